package bqwrite

import (
	"testing"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// benchRow is the rows of the write benchmarks and batch tests.
type benchRow struct {
	ID    int64               `bigquery:"id"`
	Name  bigquery.NullString `bigquery:"name"`
	Score float64             `bigquery:"score"`
}

var typeOfTime = bqcore.TypeOfTime

func newTestServer(t testing.TB, opts ...bqtest.Option) *bqtest.Server {
	t.Helper()
	srv, err := bqtest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
