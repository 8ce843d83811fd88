// Package readtest is the test glue that the read tests of bigqueryio and
// bqquery share: the events table they read, its row restriction, an exact
// fingerprint of what a read returns, and the query over the table. Only
// tests import it; it does not import package testing (TB is what it
// needs of a *testing.T or *testing.B).
package readtest

import (
	"fmt"
	"reflect"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// TB is what the helpers need of a test.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

func init() {
	register.Combiner3[Sum, Event, Sum](&SumFn{})
	bqcore.RegisterType(reflect.TypeOf((*Event)(nil)).Elem())
	bqcore.RegisterType(reflect.TypeOf((*Sum)(nil)).Elem())
}

// Event is the output type of the pipeline tests: the selected fields of
// the events table.
type Event struct {
	ID    int64   `bigquery:"id"`
	Score float64 `bigquery:"score"`
	Kind  string  `bigquery:"KIND"`
}

// EventsTable defines p.d.events: id INTEGER 0..n-1, name STRING (NULL
// every 5th row), score FLOAT, kind STRING.
func EventsTable(t TB, srv *bqtest.Server, n int) [][]bigquery.Value {
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

// Restriction is the row restriction the pipeline tests read with, and
// Passes the same in Go.
const Restriction = "name IS NOT NULL AND (score < 20 OR kind IN ('buy'))"

// Passes reports whether an events row passes Restriction.
func Passes(row []bigquery.Value) bool {
	return row[1] != nil && (row[2].(float64) < 20 || row[3] == "buy")
}

// Sum is an exact fingerprint of a multiset of events: a row lost or read
// twice changes it.
type Sum struct {
	N, IDs, Hash int64
	Score        float64
}

// Fingerprint is the Sum of one event.
func Fingerprint(e Event) Sum {
	return Sum{N: 1, IDs: e.ID, Hash: int64(mix(uint64(e.ID) ^ uint64(len(e.Kind))<<56)), Score: e.Score}
}

func mix(x uint64) uint64 { // splitmix64
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Add is a and b together.
func (a Sum) Add(b Sum) Sum {
	return Sum{N: a.N + b.N, IDs: a.IDs + b.IDs, Hash: a.Hash + b.Hash, Score: a.Score + b.Score}
}

// SumFn combines events into their Sum.
type SumFn struct{}

func (SumFn) CreateAccumulator() Sum         { return Sum{} }
func (SumFn) AddInput(a Sum, e Event) Sum    { return a.Add(Fingerprint(e)) }
func (SumFn) MergeAccumulators(a, b Sum) Sum { return a.Add(b) }

// Expected is the Sum of the rows that pass Restriction.
func Expected(rows [][]bigquery.Value) Sum {
	var s Sum
	for _, r := range rows {
		if Passes(r) {
			s = s.Add(Fingerprint(Event{ID: r[0].(int64), Score: r[2].(float64), Kind: r[3].(string)}))
		}
	}
	return s
}

// FingerprintOf is the Sum of a PCollection of Event.
func FingerprintOf(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.Combine(s.Scope("fingerprint"), &SumFn{}, col)
}

// NewServer is a bqtest server closed when the test ends.
func NewServer(t TB, opts ...bqtest.Option) *bqtest.Server {
	t.Helper()
	srv, err := bqtest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// EvenSQL is the query of QueryServer.
const EvenSQL = "SELECT * FROM d.events WHERE MOD(id, 2) = 0"

// QueryServer is a server with the events table of n rows (in EU) and the
// query EvenSQL, whose result is its even rows; it returns them.
func QueryServer(t TB, n int, opts ...bqtest.Option) (*bqtest.Server, [][]bigquery.Value) {
	t.Helper()
	srv := NewServer(t, opts...)
	rows := EventsTable(t, srv, n)
	var even [][]bigquery.Value
	for _, r := range rows {
		if r[0].(int64)%2 == 0 {
			even = append(even, r)
		}
	}
	srv.AddQuery(EvenSQL, bqtest.QueryResult{Table: bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
		{Name: "kind", Type: bigquery.StringFieldType, Required: true},
	}, Rows: even}, Location: "EU"})
	return srv, even
}
