package bqwrite

import (
	"context"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// The commit step's evidence, proven by running the write's steps by hand
// as a runner does, including the one thing Prism (v2.77, v2.78) does now
// and then that other runners do not: run the commit step after an append
// bundle failed, with the outputs of the bundles that committed.

// keyedDone is one output of an append bundle: a report and its key.
type keyedDone struct {
	key string
	sd  streamDone
}

// runAppendBundle runs one bundle of fn over rows as a runner does and
// returns its outputs, or the bundle's error (a runner then drops its
// outputs).
func runAppendBundle(ctx context.Context, fn *appendFn, rows []any) ([]keyedDone, error) {
	var out []keyedDone
	emit := func(k string, sd streamDone) { out = append(out, keyedDone{k, sd}) }
	failed := func(FailedRow) {}
	fn.StartBundle(ctx, emit, failed)
	for _, r := range rows {
		if err := fn.ProcessElement(ctx, r, emit, failed); err != nil {
			return nil, err
		}
	}
	if err := fn.FinishBundle(ctx, emit, failed); err != nil {
		return nil, err
	}
	return out, nil
}

func iterOf(sds []streamDone) func(*streamDone) bool {
	i := 0
	return func(sd *streamDone) bool {
		if i == len(sds) {
			return false
		}
		*sd, i = sds[i], i+1
		return true
	}
}

// runCommitStep runs the commit step over the outputs of the append
// bundles that committed, as the runner would: grouped by key (a call
// for each, in key order), the failures as every call's side input
// (failuresOf). It returns the results and each call's error.
func runCommitStep(ctx context.Context, cfg writeConfig, outs []keyedDone) ([]TableResult, []error) {
	byKey := map[string][]streamDone{}
	var failures []streamDone
	for _, o := range outs {
		byKey[o.key] = append(byKey[o.key], o.sd)
		failuresOf(o.key, o.sd, func(sd streamDone) { failures = append(failures, sd) })
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c := &commitFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[onceRow]()}}
	c.Setup()
	defer c.Teardown()
	var results []TableResult
	var errs []error
	for _, k := range keys {
		if err := c.ProcessElement(ctx, k, iterOf(byKey[k]), iterOf(failures), func(r TableResult) { results = append(results, r) }); err != nil {
			errs = append(errs, err)
		}
	}
	return results, errs
}

func newAppendFn(cfg writeConfig) *appendFn {
	fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[onceRow]()}, TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fixedTable)}}
	fn.Setup()
	return fn
}

func onceRowsFrom(from, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = onceRow{ID: int64(from + i), Name: "r"}
	}
	return out
}

// TestCommitRefusesFailedBundle: of two append bundles, the second meets a
// row it cannot write (refused WithFailOnRowErrors, after 100 rows
// appended) and the commit step runs all the same with the first's stream.
// On the code before, the second bundle failed, and the commit committed
// the first bundle's 300 rows: a part of the write visible in a job that
// failed. Now the bundle passes its failure on, and every commit step
// refuses, naming the row's error: nothing is committed, no row visible.
func TestCommitRefusesFailedBundle(t *testing.T) {
	ctx := context.Background()
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	cfg := writeTestConfig(t, srv, "p.d.partial", WithFailOnRowErrors())
	fn := newAppendFn(cfg)
	defer fn.Teardown()
	var committed []keyedDone // the outputs of the bundles that committed
	first, err := runAppendBundle(ctx, fn, onceRowsFrom(0, 300))
	if err != nil {
		t.Fatal(err)
	}
	committed = append(committed, first...)
	bad := append(onceRowsFrom(300, 100), onceRow{ID: 400, Name: strings.Repeat("x", 3000)}) // past WithMaxAppendBytes(2000)
	bad = append(bad, onceRowsFrom(401, 99)...)
	second, err := runAppendBundle(ctx, fn, bad)
	if err == nil {
		committed = append(committed, second...)
	} else {
		t.Logf("the second bundle failed (its outputs dropped): %v", err)
	}
	results, errs := runCommitStep(ctx, cfg, committed)
	if rows, _ := srv.TableRows("p.d.partial"); len(rows) != 0 {
		t.Fatalf("%d rows visible after a write one of whose bundles failed (results %+v)", len(rows), results)
	}
	if len(results) != 0 || len(errs) == 0 || srv.WriteStats().Commits != 0 {
		t.Fatalf("results %+v, errors %v, %d commits: want no result, no commit, errors", results, errs, srv.WriteStats().Commits)
	}
	for _, err := range errs {
		for _, want := range []string{"nothing was committed", "bqwrite.Write to p.d.partial: row refused (WithFailOnRowErrors)", "over the 2000 bytes of an append"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q: want %q in it", err, want)
			}
		}
	}
	// Both bundles appended; none of it is committed.
	var appended int64
	for _, ws := range srv.WriteStreams("p.d.partial") {
		appended += ws.Rows
		if ws.Committed {
			t.Errorf("stream %s committed", ws.Name)
		}
	}
	if appended < 300 {
		t.Errorf("%d rows appended, want the first bundle's 300 at least", appended)
	}
}

