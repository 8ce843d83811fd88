package bqwrite

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/retry"
)

// The defaults of the exactly-once write of unbounded input (see
// docs/BIGQUERY.md, "Streaming").
const (
	// AutoStreamBytesPerSecond is the rate of encoded rows a shard takes
	// when WithNumStreams is not given: each worker process keys a table's
	// rows on shards of its own, as many as its rate of the table's rows
	// over this, at least one and at most MaxAutoStreams; the write's
	// streams so grow with throughput and with the workers the runner
	// scales to (Beam Java's auto-sharding gives each worker shards of
	// its own the same way).
	AutoStreamBytesPerSecond = 4 << 20
	// MaxAutoStreams bounds the shards of a table per worker process when
	// WithNumStreams is not given.
	MaxAutoStreams = 16
	// DefaultTriggeringFrequency is the longest a row waits in its shard's
	// batch before it is appended, when WithTriggeringFrequency is not
	// given.
	DefaultTriggeringFrequency = 5 * time.Second
	// DefaultStreamMaxRows is the number of rows after which a shard's
	// stream is finalized and a new one made, when WithStreamRotation is
	// not given.
	DefaultStreamMaxRows = 100_000_000
	// DefaultStreamMaxBytes is the bytes of encoded rows after which a
	// shard's stream is finalized and a new one made, when
	// WithStreamRotationBytes is not given (about DefaultStreamMaxRows
	// rows of 100 bytes).
	DefaultStreamMaxBytes = 10 << 30
	// DefaultStreamIdle is how long a shard's stream stays open without an
	// append before it is finalized, when WithStreamRotation is not given.
	DefaultStreamIdle = 5 * time.Minute
)

// streamChunk is rows of one shard that the keying step gathered from
// one bundle, encoded in the writer schema Desc (a serialised
// DescriptorProto) whose fingerprint is Fp, at most an append's bytes.
// The keying step is stateless and a chunk may reach the shard's batching
// state on any worker, in any order: each chunk the keying step outputs
// carries Desc. The batching step keeps its chunks without it (Desc nil)
// and the descriptor once per shard and writer schema (streamDesc).
type streamChunk struct {
	Fp   uint64
	Desc []byte
	Rows [][]byte
}

// streamBatch is the rows of one shard that are appended together, in the
// order the shard's batches are made: Seq from 0 in the batching state's
// Epoch (a random number drawn when that state is new, so that the append
// step tells a batching state that was reset, or that it never saw, from
// the one it follows). Fp is the fingerprint of the writer schema they are
// encoded in; Desc, that schema (a serialised DescriptorProto), is carried
// only by the first batch of an epoch, by a batch whose schema differs
// from the batch before it, and by every descEvery-th batch (the append
// step keeps it in its state and per process). End marks the epoch's last
// "batch", of no rows: the batching state was idle and is cleared, and so
// is the append step's, after finalizing the shard's stream.
type streamBatch struct {
	Epoch int64
	Seq   int64
	Rows  [][]byte
	Fp    uint64
	Desc  []byte
	End   bool
}

// descEvery is how often (in batches) a batch carries its writer schema
// although the batch before it had the same: an append step whose state
// was reset while the batching step's was not (a renamed step, say) lacks
// it, and waits at most this many batches for it (see streamAppendFn).
const descEvery = 16

// streamDesc is a writer schema and its fingerprint, as the stateful steps
// keep it, once per shard.
type streamDesc struct {
	Fp   uint64
	Desc []byte
}

// batchMeta is a shard's open batch in the batching step's state.
type batchMeta struct {
	Epoch  int64  // of the shard's batches: drawn when the state is new
	Seq    int64  // of the open batch
	Opened int64  // unix ns of its first row
	Rows   int64  //
	Bytes  int64  //
	Fp     uint64 // the open batch's writer schema
	DescFp uint64 // the writer schema the step's Desc state holds
	SentFp uint64 // the writer schema of the last batch output in Epoch (0: none)
	IdleAt int64  // the event time (unix ms) of the idle timer (tag idleTag)
}

// shardStream is a shard's write stream in the append step's state, and
// where it is in the batching step's epochs.
type shardStream struct {
	Stream  string // "" before the first append and after a finalize
	Next    int64  // the stream's next offset
	Seq     int64  // the next batch of Epoch to append
	Created int64  // unix ns
	Last    int64  // unix ns of the last append
	IdleAt  int64  // the event time (unix ms) of the idle timer
	Epoch   int64  // the batching epoch of Seq and of Stream's batches; 0: none
	// Base is the first batch of Epoch this state saw: a state that took
	// the epoch up midway (it was reset, or never saw the epoch's start)
	// appends the batches below Base as they come, once each (Below).
	Base  int64
	Below []int64
	Bytes int64  // bytes appended to Stream
	Fp    uint64 // the writer schema the step's Desc state holds
	// Past is the epochs before Epoch whose batches may still come (the
	// batching state was reset while batches of its old epoch were on
	// their way), at most maxPastEpochs.
	Past []epochMark
}

// epochMark is where the append step is in an epoch it left.
type epochMark struct {
	Epoch, Seq, Base int64
	Below            []int64
}

// maxPastEpochs bounds shardStream.Past; maxBelow bounds Below.
const (
	maxPastEpochs = 8
	maxBelow      = 1024
)

// flushOp asks the flush step to make a stream's rows [0, End) visible
// and, with Finalize, to end the stream. Rows is how many rows the append
// behind it added (0 for a finalize alone).
type flushOp struct {
	Table    string // project.dataset.table
	Stream   string
	End      int64
	Rows     int64
	Finalize bool
}

func init() {
	beamreg.DoFn5x1[context.Context, beam.EventTime, beam.X, func(beam.EventTime, string, streamChunk), func(FailedRow), error](&streamKeyFn{})
	register.Emitter3[beam.EventTime, string, streamChunk]()
	beamreg.DoFn7x1[context.Context, beam.EventTime, state.Provider, timers.Provider, string, streamChunk, func(string, streamBatch), error](&streamBatchFn{})
	register.Emitter2[string, streamBatch]()
	beamreg.DoFn8x1[context.Context, beam.EventTime, state.Provider, timers.Provider, string, streamBatch, func(string, flushOp), func(FailedRow), error](&streamAppendFn{})
	register.Emitter2[string, flushOp]()
	register.Function1x2(primeBatch)
	register.Function1x2(primeOp)
	beamreg.DoFn4x1[context.Context, string, flushOp, func(TableResult), error](&streamFlushFn{})
	beam.RegisterType(reflect.TypeFor[streamChunk]())
	beam.RegisterType(reflect.TypeFor[streamBatch]())
	beam.RegisterType(reflect.TypeFor[batchMeta]())
	beam.RegisterType(reflect.TypeFor[shardStream]())
	beam.RegisterType(reflect.TypeFor[streamDesc]())
	beam.RegisterType(reflect.TypeFor[flushOp]())
}

// writeStreaming is the exactly-once write of an unbounded PCollection
// (in the global window): rows encoded and gathered per bundle into chunks
// keyed by table and shard, batched per shard (at most the triggering
// frequency, or an append's bytes), each batch
// appended at its shard's next offset of a BUFFERED stream by a stateful
// step, and made visible by FlushRows in a step after a shuffle.
func writeStreaming(s beam.Scope, fn *appendFn, col beam.PCollection) (results, failed beam.PCollection) {
	cfg := fn.Cfg
	keyed, badRow := beam.ParDo2(s, &streamKeyFn{Fn: fn, Shards: cfg.NumStreams}, col)
	batches := beam.ParDo(s, newStreamBatchFn(cfg), keyed)
	primeBatches := beam.ParDo(s.Scope("primeCounters"), primeBatch, beam.Impulse(s))
	app := newStreamAppendFn(cfg)
	app.Type = fn.Type // for FailedRows
	ops, refused := beam.ParDo2(s, app, beam.Flatten(s, batches, primeBatches))
	primeOps := beam.ParDo(s.Scope("primeCounters"), primeOp, beam.Impulse(s))
	results = beam.ParDo(s, &streamFlushFn{Cfg: cfg}, beam.Reshuffle(s, beam.Flatten(s, ops, primeOps)))
	return results, beam.Flatten(s, badRow, refused)
}

