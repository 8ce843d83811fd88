package bqquery_test

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqquery"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/internal/readtest"
	"github.com/sdfio/sdfio/internal/workertest"
)

const evenSQL = readtest.EvenSQL

// queryServer is a server with the events table of n rows (in EU) and the
// query evenSQL, whose result is its even rows; it returns them.
var queryServer = readtest.QueryServer

func queryOpts(srv *bqtest.Server, more ...bigqueryio.QueryOption) []bigqueryio.QueryOption {
	return queryOptsBilledTo(srv, "bill", more...)
}

// queryOptsBilledTo is queryOpts billing project billing (an option is
// given once).
func queryOptsBilledTo(srv *bqtest.Server, billing string, more ...bigqueryio.QueryOption) []bigqueryio.QueryOption {
	var opts []bigqueryio.QueryOption
	for _, o := range sessionOpts(srv) {
		opts = append(opts, o)
	}
	return append(append(opts, bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()), bigqueryio.WithBillingProject(billing)), more...)
}

// assertNoTemp checks that the server holds the events table only, and no
// dataset: the query's temporary table and dataset were removed.
func assertNoTemp(t *testing.T, srv *bqtest.Server) {
	t.Helper()
	if tabs := srv.Tables(); len(tabs) != 1 || tabs[0] != "projects/p/datasets/d/tables/events" {
		t.Errorf("tables after the pipeline: %v, want only the events table", tabs)
	}
	if ds := srv.Datasets(); len(ds) != 0 {
		t.Errorf("datasets after the pipeline: %+v, want none", ds)
	}
}

// TestQueryPipeline runs a query on Prism, its location found by a dry run
// (EU), and reads its result in Avro and in Arrow over 4 streams with
// selected fields and a row restriction: the output is exact, the job ran
// in EU into a temporary table of the billing project, and the temporary
// dataset and table are gone afterwards, but only afterwards: bqtest fails
// the ReadRows of a deleted table, and responses are slow enough that a
// cleanup not waiting for the read would delete it mid-read.
func TestQueryPipeline(t *testing.T) {
	for _, format := range []bigqueryio.DataFormat{bigqueryio.Avro, bigqueryio.Arrow} {
		srv, even := queryServer(t, 4000, bqtest.WithBlockRows(64), bqtest.WithResponseRows(100))
		srv.SetFaults(bqtest.Faults{ResponseDelay: 10 * time.Millisecond})
		p, s := beam.NewPipelineWithRoot()
		col := bqquery.Query(s, evenSQL, reflect.TypeOf(Event{}), queryOpts(srv, bigqueryio.WithMaxStreams(4), bigqueryio.WithDataFormat(format))...)
		passert.Equals(s, fingerprintOf(s, col), expected(even))
		m := run(t, p)
		if got := counter(t, m, "streams"); got != 4 {
			t.Errorf("format %d: %d streams, want 4", format, got)
		}
		assertNoTemp(t, srv)
		jobs := srv.Jobs()
		if len(jobs) != 2 || !jobs[0].DryRun || jobs[1].DryRun {
			t.Fatalf("format %d: jobs %+v, want a dry run and a job", format, jobs)
		}
		j := jobs[1]
		if j.Location != "EU" || j.LegacySQL || j.SQL != evenSQL || j.Project != "bill" || j.Err != "" || !strings.HasPrefix(j.JobID, "sdfio_query_") ||
			!strings.HasPrefix(j.Destination, "projects/bill/datasets/sdfio_temp_") || !strings.Contains(j.Destination, "/tables/sdfio_query_") {
			t.Errorf("format %d: job %+v", format, j)
		}
		if req := srv.LastSessionRequest(); req.GetReadSession().GetTable() != j.Destination || req.GetParent() != "projects/bill" {
			t.Errorf("format %d: read session of %s for %s, want the job's destination %s", format, req.GetReadSession().GetTable(), req.GetParent(), j.Destination)
		}
	}
}

func rowEvent(r bigqueryio.Row) Event {
	return Event{ID: r["id"].(int64), Score: r["score"].(float64), Kind: r["kind"].(string)}
}

func init() { register.Function1x1(rowEvent) }

