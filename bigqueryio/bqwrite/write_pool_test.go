package bqwrite_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/streamtest"
)

// TestWriteAtLeastOnceConnections writes an unbounded input, a row at a
// time over many bundles, to three tables WithAtLeastOnce: the worker
// process opens at most MaxDefaultStreamConnections AppendRows
// connections in all (not one per bundle and table), and every row is
// there once.
func TestWriteAtLeastOnceConnections(t *testing.T) {
	const n = 60
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	p, s := beam.NewPipelineWithRoot()
	rows := beam.ParDo(s, seqSimple, streamtest.Sequence(s, n, 20*time.Millisecond))
	bqwrite.Write(s, "", rows, writeOpts(srv, bqwrite.WithAtLeastOnce(), bqwrite.WithTableFunc(simpleTable))...)
	m := run(t, p)
	seen := map[int64]int{}
	for i := range 3 {
		got, _ := idCounts(t, srv, fmt.Sprintf("p.d.dyn%d", i))
		for id, c := range got {
			seen[id] += c
			if id%3 != int64(i) {
				t.Errorf("row %d in table dyn%d", id, i)
			}
		}
	}
	for i := range int64(n) {
		if seen[i] != 1 {
			t.Errorf("row %d written %d times", i, seen[i])
		}
	}
	st := srv.WriteStats()
	if st.AppendConnections > bqwrite.MaxDefaultStreamConnections || st.AppendConnsPeak > bqwrite.MaxDefaultStreamConnections {
		t.Errorf("%d AppendRows connections (%d at once) for %d appends, want at most %d", st.AppendConnections, st.AppendConnsPeak, st.Appends, bqwrite.MaxDefaultStreamConnections)
	}
	appends := counter(t, m, "appends")
	if appends < 10 {
		t.Errorf("%d appends: want rows appended as they come, over many bundles", appends)
	}
	t.Logf("%d appends to 3 tables over %d AppendRows connections (%d at once)", appends, st.AppendConnections, st.AppendConnsPeak)
}

// TestWriteAtLeastOnceFaultsBounded writes an unbounded input
// WithAtLeastOnce while appends fail: answered with an error after the
// service wrote them (in the answer, or by a connection reset), failing
// before (a reset, throttling with RESOURCE_EXHAUSTED ending the
// connection, connections closed after a few answers). No row is ever
// missing; a failure before the write duplicates nothing, and each one
// after it at most the rows of the append it struck (under 400 rows of
// 4000 bytes); the connections stay within MaxDefaultStreamConnections at
// once.
func TestWriteAtLeastOnceFaultsBounded(t *testing.T) {
	var calls atomic.Int64
	throttle := func(call int) error {
		if calls.Add(1)%4 == 0 {
			return status.Error(codes.ResourceExhausted, "bqtest: quota exceeded (throttled)")
		}
		return nil
	}
	for name, f := range map[string]bqtest.WriteFaults{
		"answers lost":     {AppendUnavailableShare: 0.2, AfterWrite: true, InBand: true},
		"reset after":      {AppendUnavailableShare: 0.2, AfterWrite: true},
		"reset before":     {AppendUnavailableShare: 0.2},
		"throttled":        {OnAppend: throttle},
		"connection close": {CloseAfterRequests: 3},
	} {
		t.Run(name, func(t *testing.T) {
			const n = 1500
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			srv.SetWriteFaults(f)
			p, s := beam.NewPipelineWithRoot()
			rows := beam.ParDo(s, seqSimple, streamtest.Sequence(s, n, time.Millisecond))
			bqwrite.Write(s, "p.d.alo", rows, writeOpts(srv, bqwrite.WithAtLeastOnce(), bqwrite.WithMaxAppendBytes(4000))...)
			m := run(t, p)
			seen, total := idCounts(t, srv, "p.d.alo")
			dups := 0
			for i := range int64(n) {
				switch c := seen[i]; {
				case c == 0:
					t.Errorf("row %d missing", i)
				case c > 1:
					dups += c - 1
				}
			}
			st := srv.WriteStats()
			bound := 0
			if f.AfterWrite {
				bound = 400 * st.InjectedFailures
			}
			if total != n+dups || dups > bound {
				t.Errorf("%d rows for %d, %d duplicates, want at most %d (server %+v)", total, n, dups, bound, st)
			}
			if st.AppendConnsPeak > bqwrite.MaxDefaultStreamConnections {
				t.Errorf("%d AppendRows connections at once, want at most %d", st.AppendConnsPeak, bqwrite.MaxDefaultStreamConnections)
			}
			faults := st.InjectedFailures + st.InjectedCloses
			if f.OnAppend != nil {
				faults = int(calls.Load() / 4)
			}
			if faults == 0 || counter(t, m, "append_retries") == 0 {
				t.Errorf("no fault struck (server %+v)", st)
			}
			t.Logf("%d appends, %d faults, %d duplicates, %d connections (%d at once)", st.Appends, faults, dups, st.AppendConnections, st.AppendConnsPeak)
		})
	}
}