// The append and flush steps each get one element of the key primeKey
// when the job starts (from an Impulse), on which they count 0 on each of
// their counters and do nothing else. Prism (v2.78,
// jobservices/metrics.go, contributeMetrics) keeps the payload of a
// counter whose short id it does not know yet in a map by short id until
// the worker says what the id is; a second bundle of the step that
// reports the same new counter before that answer replaces the first
// one's payload, whose counts are lost (TestWriteStreamCountersExact saw
// rows_flushed 195 of 200, 1 run in 20 under load). Primed by a bundle of
// their own at the start, before any batch exists, the counters' ids are
// known before a bundle counts anything.
const primeKey = ""

func primeBatch([]byte) (string, streamBatch) { return primeKey, streamBatch{} }

func primeOp([]byte) (string, flushOp) { return primeKey, flushOp{} }

// prime counts 0 on each counter of m, so that the runner learns their
// ids (see primeKey).
func (m streamMetrics) prime(ctx context.Context) {
	for _, c := range []beam.Counter{m.rows, m.bytes, m.appends, m.retries, m.refused, m.committed,
		m.created, m.finalized, m.flushed, m.repeated, m.abandoned, m.closed} {
		c.Inc(ctx, 0)
	}
}

// Each stateful step has one timer family: Beam Go's SDK harness (v2.78,
// core/runtime/harness/datamgr.go, makeChannel) waits for one end-of-timers
// signal per transform with timers, while Prism sends one per timer family
// (runners/prism/internal/worker/bundle.go, HasTimers). With two families,
// a bundle whose data reaches the worker before the worker opens the
// bundle's input counts three signals where it wants two and never ends:
// the job stalls with the bundle in progress (docs/DESIGN.md, "Streaming
// exactly once").

// newStreamBatchFn is the batching step of a write of cfg.
func newStreamBatchFn(cfg writeConfig) *streamBatchFn {
	return &streamBatchFn{Every: cfg.Frequency, MaxBytes: cfg.MaxBatchSize, Idle: cfg.Idle,
		Chunks: state.MakeBagState[streamChunk]("chunks"), Meta: state.MakeValueState[batchMeta]("meta"),
		Desc: state.MakeValueState[streamDesc]("desc"), Flush: timers.InEventTime("flush")}
}

// newStreamAppendFn is the append step of a write of cfg.
func newStreamAppendFn(cfg writeConfig) *streamAppendFn {
	return &streamAppendFn{Cfg: cfg, Shard: state.MakeValueState[shardStream]("shard"),
		Early: state.MakeBagState[streamBatch]("early"), Desc: state.MakeValueState[streamDesc]("desc"),
		Idle: timers.InEventTime("idle")}
}

// streamKeyFn encodes each row in its table's writer schema and gathers
// the rows of a bundle in chunks, one open per table, each keyed by the
// table's resource name and a shard taken in turn per chunk ("res#shard").
// A chunk is output when the next row would take it over an append's
// bytes or has another writer schema, when the rows the instance holds
// come to an append's bytes (all are output), and when the bundle ends.
// Rows that cannot be encoded go to FailedRows here. Chunking the bundle
// keeps the stateful step after it to a few state calls per chunk, not
// per row: Beam Go's harness asks the runner for every state read and
// write (it keeps nothing between elements).
type streamKeyFn struct {
	Fn     *appendFn
	Shards int // WithNumStreams; 0: automatic (autoShards)

	next  map[string]int // by table resource: the next chunk's shard
	open  map[string]*openChunk
	order []string // of open's tables, as opened
	held  int      // bytes of open's rows
	descs map[*descriptorpb.DescriptorProto]streamDesc
	arena rowArena // where rows are encoded (a chunk's rows are slices of it)

	// The previous row's table and writer schema: a bundle's rows are
	// mostly of one table, whose lookups (f.Fn.table, desc) are then
	// skipped. A table's *writeTable is never replaced within an
	// instance (appendFn.tables only grows); its encoder may be (a
	// schema update, followSchema), so the schema is kept with the
	// encoder's descriptor it is of.
	lastRes  string
	last     *writeTable
	lastEnc  *descriptorpb.DescriptorProto
	lastDesc streamDesc
}

// openChunk is a chunk being gathered, and the earliest event time of its
// rows, which it is output at.
type openChunk struct {
	streamChunk
	bytes int
	ts    beam.EventTime
}

func (f *streamKeyFn) Setup() {
	f.Fn.Setup()
	f.next, f.open = map[string]int{}, map[string]*openChunk{}
	f.descs = map[*descriptorpb.DescriptorProto]streamDesc{}
	f.last, f.lastRes, f.lastEnc = nil, "", nil // f.Fn.Setup made new tables
}

func (f *streamKeyFn) Teardown() { f.Fn.Teardown() }

func (f *streamKeyFn) ProcessElement(ctx context.Context, ts beam.EventTime, x beam.X, emit func(beam.EventTime, string, streamChunk), failed func(FailedRow)) error {
	res := f.Fn.Cfg.Table
	if f.Fn.HasTableFn {
		spec := f.Fn.route.Call1x1(x).(string)
		var err error
		if res, err = tableResource(spec); err != nil {
			return f.Fn.refuse(ctx, spec, x, fmt.Errorf("WithTableFunc: %w", err), failed)
		}
	}
	t := f.last
	if t == nil || res != f.lastRes {
		var err error
		if t, err = f.Fn.table(ctx, res); err != nil {
			return err
		}
		f.last, f.lastRes = t, res
	}
	row, err := f.arena.encode(t.enc, x)
	if err != nil && t.enc.isRow && f.Fn.followSchema(ctx, t, x) {
		row, err = f.arena.encode(t.enc, x)
	}
	if err == nil && len(row) > f.Fn.Cfg.MaxBatchSize {
		err = fmt.Errorf("the row is %d bytes encoded, over the %d bytes of an append", len(row), f.Fn.Cfg.MaxBatchSize)
	}
	if err != nil {
		return f.Fn.refuse(ctx, t.spec, x, err, failed)
	}
	desc := f.lastDesc
	if f.lastEnc == nil || f.lastEnc != t.enc.desc {
		if desc, err = f.desc(t); err != nil {
			return fmt.Errorf("bqwrite.Write to %s: %w", t.spec, err)
		}
		f.lastEnc, f.lastDesc = t.enc.desc, desc
	}
	c := f.open[res]
	if c != nil && (c.bytes+len(row) > f.Fn.Cfg.MaxBatchSize || c.Fp != desc.Fp) {
		f.output(res, emit)
		c = nil
	}
	if c == nil {
		c = &openChunk{streamChunk: streamChunk{Fp: desc.Fp, Desc: desc.Desc}, ts: ts}
		f.open[res] = c
		f.order = append(f.order, res)
	}
	if len(c.Rows) == cap(c.Rows) {
		// Doubled: append's growth of large slices (about 1.25x) would
		// allocate about five times the chunk's final slice, and copy it
		// as often, for each chunk of a bundle of many rows.
		rows := make([][]byte, len(c.Rows), max(2*cap(c.Rows), 64))
		copy(rows, c.Rows)
		c.Rows = rows
	}
	c.Rows = append(c.Rows, row)
	c.bytes += len(row)
	c.ts = min(c.ts, ts)
	if f.held += len(row); f.held >= f.Fn.Cfg.MaxBatchSize {
		f.FinishBundle(ctx, emit, failed)
	}
	return nil
}

