package datastoreio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gatedCommitter holds each commit until the test releases it by the id
// of its first key, and records the commits in the order they started as
// "first id/size".
type gatedCommitter struct {
	mu      sync.Mutex
	started []string
	gates   map[int64]chan error
	arrived chan int      // receives the number of commits started, on each start
	stop    chan struct{} // closed at the test's end: held commits fail
}

func newGatedCommitter(t *testing.T) *gatedCommitter {
	c := &gatedCommitter{gates: map[int64]chan error{}, arrived: make(chan int, 100), stop: make(chan struct{})}
	t.Cleanup(func() { close(c.stop) })
	return c
}

func (c *gatedCommitter) gate(id int64) chan error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.gates[id]
	if !ok {
		g = make(chan error, 1)
		c.gates[id] = g
	}
	return g
}

func (c *gatedCommitter) commit(_ context.Context, muts []*datastore.Mutation) error {
	id := mutationKeyOf(muts[0]).ID
	c.mu.Lock()
	c.started = append(c.started, fmt.Sprintf("%d/%d", id, len(muts)))
	n := len(c.started)
	c.mu.Unlock()
	c.arrived <- n
	select {
	case err := <-c.gate(id):
		return err
	case <-c.stop:
		return fmt.Errorf("never released")
	}
}

// release lets the commit whose first key has id end with err.
func (c *gatedCommitter) release(id int64, err error) { c.gate(id) <- err }

// waitStarted waits until n commits started, failing after a while.
func (c *gatedCommitter) waitStarted(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		c.mu.Lock()
		got := len(c.started)
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-c.arrived:
		case <-deadline:
			t.Fatalf("%d commits started, want %d", got, n)
		}
	}
}

// startedNow returns the commits started so far.
func (c *gatedCommitter) startedNow() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.started...)
}

func (c *gatedCommitter) allocateIDs(context.Context, []*datastore.Key) ([]*datastore.Key, error) {
	return nil, fmt.Errorf("not used")
}
func (c *gatedCommitter) close() error { return nil }

// addIDs adds entities of kind U with ids from..to to w, in a goroutine;
// the channel receives add's (or, at the end, flush's) error.
func addIDs(w *writer, ids []int64, flush bool) chan error {
	errc := make(chan error, 1)
	go func() {
		ctx := context.Background()
		for _, id := range ids {
			e := &unitEnt{K: datastore.IDKey("U", id, nil), N: id}
			if err := w.add(ctx, e.K, e, "unitEnt"); err != nil {
				errc <- err
				return
			}
		}
		if flush {
			errc <- w.flush(ctx)
			return
		}
		errc <- nil
	}()
	return errc
}

func idRange(from, to int64) []int64 {
	var ids []int64
	for i := from; i <= to; i++ {
		ids = append(ids, i)
	}
	return ids
}

// gatedWriter is an async writer on a gatedCommitter, with a latency known
// that makes batches of 500.
func gatedWriter(t *testing.T) (*gatedCommitter, *writer) {
	c := newGatedCommitter(t)
	w := asyncWriter(t, c)
	w.sizes.record(w.now(), time.Millisecond, 500)
	return c, w
}

// wantCommits checks the commits started, as "first id/size".
func wantCommits(t *testing.T, c *gatedCommitter, want string) {
	t.Helper()
	if got := fmt.Sprint(c.startedNow()); got != want {
		t.Fatalf("commits %s, want %s", got, want)
	}
}

// stillStarted checks, after a pause, that exactly n commits started.
func stillStarted(t *testing.T, c *gatedCommitter, n int, why string) {
	t.Helper()
	time.Sleep(100 * time.Millisecond)
	if got := c.startedNow(); len(got) != n {
		t.Fatalf("%s: commits started %v, want %d", why, got, n)
	}
}

func asyncWriter(t *testing.T, c committer) *writer {
	t.Helper()
	sz, err := processSizer()
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(writerConfig{project: "unit-project"}, c, sz, nil)
	w.async = true
	w.adapt.rand = func() float64 { return 1 }
	return w
}

// TestWriterCommitsInBackground: with async, add returns while full
// batches commit; two commits of distinct keys are in flight at once, a
// third waits for room, and flush waits for all.
func TestWriterCommitsInBackground(t *testing.T) {
	c := newGatedCommitter(t)
	w := asyncWriter(t, c)
	w.sizes.record(w.now(), time.Millisecond, 500) // target 500
	errc := addIDs(w, idRange(1, 1700), true)
	c.waitStarted(t, 2) // ids 1-500 and 501-1000, both in flight
	stillStarted(t, c, 2, "a third commit started while two were in flight")
	c.release(1, nil)
	c.waitStarted(t, 3) // 1001-1500 starts once the first ended
	stillStarted(t, c, 3, "a fourth commit started while two were in flight")
	c.release(501, nil)
	c.waitStarted(t, 4) // the flush's 200, beside 1001-1500
	c.release(1001, nil)
	c.release(1501, nil)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if len(w.inflight) != 0 || w.b.len() != 0 {
		t.Fatal("flush left a commit in flight or a batch")
	}
	wantCommits(t, c, "[1/500 501/500 1001/500 1501/200]")
}

// TestWriterSharedKeyWaits: a batch holding a key of a commit in flight is
// not committed until that commit ended, so two mutations of a key are
// applied in order.
func TestWriterSharedKeyWaits(t *testing.T) {
	c, w := gatedWriter(t)
	ids := append(idRange(1, 500), 7) // the second batch holds id 7 again
	ids = append(ids, idRange(501, 999)...)
	errc := addIDs(w, ids, true)
	c.waitStarted(t, 1)
	stillStarted(t, c, 1, "a batch sharing key U,7 with the commit in flight started")
	c.release(1, nil)
	c.waitStarted(t, 2)
	c.release(7, nil)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	wantCommits(t, c, "[1/500 7/500]")
}

