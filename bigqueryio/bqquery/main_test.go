package bqquery_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/internal/testtmp"
)

// The test glue of bqquery's pipeline tests, as bigqueryio's own
// (pipeline_test.go there): the events table, its restriction, an exact
// fingerprint of what a read returns.

func init() {
	register.Combiner3[sum, Event, sum](&sumFn{})
	bigqueryio.RegisterType(reflect.TypeOf((*Event)(nil)).Elem())
	bigqueryio.RegisterType(reflect.TypeOf((*sum)(nil)).Elem())
}

func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}

// Event is the output type of the pipeline tests: the selected fields of
// the events table.
type Event struct {
	ID    int64   `bigquery:"id"`
	Score float64 `bigquery:"score"`
	Kind  string  `bigquery:"KIND"`
}

// eventsTable defines p.d.events: id INTEGER 0..n-1, name STRING (NULL
// every 5th row), score FLOAT, kind STRING.
func eventsTable(t testing.TB, srv *bqtest.Server, n int) [][]bigquery.Value {
	t.Helper()
	rows := make([][]bigquery.Value, n)
	kinds := []string{"click", "view", "buy"}
	for i := range rows {
		var name bigquery.Value = fmt.Sprintf("user-%d", i%1000)
		if i%5 == 0 {
			name = nil
		}
		rows[i] = []bigquery.Value{int64(i), name, float64(i%100) / 4, kinds[i%3]}
	}
	err := srv.AddTable("p.d.events", bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
		{Name: "kind", Type: bigquery.StringFieldType, Required: true},
	}, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// The restriction the pipeline tests read with, and the same in Go.
const restriction = "name IS NOT NULL AND (score < 20 OR kind IN ('buy'))"

func passes(row []bigquery.Value) bool {
	return row[1] != nil && (row[2].(float64) < 20 || row[3] == "buy")
}

// sum is an exact fingerprint of a multiset of events: a row lost or read
// twice changes it.
type sum struct {
	N, IDs, Hash int64
	Score        float64
}

func fingerprint(e Event) sum {
	return sum{N: 1, IDs: e.ID, Hash: int64(mix(uint64(e.ID) ^ uint64(len(e.Kind))<<56)), Score: e.Score}
}

func mix(x uint64) uint64 { // splitmix64
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func (a sum) add(b sum) sum {
	return sum{N: a.N + b.N, IDs: a.IDs + b.IDs, Hash: a.Hash + b.Hash, Score: a.Score + b.Score}
}

type sumFn struct{}

func (sumFn) CreateAccumulator() sum         { return sum{} }
func (sumFn) AddInput(a sum, e Event) sum    { return a.add(fingerprint(e)) }
func (sumFn) MergeAccumulators(a, b sum) sum { return a.add(b) }

func expected(rows [][]bigquery.Value) sum {
	var s sum
	for _, r := range rows {
		if passes(r) {
			s = s.add(fingerprint(Event{ID: r[0].(int64), Score: r[2].(float64), Kind: r[3].(string)}))
		}
	}
	return s
}

func fingerprintOf(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.Combine(s.Scope("fingerprint"), &sumFn{}, col)
}

// sessionOpts are the options of Read and Query of the tests: srv's
// endpoint, fast retries, the columns and rows of restriction.
func sessionOpts(srv *bqtest.Server) []bigqueryio.SessionOption {
	return []bigqueryio.SessionOption{bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(),
		bigqueryio.WithRetries(8, 5*time.Millisecond), bigqueryio.WithSelectedFields("id", "score", "kind"),
		bigqueryio.WithRowRestriction(restriction)}
}

// counter sums a bigqueryio counter over all steps.
func counter(t *testing.T, res metrics.Results, name string) int64 {
	t.Helper()
	var n int64
	found := false
	for _, c := range res.AllMetrics().Counters() {
		if c.Namespace() == bigqueryio.Namespace && c.Name() == name {
			n += c.Result()
			found = true
		}
	}
	if !found {
		t.Fatalf("no counter %s/%s", bigqueryio.Namespace, name)
	}
	return n
}

func run(t *testing.T, p *beam.Pipeline) metrics.Results {
	t.Helper()
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	return res.Metrics()
}

func newServer(t testing.TB, opts ...bqtest.Option) *bqtest.Server {
	t.Helper()
	srv, err := bqtest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// runFailing runs a pipeline that is meant to fail on Beam Go's direct
// runner, in this process. On Prism, Beam Go v2.77's harness closes its
// response channel when the control stream ends (harness.go,
// MainWithOptions) with no synchronisation the race detector can see
// against the last send of a bundle goroutine: a pipeline that fails at
// once is reported as a data race now and then under -race, in Beam's code
// (TestPipelineRowCountFails, 1 of 3 runs at load 7). What these tests
// prove is the reader's error, which is the same on every runner.
func runFailing(p *beam.Pipeline) error {
	_, err := direct.Execute(context.Background(), p)
	return err
}