// output outputs the open chunk of table res, keyed by the table's next
// shard: "res#k" of WithNumStreams' k in [0, n); automatic,
// "res#<process>.k" of k in [0, autoShards.of(res)).
func (f *streamKeyFn) output(res string, emit func(beam.EventTime, string, streamChunk)) {
	c := f.open[res]
	shards, prefix := f.Shards, ""
	if shards <= 0 {
		shards, prefix = procShards.add(res, c.bytes, time.Now()), procShards.id+"."
	}
	n, ok := f.next[res]
	if !ok {
		n = rand.IntN(shards) // instances start on different shards
	}
	n %= shards
	f.next[res] = (n + 1) % shards
	emit(c.ts, res+"#"+prefix+strconv.Itoa(n), c.streamChunk)
	f.held -= c.bytes
	delete(f.open, res)
	f.order = slices.DeleteFunc(f.order, func(r string) bool { return r == res })
}

// FinishBundle outputs every open chunk.
func (f *streamKeyFn) FinishBundle(_ context.Context, emit func(beam.EventTime, string, streamChunk), _ func(FailedRow)) {
	for len(f.order) > 0 {
		f.output(f.order[0], emit)
	}
}

// autoShards is the automatic sharding of one worker process: a random
// id of its own, which its shard keys carry (two processes never share a
// shard, so a table's shards add up over the workers), and per table the
// rate of encoded rows its keying steps output, measured over windows of
// autoWindow, from which the number of its shards follows.
type autoShards struct {
	id string
	mu sync.Mutex
	by map[string]*shardRate
}

// shardRate is a table's rate in one process.
type shardRate struct {
	since  time.Time // the current window's start
	bytes  int       // in the current window
	shards int
}

// autoWindow is how long a rate is measured before the shards follow it.
const autoWindow = 2 * time.Second

var procShards = newAutoShards()

func newAutoShards() *autoShards {
	return &autoShards{id: strconv.FormatUint(rand.Uint64(), 36), by: map[string]*shardRate{}}
}

// add counts n bytes of table res output at now, and gives the number of
// shards res's rows take: 1 at first, then, at the end of each window,
// the window's rate over AutoStreamBytesPerSecond, rounded up, within
// 1..MaxAutoStreams.
func (a *autoShards) add(res string, n int, now time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.by[res]
	if r == nil {
		r = &shardRate{since: now, shards: 1}
		a.by[res] = r
	}
	r.bytes += n
	if d := now.Sub(r.since); d >= autoWindow {
		rate := float64(r.bytes) / d.Seconds()
		r.shards = min(max(int(math.Ceil(rate/AutoStreamBytesPerSecond)), 1), MaxAutoStreams)
		r.since, r.bytes = now, 0
	}
	return r.shards
}

