package bqwrite

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
)

// countingState is a fakeState that counts the writes of each value
// state and the bytes the writes would take through their coders.
type countingState struct {
	*fakeState
	writes map[string]int
	bytes  map[string]int
}

func newCountingState() *countingState {
	return &countingState{fakeState: newFakeState(), writes: map[string]int{}, bytes: map[string]int{}}
}

func (c *countingState) WriteValueState(t state.Transaction) error {
	if err := c.count(t); err != nil {
		return err
	}
	return c.fakeState.WriteValueState(t)
}

func (c *countingState) WriteBagState(t state.Transaction) error {
	if err := c.count(t); err != nil {
		return err
	}
	return c.fakeState.WriteBagState(t)
}

// count counts a write of t and the bytes its value takes through Beam's
// coder of its type (the wire coder, or Beam's row coder).
func (c *countingState) count(t state.Transaction) error {
	c.writes[t.Key]++
	var buf bytes.Buffer
	if err := beam.NewElementEncoder(reflect.TypeOf(t.Val)).Encode(t.Val, &buf); err != nil {
		return err
	}
	c.bytes[t.Key] += buf.Len()
	return nil
}

// empty reports whether the state holds nothing.
func (f *fakeState) empty() bool { return len(f.vals) == 0 && len(f.bags) == 0 }

// appendOne runs one batch through the append step under key, from state
// sp: the ops it outputs.
func (st *streamSteps) appendOne(sp state.Provider, key string, b streamBatch) []flushOp {
	st.t.Helper()
	var ops []flushOp
	err := st.app.ProcessElement(context.Background(), beam.EventTime(0), sp, &fakeTimers{}, key, b,
		func(_ string, op flushOp) { ops = append(ops, op) }, func(r FailedRow) { st.failed = append(st.failed, r) })
	if err != nil {
		st.t.Fatal(err)
	}
	return ops
}

// newAppendProcess replaces the append step by a new instance, as in
// another worker process: nothing of the old one's memory is kept.
func (st *streamSteps) newAppendProcess() {
	st.app.Teardown()
	st.app = newStreamAppendFn(st.app.Cfg)
	st.app.Setup()
}

// batchIdle fires the batching step's idle timer of st.key: the batches
// it outputs (the open one, if any, and the End of the epoch).
func (st *streamSteps) batchIdle(sp state.Provider) []streamBatch {
	st.t.Helper()
	var out []streamBatch
	if err := st.batch.OnTimer(context.Background(), sp, &fakeTimers{}, st.key, timers.Context{Family: "flush", Tag: idleTag},
		func(_ string, b streamBatch) { out = append(out, b) }); err != nil {
		st.t.Fatal(err)
	}
	return out
}

// streamsOf are the streams ops name, in order, once each.
func streamsOf(ops []flushOp) []string {
	var out []string
	for _, op := range ops {
		if !slices.Contains(out, op.Stream) {
			out = append(out, op.Stream)
		}
	}
	return out
}

// TestStreamEpochBatchingStateReset: the batching step's state of a shard
// is reset (a runner dropped it: a renamed step) while the append step's
// is not. The new batching state numbers its batches from 0 again, in an
// epoch of its own: the append step starts a new stream for them (the old
// one finalized) and appends them all, also when a batch of the old epoch
// still comes after the new epoch's first. Every row is in the table once.
// (Before epochs, the new batches were dropped as "repeated".)
func TestStreamEpochBatchingStateReset(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "in order", true: "an old batch late"}[late], func(t *testing.T) {
			srv := newStreamServer(t)
			st := newStreamSteps(t, srv)
			const n = 2000
			old := st.batches(newFakeState(), 0, n/2)
			renewed := st.batches(newFakeState(), n/2, n) // a new batching state
			if len(old) < 3 || len(renewed) < 3 || old[0].Epoch == renewed[0].Epoch || renewed[0].Seq != 0 || old[0].Epoch == 0 {
				t.Fatalf("batches %d and %d, epochs %d and %d, first seq %d: want several, two epochs, numbered from 0",
					len(old), len(renewed), old[0].Epoch, renewed[0].Epoch, renewed[0].Seq)
			}
			order := append(slices.Clone(old), renewed...)
			if late {
				// The old epoch's last batch comes after the new epoch's first.
				order = slices.Concat(old[:len(old)-1], renewed[:1], old[len(old)-1:], renewed[1:])
			}
			sp := newFakeState()
			ops := st.appendAll(sp, order)
			if got := st.flushAll(ops); got != n {
				t.Errorf("results count %d rows, want %d", got, n)
			}
			checkExactlyOnce(t, srv, n)
			streams := streamsOf(ops)
			if len(streams) < 2 {
				t.Errorf("streams %v: want a new one for the new epoch", streams)
			}
			for i, ws := range srv.WriteStreams("p.d.s") {
				if ws.Rows != ws.Visible || (i < len(streams)-1 && !ws.Finalized) {
					t.Errorf("stream %d: %+v: rows not flushed, or left open when the epoch changed", i, ws)
				}
			}
		})
	}
}

