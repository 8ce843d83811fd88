package bigqueryio_test

import (
	"fmt"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

var recSchema = bigquery.Schema{
	{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
	{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}}},
}

// extraRows are Rows with keys the table recSchema lacks, at the top and
// in the RECORD.
func extraRows(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = bigqueryio.Row{"id": int64(i), "source": "feed", "rec": bigqueryio.Row{"a": fmt.Sprint("a", i), "b": true}}
	}
	return out
}

// TestWriteIgnoreUnknownValues: Rows with keys the table lacks go to
// FailedRows by default; WithIgnoreUnknownValues writes them without
// those keys, at the top and in RECORDs, the known values exact. Given for
// a struct type it is refused when the pipeline is built.
func TestWriteIgnoreUnknownValues(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	for _, tbl := range []string{"p.d.strict", "p.d.lenient"} {
		if err := srv.AddTable(tbl, bqtest.Table{Schema: recSchema}); err != nil {
			t.Fatal(err)
		}
	}
	p, s := beam.NewPipelineWithRoot()
	col := beam.Create(s, extraRows(20)...)
	never := bigqueryio.WithCreateDisposition(bigqueryio.CreateNever)
	strict := bigqueryio.Write(s.Scope("strict"), "p.d.strict", col, writeOpts(srv, never)...)
	passert.Count(s, strict.FailedRows, "refused", 20)
	lenient := bigqueryio.Write(s.Scope("lenient"), "p.d.lenient", col, writeOpts(srv, never, bigqueryio.WithIgnoreUnknownValues())...)
	passert.Empty(s, lenient.FailedRows)
	run(t, p)
	rows, err := srv.TableRows("p.d.lenient")
	if err != nil || len(rows) != 20 {
		t.Fatalf("p.d.lenient holds %d rows (%v), want 20", len(rows), err)
	}
	for _, r := range rows {
		id := r[0].(int64)
		if rec, ok := r[1].([]bigquery.Value); !ok || len(rec) != 1 || rec[0] != fmt.Sprint("a", id) {
			t.Errorf("row %d: %v", id, r)
		}
	}
	if rows, _ := srv.TableRows("p.d.strict"); len(rows) != 0 {
		t.Errorf("p.d.strict holds %d rows, want none", len(rows))
	}

	_, s = beam.NewPipelineWithRoot()
	_, err = bigqueryio.TryWrite(s, "p.d.t", beam.Create(s, Simple{}), bigqueryio.WithIgnoreUnknownValues())
	if err == nil || !strings.Contains(err.Error(), "WithIgnoreUnknownValues applies to rows of bigqueryio.Row") {
		t.Errorf("WithIgnoreUnknownValues for a struct: %v", err)
	}
}