// desc is the serialised writer schema of t's encoder and its
// fingerprint.
func (f *streamKeyFn) desc(t *writeTable) (streamDesc, error) {
	if d, ok := f.descs[t.enc.desc]; ok {
		return d, nil
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(t.enc.desc)
	if err != nil {
		return streamDesc{}, fmt.Errorf("encoding the writer schema: %w", err)
	}
	d := streamDesc{Fp: descFingerprint(b), Desc: b}
	f.descs[t.enc.desc] = d
	return d, nil
}

// descFingerprint is the fingerprint of a serialised writer schema: the
// first 8 bytes of its SHA-256, never 0 (which means none).
func descFingerprint(b []byte) uint64 {
	h := sha256.Sum256(b)
	return max(binary.BigEndian.Uint64(h[:8]), 1)
}

// shardTable is the table resource name of a shard key.
func shardTable(key string) string {
	if i := strings.LastIndexByte(key, '#'); i >= 0 {
		return key[:i]
	}
	return key
}

// streamBatchFn gathers the chunks of a shard in batches: a batch is
// output when the next chunk would take it over an append's bytes
// (WithMaxAppendBytes), when the writer schema changes, when a chunk comes
// once the triggering frequency has passed since the batch's first row (in
// processing time), and when the watermark passes the batch's first event
// time plus the triggering frequency (an event-time timer, held at that
// first event time; it also outputs the last batch of every shard when the
// input ends or the job is drained: the watermark then passes the end of
// the window). The timer is in event time, not processing time as Beam
// Java's, because Beam's Flink runner does not fire a Go DoFn's
// processing-time timers reliably (docs/DESIGN.md, "Flink"), and because a step may
// have one timer family only on Prism (see below). A batch is output with
// the state that made it, so it is the same batch whatever bundle of the
// next step gets it, and however often.
//
// The state holds the open batch's chunks without their writer schema,
// the schema once (Desc, rewritten when it changes) and the shard's epoch
// and next batch number (Meta). Once no chunk came for the idle time of
// WithStreamRotation (in event time: a second timer of the same family,
// tagged idleTag), the state is cleared and an End batch tells the append
// step to finalize the shard's stream and clear its state too: the state
// of a shard key that is not used again (a worker's own shards, when the
// worker goes away or its rate falls) does not stay for ever. The next
// chunk of the shard starts a new epoch.
type streamBatchFn struct {
	Every    time.Duration
	MaxBytes int
	Idle     time.Duration
	Chunks   state.Bag[streamChunk]
	Meta     state.Value[batchMeta]
	Desc     state.Value[streamDesc]
	Flush    timers.EventTime

	descs map[uint64][]byte // writer schemas by fingerprint, of this process
}

// idleTag is the tag of the batching step's idle timer, in its one timer
// family.
const idleTag = "idle"

func (f *streamBatchFn) Setup() { f.descs = map[uint64][]byte{} }

func (f *streamBatchFn) ProcessElement(ctx context.Context, ts beam.EventTime, sp state.Provider, tp timers.Provider, key string, c streamChunk, emit func(string, streamBatch)) error {
	m, _, err := f.Meta.Read(sp)
	if err != nil {
		return fmt.Errorf("bqwrite.Write to %s: reading shard %s's batch state: %w", shardSpec(key), key, err)
	}
	if m.Epoch == 0 {
		m.Epoch = newEpoch()
	}
	n := 0
	for _, r := range c.Rows {
		n += len(r)
	}
	if m.Rows > 0 && (m.Bytes+int64(n) > int64(f.MaxBytes) || m.Fp != c.Fp ||
		time.Since(time.Unix(0, m.Opened)) >= f.Every) {
		if m, err = f.output(sp, key, m, emit); err != nil {
			return err
		}
	}
	if m.Rows == 0 {
		now := time.Now()
		m.Fp = c.Fp
		m.Opened = now.UnixNano()
		// The batch's rows are held back (the step's output watermark) at
		// its first chunk's time until the batch is output.
		f.Flush.Set(tp, ts.ToTime().Add(f.Every), timers.WithOutputTimestamp(ts.ToTime()))
	}
	if len(c.Desc) > 0 {
		if f.descs != nil {
			f.descs[c.Fp] = c.Desc
		}
		if m.DescFp != c.Fp {
			// Once per shard and writer schema.
			if err := f.Desc.Write(sp, streamDesc{Fp: c.Fp, Desc: c.Desc}); err != nil {
				return fmt.Errorf("bqwrite.Write to %s: keeping shard %s's writer schema: %w", shardSpec(key), key, err)
			}
			m.DescFp = c.Fp
		}
	}
	if err := f.Chunks.Add(sp, streamChunk{Fp: c.Fp, Rows: c.Rows}); err != nil {
		return fmt.Errorf("bqwrite.Write to %s: adding to shard %s's batch: %w", shardSpec(key), key, err)
	}
	m.Rows += int64(len(c.Rows))
	m.Bytes += int64(n)
	// The idle timer, moved forward (never back) by each chunk, fires once
	// no chunk came for the idle time, and when the input ends.
	if at := ts.ToTime().Add(f.Idle); f.Idle > 0 && at.UnixMilli() > m.IdleAt {
		m.IdleAt = at.UnixMilli()
		f.Flush.Set(tp, at, timers.WithTag(idleTag))
	}
	return f.Meta.Write(sp, m)
}

// newEpoch is a shard's new batching epoch: random, never 0.
func newEpoch() int64 { return rand.Int64N(math.MaxInt64) + 1 }

// output outputs the open batch of the shard key and opens the next.
func (f *streamBatchFn) output(sp state.Provider, key string, m batchMeta, emit func(string, streamBatch)) (batchMeta, error) {
	chunks, _, err := f.Chunks.Read(sp)
	if err != nil {
		return m, fmt.Errorf("bqwrite.Write to %s: reading shard %s's batch: %w", shardSpec(key), key, err)
	}
	if err := f.Chunks.Clear(sp); err != nil {
		return m, fmt.Errorf("bqwrite.Write to %s: clearing shard %s's batch: %w", shardSpec(key), key, err)
	}
	var rows [][]byte
	if len(chunks) == 1 {
		rows = chunks[0].Rows // a batch of one chunk: its rows as read
	} else {
		rows = make([][]byte, 0, m.Rows)
		for _, c := range chunks {
			rows = append(rows, c.Rows...)
		}
	}
	if int64(len(rows)) != m.Rows {
		return m, fmt.Errorf("bqwrite.Write to %s: shard %s's batch state holds %d rows, its count says %d", shardSpec(key), key, len(rows), m.Rows)
	}
	if len(rows) > 0 {
		b := streamBatch{Epoch: m.Epoch, Seq: m.Seq, Rows: rows, Fp: m.Fp}
		if m.SentFp != m.Fp || m.Seq%descEvery == 0 {
			if b.Desc, err = f.descOf(sp, key, m.Fp); err != nil {
				return m, err
			}
		}
		emit(key, b)
		m.Seq++
		m.SentFp = m.Fp
	}
	m.Rows, m.Bytes, m.Fp = 0, 0, 0
	return m, nil
}

// descOf is the writer schema of fingerprint fp: this process's, or the
// one the shard's state holds.
func (f *streamBatchFn) descOf(sp state.Provider, key string, fp uint64) ([]byte, error) {
	if d, ok := f.descs[fp]; ok {
		return d, nil
	}
	d, _, err := f.Desc.Read(sp)
	if err != nil {
		return nil, fmt.Errorf("bqwrite.Write to %s: reading shard %s's writer schema: %w", shardSpec(key), key, err)
	}
	if d.Fp != fp {
		// The state keeps the schema of the latest chunk, and a batch holds
		// chunks of one schema, the latest's: not reached.
		return nil, fmt.Errorf("bqwrite.Write to %s: shard %s's batch state holds writer schema %x, its batch is of %x", shardSpec(key), key, d.Fp, fp)
	}
	if f.descs != nil {
		f.descs[fp] = d.Desc
	}
	return d.Desc, nil
}

func (f *streamBatchFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, key string, timer timers.Context, emit func(string, streamBatch)) error {
	m, ok, err := f.Meta.Read(sp)
	if err != nil {
		return fmt.Errorf("bqwrite.Write to %s: reading shard %s's batch state: %w", shardSpec(key), key, err)
	}
	if !ok || m.Epoch == 0 {
		return nil // cleared: a timer of a state since cleared
	}
	if m.Rows > 0 {
		if m, err = f.output(sp, key, m, emit); err != nil {
			return err
		}
	} else if timer.Tag != idleTag {
		return nil
	}
	if timer.Tag != idleTag {
		return f.Meta.Write(sp, m)
	}
	// Idle: the epoch ends, after its last batch; the append step
	// finalizes the shard's stream and clears its state when the End
	// batch comes, in its order.
	emit(key, streamBatch{Epoch: m.Epoch, Seq: m.Seq, End: true})
	for _, err := range []error{f.Meta.Clear(sp), f.Desc.Clear(sp), f.Chunks.Clear(sp)} {
		if err != nil {
			return fmt.Errorf("bqwrite.Write to %s: clearing shard %s's idle batch state: %w", shardSpec(key), key, err)
		}
	}
	return nil
}

// streamAppendFn appends each batch of a shard to the shard's BUFFERED
// write stream at the offset its state holds, in the order of the
// batches, and outputs a flushOp for each: see docs/BIGQUERY.md
// ("Streaming") for why a retried bundle writes nothing twice.
//
// Batches are in order within the batching state's epoch. A batch of
// another epoch than the state's means that one of the two states is new
// or was reset (a runner that dropped one step's state and not the other:
// a renamed step in a Dataflow update, say): the shard's stream is
// finalized, the old epoch's place kept (its batches in flight still
// come, in Past), and the new epoch taken up at that batch. A state that
// takes an epoch up midway (Base > 0) appends the epoch's batches below
// Base as they come, once each (Below): a batch is never dropped as
// "repeated", nor kept waiting for batches this state will never see,
// because the other step's state is not where this one is. A batch whose
// writer schema this state has not kept and that does not carry it waits
// in Early for the next that does (at most descEvery batches).
//
// The process keeps each stream it appended to open (a connection) until
// no batch of it came for the idle time of WithStreamRotation (in
// processing time), and at most maxOpenStreams of them (the least recently
// used are closed first); a stream closed here that a shard still names is
// opened again when the shard appends. Beam Go never calls Teardown, so
// nothing else closes them.
type streamAppendFn struct {
	Cfg   writeConfig
	Shard state.Value[shardStream]
	Early state.Bag[streamBatch]
	Desc  state.Value[streamDesc]
	Idle  timers.EventTime

	// Type is the element type, whose values FailedRows show (refused
	// rows' elements are rebuilt from the rows: failedRow).
	Type beam.EncodedType

	mw      *managedwriter.Client
	wc      *writeClient           // CreateWriteStream, with the write's own retries
	streams map[string]*openStream // by stream name
	descs   map[string]*descriptorpb.DescriptorProto
	raw     map[uint64][]byte // writer schemas by fingerprint, of this process
	swept   time.Time         // when streams were last swept
	maxOpen int               // maxOpenStreams unless a test says
	m       streamMetrics
	failEnc map[string]*rowEncoder // by table resource name: failedEncoder
}

// maxOpenStreams bounds the streams an append step instance keeps open.
const maxOpenStreams = 64

// openStream is a stream's ManagedStream, the writer schema it sends and
// when it was last used.
type openStream struct {
	ms   *managedwriter.ManagedStream
	desc string
	used time.Time
}

// streamMetrics are the counters of the streaming write.
type streamMetrics struct {
	writeMetrics
	created, finalized, flushed, repeated, abandoned, closed beam.Counter
	early                                                    beam.Distribution
}

func newStreamMetrics(c writeConfig) streamMetrics {
	return streamMetrics{writeMetrics: newWriteMetrics(c), created: c.counter("streams_created"),
		finalized: c.counter("streams_finalized"), flushed: c.counter("rows_flushed"), repeated: c.counter("batches_repeated"),
		abandoned: c.counter("streams_abandoned"), closed: c.counter("connections_closed"),
		early: beam.NewDistribution(c.Namespace, "early_batches")}
}

func (f *streamAppendFn) Setup() {
	f.streams = map[string]*openStream{}
	f.descs = map[string]*descriptorpb.DescriptorProto{}
	f.raw = map[uint64][]byte{}
	f.m = newStreamMetrics(f.Cfg)
}

func (f *streamAppendFn) Teardown() {
	for _, o := range f.streams {
		o.ms.Close()
	}
	f.streams = nil
	if f.mw != nil {
		f.mw.Close()
	}
	if f.wc != nil {
		f.wc.Close()
	}
}

// shardSpec is the table spec (project.dataset.table$partition) of a
// shard key.
func shardSpec(key string) string {
	base, part := splitDecorator(shardTable(key))
	p := strings.Split(base, "/")
	if len(p) < 6 {
		return base
	}
	spec := p[1] + "." + p[3] + "." + p[5]
	if part != "" {
		spec += "$" + part
	}
	return spec
}

func (f *streamAppendFn) ProcessElement(ctx context.Context, ts beam.EventTime, sp state.Provider, tp timers.Provider, key string, b streamBatch, emit func(string, flushOp), failed func(FailedRow)) error {
	if key == primeKey {
		f.m.prime(ctx)
		return nil
	}
	spec := shardSpec(key)
	st, _, err := f.Shard.Read(sp)
	if err != nil {
		return fmt.Errorf("bqwrite.Write to %s: reading shard %s's stream state: %w", spec, key, err)
	}
	if err := f.keepDesc(sp, key, &st, b); err != nil {
		return err
	}
	f.useEpoch(key, &st, b, emit)
	wait, err := f.take(ctx, sp, key, &st, b, emit, failed)
	if err != nil {
		return err
	}
	if wait {
		// A batch ahead of one not yet here, or without its writer schema:
		// kept until it can be appended in order.
		if err := f.Early.Add(sp, b); err != nil {
			return fmt.Errorf("bqwrite.Write to %s: keeping shard %s's batch %d: %w", spec, key, b.Seq, err)
		}
	}
	left, err := f.drainEarly(ctx, sp, key, &st, emit, failed)
	if err != nil {
		return err
	}
	if !b.End {
		// The idle timer is set WithStreamRotation's idle time after the
		// latest batch (in event time: see docs/BIGQUERY.md, "Streaming"); moved, never
		// back, by each batch, it fires once no batch came for that long,
		// and for every shard when the input ends.
		if at := ts.ToTime().Add(f.Cfg.Idle); at.UnixMilli() > st.IdleAt {
			st.IdleAt = at.UnixMilli()
			f.Idle.Set(tp, at, timers.WithOutputTimestamp(ts.ToTime()))
		}
	}
	f.sweep(ctx, time.Now(), st.Stream)
	if st.Stream == "" && st.Epoch == 0 && len(st.Past) == 0 && left == 0 {
		// The batching step ended the shard's epoch (End) and nothing else
		// is kept: the shard's state is cleared, as the batching step's was.
		if err := f.Shard.Clear(sp); err != nil {
			return fmt.Errorf("bqwrite.Write to %s: clearing shard %s's stream state: %w", spec, key, err)
		}
		return f.Desc.Clear(sp)
	}
	return f.Shard.Write(sp, st)
}

// keepDesc keeps the writer schema b carries: for this process, and in
// the shard's state when it is not the one there (once per shard and
// schema).
func (f *streamAppendFn) keepDesc(sp state.Provider, key string, st *shardStream, b streamBatch) error {
	if len(b.Desc) == 0 {
		return nil
	}
	f.raw[b.Fp] = b.Desc
	if st.Fp == b.Fp {
		return nil
	}
	if err := f.Desc.Write(sp, streamDesc{Fp: b.Fp, Desc: b.Desc}); err != nil {
		return fmt.Errorf("bqwrite.Write to %s: keeping shard %s's writer schema: %w", shardSpec(key), key, err)
	}
	st.Fp = b.Fp
	return nil
}

// descOf is the writer schema of fingerprint fp, if this process or the
// shard's state has it.
func (f *streamAppendFn) descOf(sp state.Provider, key string, st *shardStream, fp uint64) ([]byte, error) {
	if d, ok := f.raw[fp]; ok {
		return d, nil
	}
	if st.Fp != fp {
		return nil, nil
	}
	d, _, err := f.Desc.Read(sp)
	if err != nil {
		return nil, fmt.Errorf("bqwrite.Write to %s: reading shard %s's writer schema: %w", shardSpec(key), key, err)
	}
	if d.Fp != fp {
		return nil, fmt.Errorf("bqwrite.Write to %s: shard %s's state names writer schema %x and holds %x", shardSpec(key), key, fp, d.Fp)
	}
	f.raw[fp] = d.Desc
	return d.Desc, nil
}

// useEpoch makes b's epoch the state's: when it is another, the shard's
// stream is finalized (a new epoch starts a new stream), the state's
// epoch is kept in Past, and b's taken from Past or, new, taken up at b.
func (f *streamAppendFn) useEpoch(key string, st *shardStream, b streamBatch, emit func(string, flushOp)) {
	if st.Epoch == b.Epoch {
		return
	}
	if st.Stream != "" {
		f.finalize(key, st, emit)
	}
	if st.Epoch != 0 {
		st.Past = append(slices.Clip(st.Past), epochMark{Epoch: st.Epoch, Seq: st.Seq, Base: st.Base, Below: st.Below})
		if len(st.Past) > maxPastEpochs {
			st.Past = st.Past[len(st.Past)-maxPastEpochs:]
		}
	}
	st.Epoch, st.Seq, st.Base, st.Below = b.Epoch, b.Seq, b.Seq, nil
	for i, e := range st.Past {
		if e.Epoch == b.Epoch {
			st.Seq, st.Base, st.Below = e.Seq, e.Base, e.Below
			st.Past = slices.Delete(st.Past, i, i+1)
			break
		}
	}
}

// take appends b, of the state's epoch, if it is its turn (or one below
// the epoch's Base not yet appended), ends the epoch if b is its End, and
// skips it if it was appended; wait is true when b must wait in Early.
func (f *streamAppendFn) take(ctx context.Context, sp state.Provider, key string, st *shardStream, b streamBatch, emit func(string, flushOp), failed func(FailedRow)) (wait bool, err error) {
	below := b.Seq < st.Base && !slices.Contains(st.Below, b.Seq)
	switch {
	case b.Seq < st.Seq && !below:
		// Appended already, by a bundle whose state is committed: a batch
		// delivered twice.
		f.m.repeated.Inc(ctx, 1)
		return false, nil
	case b.Seq > st.Seq:
		return true, nil
	}
	if b.End {
		// The batching step's state of the shard was idle and is cleared:
		// the epoch's batches are all appended. The stream is finalized and
		// the epoch forgotten.
		if st.Stream != "" {
			f.finalize(key, st, emit)
		}
		st.Epoch, st.Seq, st.Base, st.Below = 0, 0, 0, nil
		return false, nil
	}
	if len(b.Desc) == 0 {
		if b.Desc, err = f.descOf(sp, key, st, b.Fp); err != nil {
			return false, err
		}
		if len(b.Desc) == 0 {
			return true, nil
		}
	}
	n := int64(0)
	for _, r := range b.Rows {
		n += int64(len(r))
	}
	if st.Stream != "" && f.Cfg.StreamMaxBytes > 0 && st.Bytes+n > f.Cfg.StreamMaxBytes {
		f.finalize(key, st, emit)
	}
	stream, seq := st.Stream, st.Seq
	if err := f.appendBatch(ctx, key, st, b, emit, failed); err != nil {
		return false, err
	}
	if st.Stream == stream {
		st.Bytes += n
	} else {
		st.Bytes = n
	}
	if below {
		st.Seq = seq
		st.Below = append(slices.Clip(st.Below), b.Seq)
		if len(st.Below) > maxBelow {
			st.Below = st.Below[len(st.Below)-maxBelow:]
		}
	}
	return false, nil
}

// drainEarly appends the kept batches of the state's epoch that now
// follow in order, and gives how many batches stay kept.
func (f *streamAppendFn) drainEarly(ctx context.Context, sp state.Provider, key string, st *shardStream, emit func(string, flushOp), failed func(FailedRow)) (int, error) {
	early, ok, err := f.Early.Read(sp)
	if err != nil || !ok || len(early) == 0 {
		return 0, err
	}
	sort.SliceStable(early, func(i, j int) bool { return early[i].Seq < early[j].Seq })
	var keep []streamBatch
	for _, b := range early {
		if err := f.keepDesc(sp, key, st, b); err != nil {
			return 0, err
		}
	}
	for _, b := range early {
		wait := b.Epoch != st.Epoch // kept until its epoch's turn
		if !wait {
			if wait, err = f.take(ctx, sp, key, st, b, emit, failed); err != nil {
				return 0, err
			}
		}
		if wait {
			keep = append(keep, b)
		}
	}
	f.m.early.Update(ctx, int64(len(keep)))
	if len(keep) == len(early) {
		return len(keep), nil
	}
	if err := f.Early.Clear(sp); err != nil {
		return 0, err
	}
	for _, b := range keep {
		if err := f.Early.Add(sp, b); err != nil {
			return 0, err
		}
	}
	return len(keep), nil
}

func (f *streamAppendFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, key string, timer timers.Context, emit func(string, flushOp), _ func(FailedRow)) error {
	st, ok, err := f.Shard.Read(sp)
	if err != nil {
		return fmt.Errorf("bqwrite.Write to %s: reading shard %s's stream state: %w", shardSpec(key), key, err)
	}
	if !ok {
		f.sweep(ctx, time.Now(), "")
		return nil // cleared (the shard's epoch ended) since the timer was set
	}
	st.IdleAt = 0
	if st.Stream != "" {
		f.finalize(key, &st, emit)
	}
	f.sweep(ctx, time.Now(), "")
	return f.Shard.Write(sp, st)
}

// finalize asks the flush step to flush and finalize the shard's stream,
// and forgets it: the shard's next append makes a new one.
func (f *streamAppendFn) finalize(key string, st *shardStream, emit func(string, flushOp)) {
	emit(st.Stream, flushOp{Table: shardSpec(key), Stream: st.Stream, End: st.Next, Finalize: true})
	if o := f.streams[st.Stream]; o != nil {
		o.ms.Close()
		delete(f.streams, st.Stream)
	}
	st.Stream, st.Next, st.Created, st.Bytes = "", 0, 0, 0
}

// sweep closes the streams of this instance not used for the idle time of
// WithStreamRotation, and the least recently used past maxOpenStreams,
// but never keep; at most once a second. A shard whose stream is closed
// here opens it again on its next append.
func (f *streamAppendFn) sweep(ctx context.Context, now time.Time, keep string) {
	limit := f.maxOpen
	if limit <= 0 {
		limit = maxOpenStreams
	}
	if now.Sub(f.swept) < time.Second && len(f.streams) <= limit {
		return
	}
	f.swept = now
	shut := func(name string) {
		f.streams[name].ms.Close()
		delete(f.streams, name)
		f.m.closed.Inc(ctx, 1)
	}
	for name, o := range f.streams {
		if name != keep && now.Sub(o.used) > f.Cfg.Idle {
			shut(name)
		}
	}
	if len(f.streams) <= limit {
		return
	}
	names := slices.Collect(maps.Keys(f.streams))
	slices.SortFunc(names, func(a, b string) int { return f.streams[a].used.Compare(f.streams[b].used) })
	for _, name := range names {
		if len(f.streams) <= limit {
			break
		}
		if name != keep {
			shut(name)
		}
	}
}

// appendBatch appends b at st.Next, making or replacing the shard's stream
// as needed, and outputs the flushOp of its rows. What the service can
// answer:
//   - OK: the rows are at that offset.
//   - ALREADY_EXISTS (OFFSET_ALREADY_EXISTS): an attempt that the runner
//     did not commit appended there (a retried bundle; a restored
//     checkpoint whose input is replayed, perhaps as other batches, or the
//     same batch trimmed of its refused rows): the rows before the state's
//     offset are flushed, the stream is left, and the batch goes to a new
//     stream at offset 0. Rows past a committed offset are never flushed,
//     so never visible.
//   - row_errors: none of the batch written; the rows named go to
//     FailedRows (or fail the write WithFailOnRowErrors), the rest are
//     appended at the same offset. Whatever the service judges first, the
//     offset or the rows, an offset holds one write at most, and which
//     one the state commits says (docs/DESIGN.md, "Refused rows and
//     retries").
//   - NOT_FOUND (STREAM_NOT_FOUND), STREAM_FINALIZED or
//     INVALID_STREAM_STATE (a stream the service will take no more rows
//     into): the stream is ended for this shard (a finalize is asked for
//     what it holds) and the batch goes to a new stream at offset 0.
//   - OUT_OF_RANGE (OFFSET_OUT_OF_RANGE): the stream holds fewer rows than
//     the state says were appended: rows acknowledged before are gone; the
//     write fails, naming the stream and the offset.
//   - UNAVAILABLE, INTERNAL, ABORTED, RESOURCE_EXHAUSTED (throttling),
//     DEADLINE_EXCEEDED, UNKNOWN, a dropped connection: the same append
//     again, after a backoff, up to WithRetries.
//   - NOT_FOUND and PERMISSION_DENIED about the table while it is new
//     (DefaultTableSettle): the same append again, after a backoff.
//   - anything else (INVALID_ARGUMENT without row_errors, such as a schema
//     that does not fit the table; PERMISSION_DENIED; TABLE_NOT_FOUND; a
//     code the write does not know): the write fails, naming the table,
//     the stream, the offset and the code. Never FailedRows: those rows
//     are not refused, and a job whose rows went missing would succeed.
func (f *streamAppendFn) appendBatch(ctx context.Context, key string, st *shardStream, b streamBatch, emit func(string, flushOp), failed func(FailedRow)) error {
	spec, res := shardSpec(key), shardTable(key)
	desc, err := f.desc(b.Desc)
	if err != nil {
		return fmt.Errorf("bqwrite.Write to %s: shard %s: %w", spec, key, err)
	}
	rows := b.Rows
	// Appends at an offset: idempotent (ALREADY_EXISTS the second time).
	rb := retryBackoff(f.Cfg.MaxRetries, f.Cfg.RetryBase).Start()
	settle := newSettler(f.Cfg, res)
	for len(rows) > 0 {
		now := time.Now()
		if st.Stream != "" && (st.Next+int64(len(rows)) > f.Cfg.StreamMaxRows) {
			f.finalize(key, st, emit)
		}
		if st.Stream == "" {
			name, err := f.create(ctx, spec, res, desc, b.Desc)
			if err != nil {
				return err
			}
			st.Stream, st.Next, st.Created = name, 0, now.UnixNano()
		}
		o, err := f.open(ctx, spec, st.Stream, desc, b.Desc)
		if err != nil {
			return err
		}
		opts := []managedwriter.AppendOption{managedwriter.WithOffset(st.Next)}
		if o.desc != string(b.Desc) {
			opts = append(opts, managedwriter.UpdateSchemaDescriptor(desc))
			o.desc = string(b.Desc)
		}
		f.m.appends.Inc(ctx, 1)
		var resp *storagepb.AppendRowsResponse
		r, err := o.ms.AppendRows(ctx, rows, opts...)
		if err == nil {
			resp, err = r.FullResponse(ctx)
		}
		code, sc := status.Code(err), storageCode(err)
		switch {
		case code == codes.AlreadyExists:
			// Rows are at this offset already: appended by an attempt whose
			// state the runner did not commit (a retried bundle, or a
			// checkpoint restored and its input replayed). They may be
			// other rows than these (Flink replays the input through
			// random shards and processing-time batches): never taken as
			// these. The state's offset was committed, so the rows before
			// it are made visible; the stream is then left, its rows past
			// that offset never flushed (not finalized either: a finalize
			// is no flush, but the stream is simply no longer named), and
			// the batch goes to a new stream.
			f.m.abandoned.Inc(ctx, 1)
			if st.Next > 0 {
				emit(st.Stream, flushOp{Table: spec, Stream: st.Stream, End: st.Next})
			}
			if o := f.streams[st.Stream]; o != nil {
				o.ms.Close()
				delete(f.streams, st.Stream)
			}
			st.Stream, st.Next, st.Created = "", 0, 0
		case err == nil:
			f.m.rows.Inc(ctx, int64(len(rows)))
			var n int
			for _, r := range rows {
				n += len(r)
			}
			f.m.bytes.Inc(ctx, int64(n))
			st.Next += int64(len(rows))
			st.Last = now.UnixNano()
			st.Seq = b.Seq + 1
			emit(st.Stream, flushOp{Table: spec, Stream: st.Stream, End: st.Next, Rows: int64(len(rows))})
			return nil
		case len(resp.GetRowErrors()) > 0:
			if rows, err = f.dropRefused(ctx, spec, res, st.Stream, st.Next, desc, rows, resp.GetRowErrors(), failed); err != nil {
				return err
			}
		case sc == storagepb.StorageError_STREAM_NOT_FOUND || sc == storagepb.StorageError_STREAM_FINALIZED || sc == storagepb.StorageError_INVALID_STREAM_STATE:
			f.finalize(key, st, emit)
		case code == codes.OutOfRange:
			return serviceError(spec, st.Stream, st.Next, err, fmt.Sprintf("the stream holds fewer rows than were acknowledged to shard %s", key))
		case retry.Transient(err, retry.Idempotent) && ctx.Err() == nil:
			if rerr := rb.Retry(ctx, err, true, fmt.Sprintf("AppendRows of %d rows of shard %s", len(rows), key)); rerr != nil {
				return serviceError(spec, st.Stream, st.Next, err, rerr.(*retry.Error).Doing())
			}
			f.m.retries.Inc(ctx, 1)
		case settle.wait(ctx, err):
			f.m.retries.Inc(ctx, 1)
		default:
			// Not a refusal of rows: the batch is not sent to FailedRows
			// (its rows would be missing from a job that succeeds).
			return serviceError(spec, st.Stream, st.Next, err, fmt.Sprintf("AppendRows of %d rows of shard %s%s", len(rows), key, settle.note()))
		}
	}
	st.Seq = b.Seq + 1 // every row refused
	return nil
}

// dropRefused sends the rows the service refused, in an append of rows
// to stream at offset at, to FailedRows (or fails WithFailOnRowErrors) and
// returns the others, which are appended again at the same offset: none
// of the refused append was written, and the offset holds one write at
// most, whichever attempt made it (ALREADY_EXISTS then sends the batch to
// a new stream: see appendBatch).
func (f *streamAppendFn) dropRefused(ctx context.Context, spec, res, stream string, at int64, desc *descriptorpb.DescriptorProto, rows [][]byte, errs []*storagepb.RowError, failed func(FailedRow)) ([][]byte, error) {
	bad := map[int64]string{}
	var msgs []string
	for _, e := range errs {
		if e.GetIndex() < 0 || e.GetIndex() >= int64(len(rows)) {
			return nil, fmt.Errorf("bqwrite.Write to %s: stream %s at offset %d: a row error for row %d of an append of %d rows: %s", spec, stream, at, e.GetIndex(), len(rows), e.GetMessage())
		}
		bad[e.GetIndex()] = e.GetMessage()
		msgs = append(msgs, fmt.Sprintf("row %d: %s", at+e.GetIndex(), e.GetMessage()))
	}
	if f.Cfg.FailOnErrors {
		return nil, fmt.Errorf("bqwrite.Write to %s: stream %s at offset %d: %d rows refused: %s (WithFailOnRowErrors)", spec, stream, at, len(errs), strings.Join(msgs, "; "))
	}
	var keep [][]byte
	for i, row := range rows {
		if msg, ok := bad[int64(i)]; ok {
			f.m.refused.Inc(ctx, 1)
			failed(f.failedRow(ctx, spec, res, desc, row, msg))
			continue
		}
		keep = append(keep, row)
	}
	return keep, nil
}

// failedRow is the FailedRow of an encoded row of table res that the
// service refused with msg: the element rebuilt from the row (see
// FailedRow), as the batch write gives it. If the element cannot be
// rebuilt (the table's schema cannot be read), Row is the row as protojson
// shows it, and a warning says why.
func (f *streamAppendFn) failedRow(ctx context.Context, spec, res string, desc *descriptorpb.DescriptorProto, row []byte, msg string) FailedRow {
	enc, err := f.failedEncoder(ctx, spec, res)
	if err == nil {
		var x any
		if x, err = enc.element(f.Type.T, row); err == nil {
			return failedRow(spec, enc.schema, x, msg)
		}
	}
	log.Warnf(ctx, "bqwrite.Write to %s: a refused row's element could not be rebuilt, its FailedRow shows the encoded row: %v", spec, err)
	return FailedRow{Table: spec, Row: protoJSON(desc, row), Error: msg}
}

// failedEncoder is the encoder of the element type for table res, which
// rebuilds the elements of refused rows: made once per table, from its
// schema (GetWriteStream of _default).
func (f *streamAppendFn) failedEncoder(ctx context.Context, spec, res string) (*rowEncoder, error) {
	if enc, ok := f.failEnc[res]; ok {
		return enc, nil
	}
	if f.Type.T == nil {
		return nil, errors.New("the element type is not known")
	}
	mw, err := f.client(ctx, spec, res)
	if err != nil {
		return nil, err
	}
	base, _ := splitDecorator(res)
	ws, err := mw.GetWriteStream(ctx, &storagepb.GetWriteStreamRequest{Name: base + "/streams/_default", View: storagepb.WriteStreamView_FULL})
	if err != nil {
		return nil, fmt.Errorf("reading the table's schema: %w", err)
	}
	schema, err := tableSchema(ws.GetTableSchema())
	if err != nil {
		return nil, fmt.Errorf("the table's schema: %w", err)
	}
	enc, err := newRowEncoder(schema, f.Type.T)
	if err != nil {
		return nil, err
	}
	if f.failEnc == nil {
		f.failEnc = map[string]*rowEncoder{}
	}
	f.failEnc[res] = enc
	return enc, nil
}

// desc is the writer schema of a batch.
func (f *streamAppendFn) desc(b []byte) (*descriptorpb.DescriptorProto, error) {
	if d, ok := f.descs[string(b)]; ok {
		return d, nil
	}
	d := &descriptorpb.DescriptorProto{}
	if err := proto.Unmarshal(b, d); err != nil {
		return nil, fmt.Errorf("decoding a batch's writer schema: %w", err)
	}
	f.descs[string(b)] = d
	return d, nil
}

// client is the Storage Write API client, made on first use.
func (f *streamAppendFn) client(ctx context.Context, spec, res string) (*managedwriter.Client, error) {
	if f.mw == nil {
		mw, err := newManagedWriter(ctx, f.Cfg, strings.Split(res, "/")[1])
		if err != nil {
			return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
		f.mw = mw
	}
	return f.mw, nil
}

// create makes a BUFFERED stream of table res, retrying transient
// failures. A stream made by an attempt whose answer was lost stays
// empty: nothing names it.
func (f *streamAppendFn) create(ctx context.Context, spec, res string, desc *descriptorpb.DescriptorProto, key []byte) (string, error) {
	mw, err := f.client(ctx, spec, res)
	if err != nil {
		return "", err
	}
	if f.wc == nil {
		if f.wc, err = newWriteClient(ctx, f.Cfg); err != nil {
			return "", fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
	}
	// Not idempotent strictly (each call makes a stream), but a stream
	// made by a lost attempt stays empty and unnamed: retried as idempotent.
	r := retryBackoff(f.Cfg.MaxRetries, f.Cfg.RetryBase).Start()
	settle := newSettler(f.Cfg, res)
	for {
		ws, err := f.wc.CreateWriteStream(ctx, &storagepb.CreateWriteStreamRequest{Parent: res,
			WriteStream: &storagepb.WriteStream{Type: storagepb.WriteStream_BUFFERED}}, noRetry)
		if err == nil {
			f.m.created.Inc(ctx, 1)
			ms, err := mw.NewManagedStream(ctx, managedwriter.WithStreamName(ws.GetName()), managedwriter.WithType(managedwriter.BufferedStream),
				managedwriter.WithSchemaDescriptor(desc))
			if err != nil {
				return "", fmt.Errorf("bqwrite.Write to %s: opening write stream %s: %w", spec, ws.GetName(), err)
			}
			f.streams[ws.GetName()] = &openStream{ms: ms, desc: string(key), used: time.Now()}
			return ws.GetName(), nil
		}
		if settle.wait(ctx, err) {
			continue
		}
		if rerr := r.Retry(ctx, err, retry.Transient(err, retry.Idempotent), "CreateWriteStream (BUFFERED)"); rerr != nil {
			re := rerr.(*retry.Error)
			if re.Exhausted || re.Stopped != nil {
				return "", serviceError(spec, "", -1, err, re.Doing())
			}
			return "", serviceError(spec, "", -1, err, re.Doing()+settle.note())
		}
	}
}

// open is the ManagedStream of stream name, opened on the stream when this
// DoFn instance has none (the shard's state came from another worker).
func (f *streamAppendFn) open(ctx context.Context, spec, name string, desc *descriptorpb.DescriptorProto, key []byte) (*openStream, error) {
	if o := f.streams[name]; o != nil {
		o.used = time.Now()
		return o, nil
	}
	mw, err := f.client(ctx, spec, streamParent(name))
	if err != nil {
		return nil, err
	}
	ms, err := mw.NewManagedStream(ctx, managedwriter.WithStreamName(name), managedwriter.WithType(managedwriter.BufferedStream),
		managedwriter.WithSchemaDescriptor(desc))
	if err != nil {
		return nil, fmt.Errorf("bqwrite.Write to %s: opening write stream %s: %w", spec, name, err)
	}
	o := &openStream{ms: ms, desc: string(key), used: time.Now()}
	f.streams[name] = o
	return o, nil
}

// streamFlushFn makes the rows of a flushOp visible (FlushRows up to its
// end), finalizes the stream if asked, and outputs a TableResult for the
// rows. FlushRows is idempotent up to an offset: a flush repeated, or
// overtaken by a later one of the same stream, is answered ALREADY_EXISTS,
// which is its success; a stream is finalized only by a finalize op,
// after a flush to its end, so a flush answered STREAM_FINALIZED was done
// by it. A stream NOT_FOUND loses the rows the op names: the write fails,
// naming the stream and the rows.
//
// The flush is made as the step gets the op. Beam's portable hook for
// "once the runner has committed this bundle", bundle finalization, is not
// usable from Beam Go v2.78 (docs/DESIGN.md, "Streaming exactly once, per
// runner"), so on a runner that restores a checkpoint and replays its
// input (Flink), rows flushed after the last completed checkpoint are
// appended again by the replay: at least once there, under failures.
type streamFlushFn struct {
	Cfg writeConfig

	c *writeClient
	m streamMetrics
}

func (f *streamFlushFn) Setup() { f.m = newStreamMetrics(f.Cfg) }

func (f *streamFlushFn) Teardown() {
	if f.c != nil {
		f.c.Close()
	}
}

func (f *streamFlushFn) ProcessElement(ctx context.Context, _ string, op flushOp, emit func(TableResult)) error {
	if op.Stream == "" {
		f.m.prime(ctx) // see primeKey
		return nil
	}
	if f.c == nil {
		c, err := newWriteClient(ctx, f.Cfg)
		if err != nil {
			return fmt.Errorf("bqwrite.Write to %s: %w", op.Table, err)
		}
		f.c = c
	}
	if op.End > 0 {
		if err := f.call(ctx, op, "flushing", func() error {
			_, err := f.c.FlushRows(ctx, &storagepb.FlushRowsRequest{WriteStream: op.Stream, Offset: wrapInt64(op.End - 1)}, noRetry)
			return err
		}); err != nil {
			return err
		}
	}
	if op.Finalize {
		if err := f.call(ctx, op, "finalizing", func() error {
			_, err := f.c.FinalizeWriteStream(ctx, &storagepb.FinalizeWriteStreamRequest{Name: op.Stream}, noRetry)
			return err
		}); err != nil {
			return err
		}
		f.m.finalized.Inc(ctx, 1)
	}
	if op.Rows > 0 {
		f.m.flushed.Inc(ctx, op.Rows)
		emit(TableResult{Table: op.Table, Streams: []string{op.Stream}, Rows: op.Rows, CommitTime: time.Now()})
	}
	return nil
}

// call runs a FlushRows or FinalizeWriteStream call of op until it is
// done: ALREADY_EXISTS and STREAM_FINALIZED are done (see streamFlushFn);
// transient failures are retried with backoff.
func (f *streamFlushFn) call(ctx context.Context, op flushOp, what string, do func() error) error {
	// Both are idempotent: a second one answers ALREADY_EXISTS or
	// STREAM_FINALIZED, which is done.
	r := retryBackoff(f.Cfg.MaxRetries, f.Cfg.RetryBase).Start()
	for {
		err := do()
		switch {
		case err == nil, status.Code(err) == codes.AlreadyExists, storageCode(err) == storagepb.StorageError_STREAM_FINALIZED:
			return nil
		}
		if err := r.Retry(ctx, err, retry.Transient(err, retry.Idempotent),
			fmt.Sprintf("bqwrite.Write to %s: %s stream %s to offset %d (%d rows of it not yet visible)", op.Table, what, op.Stream, op.End, op.Rows)); err != nil {
			return err
		}
	}
}

// writeClient is the Storage Write API's plain client, for the calls the
// flush step makes (FlushRows, FinalizeWriteStream).
type writeClient = bqstorage.BigQueryWriteClient

func newWriteClient(ctx context.Context, cfg writeConfig) (*writeClient, error) {
	opts, err := cfg.clientOptions()
	if err != nil {
		return nil, err
	}
	c, err := bqstorage.NewBigQueryWriteClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigqueryio: creating the Storage Write client: %w", err)
	}
	return c, nil
}

func wrapInt64(v int64) *wrapperspb.Int64Value { return wrapperspb.Int64(v) }
