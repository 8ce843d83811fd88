package bigqueryio_test

import (
	"testing"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// The query of the tests that run bqquery.Query beside Read and Write
// (client_options_test.go, example_readme_test.go); bqquery's own tests
// have the same.

const evenSQL = "SELECT * FROM d.events WHERE MOD(id, 2) = 0"

// queryServer is a server with the events table of n rows (in EU) and the
// query evenSQL, whose result is its even rows; it returns them.
func queryServer(t *testing.T, n int, opts ...bqtest.Option) (*bqtest.Server, [][]bigquery.Value) {
	t.Helper()
	srv := newServer(t, opts...)
	rows := eventsTable(t, srv, n)
	var even [][]bigquery.Value
	for _, r := range rows {
		if r[0].(int64)%2 == 0 {
			even = append(even, r)
		}
	}
	srv.AddQuery(evenSQL, bqtest.QueryResult{Table: bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
		{Name: "kind", Type: bigquery.StringFieldType, Required: true},
	}, Rows: even}, Location: "EU"})
	return srv, even
}
