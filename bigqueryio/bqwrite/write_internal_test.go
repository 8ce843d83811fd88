package bqwrite

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

type onceRow struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

// failAfterAppend makes failStreamFn fail while it is set.
var failAfterAppend atomic.Bool

// failStreamFn runs in the append's stage, after it: failing, it fails the
// bundle that appended.
func failStreamFn(table string, sd streamDone) error {
	if failAfterAppend.Load() {
		return fmt.Errorf("injected failure after appending to %s", sd.Stream)
	}
	return nil
}

func init() {
	RegisterType(reflect.TypeFor[onceRow]())
	register.Function2x1(failStreamFn)
	register.Function1x0(keepResult)
}

// kept holds the results keepResult saw (the pipeline runs in this
// process).
var kept struct {
	sync.Mutex
	results []TableResult
}

func keepResult(r TableResult) {
	kept.Lock()
	kept.results = append(kept.results, r)
	kept.Unlock()
}

func keptResults() []TableResult {
	kept.Lock()
	defer kept.Unlock()
	return append([]TableResult(nil), kept.results...)
}

// noFailures is the side input of a commit step to which no bundle
// passed a failure on.
func noFailures(*streamDone) bool { return false }

func writeTestConfig(t *testing.T, srv *bqtest.Server, table string, opts ...WriteOption) writeConfig {
	t.Helper()
	opts = append([]WriteOption{WithEndpoint(srv.Addr()), WithInsecure(), WithRESTEndpoint(srv.RESTEndpoint()),
		WithRetries(5, 5*time.Millisecond), WithMaxAppendBytes(2000)}, opts...)
	cfg, err := newWriteConfig(table, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func onceRows(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = onceRow{ID: int64(i), Name: "r"}
	}
	return out
}

// TestWriteNothingVisibleBeforeCommit runs the append step alone: its
// streams hold every row, finalized, and nothing is visible; committing
// them makes every row visible once.
func TestWriteNothingVisibleBeforeCommit(t *testing.T) {
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	cfg := writeTestConfig(t, srv, "p.d.gated")
	p, s := beam.NewPipelineWithRoot()
	col := beam.Reshuffle(s, beam.Create(s, onceRows(1000)...))
	fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[onceRow]()}, TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fixedTable)}}
	beam.ParDo2(s, fn, col)
	ptest.RunAndValidate(t, p)
	if rows, _ := srv.TableRows("p.d.gated"); len(rows) != 0 {
		t.Fatalf("%d rows visible before the commit", len(rows))
	}
	var names []string
	var total int64
	for _, ws := range srv.PendingStreams("p.d.gated") {
		if !ws.Finalized || ws.Committed {
			t.Errorf("stream %+v: want finalized, not committed", ws)
		}
		names, total = append(names, ws.Name), total+ws.Rows
	}
	if total != 1000 {
		t.Fatalf("pending streams hold %d rows, want 1000", total)
	}
	c := &commitFn{Cfg: cfg}
	c.Setup()
	var got []TableResult
	i := 0
	err = c.ProcessElement(context.Background(), cfg.Table, func(sd *streamDone) bool {
		if i == len(names) {
			return false
		}
		*sd = streamDone{Stream: names[i], Rows: 0}
		i++
		return true
	}, noFailures, func(r TableResult) { got = append(got, r) })
	c.Teardown()
	if err != nil {
		t.Fatal(err)
	}
	if rows, _ := srv.TableRows("p.d.gated"); len(rows) != 1000 || len(got) != 1 || len(got[0].Streams) != len(names) {
		t.Fatalf("%d rows visible after the commit, results %+v", len(rows), got)
	}
}

