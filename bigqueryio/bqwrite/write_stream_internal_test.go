package bqwrite

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// fakeState is a shard's user state as a runner keeps it: what a bundle
// wrote, which a failed bundle's retry does not see (restore a copy).
type fakeState struct {
	state.Provider // the kinds of state the write does not use: nil
	vals           map[string]any
	bags           map[string][]any
}

func newFakeState() *fakeState {
	return &fakeState{vals: map[string]any{}, bags: map[string][]any{}}
}

func (f *fakeState) ReadValueState(id string) (any, []state.Transaction, error) {
	return f.vals[id], nil, nil
}
func (f *fakeState) WriteValueState(t state.Transaction) error { f.vals[t.Key] = t.Val; return nil }
func (f *fakeState) ClearValueState(t state.Transaction) error { delete(f.vals, t.Key); return nil }
func (f *fakeState) ReadBagState(id string) ([]any, []state.Transaction, error) {
	return append([]any(nil), f.bags[id]...), nil, nil
}
func (f *fakeState) WriteBagState(t state.Transaction) error {
	f.bags[t.Key] = append(f.bags[t.Key], t.Val)
	return nil
}
func (f *fakeState) ClearBagState(t state.Transaction) error { delete(f.bags, t.Key); return nil }

// copy is the state as it is now: what a bundle that fails later rolls
// back to.
func (f *fakeState) copy() *fakeState {
	c := newFakeState()
	for k, v := range f.vals {
		c.vals[k] = v
	}
	for k, v := range f.bags {
		c.bags[k] = append([]any(nil), v...)
	}
	return c
}

// fakeTimers records the timers set.
type fakeTimers struct{ set []timers.TimerMap }

func (f *fakeTimers) Set(t timers.TimerMap) { f.set = append(f.set, t) }

// streamSteps are the steps of the streaming write, run by hand on one
// shard, against a bqtest server.
type streamSteps struct {
	t      testing.TB
	key    string
	keyFn  *streamKeyFn
	batch  *streamBatchFn
	app    *streamAppendFn
	flush  *streamFlushFn
	failed []FailedRow
}

func newStreamSteps(t *testing.T, srv *bqtest.Server, opts ...WriteOption) *streamSteps {
	t.Helper()
	cfg := writeTestConfig(t, srv, "p.d.s", append([]WriteOption{WithNumStreams(1)}, opts...)...)
	return newStreamStepsOf(t, cfg, reflect.TypeFor[onceRow]())
}

// newStreamStepsOf is newStreamSteps of a configuration and a row type.
func newStreamStepsOf(t testing.TB, cfg writeConfig, typ reflect.Type) *streamSteps {
	fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: typ}, TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fixedTable)}}
	st := &streamSteps{t: t, key: cfg.Table + "#0", keyFn: &streamKeyFn{Fn: fn, Shards: cfg.NumStreams},
		batch: newStreamBatchFn(cfg), app: newStreamAppendFn(cfg), flush: &streamFlushFn{Cfg: cfg}}
	st.app.Type = fn.Type
	st.keyFn.Setup()
	st.app.Setup()
	st.flush.Setup()
	t.Cleanup(func() { st.keyFn.Teardown(); st.app.Teardown(); st.flush.Teardown() })
	return st
}

// batches runs rows ids from..to-1 through the keying and batching steps
// and the batching step's timer: the batches it outputs, in order.
func (st *streamSteps) batches(sp *fakeState, from, to int) []streamBatch {
	st.t.Helper()
	rows := make([]any, 0, to-from)
	for i := from; i < to; i++ {
		rows = append(rows, onceRow{ID: int64(i), Name: "r"})
	}
	return st.batchRows(sp, rows)
}

// keyBundle is the rows of one bundle of the keying step when the tests
// run it by hand: its chunks (all of shard st.key) come out when a chunk
// is full and when the bundle ends.
const keyBundle = 37