// TestQueryParametersAndRows runs, in one pipeline, a query with named
// parameters read into bigqueryio.Row and one with positional parameters
// read into structs: bqtest's query function answers each job from the
// parameters it received, so the outputs are exact only if the
// parameters reached the job as given; the dry runs got them too.
// (Before: Query refused Row, and took no parameters.)
func TestQueryParametersAndRows(t *testing.T) {
	srv := newServer(t, bqtest.WithBlockRows(32))
	rows := eventsTable(t, srv, 600)
	schema := bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
		{Name: "kind", Type: bigquery.StringFieldType, Required: true},
	}
	const namedSQL = "SELECT * FROM d.events WHERE kind = @kind AND id >= @min_id"
	const positionalSQL = "SELECT * FROM d.events WHERE kind = ? AND id < ?"
	filter := func(kind string, keep func(id int64) bool) [][]bigquery.Value {
		var out [][]bigquery.Value
		for _, r := range rows {
			if r[3] == kind && keep(r[0].(int64)) {
				out = append(out, r)
			}
		}
		return out
	}
	srv.SetQueryFunc(func(j bqtest.QueryJob) bqtest.QueryResult {
		scalar := func(p bqtest.QueryParameter) string { v, _ := p.Scalar(); return v }
		var kind, bound string
		switch {
		case j.SQL == namedSQL && j.ParameterMode == "NAMED":
			k, _ := j.Param("kind")
			m, _ := j.Param("min_id")
			kind, bound = scalar(k), ">="+scalar(m)
		case j.SQL == positionalSQL && j.ParameterMode == "POSITIONAL" && len(j.Parameters) == 2:
			kind, bound = scalar(j.Parameters[0]), "<"+scalar(j.Parameters[1])
		default:
			return bqtest.QueryResult{Err: fmt.Sprintf("unexpected job %+v", j)}
		}
		var n int64
		fmt.Sscan(bound[strings.IndexAny(bound, "0123456789-"):], &n)
		return bqtest.QueryResult{Table: bqtest.Table{Schema: schema, Rows: filter(kind, func(id int64) bool {
			if bound[0] == '<' {
				return id < n
			}
			return id >= n
		})}}
	})
	p, s := beam.NewPipelineWithRoot()
	opts := func(more ...bigqueryio.QueryOption) []bigqueryio.QueryOption {
		return append([]bigqueryio.QueryOption{bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(), bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()),
			bigqueryio.WithBillingProject("bill"), bigqueryio.WithMaxStreams(3)}, more...)
	}
	named := bqquery.Query(s.Scope("named"), namedSQL, reflect.TypeOf(bigqueryio.Row{}), opts(bigqueryio.WithQueryParameters(
		bigquery.QueryParameter{Name: "kind", Value: "buy"}, bigquery.QueryParameter{Name: "min_id", Value: 300}))...)
	positional := bqquery.Query(s.Scope("positional"), positionalSQL, reflect.TypeOf(Event{}), opts(bigqueryio.WithQueryParameters(
		bigquery.QueryParameter{Value: "view"}, bigquery.QueryParameter{Value: int64(100)}), bigqueryio.WithDataFormat(bigqueryio.Arrow))...)
	wantNamed := filter("buy", func(id int64) bool { return id >= 300 })
	wantPositional := filter("view", func(id int64) bool { return id < 100 })
	if len(wantNamed) != 100 || len(wantPositional) != 33 {
		t.Fatalf("%d and %d rows expected", len(wantNamed), len(wantPositional))
	}
	all := func(rs [][]bigquery.Value) sum {
		var x sum
		for _, r := range rs {
			x = x.Add(fingerprint(Event{ID: r[0].(int64), Score: r[2].(float64), Kind: r[3].(string)}))
		}
		return x
	}
	passert.Equals(s, fingerprintOf(s.Scope("n"), beam.ParDo(s, rowEvent, named)), all(wantNamed))
	passert.Equals(s, fingerprintOf(s.Scope("p"), positional), all(wantPositional))
	run(t, p)
	jobs := srv.Jobs()
	if len(jobs) != 4 {
		t.Fatalf("jobs %+v, want a dry run and a job per query", jobs)
	}
	for _, j := range jobs {
		if j.Err != "" || len(j.Parameters) != 2 {
			t.Errorf("job %+v", j)
		}
		if j.ParameterMode == "NAMED" {
			if p, _ := j.Param("min_id"); p.Type != "INT64" {
				t.Errorf("min_id: %+v", p)
			}
		}
	}
	assertNoTemp(t, srv)
}

// TestQueryOptions: WithQueryLocation skips the dry run and runs the job
// there; legacy SQL and the priority reach the job; WithQueryTempDataset
// writes into the user's dataset, which stays, without its table; the
// billing project may be domain-scoped.
func TestQueryOptions(t *testing.T) {
	srv, even := queryServer(t, 500)
	srv.AddDataset("example.com:bill", "scratch", "EU")
	p, s := beam.NewPipelineWithRoot()
	col := bqquery.Query(s, evenSQL, reflect.TypeOf(Event{}), queryOptsBilledTo(srv, "example.com:bill", bigqueryio.WithQueryLocation("EU"), bigqueryio.WithLegacySQL(),
		bigqueryio.WithQueryPriority(bigquery.BatchPriority), bigqueryio.WithQueryTempDataset("scratch"))...)
	passert.Equals(s, fingerprintOf(s, col), expected(even))
	run(t, p)
	jobs := srv.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("jobs %+v, want one job and no dry run", jobs)
	}
	if j := jobs[0]; j.Location != "EU" || !j.LegacySQL || j.Priority != "BATCH" || !strings.HasPrefix(j.Destination, "projects/example.com:bill/datasets/scratch/tables/sdfio_query_") {
		t.Errorf("job %+v", j)
	}
	if ds := srv.Datasets(); len(ds) != 1 || ds[0].ID != "scratch" {
		t.Errorf("datasets %+v, want the user's scratch dataset only", ds)
	}
	if tabs := srv.Tables(); len(tabs) != 1 {
		t.Errorf("tables %v, want the events table only", tabs)
	}
}

