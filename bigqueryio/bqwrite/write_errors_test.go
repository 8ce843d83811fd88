package bqwrite_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	register.Function1x1(failedTableError)
}

func failedTableError(f bqwrite.FailedRow) string { return f.Table + " " + f.Row + ": " + f.Error }

// TestWriteNewTableSettles (issue 37 item 2): right after the write makes
// its table (CreateIfNeeded), the service answers NOT_FOUND, then
// PERMISSION_DENIED, to the first stream creations and appends: the write
// waits them out, in the bounded write and WithAtLeastOnce, and every row
// is in the table once, none in FailedRows. (Before, passOn took them for
// permanent and the write failed.)
func TestWriteNewTableSettles(t *testing.T) {
	for _, alo := range []bool{false, true} {
		t.Run(fmt.Sprintf("at least once %v", alo), func(t *testing.T) {
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			refuse := func(call int) error {
				switch {
				case call == 1:
					return status.Error(codes.NotFound, "Not found: Table p:d.new")
				case call == 2:
					return status.Error(codes.PermissionDenied, "Permission 'TABLES_UPDATE_DATA' denied on resource 'projects/p/datasets/d/tables/new'")
				}
				return nil
			}
			srv.SetWriteFaults(bqtest.WriteFaults{CreateErrorCode: codes.NotFound, CreateErrorCalls: 2, OnAppend: refuse})
			const n = 500
			opts := writeOpts(srv, bqwrite.WithMaxAppendBytes(4000))
			if alo {
				opts = append(opts, bqwrite.WithAtLeastOnce())
			}
			p, s := beam.NewPipelineWithRoot()
			res := bqwrite.Write(s, "p.d.new", beam.Create(s, anys(simpleRows(n))...), opts...)
			passert.Empty(s, res.FailedRows)
			run(t, p)
			checkOnce(t, srv, "p.d.new", n, nil)
			if st := srv.WriteStats(); st.TablesCreated != 1 || st.InjectedCreate == 0 && !alo {
				t.Errorf("server %+v: want the table made and stream creations refused", st)
			}
		})
	}
}

// TestWriteOldTableRefusalsFail (issue 37 item 2): the same answers about
// a table made long ago (PERMISSION_DENIED, NOT_FOUND), and an
// INVALID_ARGUMENT without row_errors, fail the write in the bounded
// write and WithAtLeastOnce, naming the table, the stream and the code
// first: the rows are either in the table or the job fails.
func TestWriteOldTableRefusalsFail(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.NotFound, codes.InvalidArgument} {
		for _, alo := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v at least once %v", code, alo), func(t *testing.T) {
				srv := newServer(t)
				srv.AddDataset("p", "d", "")
				if err := srv.AddTable("p.d.old", bqtest.Table{Schema: bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType},
					{Name: "name", Type: bigquery.StringFieldType}}, Created: time.Now().Add(-time.Hour)}); err != nil {
					t.Fatal(err)
				}
				srv.SetWriteFaults(bqtest.WriteFaults{AppendErrorCode: code, AppendErrorMessage: "Refused by the test."})
				opts := writeOpts(srv)
				if alo {
					opts = append(opts, bqwrite.WithAtLeastOnce())
				}
				p, s := beam.NewPipelineWithRoot()
				res := bqwrite.Write(s, "p.d.old", beam.Create(s, anys(simpleRows(50))...), opts...)
				passert.Empty(s, res.FailedRows)
				err := runFailing(p)
				want := "bqwrite.Write to p.d.old: stream projects/p/datasets/d/tables/old/"
				wantCode := ": " + strings.ToUpper(strings.Join(splitCamel(code.String()), "_")) + ": Refused by the test."
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), wantCode) {
					t.Fatalf("error %v: want %q ... %q", err, want, wantCode)
				}
				if rows, _ := srv.TableRows("p.d.old"); len(rows) != 0 {
					t.Errorf("%d rows visible", len(rows))
				}
			})
		}
	}
}

// splitCamel splits PermissionDenied into Permission, Denied.
func splitCamel(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] >= 'A' && s[i] <= 'Z' {
			out, start = append(out, s[start:i]), i
		}
	}
	return append(out, s[start:])
}