// batchRows runs rows through the keying step, in bundles of keyBundle
// rows, each chunk through the batching step, and then the batching
// step's timer: the batches it outputs, in order.
func (st *streamSteps) batchRows(sp *fakeState, rows []any) []streamBatch {
	st.t.Helper()
	ctx := context.Background()
	var out []streamBatch
	emit := func(k string, b streamBatch) { out = append(out, b) }
	failed := func(r FailedRow) { st.failed = append(st.failed, r) }
	var batchErr error
	chunk := func(ts beam.EventTime, k string, c streamChunk) {
		if k != st.key {
			st.t.Fatalf("a chunk keyed %q, want %q", k, st.key)
		}
		if err := st.batch.ProcessElement(ctx, ts, sp, &fakeTimers{}, k, c, emit); err != nil && batchErr == nil {
			batchErr = err
		}
	}
	for i, x := range rows {
		if err := st.keyFn.ProcessElement(ctx, beam.EventTime(i), x, chunk, failed); err != nil {
			st.t.Fatal(err)
		}
		if i%keyBundle == keyBundle-1 || i == len(rows)-1 {
			st.keyFn.FinishBundle(ctx, chunk, failed)
		}
	}
	if batchErr != nil {
		st.t.Fatal(batchErr)
	}
	if err := st.batch.OnTimer(ctx, sp, &fakeTimers{}, st.key, timers.Context{Family: "flush"}, emit); err != nil {
		st.t.Fatal(err)
	}
	return out
}

// appendAll runs batches through the append step from state sp: the
// flushOps it outputs.
func (st *streamSteps) appendAll(sp *fakeState, bs []streamBatch) []flushOp {
	st.t.Helper()
	var ops []flushOp
	for _, b := range bs {
		err := st.app.ProcessElement(context.Background(), beam.EventTime(0), sp, &fakeTimers{}, st.key, b,
			func(_ string, op flushOp) { ops = append(ops, op) }, func(r FailedRow) { st.failed = append(st.failed, r) })
		if err != nil {
			st.t.Fatal(err)
		}
	}
	return ops
}

// flushAll runs ops through the flush step: the rows its results count.
func (st *streamSteps) flushAll(ops []flushOp) int64 {
	st.t.Helper()
	var rows int64
	for _, op := range ops {
		if err := st.flush.ProcessElement(context.Background(), op.Stream, op, func(r TableResult) { rows += r.Rows }); err != nil {
			st.t.Fatal(err)
		}
	}
	return rows
}

// checkExactlyOnce fails unless table p.d.s shows ids 0..n-1 once each,
// counting duplicates and missing rows.
func checkExactlyOnce(t *testing.T, srv *bqtest.Server, n int) {
	t.Helper()
	rows, err := srv.TableRows("p.d.s")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, r := range rows {
		seen[r[0].(int64)]++
	}
	dup, missing := 0, 0
	for i := 0; i < n; i++ {
		switch c := seen[int64(i)]; {
		case c == 0:
			missing++
		case c > 1:
			dup += c - 1
		}
	}
	if dup > 0 || missing > 0 || len(rows) != n {
		t.Errorf("p.d.s: %d rows, %d duplicates, %d missing of ids 0..%d", len(rows), dup, missing, n-1)
	}
}

func newStreamServer(t *testing.T) *bqtest.Server {
	t.Helper()
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	srv.AddDataset("p", "d", "")
	return srv
}

