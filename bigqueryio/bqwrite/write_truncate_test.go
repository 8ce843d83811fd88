package bqwrite_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"google.golang.org/grpc/codes"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/workertest"
)

var simpleSchema = bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType, Required: true}, {Name: "name", Type: bigquery.StringFieldType, Required: true}}

// oldRows defines table as holding n old rows (ids from 1000) and a
// description.
func oldRows(t *testing.T, srv *bqtest.Server, table string, n int) [][]bigquery.Value {
	t.Helper()
	var rows [][]bigquery.Value
	for i := range n {
		rows = append(rows, []bigquery.Value{int64(1000 + i), "old"})
	}
	if err := srv.AddTable(table, bqtest.Table{Schema: simpleSchema, Rows: rows, Description: "kept", Clustering: &bigquery.Clustering{Fields: []string{"name"}}}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// onlyTables fails unless the server's tables are exactly want (resource
// names): no staging table is left behind.
func onlyTables(t *testing.T, srv *bqtest.Server, want ...string) {
	t.Helper()
	if got := srv.Tables(); !reflect.DeepEqual(got, want) {
		t.Errorf("tables %v, want %v", got, want)
	}
}

// TestWriteTruncate: WithWriteDisposition(WriteTruncate) replaces the
// rows of a table that had rows with exactly the write's (each once),
// keeping the table's metadata; through WithTableFunc, each table that
// gets rows is replaced or created; a write of no rows empties its table.
// No write stream ever writes to a destination (rows are staged, then
// copied in one job), and no staging table is left.
func TestWriteTruncate(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	oldRows(t, srv, "p.d.tr", 5)
	oldRows(t, srv, "p.d.dyn0", 3)
	oldRows(t, srv, "p.d.gone", 4)
	p, s := beam.NewPipelineWithRoot()
	trunc := bqwrite.WithWriteDisposition(bqwrite.WriteTruncate)
	col := beam.Create(s, anys(simpleRows(300))...)
	res := bqwrite.Write(s.Scope("one"), "p.d.tr", col, writeOpts(srv, trunc, bqwrite.WithMaxAppendBytes(2000))...)
	passert.Empty(s, res.FailedRows)
	passert.Equals(s, beam.ParDo(s, resultText, res.Results), "p.d.tr 300 rows")
	res = bqwrite.Write(s.Scope("dyn"), "", col, writeOpts(srv, trunc, bqwrite.WithTableFunc(simpleTable))...)
	passert.Empty(s, res.FailedRows)
	res = bqwrite.Write(s.Scope("empty"), "p.d.gone", beam.CreateList(s, []Simple{}), writeOpts(srv, trunc)...)
	passert.Equals(s, beam.ParDo(s, resultText, res.Results), "p.d.gone 0 rows")
	run(t, p)

	checkOnce(t, srv, "p.d.tr", 300, nil)
	for i, tbl := range []string{"p.d.dyn0", "p.d.dyn1", "p.d.dyn2"} {
		checkOnce(t, srv, tbl, 300, func(id int64) bool { return id%3 != int64(i) })
	}
	if got, err := srv.TableRows("p.d.gone"); err != nil || len(got) != 0 {
		t.Errorf("p.d.gone holds %d rows (%v), want none", len(got), err)
	}
	if md := metadata(t, srv, "tr"); md.Description != "kept" || md.Clustering == nil || len(md.Schema) != 2 {
		t.Errorf("p.d.tr's metadata: %q %+v %v, want it kept", md.Description, md.Clustering, md.Schema)
	}
	for _, tbl := range []string{"p.d.tr", "p.d.dyn0", "p.d.gone"} {
		if ws := srv.WriteStreams(tbl); len(ws) != 0 {
			t.Errorf("%s: write streams %v, want none on the destination", tbl, ws)
		}
	}
	if st := srv.WriteStats(); st.CopyJobs != 5 || st.StreamsCommitted == 0 {
		t.Errorf("server %+v: want 5 copy jobs and streams committed", st)
	}
	onlyTables(t, srv, "projects/p/datasets/d/tables/dyn0", "projects/p/datasets/d/tables/dyn1", "projects/p/datasets/d/tables/dyn2",
		"projects/p/datasets/d/tables/gone", "projects/p/datasets/d/tables/tr")
}

// TestWriteTruncateCopyFails: when the copy job fails, the write fails
// with the service's message naming the table and the job, the table
// keeps its old rows, and the staging table is deleted.
func TestWriteTruncateCopyFails(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	old := oldRows(t, srv, "p.d.tr", 5)
	srv.SetWriteFaults(bqtest.WriteFaults{CopyJobError: "Quota exceeded: your project exceeded quota for copies per table"})
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.tr", beam.Create(s, anys(simpleRows(50))...), writeOpts(srv, bqwrite.WithWriteDisposition(bqwrite.WriteTruncate))...)
	err := workertest.RunFailing(t, p)
	if err == nil {
		t.Fatal("the write succeeded")
	}
	for _, want := range []string{"bqwrite.Write to p.d.tr", "the copy job sdfio_truncate_", "the table left as it was", "Quota exceeded"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want %q in it", err, want)
		}
	}
	if got, err := srv.TableRows("p.d.tr"); err != nil || !reflect.DeepEqual(got, old) {
		t.Errorf("p.d.tr holds %v (%v), want its old rows", got, err)
	}
	onlyTables(t, srv, "projects/p/datasets/d/tables/tr")
}

// TestWriteTruncateAppendFails: when the appends fail (permanently), the
// write fails before any copy: the table keeps its old rows. The bundles
// pass the failure on to the commit step (instead of failing, which would
// let Prism run the commit step without them), which commits nothing and
// deletes the staging table: nothing is left. (Before, the failed bundle
// left the staging table, to expire a day later.)
func TestWriteTruncateAppendFails(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	old := oldRows(t, srv, "p.d.tr", 5)
	// The staging table reads as made an hour ago: a new table's
	// PERMISSION_DENIED is waited out (TestNewTableSettles).
	srv.SetWriteFaults(bqtest.WriteFaults{AppendErrorCode: codes.PermissionDenied, AppendErrorMessage: "Permission denied.", CreatedAgo: time.Hour})
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.tr", beam.Create(s, anys(simpleRows(50))...), writeOpts(srv, bqwrite.WithWriteDisposition(bqwrite.WriteTruncate))...)
	err := workertest.RunFailing(t, p)
	if err == nil || !strings.Contains(err.Error(), "Permission denied.") || !strings.Contains(err.Error(), "nothing was committed") {
		t.Fatalf("error %v: want the append's, from the commit step", err)
	}
	if got, err := srv.TableRows("p.d.tr"); err != nil || !reflect.DeepEqual(got, old) {
		t.Errorf("p.d.tr holds %v (%v), want its old rows", got, err)
	}
	if st := srv.WriteStats(); st.CopyJobs != 0 || st.Commits != 0 {
		t.Errorf("server %+v: want no commit and no copy", st)
	}
	onlyTables(t, srv, "projects/p/datasets/d/tables/tr")
}

// TestWriteTruncateConstruction: WriteTruncate is refused with
// WithAtLeastOnce and for a partition decorator.
func TestWriteTruncateConstruction(t *testing.T) {
	trunc := bqwrite.WithWriteDisposition(bqwrite.WriteTruncate)
	for _, tc := range []struct {
		tbl  string
		opts []bqwrite.WriteOption
		want string
	}{
		{"p.d.t", []bqwrite.WriteOption{trunc, bqwrite.WithAtLeastOnce()}, "WithWriteDisposition(2) cannot be given with WithAtLeastOnce"},
		{"p.d.t$20261203", []bqwrite.WriteOption{trunc}, `WithWriteDisposition(2) replaces a whole table, not the partition "p.d.t$20261203" names`},
		{"p.d.t", []bqwrite.WriteOption{bqwrite.WithWriteDisposition(7)}, "WithWriteDisposition(7): not a write disposition"},
	} {
		_, s := beam.NewPipelineWithRoot()
		_, err := bqwrite.TryWrite(s, tc.tbl, beam.Create(s, Simple{}), tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.tbl, err, tc.want)
		}
	}
}

