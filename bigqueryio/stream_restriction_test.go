package bigqueryio

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/googleapis/gax-go/v2"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/internal/logtest"
	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// numbersTable defines p.d.nums: id INTEGER (0..n-1), name STRING (NULL
// every 7th row), score FLOAT.
func numbersTable(t testing.TB, srv *bqtest.Server, n int) {
	t.Helper()
	rows := make([][]bigquery.Value, n)
	for i := range rows {
		var name bigquery.Value = fmt.Sprintf("name-%d", i)
		if i%7 == 3 {
			name = nil
		}
		rows[i] = []bigquery.Value{int64(i), name, float64(i) * 1.5}
	}
	err := srv.AddTable("p.d.nums", bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
	}, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
}

func newTestServer(t testing.TB, opts ...bqtest.Option) *bqtest.Server {
	t.Helper()
	srv, err := bqtest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func serverOpts(srv *bqtest.Server, more ...ReadOption) []ReadOption {
	return append([]ReadOption{WithEndpoint(srv.Addr()), WithInsecure(), WithRetries(5, time.Millisecond)}, more...)
}

// subject is the split harness's subject of p.d.nums read as one stream;
// its trackers split as a runner that asks again sees them (asRunner).
func subject(t *testing.T, srv *bqtest.Server, opts ...ReadOption) sdftest.Subject[[]bigquery.Value] {
	t.Helper()
	sc, err := NewStreamCheck(context.Background(), "p.d.nums", serverOpts(srv, append([]ReadOption{WithMaxStreams(1)}, opts...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	return asRunner(bqtest.Subject(t, sc), sc.NewTracker)
}

// asRunner makes s's trackers (made by mk) split the way a runner that
// asks again sees them: a split refused while its RPCs run in the
// background is asked for again once they have prepared it (runnerTracker).
func asRunner(s sdftest.Subject[[]bigquery.Value], mk func(StreamRestriction) *StreamTracker) sdftest.Subject[[]bigquery.Value] {
	read := s.Read
	s.NewTracker = func(r any) beamsdf.RTracker { return runnerTracker{mk(r.(StreamRestriction))} }
	s.Read = func(ctx context.Context, rt beamsdf.RTracker, emit func([]bigquery.Value)) error {
		if w, ok := rt.(runnerTracker); ok {
			rt = w.StreamTracker
		}
		return read(ctx, rt, emit)
	}
	return s
}

// runnerTracker is a StreamTracker whose TrySplit is runnerSplit.
type runnerTracker struct{ *StreamTracker }

func (r runnerTracker) TrySplit(f float64) (primary, residual any, err error) {
	return runnerSplit(r.StreamTracker, f)
}

// runnerSplit is TrySplit as a runner that asks again does it: a split
// refused while its RPCs run in the background (they take longer than the
// split may wait) is asked for again once they have settled, if they
// prepared one. Called from the reader's emit, the reader does not move
// meanwhile, so the prepared split commits; called on another goroutine,
// the reader may pass it, and it is dropped.
func runnerSplit(tr *StreamTracker, f float64) (primary, residual any, err error) {
	p, r, err := tr.TrySplit(f)
	if r != nil || err != nil || f <= 0 {
		return p, r, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := tr.core.WaitSplitIO(ctx); err != nil {
		return p, nil, fmt.Errorf("waiting for the split's RPCs: %w", err)
	}
	if !tr.core.HasPreparedSplit() {
		return p, nil, nil
	}
	return tr.TrySplit(f)
}

func ids(rows [][]bigquery.Value) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r[0].(int64)
	}
	return out
}

func TestStreamSplitExhaustive(t *testing.T) {
	for _, format := range []DataFormat{Avro, Arrow} {
		t.Run(fmt.Sprint(format), func(t *testing.T) {
			srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
			numbersTable(t, srv, 12)
			s := subject(t, srv, WithDataFormat(format))
			all := sdftest.AssertReadAll(t, s)
			if len(all) != 12 {
				t.Fatalf("%d rows", len(all))
			}
			sdftest.AssertSplitAtFraction(t, s, 4, 0.5, sdftest.MustSucceedAndBeConsistent)
			sdftest.AssertSplitAtFractionExhaustive(t, s)
			st := srv.Stats()
			if st.SplitsAccepted == 0 || st.SplitsRefused == 0 {
				t.Fatalf("server stats %+v: want splits accepted and refused", st)
			}
			t.Logf("server: %+v", st)
		})
	}
}

// lowSplits lowers every split fraction by a factor, so that the service
// splits before the reader's position (the primary cannot serve the next
// row), or delays a split.
type lowSplits struct {
	splitClient
	factor float64
	calls  atomic.Int64
}

func (l *lowSplits) SplitReadStream(ctx context.Context, req *storagepb.SplitReadStreamRequest, opts ...gax.CallOption) (*storagepb.SplitReadStreamResponse, error) {
	l.calls.Add(1)
	req.Fraction *= l.factor
	return l.splitClient.SplitReadStream(ctx, req, opts...)
}

func testClient(t *testing.T, srv *bqtest.Server) splitClient {
	t.Helper()
	cfg, _ := newConfig("bigqueryio.Read", "p.d.nums", serverOpts(srv))
	c, err := newClient(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSplitPosition checks the fraction conversion: Beam's f is of the
// remaining rows, the service's of the whole stream.
func TestSplitPosition(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
	numbersTable(t, srv, 20)
	s := subject(t, srv)
	for _, tc := range []struct {
		n       int
		f       float64
		primary int
	}{{0, 0.5, 10}, {4, 0.5, 12}, {4, 0.25, 8}, {10, 0.1, 11}, {19, 0.5, 19}} {
		res := sdftest.AssertSplitAtFraction(t, s, tc.n, tc.f, sdftest.ConsistentIfSucceeds)
		if !res.Succeeded || res.PrimaryRecords != tc.primary {
			t.Errorf("split at %v after %d rows: %+v, want a primary of %d rows", tc.f, tc.n, res, tc.primary)
		}
	}
	// Checkpoint: the rest of the same stream.
	res := sdftest.AssertSplitAtFraction(t, s, 7, 0, sdftest.MustSucceedAndBeConsistent)
	if r := res.Residual.(StreamRestriction); r.Stream != s.Restriction.(StreamRestriction).Stream || r.Start != 7 || res.PrimaryRecords != 7 {
		t.Errorf("checkpoint after 7 rows: %+v", res)
	}
}

// TestSplitReaderPassed: when the service splits before the reader's next
// row, reading the primary there fails with FAILED_PRECONDITION; the split
// is refused, nothing changes, and the reader goes on with the original.
func TestSplitReaderPassed(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
	numbersTable(t, srv, 20)
	s := subject(t, srv)
	low := &lowSplits{splitClient: testClient(t, srv), factor: 0.2}
	var tr *StreamTracker
	s = asRunner(s, func(r StreamRestriction) *StreamTracker {
		tr = NewStreamTracker(r, low, 0)
		return tr
	})
	before := srv.Stats().SplitsAccepted
	sdftest.AssertSplitAtFraction(t, s, 10, 0.5, sdftest.MustFail)
	if srv.Stats().SplitsAccepted != before+1 {
		t.Fatal("the service did not split")
	}
	if tr.Refusals()["background: "+refusedPassed] != 1 {
		t.Errorf("refusals %v, want one for a reader past the split", tr.Refusals())
	}
}

// TestSplitTrackerRefusals drives one tracker by hand through the refusals.
func TestSplitTrackerRefusals(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
	numbersTable(t, srv, 20)
	s := subject(t, srv)
	read := func(tr *StreamTracker, splitAfter int, split func()) []int64 {
		t.Helper()
		return readIDs(t, s, tr, splitAfter, split)
	}
	rest := s.Restriction.(StreamRestriction)
	want := make([]int64, 20)
	for i := range want {
		want[i] = int64(i)
	}

	// Passed: the service splits before the reader.
	low := &lowSplits{splitClient: testClient(t, srv), factor: 0.2}
	tr := NewStreamTracker(rest, low, 0)
	got := read(tr, 10, func() {
		if _, r, _ := runnerSplit(tr, 0.5); r != nil {
			t.Errorf("split past the reader accepted: %v", r)
		}
	})
	if !slices.Equal(got, want) || tr.Refusals()["background: "+refusedPassed] != 1 {
		t.Errorf("passed split: rows %v, refusals %v", got, tr.Refusals())
	}

	// Empty half: the stream cannot be split any more; no second RPC.
	one := &lowSplits{splitClient: testClient(t, srv), factor: 1e-9}
	tr = NewStreamTracker(rest, one, 0)
	got = read(tr, 3, func() {
		for i := 0; i < 3; i++ {
			if _, r, _ := runnerSplit(tr, 1e-6); r != nil {
				t.Errorf("split with an empty primary accepted: %v", r)
			}
		}
	})
	if !slices.Equal(got, want) || tr.Refusals()["background: "+refusedEmpty] != 1 || one.calls.Load() != 1 {
		t.Errorf("empty half: rows %v, refusals %v, %d SplitReadStream calls", got, tr.Refusals(), one.calls.Load())
	}

	// Slow split: the deadline refuses it in the background.
	srv.SetFaults(bqtest.Faults{SplitDelay: 2 * time.Second})
	tr = NewStreamTracker(rest, testClient(t, srv), 100*time.Millisecond)
	start := time.Now()
	got = read(tr, 5, func() {
		if _, r, _ := runnerSplit(tr, 0.5); r != nil {
			t.Errorf("slow split accepted: %v", r)
		}
	})
	if d := time.Since(start); !slices.Equal(got, want) || d > time.Second || tr.Refusals()["background: timeout"] != 1 {
		t.Errorf("slow split: rows %v in %v, refusals %v", got, d, tr.Refusals())
	}

	// Refused at random by the service: nothing changes.
	srv.SetFaults(bqtest.Faults{SplitRefuseShare: 1})
	tr = NewStreamTracker(rest, testClient(t, srv), 0)
	got = read(tr, 5, func() {
		if _, r, _ := runnerSplit(tr, 0.5); r != nil {
			t.Errorf("refused split accepted: %v", r)
		}
	})
	if !slices.Equal(got, want) {
		t.Errorf("refused split: rows %v", got)
	}
	srv.SetFaults(bqtest.Faults{})

	// Accepted, then progress: done counts rows, remaining shrinks to 0.
	tr = NewStreamTracker(rest, testClient(t, srv), 0)
	var prog [][2]float64
	got = read(tr, 6, func() {
		prog = append(prog, progress(tr))
		_, r, _ := runnerSplit(tr, 0.5)
		if r == nil {
			t.Fatal("split refused")
		}
		prog = append(prog, progress(tr))
	})
	prog = append(prog, progress(tr))
	if !slices.Equal(got, want[:13]) {
		t.Errorf("after a split at 0.5 of 14 remaining: rows %v", got)
	}
	if prog[0][0] != 6 || prog[0][1] != 14 || prog[2][1] != 0 {
		t.Errorf("progress %v", prog)
	}
	if a, r := tr.SplitStats(); a != 1 || r != 1 { // refused while prepared, then accepted
		t.Errorf("split stats %d %d", a, r)
	}
}

func progress(tr *StreamTracker) [2]float64 {
	d, r := tr.GetProgress()
	return [2]float64{d, r}
}

// TestInfoLogs: planning a read logs its session, streams and estimates,
// and an accepted split logs its halves, at INFO, so that a Dataflow user
// sees the plan and the rebalancing. (Before: neither was logged.)
func TestInfoLogs(t *testing.T) {
	l := logtest.Capture(t)
	srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
	numbersTable(t, srv, 12)
	ctx := context.Background()
	cfg, err := newConfig("bigqueryio.Read", "p.d.nums", serverOpts(srv, WithMaxStreams(3)))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := emitSession(ctx, cfg, nil, func(StreamElement) { n++ }); err != nil {
		t.Fatal(err)
	}
	l.Has(t, fmt.Sprintf("of projects/p/datasets/d/tables/nums: %d streams, about 12 rows", n))
	s := subject(t, srv)
	sdftest.AssertSplitAtFraction(t, s, 4, 0.5, sdftest.MustSucceedAndBeConsistent)
	l.Has(t, "bigqueryio: split accepted at fraction 0.5 of the rest: primary ")
}

// TestSplitDoesNotStall: Beam Go's harness answers a runner's split on its
// control loop, so a TrySplit that waits on SplitReadStream stalls every
// bundle of the worker. With a SplitReadStream that takes 2 s, TrySplit
// answers at once (refused, the split prepared in the background), and the
// runner's next request commits the prepared split, also at once, with the
// rows exact on both sides. WithSplitWait at least the split timeout is the
// old behaviour: the caller waits the 2 s. (Before: TrySplit took 2 s.)
func TestSplitDoesNotStall(t *testing.T) {
	const rpc = 2 * time.Second
	srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
	numbersTable(t, srv, 20)
	s := subject(t, srv)
	rest := s.Restriction.(StreamRestriction)
	c := testClient(t, srv)
	ctx := context.Background()
	read := func(tr *StreamTracker, splitAfter int, split func()) []int64 {
		t.Helper()
		return readIDs(t, s, tr, splitAfter, split)
	}
	srv.SetFaults(bqtest.Faults{SplitDelay: rpc})

	tr := NewStreamTracker(rest, c, 0)
	var asked, committed, prepared time.Duration
	var residual any
	primary := read(tr, 5, func() {
		start := time.Now()
		_, r, err := tr.TrySplit(0.5)
		asked = time.Since(start)
		if r != nil || err != nil {
			t.Fatalf("the first TrySplit answered %v, %v; want refused while the RPC runs", r, err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := tr.core.WaitSplitIO(wctx); err != nil || !tr.core.HasPreparedSplit() {
			t.Fatalf("no split prepared: %v (refusals %v)", err, tr.Refusals())
		}
		prepared = time.Since(start)
		start = time.Now()
		_, residual, err = tr.TrySplit(0.5)
		committed = time.Since(start)
		if residual == nil || err != nil {
			t.Fatalf("the prepared split was not committed: %v, %v (refusals %v)", residual, err, tr.Refusals())
		}
	})
	t.Logf("SplitReadStream taking %v: TrySplit answered in %v (refused, preparing), the split was ready after %v, and the next TrySplit committed it in %v", rpc, asked, prepared, committed)
	if asked > 50*time.Millisecond || committed > 50*time.Millisecond {
		t.Errorf("TrySplit took %v and %v; want each within 50ms", asked, committed)
	}
	if prepared < rpc {
		t.Errorf("the split was prepared after %v, before the RPC's %v: the delay did not apply", prepared, rpc)
	}
	srv.SetFaults(bqtest.Faults{})
	rest2 := read(NewStreamTracker(residual.(StreamRestriction), c, 0), -1, nil)
	// 5 read + 0.5 of the 15 left: the service splits at 12 or 13.
	k := len(primary)
	want := make([]int64, 20)
	for i := range want {
		want[i] = int64(i)
	}
	if k < 12 || k > 13 || !slices.Equal(primary, want[:k]) || !slices.Equal(rest2, want[k:]) {
		t.Errorf("primary read %v, residual %v; want 0..k-1 and k..19 with k 12 or 13", primary, rest2)
	}

	// Before: a split that waits for its RPCs (a wait of the timeout, as
	// every split did) holds its caller for the whole RPC.
	srv.SetFaults(bqtest.Faults{SplitDelay: rpc})
	tr = NewStreamTracker(rest, c, 0)
	tr.wait = sdf.DefaultSplitTimeout
	var sync time.Duration
	read(tr, 5, func() {
		start := time.Now()
		if _, r, _ := tr.TrySplit(0.5); r == nil {
			t.Errorf("the synchronous split was refused (%v)", tr.Refusals())
		}
		sync = time.Since(start)
	})
	t.Logf("waiting for the RPCs (WithSplitWait of the timeout): TrySplit answered in %v", sync)
	if sync < rpc {
		t.Errorf("a split that waits for its RPCs answered in %v, before the RPC's %v", sync, rpc)
	}
}

// readIDs reads tr's restriction with s, calling split after splitAfter
// rows, and returns the ids read; the read must end done.
func readIDs(t *testing.T, s sdftest.Subject[[]bigquery.Value], tr *StreamTracker, splitAfter int, split func()) []int64 {
	t.Helper()
	var got []int64
	err := s.Read(context.Background(), tr, func(row []bigquery.Value) {
		got = append(got, row[0].(int64))
		if len(got) == splitAfter {
			split()
		}
	})
	if err != nil || !tr.IsDone() {
		t.Fatalf("read of %v: %v, done %v (%v)", tr.Restriction(), err, tr.IsDone(), tr)
	}
	return got
}

// TestStreamSplitConcurrent: splits that never wait (WithSplitWait(0)),
// asked for again once prepared, race the reader: every trial reads each row
// once, whether the prepared split commits or the reader passed it.
func TestStreamSplitConcurrent(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
	numbersTable(t, srv, 60)
	s := subject(t, srv, WithSplitWait(0))
	rep := sdftest.AssertSplitAtFractionConcurrent(t, s, 5, 0.5, 100)
	if rep.NonTrivial == 0 {
		t.Errorf("%v: no prepared split committed while the reader raced it", rep)
	}
}