// TestWriteBundleFailsAfterAppend: a bundle that fails after its appends
// (a DoFn of the same stage, after the append, fails) fails the pipeline
// with nothing visible; its streams are never committed. The pipeline run
// again writes every row exactly once. (Direct runner: a failing pipeline
// under -race, see runFailing in the external tests.)
func TestWriteBundleFailsAfterAppend(t *testing.T) {
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	cfg := writeTestConfig(t, srv, "p.d.retried")
	build := func() *beam.Pipeline {
		p, s := beam.NewPipelineWithRoot()
		col := beam.Create(s, onceRows(500)...)
		fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[onceRow]()}, TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fixedTable)}}
		streams, _ := beam.ParDo2(s, fn, col)
		beam.ParDo0(s, failStreamFn, streams)
		beam.ParDo(s, &commitFn{Cfg: cfg}, beam.GroupByKey(s, streams), beam.SideInput{Input: beam.ParDo(s, failuresOf, streams)})
		return p
	}
	failAfterAppend.Store(true)
	defer failAfterAppend.Store(false)
	_, err = direct.Execute(context.Background(), build())
	if err == nil || !strings.Contains(err.Error(), "injected failure after appending") {
		t.Fatalf("error %v: want the injected failure", err)
	}
	if rows, _ := srv.TableRows("p.d.retried"); len(rows) != 0 {
		t.Fatalf("%d rows visible after the failed run", len(rows))
	}
	first := srv.PendingStreams("p.d.retried")
	if len(first) == 0 {
		t.Fatal("the failed run appended nothing")
	}
	failAfterAppend.Store(false)
	if _, err := direct.Execute(context.Background(), build()); err != nil {
		t.Fatal(err)
	}
	rows, _ := srv.TableRows("p.d.retried")
	seen := map[int64]int{}
	for _, r := range rows {
		seen[r[0].(int64)]++
	}
	if len(rows) != 500 || len(seen) != 500 {
		t.Fatalf("%d rows, %d distinct, want 500 once each", len(rows), len(seen))
	}
	for _, ws := range srv.WriteStreams("p.d.retried") {
		for _, f := range first {
			if ws.Name == f.Name && ws.Committed {
				t.Errorf("stream %s of the failed run was committed", ws.Name)
			}
		}
	}
}

// TestWriteTruncateCommitRetried: the commit step of a WriteTruncate run
// again after it succeeded (a retried bundle whose output was lost) finds
// its copy job done and succeeds without committing or copying again: the
// table keeps the write's rows, once each.
func TestWriteTruncateCommitRetried(t *testing.T) {
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	cfg := writeTestConfig(t, srv, "p.d.tr", WithWriteDisposition(WriteTruncate))
	typ := beam.EncodedType{T: reflect.TypeFor[onceRow]()}
	kept.Lock()
	kept.results = nil
	kept.Unlock()
	p, s := beam.NewPipelineWithRoot()
	res := Write(s, "p.d.tr", beam.Create(s, onceRows(200)...), WithEndpoint(srv.Addr()), WithInsecure(), WithRESTEndpoint(srv.RESTEndpoint()),
		WithRetries(5, 5*time.Millisecond), WithMaxAppendBytes(2000), WithWriteDisposition(WriteTruncate))
	beam.ParDo0(s, keepResult, res.Results)
	ptest.RunAndValidate(t, p)
	before := srv.WriteStats()
	if rows, _ := srv.TableRows("p.d.tr"); len(rows) != 200 || before.CopyJobs != 1 {
		t.Fatalf("%d rows, %d copy jobs after the write: want 200 and 1", len(rows), before.CopyJobs)
	}
	var done []streamDone
	for _, r := range keptResults() {
		for _, name := range r.Streams {
			for _, ws := range srv.WriteStreams(streamParent(name)) {
				if ws.Name == name {
					done = append(done, streamDone{Stream: ws.Name, Rows: ws.Rows})
				}
			}
		}
	}
	if len(done) == 0 {
		t.Fatal("no stream wrote to the staging table")
	}
	retry := &commitFn{Cfg: cfg, Type: typ}
	retry.Setup()
	defer retry.Teardown()
	i := 0
	next := func(sd *streamDone) bool {
		if i == len(done) {
			return false
		}
		*sd, i = done[i], i+1
		return true
	}
	var got []TableResult
	if err := retry.ProcessElement(context.Background(), cfg.Table, next, noFailures, func(r TableResult) { got = append(got, r) }); err != nil {
		t.Fatalf("the retried commit: %v", err)
	}
	after := srv.WriteStats()
	if len(got) != 1 || got[0].Rows != 200 || after.CopyJobs != 1 || after.Commits != before.Commits {
		t.Errorf("retried commit: results %+v, server %+v: want 200 rows and nothing committed or copied again", got, after)
	}
	if rows, _ := srv.TableRows("p.d.tr"); len(rows) != 200 {
		t.Errorf("%d rows after the retry, want 200", len(rows))
	}
	if tables := srv.Tables(); len(tables) != 1 {
		t.Errorf("tables %v: want the destination alone", tables)
	}
}