// TestWriteTruncateRunTwice: a pipeline built once and run twice (as a
// template is) replaces the table each run: the second run, after the
// table got other rows, leaves exactly the write's rows again.
func TestWriteTruncateRunTwice(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.tr", beam.Create(s, anys(simpleRows(20))...), writeOpts(srv, bqwrite.WithWriteDisposition(bqwrite.WriteTruncate))...)
	run(t, p)
	checkOnce(t, srv, "p.d.tr", 20, nil)
	oldRows(t, srv, "p.d.tr", 5)
	run(t, p)
	checkOnce(t, srv, "p.d.tr", 20, nil)
	onlyTables(t, srv, "projects/p/datasets/d/tables/tr")
	if st := srv.WriteStats(); st.CopyJobs != 2 {
		t.Errorf("%d copy jobs, want 2", st.CopyJobs)
	}
}

// TestWriteTruncateKeepsPrimaryKey: WriteTruncate into a table with a
// primary key (which CDC writes need) replaces its rows and keeps the key.
// A copy job in WRITE_TRUNCATE gives the table the staging table's
// constraints; on the code before, the staging table had none, so the
// table lost its primary key (and every later CDC write failed).
func TestWriteTruncateKeepsPrimaryKey(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	var old [][]bigquery.Value
	for i := range 4 {
		old = append(old, []bigquery.Value{int64(1000 + i), "old"})
	}
	if err := srv.AddTable("p.d.keyed", bqtest.Table{Schema: simpleSchema, Rows: old, PrimaryKey: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.keyed", beam.Create(s, anys(simpleRows(40))...), writeOpts(srv, bqwrite.WithWriteDisposition(bqwrite.WriteTruncate))...)
	passert.Empty(s, res.FailedRows)
	run(t, p)
	checkOnce(t, srv, "p.d.keyed", 40, nil)
	md := metadata(t, srv, "keyed")
	if tc := md.TableConstraints; tc == nil || tc.PrimaryKey == nil || !reflect.DeepEqual(tc.PrimaryKey.Columns, []string{"id"}) {
		t.Errorf("p.d.keyed's constraints after WriteTruncate: %+v, want the primary key (id) kept", tc)
	}
	onlyTables(t, srv, "projects/p/datasets/d/tables/keyed")
}
