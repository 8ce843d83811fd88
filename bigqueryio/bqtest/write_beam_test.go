package bqtest_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beambq "github.com/apache/beam/sdks/v2/go/pkg/beam/io/bigqueryio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
)

// beamRow is an element of Beam Go's bigqueryio.Write.
type beamRow struct {
	Name  string `bigquery:"name"`
	Value int64  `bigquery:"value"`
}

func init() {
	beam.RegisterType(reflect.TypeOf((*beamRow)(nil)).Elem())
}

// TestBeamGoWrite runs Beam Go's own bigqueryio.Write (the legacy
// streaming insert, tabledata.insertAll) against the server, creating the
// table as CreateIfNeeded does, and reads the rows back.
func TestBeamGoWrite(t *testing.T) {
	e := newWriteEnv(t)
	e.table(t, "other", simpleSchema) // the dataset exists
	restore, err := e.srv.RouteGoogleAPIs()
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	p, s := beam.NewPipelineWithRoot()
	var elems []any
	for i := 0; i < 12000; i++ {
		elems = append(elems, beamRow{Name: "b", Value: int64(i)})
	}
	beambq.Write(s, "proj", "proj:ds.beam", beam.Create(s, elems...))
	if _, err := direct.Execute(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	restore()
	rows, err := e.srv.TableRows("proj.ds.beam")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, r := range rows {
		seen[r[1].(int64)]++
	}
	if len(rows) != 12000 || len(seen) != 12000 {
		t.Fatalf("%d rows, %d distinct", len(rows), len(seen))
	}
	if st := e.srv.WriteStats(); st.TablesCreated != 1 || st.InsertAllRequests != 2 {
		t.Fatalf("stats %+v: want the table made once and Beam's 10,000-row requests", st)
	}
}
