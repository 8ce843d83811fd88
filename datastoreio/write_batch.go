package datastoreio

import (
	"time"
)

// Limits of one commit, and the adaptive batch size, as in Beam Java's
// DatastoreV1 writer.
const (
	// MaxBatchMutations is the most mutations one commit carries: the
	// service's limit of 500 per request.
	MaxBatchMutations = 500
	// MinBatchMutations is the smallest target batch size the adaptive
	// sizing chooses; a batch can still be smaller when it is cut by bytes,
	// by a duplicate key, or at the end of a bundle.
	MinBatchMutations = 10
	// StartBatchMutations is the target batch size before any commit
	// latency is known.
	StartBatchMutations = 200
	// MaxBatchBytes bounds the summed encoded size of a commit's mutations:
	// 9,000,000 bytes, below the service's 10 MiB request limit so that the
	// request around the mutations fits too. A batch is committed before a
	// mutation that would take it to MaxBatchBytes or beyond is added.
	MaxBatchBytes = 9_000_000
	// TargetCommitLatency is the latency the adaptive sizing aims at for
	// one commit: the batch size is chosen from the recent mean latency per
	// mutation so that a commit takes about this long.
	TargetCommitLatency = 5 * time.Second
)

// latencyWindow and latencyBucket shape the moving average of the commit
// latency per mutation: the last two minutes, in buckets of ten seconds.
const (
	latencyWindow = 2 * time.Minute
	latencyBucket = 10 * time.Second
)

// movingAverage is the mean of the samples added in the last window,
// kept in fixed buckets aligned to multiples of the bucket width (Java's
// MovingAverage over MovingFunction): a sample lives in the bucket of its
// time, and a bucket is dropped once its start is a whole window old.
type movingAverage struct {
	bucket time.Duration
	sums   []float64
	counts []int64
	starts []int64 // bucket index (time / bucket) each slot holds
}

func newMovingAverage(window, bucket time.Duration) *movingAverage {
	n := int(window / bucket)
	if n < 1 {
		n = 1
	}
	m := &movingAverage{bucket: bucket, sums: make([]float64, n), counts: make([]int64, n), starts: make([]int64, n)}
	for i := range m.starts {
		m.starts[i] = -1
	}
	return m
}

func (m *movingAverage) slot(now time.Time) (int, int64) {
	idx := now.UnixNano() / int64(m.bucket)
	return int(idx % int64(len(m.sums))), idx
}

// add adds the sample v taken at now.
func (m *movingAverage) add(now time.Time, v float64) {
	i, idx := m.slot(now)
	if m.starts[i] != idx {
		m.starts[i], m.sums[i], m.counts[i] = idx, 0, 0
	}
	m.sums[i] += v
	m.counts[i]++
}

// mean returns the mean of the samples of the window ending at now, and
// false when there are none.
func (m *movingAverage) mean(now time.Time) (float64, bool) {
	_, cur := m.slot(now)
	oldest := cur - int64(len(m.sums)) + 1
	var sum float64
	var n int64
	for i, idx := range m.starts {
		if idx >= oldest && idx <= cur {
			sum += m.sums[i]
			n += m.counts[i]
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// batchSizer chooses the number of mutations of the next commit from the
// latencies of past commits (Java's WriteBatcherImpl): it keeps the moving
// mean latency per mutation over the last two minutes and aims for
// TargetCommitLatency per commit, within [MinBatchMutations,
// MaxBatchMutations]; before any sample it answers StartBatchMutations.
// Per-mutation latencies under a millisecond count as one millisecond, as
// in Java, so a fast service gets full batches.
type batchSizer struct {
	avg *movingAverage
}

func newBatchSizer() *batchSizer {
	return &batchSizer{avg: newMovingAverage(latencyWindow, latencyBucket)}
}

// record reports a successful commit of n mutations that took latency.
func (b *batchSizer) record(now time.Time, latency time.Duration, n int) {
	if n <= 0 {
		return
	}
	b.avg.add(now, float64(latency)/float64(time.Millisecond)/float64(n))
}

// next returns the target size of the next batch.
func (b *batchSizer) next(now time.Time) int {
	n, _ := b.nextKnown(now)
	return n
}

// nextKnown returns the target size of the next batch, and whether it comes
// from commit latencies (false: StartBatchMutations, none known yet).
func (b *batchSizer) nextKnown(now time.Time) (int, bool) {
	perMutationMs, ok := b.avg.mean(now)
	if !ok {
		return StartBatchMutations, false
	}
	perMutationMs = max(perMutationMs, 1)
	n := int(float64(TargetCommitLatency/time.Millisecond) / perMutationMs)
	return min(max(n, MinBatchMutations), MaxBatchMutations), true
}

// batch is the set of mutations waiting for the next commit. It knows
// nothing of Datastore: items are opaque, identified by a key string for
// the duplicate rule and sized in bytes by the caller.
type batch[T any] struct {
	items []T
	keys  map[string]struct{}
	bytes int64
}

func newBatch[T any]() *batch[T] {
	return &batch[T]{keys: make(map[string]struct{})}
}

func (b *batch[T]) len() int { return len(b.items) }

// mustFlushBefore reports whether the batch has to be committed before an
// item of key (empty: an incomplete key, never a duplicate) and size bytes
// joins it: when the batch is not empty and either holds a mutation of the
// same key (two mutations of one key never share a commit) or would reach
// MaxBatchBytes with it. A single item of MaxBatchBytes or more still makes
// a batch of its own.
func (b *batch[T]) mustFlushBefore(key string, size int64) bool {
	if len(b.items) == 0 {
		return false
	}
	if key != "" {
		if _, dup := b.keys[key]; dup {
			return true
		}
	}
	return b.bytes+size >= MaxBatchBytes
}

// add appends an item; the caller has called mustFlushBefore first.
func (b *batch[T]) add(item T, key string, size int64) {
	b.items = append(b.items, item)
	if key != "" {
		b.keys[key] = struct{}{}
	}
	b.bytes += size
}

// reset empties the batch, keeping its storage.
func (b *batch[T]) reset() {
	clear(b.items)
	b.items = b.items[:0]
	clear(b.keys)
	b.bytes = 0
}

// sum returns the sum of the samples of the window ending at now.
func (m *movingAverage) sum(now time.Time) float64 {
	_, cur := m.slot(now)
	oldest := cur - int64(len(m.sums)) + 1
	var sum float64
	for i, idx := range m.starts {
		if idx >= oldest && idx <= cur {
			sum += m.sums[i]
		}
	}
	return sum
}