// TestWriteCDCNeedsSequenceNumbers (issue 37 item 9): changes without a
// sequence number are refused (FailedRows, naming the fix) unless the
// write is given WithUnorderedChanges, which applies them; the option
// without WithRowMutation is refused when the pipeline is built.
func TestWriteCDCNeedsSequenceNumbers(t *testing.T) {
	var changes []Change
	for i := range 5 {
		changes = append(changes, Change{ID: int64(i), Name: fmt.Sprintf("v%d", i)})
	}
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	p, s := beam.NewPipelineWithRoot()
	refused := bqwrite.Write(s, "p.d.noseq", beam.Create(s, anys(changes)...), writeOpts(srv, bqwrite.WithAtLeastOnce(),
		bqwrite.WithRowMutation(unorderedMutation), bqwrite.WithPrimaryKey("id"))...)
	var want []any
	for _, c := range changes {
		want = append(want, fmt.Sprintf(`p.d.noseq {"ID":%d,"Name":"%s","Seq":0,"Del":false}: WithRowMutation: the change has no sequence number (RowMutation.SequenceNumber), so a retried or multiplexed append could apply an older change of its key after a newer one: give each change one (bqwrite.SequenceNumber), or WithUnorderedChanges() to apply changes in the order they arrive`, c.ID, c.Name))
	}
	passert.Equals(s, beam.ParDo(s, failedTableError, refused.FailedRows), want...)
	applied := bqwrite.Write(s, "p.d.unordered", beam.Create(s, anys(changes)...), writeOpts(srv, bqwrite.WithAtLeastOnce(),
		bqwrite.WithRowMutation(unorderedMutation), bqwrite.WithUnorderedChanges(), bqwrite.WithPrimaryKey("id"))...)
	passert.Empty(s, applied.FailedRows)
	run(t, p)
	if rows, _ := srv.TableRows("p.d.noseq"); len(rows) != 0 {
		t.Errorf("p.d.noseq: %d rows applied, want none", len(rows))
	}
	checkCDC(t, srv, "p.d.unordered", []string{"0 v0 0", "1 v1 0", "2 v2 0", "3 v3 0", "4 v4 0"})

	_, s = beam.NewPipelineWithRoot()
	_, err := bqwrite.TryWrite(s, "p.d.t", beam.Create(s, Change{}), bqwrite.WithUnorderedChanges())
	if err == nil || err.Error() != "bqwrite.Write of bqwrite_test.Change: WithUnorderedChanges() applies to the changes of WithRowMutation, which is not given" {
		t.Errorf("WithUnorderedChanges alone: %v", err)
	}
}

// TestWriteCDCTableWithoutPrimaryKey (issue 37 item 9): a CDC write to a
// table it does not make (CreateNever) checks, when it meets the table,
// that the table has a primary key: without one the write fails naming
// the table, and nothing is appended; with one the changes are applied.
func TestWriteCDCTableWithoutPrimaryKey(t *testing.T) {
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "name", Type: bigquery.StringFieldType},
		{Name: "seq", Type: bigquery.IntegerFieldType}, {Name: "del", Type: bigquery.BooleanFieldType}}
	for _, key := range []bool{false, true} {
		t.Run(fmt.Sprintf("primary key %v", key), func(t *testing.T) {
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			tbl := bqtest.Table{Schema: schema}
			if key {
				tbl.PrimaryKey = []string{"id"}
			}
			if err := srv.AddTable("p.d.cdc", tbl); err != nil {
				t.Fatal(err)
			}
			p, s := beam.NewPipelineWithRoot()
			changes := []Change{changeOf(1), changeOf(2)}
			bqwrite.Write(s, "p.d.cdc", beam.Create(s, anys(changes)...), writeOpts(srv, bqwrite.WithAtLeastOnce(),
				bqwrite.WithRowMutation(changeMutation), bqwrite.WithCreateDisposition(bqwrite.CreateNever))...)
			err := runFailing(p)
			if key {
				if err != nil {
					t.Fatal(err)
				}
				if rows, _ := srv.TableRows("p.d.cdc"); len(rows) == 0 {
					t.Error("no change applied")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "bqwrite.Write to p.d.cdc: the table has no primary key") {
				t.Fatalf("error %v: want the write failed naming the table and its missing primary key", err)
			}
			if st := srv.WriteStats(); st.Appends != 0 {
				t.Errorf("server %+v: want nothing appended", st)
			}
		})
	}
}

// TestWriteStreamRefusalFails (issue 37 item 2): the streaming write
// (unbounded input, exactly once) whose third append is answered
// PERMISSION_DENIED, for a table made long ago, fails the job naming the
// table, the stream and the code; the rows are not sent to FailedRows.
// (Before, the batch went to FailedRows and the job succeeded with its
// rows missing from the table.)
func TestWriteStreamRefusalFails(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	if err := srv.AddTable("p.d.denied", bqtest.Table{Schema: bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType},
		{Name: "name", Type: bigquery.StringFieldType}}, Created: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	srv.SetWriteFaults(bqtest.WriteFaults{OnAppend: func(call int) error {
		if call == 3 {
			return status.Error(codes.PermissionDenied, "Permission 'TABLES_UPDATE_DATA' denied on resource 'projects/p/datasets/d/tables/denied'")
		}
		return nil
	}})
	const n = 60
	p, s := beam.NewPipelineWithRoot()
	start := time.Now().Add(time.Second)
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*50*time.Millisecond), 50*time.Millisecond)))
	bqwrite.Write(s, "p.d.denied", beam.ParDo(s, seqSimple, seq), writeOpts(srv, bqwrite.WithTriggeringFrequency(200*time.Millisecond))...)
	_, err := workertest.Run(t, p)
	if err == nil {
		rows, _ := srv.TableRows("p.d.denied")
		t.Fatalf("the job succeeded with %d of %d rows in the table", len(rows), n)
	}
	if msg := err.Error(); !strings.Contains(msg, "bqwrite.Write to p.d.denied: stream projects/p/datasets/d/tables/denied/streams/") ||
		!strings.Contains(msg, ": PERMISSION_DENIED: Permission 'TABLES_UPDATE_DATA' denied") {
		t.Errorf("error %.2000v: want the table, the stream and the code", err)
	}
}