// TestWriterAsyncErrorStops: a background commit's error is returned by
// the next add, naming that commit's keys; the commit already in flight
// beside it ends, and nothing later starts.
func TestWriterAsyncErrorStops(t *testing.T) {
	c, w := gatedWriter(t)
	errc := addIDs(w, idRange(1, 2000), true)
	c.waitStarted(t, 2)
	c.release(1, status.Error(codes.PermissionDenied, "no"))
	c.release(501, nil)
	err := <-errc
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "commit of 500 upsert mutations") || !strings.Contains(err.Error(), "key U,1,") {
		t.Fatalf("got %v", err)
	}
	if got := c.startedNow(); len(got) != 2 {
		t.Fatalf("commits started %v, want the failed one and the one beside it", got)
	}
	if len(w.inflight) != 0 {
		t.Fatal("a commit is still in flight after the error")
	}
}

// TestWriterLaterErrorWaitsForEarlier: when the later of two commits in
// flight fails, the earlier one still ends before the error is returned,
// and the error stops the writer: the batch after the next is never sent.
func TestWriterLaterErrorWaitsForEarlier(t *testing.T) {
	c, w := gatedWriter(t)
	errc := addIDs(w, idRange(1, 2000), true)
	c.waitStarted(t, 2)
	c.release(501, status.Error(codes.PermissionDenied, "no"))
	select {
	case err := <-errc:
		t.Fatalf("returned %v while the first commit was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	// 1001-1500 may start if the writer looks before 501's commit has
	// ended; 1501-2000 cannot, as 501's commit is then the oldest.
	c.release(1001, nil)
	c.release(1, nil)
	err := <-errc
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "key U,501,") {
		t.Fatalf("got %v", err)
	}
	for _, st := range c.startedNow() {
		if strings.HasPrefix(st, "1501/") {
			t.Fatalf("commits started %v: 1501-2000 was sent after 501-1000 failed", c.startedNow())
		}
	}
}

// TestWriterProbesOnceThenFills: before any commit latency is known the
// first commit is of StartBatchMutations; the batch built while it is in
// flight grows to MaxBatchMutations instead of sending more commits of the
// start size.
func TestWriterProbesOnceThenFills(t *testing.T) {
	c := newGatedCommitter(t)
	w := asyncWriter(t, c) // no latency recorded
	errc := addIDs(w, idRange(1, 800), true)
	c.waitStarted(t, 1)
	c.waitStarted(t, 2)
	if got, want := fmt.Sprint(c.startedNow()), fmt.Sprintf("[1/%d %d/%d]", StartBatchMutations, StartBatchMutations+1, MaxBatchMutations); got != want {
		t.Fatalf("commits %s, want %s", got, want)
	}
	c.release(1, nil)
	c.release(StartBatchMutations+1, nil)
	c.waitStarted(t, 3)
	c.release(StartBatchMutations+MaxBatchMutations+1, nil)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(c.startedNow()), fmt.Sprintf("[1/%d %d/%d %d/%d]", StartBatchMutations, StartBatchMutations+1, MaxBatchMutations, StartBatchMutations+MaxBatchMutations+1, 800-StartBatchMutations-MaxBatchMutations); got != want {
		t.Fatalf("commits %s, want %s", got, want)
	}
}

// countingCommitter accepts every commit after a short wait, counting
// commits and mutations; it is safe for concurrent use.
type countingCommitter struct {
	mu            sync.Mutex
	commits, muts int64
}

func (c *countingCommitter) commit(_ context.Context, muts []*datastore.Mutation) error {
	time.Sleep(2 * time.Millisecond)
	c.mu.Lock()
	c.commits++
	c.muts += int64(len(muts))
	c.mu.Unlock()
	return nil
}

func (c *countingCommitter) allocateIDs(context.Context, []*datastore.Key) ([]*datastore.Key, error) {
	return nil, fmt.Errorf("not used")
}
func (c *countingCommitter) close() error { return nil }

// TestWriterMetricsFromBackgroundCommits: the counts of commits that ran
// in the background, two at a time, all reach the bundle's Beam metrics.
// Before, each background commit called Inc on the bundle's context, which
// Beam Go does not allow from two goroutines: a pipeline of 5,000 entities
// reported 200 written (and -race reports the map write).
func TestWriterMetricsFromBackgroundCommits(t *testing.T) {
	c := &countingCommitter{}
	w := asyncWriter(t, c)
	w.sizes.record(w.now(), time.Millisecond, 100) // batches of 100: many commits
	w.sizes.record(w.now(), 50*time.Millisecond, 1)
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "write")
	const n = 5000
	for i := int64(1); i <= n; i++ {
		e := &unitEnt{K: datastore.IDKey("U", i, nil), N: i}
		if err := w.add(ctx, e.K, e, "unitEnt"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range metrics.ResultsExtractor(ctx).AllMetrics().Counters() {
		if r.Key.Namespace == Namespace {
			got[r.Key.Name] += r.Result()
		}
	}
	if got["entities_written"] != n || got["commits"] != c.commits || c.muts != n || c.commits < 10 {
		t.Fatalf("metrics %v; the committer saw %d commits of %d mutations", got, c.commits, c.muts)
	}
}