// TestStreamBatchRetriedFromSameState: a bundle of the append step that
// appended batches and then failed is retried from the state it started
// with (a runner rolls the state back), with the same batches (Dataflow)
// or with other batches of the same rows (Flink replays its input through
// random shards and processing-time batches). The retry's first append
// meets the failed attempt's rows (ALREADY_EXISTS): it does not take them
// for its own; the committed rows of the stream are flushed, the stream is
// left, and the retry appends to a new stream. The failed attempt's ops
// never reach the flush step (a failed bundle's output is dropped): its
// rows stay invisible. After the committed ops and the retry's, each row is in
// the table once. A batch delivered again after its bundle's state is
// committed appends nothing.
func TestStreamBatchRetriedFromSameState(t *testing.T) {
	for _, regroup := range []bool{false, true} {
		t.Run(map[bool]string{false: "same batches", true: "other batches"}[regroup], func(t *testing.T) {
			srv := newStreamServer(t)
			st := newStreamSteps(t, srv)
			const n = 1000
			bs := st.batches(newFakeState(), 0, n)
			if len(bs) < 3 {
				t.Fatalf("%d batches of %d rows, want several (WithMaxAppendBytes 2000)", len(bs), n)
			}
			rows := 0
			for i, b := range bs {
				if b.Seq != int64(i) {
					t.Fatalf("batch %d has seq %d", i, b.Seq)
				}
				rows += len(b.Rows)
			}
			if rows != n {
				t.Fatalf("batches hold %d rows, want %d", rows, n)
			}

			sp := newFakeState()
			committed := st.appendAll(sp, bs[:1]) // the stream and its offset are in state
			before := sp.copy()
			first := st.appendAll(sp, bs[1:]) // the bundle fails after these appends
			replay := bs[1:]
			if regroup {
				// The same rows in other batches: the rows of batches 1 and 2
				// swapped between them, numbered as before.
				replay = append([]streamBatch(nil), bs[1:]...)
				replay[0], replay[1] = bs[1], bs[2]
				replay[0].Rows, replay[1].Rows = bs[2].Rows, bs[1].Rows
			}
			retry := st.appendAll(before, replay)
			if got, _ := srv.TableRows("p.d.s"); len(got) != 0 {
				t.Errorf("%d rows visible before any flush", len(got))
			}
			if len(retry) == 0 || retry[0].Stream != committed[0].Stream || retry[0].End != int64(len(bs[0].Rows)) || retry[0].Rows != 0 {
				t.Fatalf("the retry's first op %+v, want a flush of stream %s to its committed offset %d", retry[0], committed[0].Stream, len(bs[0].Rows))
			}
			for _, op := range retry[1:] {
				if op.Stream == committed[0].Stream {
					t.Errorf("the retry appended to the failed attempt's stream: %+v", op)
				}
			}
			_ = first // the failed bundle's ops: never finalized
			if got := st.flushAll(append(committed, retry...)); got != n {
				t.Errorf("results count %d rows, want %d", got, n)
			}
			checkExactlyOnce(t, srv, n)

			// The retry's state committed, its batches delivered again:
			// nothing appended.
			appends := srv.WriteStats().Appends
			if more := st.appendAll(before, bs); len(more) != 0 || srv.WriteStats().Appends != appends {
				t.Errorf("batches delivered again output %v and sent %d appends, want nothing", more, srv.WriteStats().Appends-appends)
			}
			checkExactlyOnce(t, srv, n)
		})
	}
}

// TestStreamBatchesOutOfOrder: batches that come out of order after the
// first of their epoch are appended in their order. (A state that has not
// seen an epoch takes it up at the first batch of it that comes, and
// appends the epoch's batches below that one as they come:
// TestStreamEpochAppendStateReset.)
func TestStreamBatchesOutOfOrder(t *testing.T) {
	srv := newStreamServer(t)
	st := newStreamSteps(t, srv)
	const n = 1000
	bs := st.batches(newFakeState(), 0, n)
	rev := make([]streamBatch, len(bs))
	rev[0] = bs[0]
	for i, b := range bs[1:] {
		rev[len(bs)-1-i] = b
	}
	sp := newFakeState()
	ops := st.appendAll(sp, rev)
	if len(ops) != len(bs) {
		t.Fatalf("%d flushes for %d batches", len(ops), len(bs))
	}
	end := int64(0)
	for i, op := range ops {
		end += int64(len(bs[i].Rows))
		if op.End != end {
			t.Errorf("flush %d ends at %d, want %d: batches appended out of order", i, op.End, end)
		}
	}
	st.flushAll(ops)
	checkExactlyOnce(t, srv, n)
	rows, _ := srv.TableRows("p.d.s")
	for i, r := range rows {
		if r[0].(int64) != int64(i) {
			t.Fatalf("row %d is id %v: batches not appended in order", i, r[0])
		}
	}
}