// TestStreamEpochAppendStateReset: the append step's state of a shard is
// reset while the batching step's is not: the batches go on in the same
// epoch at a sequence number the new state has never seen. It takes the
// epoch up at the first that comes and appends the ones below it that are
// still on their way (here, out of order) as they come, once each. Every
// row is in the table once. In a new process (no writer schema kept) the
// batches without their schema wait for the next batch that carries it
// (every descEvery-th), then go. (Before epochs, the first batch after
// the reset waited in the Early bag for ever.)
func TestStreamEpochAppendStateReset(t *testing.T) {
	for _, newProcess := range []bool{false, true} {
		t.Run(map[bool]string{false: "same process", true: "new process"}[newProcess], func(t *testing.T) {
			srv := newStreamServer(t)
			st := newStreamSteps(t, srv)
			const n = 7000 // about 21 batches of 330 rows
			bs := st.batches(newFakeState(), 0, n)
			if len(bs) <= descEvery+2 {
				t.Fatalf("%d batches, want more than %d", len(bs), descEvery+2)
			}
			ops := st.appendAll(newFakeState(), bs[:2])
			if newProcess {
				st.newAppendProcess()
			}
			reset := newFakeState()
			// Batch 2 is on its way when the state is reset and comes late.
			ops = append(ops, st.appendAll(reset, bs[3:descEvery])...)
			if newProcess {
				if len(ops) != 2 {
					t.Errorf("%d ops before a batch carried the writer schema, want the first 2 batches' only", len(ops))
				}
			}
			ops = append(ops, st.appendAll(reset, bs[descEvery:])...)
			ops = append(ops, st.appendAll(reset, bs[2:3])...)
			// And delivered twice: nothing more.
			appends := srv.WriteStats().Appends
			if more := st.appendAll(reset, bs[2:]); len(more) != 0 || srv.WriteStats().Appends != appends {
				t.Errorf("batches delivered again: ops %v, %d appends", more, srv.WriteStats().Appends-appends)
			}
			if got := st.flushAll(ops); got != n {
				t.Errorf("results count %d rows, want %d", got, n)
			}
			checkExactlyOnce(t, srv, n)
			if early := reset.bags["early"]; len(early) != 0 {
				t.Errorf("%d batches still in the Early bag", len(early))
			}
		})
	}
}

