package bqquery

import (
	"fmt"
	"testing"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
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