// TestStreamFaults runs the steps while the server fails calls: every row
// is in the table once.
func TestStreamFaults(t *testing.T) {
	for _, c := range []struct {
		name   string
		faults bqtest.WriteFaults
	}{
		{"append answers lost", bqtest.WriteFaults{AppendUnavailableCalls: 3, AfterWrite: true}},
		{"appends failed before the write", bqtest.WriteFaults{AppendUnavailableCalls: 3}},
		{"connection reset", bqtest.WriteFaults{CloseAfterRequests: 2}},
		{"throttling", bqtest.WriteFaults{OnAppend: func(call int) error {
			if call <= 4 {
				return status.Error(codes.ResourceExhausted, "bqtest: quota exceeded")
			}
			return nil
		}}},
		{"flush answers lost", bqtest.WriteFaults{FlushErrorCode: codes.Unavailable, FlushErrorCalls: 3, FlushAfterApply: true}},
		{"flushes failed", bqtest.WriteFaults{FlushErrorCode: codes.Unavailable, FlushErrorCalls: 3}},
		{"flushes throttled", bqtest.WriteFaults{FlushErrorCode: codes.ResourceExhausted, FlushErrorCalls: 3}},
		{"create answer lost", bqtest.WriteFaults{CreateErrorCode: codes.Unavailable, CreateErrorCalls: 2, CreateAfterApply: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newStreamServer(t)
			st := newStreamSteps(t, srv, WithStreamRotation(700, time.Hour))
			const n = 1000
			bs := st.batches(newFakeState(), 0, n)
			srv.SetWriteFaults(c.faults)
			ops := st.appendAll(newFakeState(), bs)
			if got := st.flushAll(ops); got != n {
				t.Errorf("results count %d rows, want %d", got, n)
			}
			checkExactlyOnce(t, srv, n)
			ws := srv.WriteStats()
			if ws.InjectedFailures+ws.InjectedCloses+ws.InjectedFlush+ws.InjectedCreate == 0 && c.faults.OnAppend == nil {
				t.Errorf("server %+v: no fault injected", ws)
			}
		})
	}
}

// TestStreamRotation: a shard's stream is finalized before an append
// would take it past WithStreamRotation's rows (400; batches of about
// 330), after a flush to its end,
// and the shard goes on in a new stream; every row is there once.
func TestStreamRotation(t *testing.T) {
	srv := newStreamServer(t)
	st := newStreamSteps(t, srv, WithStreamRotation(400, time.Hour))
	const n = 1000
	bs := st.batches(newFakeState(), 0, n)
	sp := newFakeState()
	ops := st.appendAll(sp, bs)
	st.flushAll(ops)
	checkExactlyOnce(t, srv, n)
	streams := srv.WriteStreams("p.d.s")
	if len(streams) < 3 {
		t.Fatalf("%d streams, want a new one every 400 rows at most", len(streams))
	}
	for i, ws := range streams {
		if ws.Rows > 400 || ws.Visible != ws.Rows {
			t.Errorf("stream %d: %+v: over 400 rows, or rows not flushed", i, ws)
		}
		if !ws.Finalized && i < len(streams)-1 {
			t.Errorf("stream %d: %+v: rotated but not finalized", i, ws)
		}
	}
	// The end of the input finalizes the last one.
	var end []flushOp
	if err := st.app.OnTimer(context.Background(), sp, &fakeTimers{}, st.key, timers.Context{Family: "idle"}, func(_ string, op flushOp) { end = append(end, op) }, nil); err != nil {
		t.Fatal(err)
	}
	st.flushAll(end)
	if last := srv.WriteStreams("p.d.s")[len(streams)-1]; len(end) != 1 || !last.Finalized {
		t.Errorf("end of input: ops %v, last stream %+v: want it finalized", end, last)
	}
}