// TestStreamIdleStateCleared: once a shard's batching state is idle (its
// idle timer fires), it outputs its open batch and an End batch and is
// cleared; the append step, when the End comes, finalizes the shard's
// stream (flushed to its end) and clears its state. The shard's next rows
// start a new epoch and a new stream, from empty states, and every row is
// in the table once. A timer of a cleared state does nothing.
func TestStreamIdleStateCleared(t *testing.T) {
	srv := newStreamServer(t)
	st := newStreamSteps(t, srv)
	bsp, asp := newFakeState(), newFakeState()
	bs := st.batches(bsp, 0, 1000)
	ops := st.appendAll(asp, bs)
	end := st.batchIdle(bsp)
	if len(end) != 1 || !end[0].End || end[0].Epoch != bs[0].Epoch || end[0].Seq != int64(len(bs)) || len(end[0].Rows) != 0 {
		t.Fatalf("idle batching state output %+v, want one End batch of epoch %d, seq %d", end, bs[0].Epoch, len(bs))
	}
	if !bsp.empty() {
		t.Errorf("batching state after idle: %v %v, want empty", bsp.vals, bsp.bags)
	}
	if st.batchIdle(bsp) != nil || !bsp.empty() {
		t.Errorf("a second idle timer output batches or wrote state")
	}
	fin := st.appendAll(asp, end)
	if len(fin) != 1 || !fin[0].Finalize || fin[0].Stream != ops[len(ops)-1].Stream {
		t.Errorf("End: ops %+v, want a finalize of stream %s", fin, ops[len(ops)-1].Stream)
	}
	if !asp.empty() {
		t.Errorf("append state after End: %v %v, want empty", asp.vals, asp.bags)
	}
	// The append step's idle timer, set before, fires on the cleared state.
	if err := st.app.OnTimer(context.Background(), asp, &fakeTimers{}, st.key, timers.Context{Family: "idle"}, func(string, flushOp) {
		t.Error("the idle timer of a cleared state output an op")
	}, nil); err != nil || !asp.empty() {
		t.Errorf("idle timer of a cleared state: %v, state %v", err, asp.vals)
	}
	ops = append(ops, fin...)
	more := st.batches(bsp, 1000, 2000)
	if more[0].Epoch == bs[0].Epoch || more[0].Seq != 0 {
		t.Errorf("after the clear: epoch %d seq %d, want a new epoch from 0", more[0].Epoch, more[0].Seq)
	}
	ops = append(ops, st.appendAll(asp, more)...)
	if got := st.flushAll(ops); got != 2000 {
		t.Errorf("results count %d rows, want 2000", got)
	}
	checkExactlyOnce(t, srv, 2000)
	streams := srv.WriteStreams("p.d.s")
	if len(streams) != 2 || !streams[0].Finalized || streams[0].Visible != 1000 || streams[1].Visible != 1000 {
		t.Errorf("streams %+v: want the first finalized with 1000 rows, a second with 1000", streams)
	}
}

// TestStreamOpenStreamsClosed: the append step closes the streams it
// keeps open once they have not been used for the idle time, and keeps at
// most its cap of them (the least recently used closed first); a shard
// whose stream was closed opens it again on its next append, and every
// row is in the table once.
func TestStreamOpenStreamsClosed(t *testing.T) {
	srv := newStreamServer(t)
	st := newStreamSteps(t, srv, WithStreamRotation(1_000_000, time.Minute))
	st.app.maxOpen = 3
	const shards, per = 6, 400
	var ops []flushOp
	states, batching := make([]*fakeState, shards), make([]*fakeState, shards)
	key := func(i int) string { return st.key[:len(st.key)-1] + string(rune('a'+i)) }
	for i := range shards {
		states[i], batching[i] = newFakeState(), newFakeState()
		for _, b := range st.batches(batching[i], i*per, (i+1)*per) {
			ops = append(ops, st.appendOne(states[i], key(i), b)...)
			if len(st.app.streams) > 3 {
				t.Fatalf("shard %d: %d streams open, want at most 3", i, len(st.app.streams))
			}
		}
	}
	if len(st.app.streams) != 3 {
		t.Errorf("%d streams open after %d shards, want the cap, 3", len(st.app.streams), shards)
	}
	// Idle: every stream not used for a minute is closed, on the next
	// element or timer.
	for _, o := range st.app.streams {
		o.used = o.used.Add(-2 * time.Minute)
	}
	st.app.swept = time.Time{}
	b := st.batches(batching[0], shards*per, (shards+1)*per)    // shard 0 goes on, in its epoch
	ops = append(ops, st.appendOne(states[0], key(0), b[0])...) // shard 0's stream was closed: opened again
	if len(st.app.streams) != 1 {
		t.Errorf("%d streams open after the idle time, want only the one just used", len(st.app.streams))
	}
	for _, b := range b[1:] {
		ops = append(ops, st.appendOne(states[0], key(0), b)...)
	}
	if got := st.flushAll(ops); got != (shards+1)*per {
		t.Errorf("results count %d rows, want %d", got, (shards+1)*per)
	}
	checkExactlyOnce(t, srv, (shards+1)*per)
	if n := len(srv.WriteStreams("p.d.s")); n != shards {
		t.Errorf("%d streams made, want one per shard (%d): a closed one was not reopened", n, shards)
	}
}

