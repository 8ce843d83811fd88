package bqwrite_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window/trigger"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/streamtest"
)

func init() {
	register.Function1x2(stampSimple)
	register.Function1x1(seqSimple)
	register.Function4x0(ungroupSimple)
	register.Function1x2(keySimple)
	register.Iter1[Simple]()
	register.Emitter1[Simple]()
}

// stampSimple gives row i the event time i seconds.
func stampSimple(r Simple) (beam.EventTime, Simple) { return beam.EventTime(r.ID * 1000), r }

func seqSimple(i int64) Simple { return Simple{ID: i, Name: fmt.Sprintf("name-%d", i)} }

var panesCounter = beam.NewCounter(bqwrite.Namespace, "test_panes")

func keySimple(r Simple) (int64, Simple) { return 0, r }

// ungroupSimple outputs the rows of a group, counting the groups (panes).
func ungroupSimple(ctx context.Context, _ int64, rows func(*Simple) bool, emit func(Simple)) {
	panesCounter.Inc(ctx, 1)
	var r Simple
	for rows(&r) {
		emit(r)
	}
}

// checkCopies fails unless the table holds ids 0..n-1 exactly copies
// times each, and nothing else.
func checkCopies(t *testing.T, srv *bqtest.Server, table string, n, copies int) {
	t.Helper()
	seen, rows := idCounts(t, srv, table)
	for i := 0; i < n; i++ {
		if seen[int64(i)] != copies {
			t.Errorf("%s: row %d written %d times, want %d", table, i, seen[int64(i)], copies)
		}
	}
	if rows != n*copies {
		t.Errorf("%s: %d rows, want %d", table, rows, n*copies)
	}
}

// TestWriteWindowed writes rows one second apart in fixed, sliding and
// session windows, exactly once (appending, and WriteTruncate) and
// WithAtLeastOnce: every row-in-window is in the table once (a row of
// three sliding windows three times, as Beam Java's BigQueryIO writes it),
// and each table's result counts them all in one result. Before, the commit's GroupByKey failed the job on
// the global window of the append step's output.
func TestWriteWindowed(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const n = 300
	windows := []struct {
		name   string
		fn     *window.Fn
		copies int
	}{
		{"fixed", window.NewFixedWindows(10 * time.Second), 1},
		{"sliding", window.NewSlidingWindows(time.Second, 3*time.Second), 3},
		{"session", window.NewSessions(1500 * time.Millisecond), 1},
	}
	p, s := beam.NewPipelineWithRoot()
	rows := beam.ParDo(s, stampSimple, beam.Reshuffle(s, beam.Create(s, anys(simpleRows(n))...)))
	for _, w := range windows {
		for _, mode := range []string{"once", "alo", "trunc"} {
			table := fmt.Sprintf("p.d.%s_%s", w.name, mode)
			s := s.Scope(table)
			opts := writeOpts(srv, bqwrite.WithMaxAppendBytes(2000))
			switch mode {
			case "alo":
				opts = append(opts, bqwrite.WithAtLeastOnce())
			case "trunc":
				opts = append(opts, bqwrite.WithWriteDisposition(bqwrite.WriteTruncate))
			}
			res := bqwrite.Write(s, table, beam.WindowInto(s, w.fn, rows), opts...)
			passert.Empty(s, res.FailedRows)
			passert.Equals(s, beam.ParDo(s, resultText, res.Results), fmt.Sprintf("%s %d rows", table, n*w.copies))
		}
	}
	run(t, p)
	for _, w := range windows {
		for _, mode := range []string{"once", "alo", "trunc"} {
			checkCopies(t, srv, fmt.Sprintf("p.d.%s_%s", w.name, mode), n, w.copies)
		}
	}
	if st := srv.WriteStats(); st.Commits != 6 {
		t.Errorf("server %+v: want one commit per exactly-once table (3) and per staging table of WriteTruncate (3)", st)
	}
}