// TestQueryErrors: a query the service rejects fails the pipeline with the
// service's message, found by the dry run (nothing created) or by the job
// (its temporary dataset removed); a job in a location other than its
// tables' fails; a read session that fails after the query removes the
// temporary table too.
func TestQueryErrors(t *testing.T) {
	srv, _ := queryServer(t, 100)
	srv.AddQuery("SELECT nope FROM d.events", bqtest.QueryResult{Err: "Unrecognized name: nope at [1:8]", Location: "EU"})
	for _, tc := range []struct {
		name, sql string
		opts      []bigqueryio.QueryOption
		want      []string
	}{
		{"dry run", "SELECT nope FROM d.events", nil, []string{"dry run", "Unrecognized name: nope at [1:8]"}},
		{"job", "SELECT nope FROM d.events", []bigqueryio.QueryOption{bigqueryio.WithQueryLocation("EU")}, []string{"query job", "Unrecognized name: nope at [1:8]"}},
		{"location", evenSQL, []bigqueryio.QueryOption{bigqueryio.WithQueryLocation("US")}, []string{"query job", "not found in location US"}},
		{"session", evenSQL, nil, []string{"InvalidArgument", "Unrecognized name: nope"}},
	} {
		opts := queryOpts(srv, tc.opts...)
		if tc.name == "session" { // queryOpts' row restriction replaced, not given twice
			opts = []bigqueryio.QueryOption{bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(), bigqueryio.WithRetries(8, 5*time.Millisecond),
				bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()), bigqueryio.WithBillingProject("bill"), bigqueryio.WithRowRestriction("nope > 1")}
		}
		p, s := beam.NewPipelineWithRoot()
		bqquery.Query(s, tc.sql, reflect.TypeOf(Event{}), opts...)
		err := runFailing(p)
		if err == nil {
			t.Errorf("%s: the pipeline succeeded", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error does not say %q: %v", tc.name, w, err)
			}
		}
		assertNoTemp(t, srv)
	}
}

// TestOptionTypes: Query's own options are not ReadOptions and Read's own
// are not QueryOptions, so that one given to the other transform does not
// compile (Go's assignability to an interface is this method-set check);
// the shared ones are both. (Before: Read refused Query's options when the
// pipeline was built, and Query refused WithSnapshotTime then.)
func TestOptionTypes(t *testing.T) {
	queryOnly := map[string]any{
		"WithLegacySQL":        bigqueryio.WithLegacySQL(),
		"WithQueryPriority":    bigqueryio.WithQueryPriority(bigquery.BatchPriority),
		"WithQueryLocation":    bigqueryio.WithQueryLocation("EU"),
		"WithQueryTempDataset": bigqueryio.WithQueryTempDataset("d"),
		"WithQueryParameters":  bigqueryio.WithQueryParameters(),
		"WithRESTEndpoint":     bigqueryio.WithRESTEndpoint("http://x"),
	}
	for name, o := range queryOnly {
		if _, ok := o.(bigqueryio.ReadOption); ok {
			t.Errorf("%s is a ReadOption", name)
		}
		if _, ok := o.(bigqueryio.QueryOption); !ok {
			t.Errorf("%s is no QueryOption", name)
		}
	}
	var snap any = bigqueryio.WithSnapshotTime(time.Now())
	if _, ok := snap.(bigqueryio.QueryOption); ok {
		t.Error("WithSnapshotTime is a QueryOption")
	}
	for _, o := range []bigqueryio.SessionOption{bigqueryio.WithSelectedFields("a"), bigqueryio.WithIgnoreUnknownFields(),
		bigqueryio.WithRowRestriction("a > 1"), bigqueryio.WithDataFormat(bigqueryio.Arrow), bigqueryio.WithBillingProject("b"),
		bigqueryio.WithMaxStreams(1), bigqueryio.WithDesiredBundleSize(1), bigqueryio.WithEndpoint("h:1"), bigqueryio.WithInsecure(),
		bigqueryio.WithSplitTimeout(time.Second), bigqueryio.WithRetries(1, time.Second), bigqueryio.WithMetricsNamespace("ns")} {
		var _ bigqueryio.ReadOption = o
		var _ bigqueryio.QueryOption = o
	}
}

