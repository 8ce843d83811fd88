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

func subject(t *testing.T, srv *bqtest.Server, opts ...ReadOption) sdftest.Subject[[]bigquery.Value] {
	t.Helper()
	sc, err := NewStreamCheck(context.Background(), "p.d.nums", serverOpts(srv, append([]ReadOption{WithMaxStreams(1)}, opts...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	return bqtest.Subject(t, sc)
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
	s.NewTracker = func(r any) beamsdf.RTracker {
		return NewStreamTracker(r.(StreamRestriction), low, 0)
	}
	before := srv.Stats().SplitsAccepted
	sdftest.AssertSplitAtFraction(t, s, 10, 0.5, sdftest.MustFail)
	if srv.Stats().SplitsAccepted != before+1 {
		t.Fatal("the service did not split")
	}
}

// TestSplitTrackerRefusals drives one tracker by hand through the refusals.
func TestSplitTrackerRefusals(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
	numbersTable(t, srv, 20)
	s := subject(t, srv)
	ctx := context.Background()
	read := func(tr *StreamTracker, splitAfter int, split func()) []int64 {
		t.Helper()
		var got []int64
		err := s.Read(ctx, tr, func(row []bigquery.Value) {
			got = append(got, row[0].(int64))
			if len(got) == splitAfter {
				split()
			}
		})
		if err != nil || !tr.IsDone() {
			t.Fatalf("read: %v, done %v (%v)", err, tr.IsDone(), tr)
		}
		return got
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
		if _, r, _ := tr.TrySplit(0.5); r != nil {
			t.Errorf("split past the reader accepted: %v", r)
		}
	})
	if !slices.Equal(got, want) || tr.Refusals()[refusedPassed] != 1 {
		t.Errorf("passed split: rows %v, refusals %v", got, tr.Refusals())
	}

	// Empty half: the stream cannot be split any more; no second RPC.
	one := &lowSplits{splitClient: testClient(t, srv), factor: 1e-9}
	tr = NewStreamTracker(rest, one, 0)
	got = read(tr, 3, func() {
		for i := 0; i < 3; i++ {
			if _, r, _ := tr.TrySplit(1e-6); r != nil {
				t.Errorf("split with an empty primary accepted: %v", r)
			}
		}
	})
	if !slices.Equal(got, want) || tr.Refusals()[refusedEmpty] != 1 || one.calls.Load() != 1 {
		t.Errorf("empty half: rows %v, refusals %v, %d SplitReadStream calls", got, tr.Refusals(), one.calls.Load())
	}

	// Slow split: the deadline refuses it; the reader waited at most that.
	srv.SetFaults(bqtest.Faults{SplitDelay: 2 * time.Second})
	tr = NewStreamTracker(rest, testClient(t, srv), 100*time.Millisecond)
	start := time.Now()
	got = read(tr, 5, func() {
		if _, r, _ := tr.TrySplit(0.5); r != nil {
			t.Errorf("slow split accepted: %v", r)
		}
	})
	if d := time.Since(start); !slices.Equal(got, want) || d > time.Second || tr.Refusals()["timeout"] != 1 {
		t.Errorf("slow split: rows %v in %v, refusals %v", got, d, tr.Refusals())
	}

	// Refused at random by the service: nothing changes.
	srv.SetFaults(bqtest.Faults{SplitRefuseShare: 1})
	tr = NewStreamTracker(rest, testClient(t, srv), 0)
	got = read(tr, 5, func() {
		if _, r, _ := tr.TrySplit(0.5); r != nil {
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
		_, r, _ := tr.TrySplit(0.5)
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
	if a, r := tr.SplitStats(); a != 1 || r != 0 {
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