// TestStreamOptions: the options of the streaming write are taken alone
// (unbounded input is written exactly once without WithExactlyOnceStreaming)
// and refused with WithAtLeastOnce and with values that cannot work,
// naming the option.
func TestStreamOptions(t *testing.T) {
	for _, opts := range [][]WriteOption{
		{WithNumStreams(3)}, {WithTriggeringFrequency(time.Second)}, {WithStreamRotation(10, time.Minute)},
		{WithExactlyOnceStreaming(), WithNumStreams(2), WithTriggeringFrequency(time.Second), WithStreamRotation(10, time.Minute)},
	} {
		cfg, err := newWriteConfig("p.d.t", opts)
		if err != nil {
			t.Errorf("%v: %v", opts, err)
		}
		if cfg.NumStreams < 0 || cfg.Frequency <= 0 || cfg.StreamMaxRows <= 0 || cfg.Idle <= 0 {
			t.Errorf("%v: configuration %+v", opts, cfg)
		}
	}
	for _, c := range []struct {
		opts []WriteOption
		want string
	}{
		{[]WriteOption{WithNumStreams(3), WithAtLeastOnce()}, "WithNumStreams(3) cannot be given with WithAtLeastOnce"},
		{[]WriteOption{WithAtLeastOnce(), WithTriggeringFrequency(time.Second)}, "WithTriggeringFrequency(1s) cannot be given with WithAtLeastOnce"},
		{[]WriteOption{WithExactlyOnceStreaming(), WithAtLeastOnce()}, "WithExactlyOnceStreaming() cannot be given with WithAtLeastOnce"},
		{[]WriteOption{WithExactlyOnceStreaming(), WithNumStreams(0)}, "WithNumStreams(0): a table needs at least one stream"},
		{[]WriteOption{WithExactlyOnceStreaming(), WithTriggeringFrequency(0)}, "WithTriggeringFrequency(0s): the frequency must be positive"},
		{[]WriteOption{WithExactlyOnceStreaming(), WithStreamRotation(0, time.Second)}, "WithStreamRotation(0, 1s): the rows and the idle time must be positive"},
	} {
		_, err := newWriteConfig("p.d.t", c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.opts, err, c.want)
		}
	}
}

// TestStreamAutoShards: without WithNumStreams a worker process's shards of
// a table follow the rate of rows it keys (one at first, then the last
// window's bytes per second over AutoStreamBytesPerSecond, rounded up,
// within 1..MaxAutoStreams), under a prefix of its own; WithNumStreams(n)
// keys on exactly n shards, the same in every process.
func TestStreamAutoShards(t *testing.T) {
	a := newAutoShards()
	t0 := time.Unix(1000, 0)
	if got := a.add("t", 100<<20, t0); got != 1 {
		t.Errorf("first chunk: %d shards, want 1 until a window is measured", got)
	}
	steps := []struct {
		at    time.Duration
		bytes int
		want  int
	}{
		{time.Second, 1 << 20, 1},                         // within the first window: unchanged
		{autoWindow, 10 << 20, 14},                        // (100+1+10) MiB over 2 s = 55.5 MiB/s: 14 shards
		{autoWindow + time.Second, 0, 14},                 // within the window
		{2 * autoWindow, 3 * AutoStreamBytesPerSecond, 2}, // 12 MiB over 2 s = 6 MiB/s: 2 shards
		{3 * autoWindow, 1, 1},                            // idle: 1
		{4 * autoWindow, 1 << 30, MaxAutoStreams},         // 512 MiB/s: the cap
	}
	for _, s := range steps {
		if got := a.add("t", s.bytes, t0.Add(s.at)); got != s.want {
			t.Errorf("at %v after %d bytes: %d shards, want %d", s.at, s.bytes, got, s.want)
		}
	}
	if got := a.add("other", 1<<30, t0.Add(4*autoWindow)); got != 1 {
		t.Errorf("another table: %d shards, want its own count (1)", got)
	}
	if b := newAutoShards(); b.id == a.id {
		t.Errorf("two processes' shard prefixes are the same: %q", a.id)
	}

	srv := newStreamServer(t)
	keys := func(opts ...WriteOption) map[string]int {
		cfg := writeTestConfig(t, srv, "p.d.s", opts...)
		fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[onceRow]()}, TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fixedTable)}}
		kf := &streamKeyFn{Fn: fn, Shards: cfg.NumStreams}
		kf.Setup()
		defer kf.Teardown()
		got := map[string]int{}
		emit := func(_ beam.EventTime, k string, c streamChunk) { got[k] += len(c.Rows) }
		for i := range 2000 {
			if err := kf.ProcessElement(context.Background(), 0, onceRow{ID: int64(i), Name: "r"}, emit, func(FailedRow) {}); err != nil {
				t.Fatal(err)
			}
		}
		kf.FinishBundle(context.Background(), emit, func(FailedRow) {})
		return got
	}
	fixed := keys(WithNumStreams(3))
	if len(fixed) != 3 {
		t.Errorf("WithNumStreams(3): keys %v, want 3", fixed)
	}
	for k := range fixed {
		if sh := k[strings.LastIndexByte(k, '#'):]; sh != "#0" && sh != "#1" && sh != "#2" {
			t.Errorf("WithNumStreams(3): key %q", k)
		}
	}
	auto := keys()
	res := ""
	for k := range auto {
		res = shardTable(k)
	}
	want := res + "#" + procShards.id + ".0"
	if len(auto) != 1 || auto[want] != 2000 {
		t.Errorf("automatic, a low rate: keys %v, want all 2000 rows on %q", auto, want)
	}
}