// TestCommitTruncateRefusesMissingBundles: a WriteTruncate of one table
// whose only append bundle failed after it began (it made the run's
// staging table and appended), with the commit step run all the same
// (Prism) with nothing but the table's key. On the code before, the commit
// took that for an empty input and replaced the table with an empty one:
// its 5 rows lost. Now the run's staging table is the evidence that a
// bundle began, the commit refuses naming it, deletes it, and the table
// keeps its rows. A bundle whose every row was refused (it reports the
// table, with no stream) is not a missing one: the table is replaced by
// an empty one, as the write said.
func TestCommitTruncateRefusesMissingBundles(t *testing.T) {
	ctx := context.Background()
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "name", Type: bigquery.StringFieldType}}
	old := [][]bigquery.Value{{int64(1)}, {int64(2)}, {int64(3)}, {int64(4)}, {int64(5)}}
	for i := range old {
		old[i] = append(old[i], "old")
	}
	if err := srv.AddTable("p.d.tr", bqtest.Table{Schema: schema, Rows: old}); err != nil {
		t.Fatal(err)
	}
	cfg := writeTestConfig(t, srv, "p.d.tr", WithWriteDisposition(WriteTruncate))
	const run = "0123456789abcdef"
	fn := newAppendFn(cfg)
	defer fn.Teardown()
	// The bundle begins: it makes the staging table and appends, then
	// fails elsewhere in its stage (its outputs dropped, no FinishBundle).
	fn.run = run
	fn.StartBundle(ctx, nil, nil)
	for _, r := range onceRowsFrom(0, 50) {
		if err := fn.ProcessElement(ctx, r, nil, func(FailedRow) {}); err != nil {
			t.Fatal(err)
		}
	}
	fn.closeStreams()
	staging := stagingTable(cfg.Table, run)
	if !slices.Contains(srv.Tables(), staging) {
		t.Fatalf("tables %v: the bundle made no staging table %s", srv.Tables(), staging)
	}
	key := keyedDone{cfg.Table, streamDone{Key: true, Run: run}} // truncateKeyFn's
	results, errs := runCommitStep(ctx, cfg, []keyedDone{key})
	if got, _ := srv.TableRows("p.d.tr"); !reflect.DeepEqual(got, old) {
		t.Fatalf("p.d.tr holds %v after a commit without the write's bundles (results %+v, errors %v), want its old rows", got, results, errs)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "the table left as it was") || !strings.Contains(errs[0].Error(), "staging table "+staging+" exists") {
		t.Fatalf("errors %v: want one naming the staging table", errs)
	}
	if tables := srv.Tables(); !reflect.DeepEqual(tables, []string{cfg.Table}) {
		t.Errorf("tables %v: want the destination alone (the staging table deleted)", tables)
	}
	if st := srv.WriteStats(); st.CopyJobs != 0 || st.Commits != 0 {
		t.Errorf("server %+v: want no commit and no copy", st)
	}

	// Every row refused (no WithFailOnRowErrors): the bundle reports the
	// table, and the write of no rows empties it.
	fn.run = "fedcba9876543210"
	outs, err := runAppendBundle(ctx, fn, []any{onceRow{ID: 9, Name: strings.Repeat("x", 3000)}})
	if err != nil {
		t.Fatal(err)
	}
	results, errs = runCommitStep(ctx, cfg, append(outs, keyedDone{cfg.Table, streamDone{Key: true, Run: fn.run}}))
	if got, _ := srv.TableRows("p.d.tr"); len(errs) != 0 || len(results) != 1 || len(got) != 0 {
		t.Errorf("every row refused: results %+v, errors %v, %d rows: want the table emptied", results, errs, len(got))
	}
}

// TestCommitDuplicatesAndRetries: a stream delivered twice to the commit
// step is committed once and its rows counted once (the code before
// counted them twice: 450 rows reported for 300 written); the commit run
// again with the same reports in another order (a retried commit step,
// its answer lost) finds every stream committed, which is success with
// the same result, and commits nothing more.
func TestCommitDuplicatesAndRetries(t *testing.T) {
	ctx := context.Background()
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	cfg := writeTestConfig(t, srv, "p.d.dup")
	fn := newAppendFn(cfg)
	defer fn.Teardown()
	a, err := runAppendBundle(ctx, fn, onceRowsFrom(0, 150))
	if err != nil {
		t.Fatal(err)
	}
	b, err := runAppendBundle(ctx, fn, onceRowsFrom(150, 150))
	if err != nil {
		t.Fatal(err)
	}
	outs := append(append(a, b...), a...) // a's stream delivered twice
	results, errs := runCommitStep(ctx, cfg, outs)
	if len(errs) != 0 || len(results) != 1 || results[0].Rows != 300 || len(results[0].Streams) != 2 {
		t.Fatalf("results %+v, errors %v: want one result of 300 rows in 2 streams", results, errs)
	}
	if rows, _ := srv.TableRows("p.d.dup"); len(rows) != 300 {
		t.Fatalf("%d rows visible, want 300", len(rows))
	}
	commits := srv.WriteStats().Commits
	again, errs := runCommitStep(ctx, cfg, append(append([]keyedDone(nil), b...), a...))
	if len(errs) != 0 || len(again) != 1 || again[0].Rows != 300 || !reflect.DeepEqual(again[0].Streams, results[0].Streams) || !again[0].CommitTime.Equal(results[0].CommitTime) {
		t.Fatalf("retried commit: results %+v, errors %v; want %+v", again, errs, results)
	}
	if rows, _ := srv.TableRows("p.d.dup"); len(rows) != 300 || srv.WriteStats().Commits != commits {
		t.Errorf("after the retry: %d rows, %d commits; want 300 and %d", len(rows), srv.WriteStats().Commits, commits)
	}
}