// TestStreamRotationBytes: WithStreamRotationBytes finalizes a shard's
// stream before an append would take it past its bytes, and the shard goes
// on in a new stream; every row is there once.
func TestStreamRotationBytes(t *testing.T) {
	srv := newStreamServer(t)
	const limit = 5000
	st := newStreamSteps(t, srv, WithStreamRotationBytes(limit))
	bs := st.batches(newFakeState(), 0, 3000)
	sp := newFakeState()
	perStream := map[string]int{}
	var ops []flushOp
	for _, b := range bs {
		got := st.appendAll(sp, []streamBatch{b})
		ops = append(ops, got...)
		size := 0
		for _, r := range b.Rows {
			size += len(r)
		}
		perStream[got[len(got)-1].Stream] += size
	}
	st.flushAll(ops)
	checkExactlyOnce(t, srv, 3000)
	if len(perStream) < 3 {
		t.Errorf("%d streams for %d batches of about 2000 bytes, want a new one every %d bytes", len(perStream), len(bs), limit)
	}
	for s, n := range perStream {
		if n > limit {
			t.Errorf("stream %s took %d bytes, over %d", s, n, limit)
		}
	}
	streams := srv.WriteStreams("p.d.s")
	for i, ws := range streams[:len(streams)-1] {
		if !ws.Finalized || ws.Visible != ws.Rows {
			t.Errorf("stream %d: %+v: rotated but not finalized, or rows not flushed", i, ws)
		}
	}
}

// wideRow is a row of a wide table: its writer schema (DescriptorProto)
// is some kilobytes.
type wideRow struct {
	ID int64 `bigquery:"id"`
	A0, A1, A2, A3, A4, A5, A6, A7, A8, A9,
	B0, B1, B2, B3, B4, B5, B6, B7, B8, B9,
	C0, C1, C2, C3, C4, C5, C6, C7, C8, C9,
	D0, D1, D2, D3, D4, D5, D6, D7, D8, D9 string
	LongColumnNameOfAWideTableNumberOne, LongColumnNameOfAWideTableNumberTwo       float64
	LongColumnNameOfAWideTableNumberThree, LongColumnNameOfAWideTableNumberFour    float64
	LongColumnNameOfAWideTableNumberFive, LongColumnNameOfAWideTableNumberSix      float64
	LongColumnNameOfAWideTableNumberSeven, LongColumnNameOfAWideTableNumberEight   float64
	LongColumnNameOfAWideTableNumberNine, LongColumnNameOfAWideTableNumberTen      float64
	LongColumnNameOfAWideTableNumberEleven, LongColumnNameOfAWideTableNumberTwelve float64
}