// evenOddTable routes even IDs to table p.d.even and odd ones to p.d.odd.
func evenOddTable(r onceRow) string {
	if r.ID%2 == 0 {
		return "p.d.even"
	}
	return "p.d.odd"
}

// TestStreamKeyChunksInterleaved: the keying step, its rows alternating
// between two tables (its lookups of the previous row's table and writer
// schema then miss on every row) in bundles of many chunks, outputs each
// table's rows once, in order, in chunks of that table within an
// append's bytes that carry the table's writer schema.
func TestStreamKeyChunksInterleaved(t *testing.T) {
	srv := newStreamServer(t)
	cfg := writeTestConfig(t, srv, "p.d.s", WithNumStreams(2), WithCreateDisposition(CreateIfNeeded))
	fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[onceRow]()}, HasTableFn: true,
		TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(evenOddTable)}}
	kf := &streamKeyFn{Fn: fn, Shards: cfg.NumStreams}
	kf.Setup()
	defer kf.Teardown()
	ctx := context.Background()
	got := map[string][][]byte{}
	chunks := 0
	emit := func(_ beam.EventTime, k string, c streamChunk) {
		chunks++
		res, n := shardTable(k), 0
		for _, r := range c.Rows {
			n += len(r)
		}
		if n > cfg.MaxBatchSize {
			t.Errorf("a chunk of %s of %d bytes, over %d", res, n, cfg.MaxBatchSize)
		}
		if d := kf.descs[fn.tables[res].enc.desc]; c.Fp != d.Fp || !bytes.Equal(c.Desc, d.Desc) || c.Fp == 0 {
			t.Errorf("a chunk of %s: writer schema %x, want %x", res, c.Fp, d.Fp)
		}
		got[res] = append(got[res], c.Rows...)
	}
	failed := func(r FailedRow) { t.Errorf("refused: %+v", r) }
	var rows []onceRow
	for bundle := range 3 {
		for i := range 1500 {
			r := onceRow{ID: int64(bundle*1500 + i), Name: strings.Repeat("n", i%7)}
			rows = append(rows, r)
			if err := kf.ProcessElement(ctx, beam.EventTime(i), r, emit, failed); err != nil {
				t.Fatal(err)
			}
		}
		kf.FinishBundle(ctx, emit, failed)
	}
	if chunks < 20 {
		t.Errorf("%d chunks: the test wants many per bundle", chunks)
	}
	want := map[string][][]byte{}
	for _, r := range rows {
		res, err := tableResource(evenOddTable(r))
		if err != nil {
			t.Fatal(err)
		}
		b, err := fn.tables[res].enc.encode(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		want[res] = append(want[res], b)
	}
	if len(got) != 2 {
		t.Fatalf("rows of %d tables, want 2", len(got))
	}
	for res, w := range want {
		g := got[res]
		if len(g) != len(w) {
			t.Errorf("%s: %d rows, want %d", res, len(g), len(w))
			continue
		}
		for i := range w {
			if !bytes.Equal(g[i], w[i]) {
				t.Errorf("%s: row %d is %x, want %x", res, i, g[i], w[i])
				break
			}
		}
	}
}