// TestWriteUnboundedConstruction: an unbounded PCollection is taken
// without options (written exactly once by the streaming write, its
// options alone included) and WithAtLeastOnce, to one table and WithTableFunc;
// a write disposition that needs the end of the input is refused when the
// pipeline is built, naming it.
func TestWriteUnboundedConstruction(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	now := time.Now()
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(now, now.Add(time.Second), time.Second)))
	col := beam.ParDo(s, seqSimple, seq)
	for _, table := range []string{"p.d.t", ""} {
		var base []bqwrite.WriteOption
		if table == "" {
			base = append(base, bqwrite.WithTableFunc(simpleTable))
		}
		for _, opts := range [][]bqwrite.WriteOption{nil, {bqwrite.WithAtLeastOnce()}, {bqwrite.WithExactlyOnceStreaming()},
			{bqwrite.WithNumStreams(2), bqwrite.WithTriggeringFrequency(time.Second)}} {
			if _, err := bqwrite.TryWrite(s, table, col, append(base, opts...)...); err != nil {
				t.Errorf("%q %v: %v", table, opts, err)
			}
		}
		for _, d := range []bqwrite.WriteDisposition{bqwrite.WriteTruncate, bqwrite.WriteEmpty} {
			_, err := bqwrite.TryWrite(s, table, col, append(base, bqwrite.WithWriteDisposition(d))...)
			if err == nil || !strings.Contains(err.Error(), "unbounded") || !strings.Contains(err.Error(), "WithWriteDisposition(") || !strings.HasPrefix(err.Error(), "bqwrite.Write to ") {
				t.Errorf("%q %v: error %v, want the disposition refused for unbounded input", table, d, err)
			}
		}
	}
}

// TestWriteUnboundedAtLeastOnce writes an unbounded input (a periodic
// sequence of 40 rows over 4 s), as it is, in fixed windows, and as the
// panes of one window (a trigger firing every 5 rows, discarding),
// WithAtLeastOnce: rows are in the table while the pipeline still runs
// (appended as they come, not at the end of the input), there are several
// panes, and at the end each row is there once (no faults, so no
// duplicates).
func TestWriteUnboundedAtLeastOnce(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const n = 40
	p, s := beam.NewPipelineWithRoot()
	seq := streamtest.Sequence(s, n, 100*time.Millisecond)
	rows := beam.ParDo(s, seqSimple, seq)
	res := bqwrite.Write(s, "p.d.stream", rows, writeOpts(srv, bqwrite.WithAtLeastOnce())...)
	checkResults(s, res, "p.d.stream", 1, n, -2) // a result per bundle appended
	bqwrite.Write(s, "p.d.stream_fixed", beam.WindowInto(s, window.NewFixedWindows(time.Second), rows), writeOpts(srv, bqwrite.WithAtLeastOnce())...)
	triggered := beam.WindowInto(s, window.NewFixedWindows(time.Hour), rows,
		beam.Trigger(trigger.Repeat(trigger.AfterCount(5))), beam.PanesDiscard())
	panes := beam.ParDo(s, ungroupSimple, beam.GroupByKey(s, beam.ParDo(s, keySimple, triggered)))
	bqwrite.Write(s, "p.d.panes", panes, writeOpts(srv, bqwrite.WithAtLeastOnce())...)

	stop := streamtest.WatchPartial(func() int { got, _ := srv.TableRows("p.d.stream"); return len(got) }, n)
	m := run(t, p)
	if !stop() {
		t.Error("no poll saw the table partly written: rows waited for the end of the input")
	}
	if got := counter(t, m, "test_panes"); got < 2 {
		t.Errorf("%d panes, want several", got)
	}
	checkCopies(t, srv, "p.d.stream", n, 1)
	checkCopies(t, srv, "p.d.stream_fixed", n, 1)
	checkCopies(t, srv, "p.d.panes", n, 1)
}
