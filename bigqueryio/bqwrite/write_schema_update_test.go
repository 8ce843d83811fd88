package bqwrite_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/workertest"
)

// Grown is a row type with a column more than the table it is written to
// (note) and a NULLABLE one (name) that the table has REQUIRED.
type Grown struct {
	ID   int64               `bigquery:"id"`
	Name bigquery.NullString `bigquery:"name"`
	Note string              `bigquery:"note"`
}

func init() { bqwrite.RegisterType(reflect.TypeFor[Grown]()) }

var recSchema = bigquery.Schema{
	{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
	{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}}},
}

// extraRows are Rows with keys the table recSchema lacks, at the top and
// in the RECORD.
func extraRows(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = bqwrite.Row{"id": int64(i), "source": "feed", "rec": bqwrite.Row{"a": fmt.Sprint("a", i), "b": true}}
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
	never := bqwrite.WithCreateDisposition(bqwrite.CreateNever)
	strict := bqwrite.Write(s.Scope("strict"), "p.d.strict", col, writeOpts(srv, never)...)
	passert.Count(s, strict.FailedRows, "refused", 20)
	lenient := bqwrite.Write(s.Scope("lenient"), "p.d.lenient", col, writeOpts(srv, never, bqwrite.WithIgnoreUnknownValues())...)
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
	_, err = bqwrite.TryWrite(s, "p.d.t", beam.Create(s, Simple{}), bqwrite.WithIgnoreUnknownValues())
	if err == nil || !strings.Contains(err.Error(), "WithIgnoreUnknownValues applies to rows of bqwrite.Row") {
		t.Errorf("WithIgnoreUnknownValues for a struct: %v", err)
	}
}

// TestWriteSchemaUpdateOptions: a struct with a field the table lacks
// fails the write naming it; WithSchemaUpdateOptions(AllowFieldAddition,
// AllowFieldRelaxation) adds the column (NULLABLE) and relaxes the
// REQUIRED column the struct may leave NULL before the rows are appended:
// every row is written, the old rows read NULL in the new column.
func TestWriteSchemaUpdateOptions(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	if err := srv.AddTable("p.d.grow", bqtest.Table{Schema: simpleSchema, Rows: [][]bigquery.Value{{int64(100), "old"}}}); err != nil {
		t.Fatal(err)
	}
	rows := make([]any, 30)
	for i := range rows {
		g := Grown{ID: int64(i), Note: fmt.Sprint("n", i)}
		if i%2 == 0 {
			g.Name = bigquery.NullString{StringVal: fmt.Sprint("x", i), Valid: true}
		}
		rows[i] = g
	}
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.grow", beam.Create(s, rows...), writeOpts(srv)...)
	if err := workertest.RunFailing(t, p); err == nil || !strings.Contains(err.Error(), "field Note matches no column") {
		t.Fatalf("error %v: want the field without a column named", err)
	}

	p, s = beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.grow", beam.Create(s, rows...), writeOpts(srv,
		bqwrite.WithSchemaUpdateOptions(bqwrite.AllowFieldAddition, bqwrite.AllowFieldRelaxation))...)
	passert.Empty(s, res.FailedRows)
	run(t, p)
	md := metadata(t, srv, "grow")
	if len(md.Schema) != 3 || md.Schema[2].Name != "note" || md.Schema[2].Required || md.Schema[1].Required || !md.Schema[0].Required {
		t.Errorf("schema after the write: %v %v %v", md.Schema[0], md.Schema[1], md.Schema[len(md.Schema)-1])
	}
	got, err := srv.TableRows("p.d.grow")
	if err != nil || len(got) != 31 {
		t.Fatalf("%d rows (%v), want 31", len(got), err)
	}
	for _, r := range got {
		id := r[0].(int64)
		want := []bigquery.Value{id, nil, fmt.Sprint("n", id)}
		if id%2 == 0 {
			want[1] = fmt.Sprint("x", id)
		}
		if id == 100 {
			want = []bigquery.Value{id, "old", nil}
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("row %v, want %v", r, want)
		}
	}

	_, s = beam.NewPipelineWithRoot()
	for opts, want := range map[string][]bqwrite.WriteOption{
		`WithSchemaUpdateOptions("ALLOW_EVERYTHING"): "ALLOW_EVERYTHING" is not a schema update option`: {bqwrite.WithSchemaUpdateOptions("ALLOW_EVERYTHING")},
		"WithSchemaUpdateOptions(): no option given":                                                    {bqwrite.WithSchemaUpdateOptions()},
	} {
		if _, err := bqwrite.TryWrite(s, "p.d.t", beam.Create(s, Simple{}), want...); err == nil || !strings.Contains(err.Error(), opts) {
			t.Errorf("error %v, want %q", err, opts)
		}
	}
	if _, err := bqwrite.TryWrite(s, "p.d.t", beam.Create(s, bqwrite.Row{}), bqwrite.WithCreateDisposition(bqwrite.CreateNever),
		bqwrite.WithSchemaUpdateOptions(bqwrite.AllowFieldAddition)); err == nil || !strings.Contains(err.Error(), "give WithSchema with WithSchemaUpdateOptions") {
		t.Errorf("Row without a schema: %v", err)
	}
}

// TestWriteFollowsSchema: the table's schema gains a column while the
// write runs (patched by another client when the first append reaches the
// server; the writer waits for that answer after four appends in flight):
// Rows with that key, which the writer's schema did not have, are written
// with it, the writer reading the table's schema again and sending the
// new writer schema on its stream; nothing is refused.
func TestWriteFollowsSchema(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	if err := srv.AddTable("p.d.follow", bqtest.Table{Schema: simpleSchema}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var patchErr error
	srv.SetWriteFaults(bqtest.WriteFaults{OnAppend: func(int) error {
		once.Do(func() {
			ctx := context.Background()
			c, err := bigquery.NewClient(ctx, "p", srv.RESTClientOptions()...)
			if err != nil {
				patchErr = err
				return
			}
			defer c.Close()
			grown := append(append(bigquery.Schema{}, simpleSchema...), &bigquery.FieldSchema{Name: "note", Type: bigquery.StringFieldType})
			_, patchErr = c.Dataset("d").Table("follow").Update(ctx, bigquery.TableMetadataToUpdate{Schema: grown}, "")
		})
		return nil
	}})
	rows := make([]any, 200)
	for i := range rows {
		r := bqwrite.Row{"id": int64(i), "name": fmt.Sprint("n", i)}
		if i >= 50 {
			r["note"] = fmt.Sprint("note", i)
		}
		rows[i] = r
	}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.follow", beam.Create(s, rows...), writeOpts(srv,
		bqwrite.WithCreateDisposition(bqwrite.CreateNever), bqwrite.WithMaxAppendBytes(40))...)
	passert.Empty(s, res.FailedRows)
	run(t, p)
	if patchErr != nil {
		t.Fatalf("patching the schema: %v", patchErr)
	}
	got, err := srv.TableRows("p.d.follow")
	if err != nil || len(got) != 200 {
		t.Fatalf("%d rows (%v), want 200", len(got), err)
	}
	for _, r := range got {
		id := r[0].(int64)
		var want bigquery.Value
		if id >= 50 {
			want = fmt.Sprint("note", id)
		}
		if len(r) != 3 || r[2] != want {
			t.Errorf("row %v: want note %v", r, want)
		}
	}
}