// TestQueryConstruction: Query refuses what cannot work.
func TestQueryConstruction(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	for _, tc := range []struct {
		sql  string
		opts []bigqueryio.QueryOption
		want string
	}{
		{"SELECT 1", nil, "WithBillingProject"},
		{"  ", []bigqueryio.QueryOption{bigqueryio.WithBillingProject("b")}, "empty SQL"},
		{"SELECT 1", []bigqueryio.QueryOption{bigqueryio.WithBillingProject("b"), bigqueryio.WithQueryPriority("SOON")}, "priority"},
		{"SELECT 1", []bigqueryio.QueryOption{bigqueryio.WithBillingProject("b"), bigqueryio.WithQueryTempDataset("x.y")}, "temporary dataset"},
	} {
		if _, err := bqquery.TryQuery(s, tc.sql, reflect.TypeOf(Event{}), tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TryQuery(%q): %v, want an error saying %q", tc.sql, err, tc.want)
		}
	}
}

// unregistered is a named type no init registers with Beam.
type unregistered struct{ ID int64 }

// TestUnregisteredType: Read and Query refuse, when the pipeline is built,
// a named element type not registered with Beam, naming it and the call
// that registers it. (Before: they took it, and a separate worker would
// have decoded its rows into an anonymous copy.)
func TestUnregisteredType(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	typ := reflect.TypeOf(unregistered{})
	want := "element type bqquery_test.unregistered is not registered with Beam: call bigqueryio.RegisterType(reflect.TypeFor[bqquery_test.unregistered]()) in an init function"
	if _, err := bigqueryio.TryRead(s, "p.d.t", typ); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "Read of p.d.t") {
		t.Errorf("TryRead: %v", err)
	}
	if _, err := bqquery.TryQuery(s, "SELECT 1", typ, bigqueryio.WithBillingProject("b")); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("TryQuery: %v", err)
	}
	// Registered, and unnamed, types are taken.
	for _, ok := range []reflect.Type{reflect.TypeOf(Event{}), reflect.TypeOf(struct{ ID int64 }{}), reflect.TypeOf(bigqueryio.Row{})} {
		if _, err := bigqueryio.TryRead(s, "p.d.t", ok); err != nil {
			t.Errorf("TryRead of %v: %v", ok, err)
		}
	}
}

// TestQuerySeparateWorker runs Query with SDK workers in separate
// processes: the query, session and cleanup DoFns, the temporary table's
// element and the side input that orders the cleanup travel through the
// pipeline proto; the temporary dataset is gone afterwards.
func TestQuerySeparateWorker(t *testing.T) {
	srv, even := queryServer(t, 1000, bqtest.WithBlockRows(32))
	p, s := beam.NewPipelineWithRoot()
	col := bqquery.Query(s, evenSQL, reflect.TypeOf(Event{}), queryOpts(srv, bigqueryio.WithMaxStreams(3))...)
	passert.Equals(s, fingerprintOf(s, col), expected(even))
	res, err := workertest.Run(t, p)
	if err != nil {
		t.Fatalf("pipeline with separate worker processes failed: %v", err)
	}
	if len(res.Workers) == 0 {
		t.Fatal("no worker process was started")
	}
	for _, w := range res.Workers {
		if w.PID == 0 || w.PID == os.Getpid() {
			t.Errorf("worker %s ran as pid %d, want a separate process", w.ID, w.PID)
		}
	}
	assertNoTemp(t, srv)
}

// TestQueryEmpty: a query with no rows reads as an empty PCollection (a
// session without streams), and its temporary table is removed all the same.
func TestQueryEmpty(t *testing.T) {
	srv, _ := queryServer(t, 10)
	srv.AddQuery("SELECT * FROM d.events WHERE FALSE", bqtest.QueryResult{Table: bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "score", Type: bigquery.FloatFieldType}, {Name: "kind", Type: bigquery.StringFieldType},
	}}})
	p, s := beam.NewPipelineWithRoot()
	col := bqquery.Query(s, "SELECT * FROM d.events WHERE FALSE", reflect.TypeOf(Event{}),
		bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(), bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()), bigqueryio.WithBillingProject("bill"))
	passert.Empty(s, col)
	m := run(t, p)
	if n := counter(t, m, "streams"); n != 0 {
		t.Errorf("%d streams", n)
	}
	if js := srv.Jobs(); len(js) != 2 || js[1].Err != "" {
		t.Errorf("jobs %+v", js)
	}
	assertNoTemp(t, srv)
}