// TestStreamDescriptorCarriedOnce: the writer schema of a wide table is
// carried by the first batch of an epoch and every descEvery-th only, and
// the stateful steps keep it once per shard (one write of each step's
// "desc" state); the batching state's cells and the append state's carry
// no schema, and the batches in between carry only its fingerprint. An
// append step in another process (no schema of its own) appends them from
// the schema its state keeps. Every row is in the table once.
func TestStreamDescriptorCarriedOnce(t *testing.T) {
	srv := newStreamServer(t)
	cfg := writeTestConfig(t, srv, "p.d.s", WithNumStreams(1))
	st := newStreamStepsOf(t, cfg, reflect.TypeFor[wideRow]())
	const n = 600 // about 35 batches of 17 rows of 110 bytes
	rows := make([]any, n)
	for i := range rows {
		rows[i] = wideRow{ID: int64(i), A0: strings.Repeat("a", 100)}
	}
	// The keying and batching steps by hand, through a state that counts
	// its writes.
	bsp := newCountingState()
	var bs []streamBatch
	ctx := context.Background()
	emit := func(_ string, b streamBatch) { bs = append(bs, b) }
	for i, x := range rows {
		if err := st.keyFn.ProcessElement(ctx, beam.EventTime(i), x, func(ts beam.EventTime, k string, c streamChunk) {
			if len(c.Desc) == 0 || c.Fp == 0 {
				t.Fatalf("a chunk without its writer schema")
			}
			if err := st.batch.ProcessElement(ctx, ts, bsp, &fakeTimers{}, k, c, emit); err != nil {
				t.Fatal(err)
			}
		}, func(FailedRow) {}); err != nil {
			t.Fatal(err)
		}
		if i%keyBundle == keyBundle-1 {
			st.keyFn.FinishBundle(ctx, func(ts beam.EventTime, k string, c streamChunk) {
				if err := st.batch.ProcessElement(ctx, ts, bsp, &fakeTimers{}, k, c, emit); err != nil {
					t.Fatal(err)
				}
			}, func(FailedRow) {})
		}
	}
	st.keyFn.FinishBundle(ctx, func(ts beam.EventTime, k string, c streamChunk) {
		if err := st.batch.ProcessElement(ctx, ts, bsp, &fakeTimers{}, k, c, emit); err != nil {
			t.Fatal(err)
		}
	}, func(FailedRow) {})
	if err := st.batch.OnTimer(ctx, bsp, &fakeTimers{}, st.key, timers.Context{Family: "flush"}, emit); err != nil {
		t.Fatal(err)
	}
	desc := bsp.vals["desc"].(streamDesc).Desc
	if len(desc) < 1000 {
		t.Fatalf("the wide table's writer schema is %d bytes, want a wide one", len(desc))
	}
	if len(bs) <= descEvery {
		t.Fatalf("%d batches, want more than %d", len(bs), descEvery)
	}
	carried := 0
	for _, b := range bs {
		if len(b.Desc) > 0 {
			carried++
		}
		if b.Fp != bs[0].Fp || b.Fp == 0 {
			t.Errorf("batch %d: fingerprint %x, want %x", b.Seq, b.Fp, bs[0].Fp)
		}
		if (len(b.Desc) > 0) != (b.Seq%descEvery == 0) {
			t.Errorf("batch %d carries %d bytes of writer schema", b.Seq, len(b.Desc))
		}
	}
	if want := (len(bs) + descEvery - 1) / descEvery; carried != want {
		t.Errorf("%d of %d batches carry the writer schema, want %d", carried, len(bs), want)
	}
	if bsp.writes["desc"] != 1 {
		t.Errorf("the batching step wrote its writer schema %d times, want once", bsp.writes["desc"])
	}
	if per := bsp.bytes["meta"] / bsp.writes["meta"]; per >= len(desc)/4 {
		t.Errorf("the batching step's meta state takes %d bytes a write, the schema %d: it carries the schema", per, len(desc))
	}
	for _, c := range bsp.bags["chunks"] {
		if len(c.(streamChunk).Desc) > 0 {
			t.Errorf("a chunk in the batching state carries its writer schema")
		}
	}

	// The append step: the first batch in one process, the rest in another
	// (no schema of its own: it reads the one its state keeps).
	asp := newCountingState()
	ops := st.appendOne(asp, st.key, bs[0])
	st.newAppendProcess()
	for _, b := range bs[1:] {
		ops = append(ops, st.appendOne(asp, st.key, b)...)
	}
	if asp.writes["desc"] != 1 {
		t.Errorf("the append step wrote its writer schema %d times, want once", asp.writes["desc"])
	}
	if per := asp.bytes["shard"] / asp.writes["shard"]; per >= len(desc)/4 {
		t.Errorf("the append step's shard state takes %d bytes a write, the schema %d: it carries the schema", per, len(desc))
	}
	if got := st.flushAll(ops); got != n {
		t.Errorf("results count %d rows, want %d", got, n)
	}
	got, err := srv.TableRows("p.d.s")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, r := range got {
		seen[r[0].(int64)]++
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("%d rows, %d distinct, want %d once each", len(got), len(seen), n)
	}
}
