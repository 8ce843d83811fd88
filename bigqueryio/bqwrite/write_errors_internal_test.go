package bqwrite

import (
	"context"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/internal/logtest"
)

// tryAppend is appendAll returning the first error instead of failing.
func (st *streamSteps) tryAppend(sp *fakeState, bs []streamBatch) ([]flushOp, error) {
	var ops []flushOp
	for _, b := range bs {
		err := st.app.ProcessElement(context.Background(), beam.EventTime(0), sp, &fakeTimers{}, st.key, b,
			func(_ string, op flushOp) { ops = append(ops, op) }, func(r FailedRow) { st.failed = append(st.failed, r) })
		if err != nil {
			return ops, err
		}
	}
	return ops, nil
}

// refuseID refuses, as the service refuses a row that breaks the table's
// schema, the rows of p.d.s whose id is in ids.
func refuseID(ids ...int64) func(string, []bigquery.Value) string {
	return func(table string, row []bigquery.Value) string {
		for _, id := range ids {
			if strings.HasSuffix(table, "/tables/s") && row[0] == id {
				return fmt.Sprintf("Field name: row %d refused by the test.", id)
			}
		}
		return ""
	}
}

// checkIDsOnce fails unless table p.d.s holds ids 0..n-1 but those of
// skip once each.
func checkIDsOnce(t *testing.T, srv *bqtest.Server, n int, skip ...int64) {
	t.Helper()
	rows, err := srv.TableRows("p.d.s")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, r := range rows {
		seen[r[0].(int64)]++
	}
	for _, s := range skip {
		if seen[s] != 0 {
			t.Errorf("refused id %d is in the table %d times", s, seen[s])
		}
		seen[s] = 1
	}
	dup, missing := 0, 0
	for i := range int64(n) {
		switch c := seen[i]; {
		case c == 0:
			missing++
		case c > 1:
			dup += c - 1
		}
	}
	if dup > 0 || missing > 0 || len(rows) != n-len(skip) {
		t.Errorf("p.d.s: %d rows, %d duplicates, %d missing of %d", len(rows), dup, missing, n-len(skip))
	}
}

// TestStreamRefusedRowRetried (issue 37 item 1): a batch with one refused
// row among many, appended by a bundle that then fails, is retried from
// the state the bundle started with, with the same batches, whichever the
// service judges first (the offset, or the rows). The failed attempt
// appended the batch's kept rows at the state's offset; the retry's full
// batch meets them (ALREADY_EXISTS, or row_errors and then ALREADY_EXISTS
// for the kept rows): the stream is left with them unflushed, and the
// retry appends the kept rows to a new stream. Every kept row is in the
// table once, the refused row in FailedRows once (the failed attempt's
// outputs are dropped, as a runner drops them), and the shard goes on:
// the next batches append and flush (no OUT_OF_RANGE).
func TestStreamRefusedRowRetried(t *testing.T) {
	for _, rowsFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("row errors first %v", rowsFirst), func(t *testing.T) {
			srv := newStreamServer(t)
			st := newStreamSteps(t, srv)
			const n, refused = 1300, 500
			bs := st.batches(newFakeState(), 0, n)
			k := -1 // the batch of the refused row
			at := 0
			for i, b := range bs {
				if at <= refused && refused < at+len(b.Rows) {
					k = i
				}
				at += len(b.Rows)
			}
			if k < 1 || k >= len(bs)-2 {
				t.Fatalf("the refused row is in batch %d of %d: want one in the middle", k, len(bs))
			}
			srv.SetWriteFaults(bqtest.WriteFaults{RefuseRow: refuseID(refused), RowErrorsFirst: rowsFirst})

			sp := newFakeState()
			committed := st.appendAll(sp, bs[:k])
			before := sp.copy()
			st.appendAll(sp, bs[k:k+2]) // the bundle fails after these: its ops and FailedRows are dropped
			if len(st.failed) != 1 {
				t.Fatalf("the failed attempt refused %d rows, want 1", len(st.failed))
			}
			st.failed = nil
			retry := st.appendAll(before, bs[k:k+2])
			later := st.appendAll(before, bs[k+2:]) // the shard goes on from the retry's state
			if got := st.flushAll(append(append(committed, retry...), later...)); got != n-1 {
				t.Errorf("results count %d rows, want %d", got, n-1)
			}
			checkIDsOnce(t, srv, n, refused)
			if len(st.failed) != 1 || st.failed[0].Row != `{"ID":500,"Name":"r"}` || st.failed[0].Column != "name" ||
				st.failed[0].Error != "Field name: row 500 refused by the test." || st.failed[0].Table != "p.d.s" {
				t.Errorf("the retry's FailedRows %+v, want row 500 once, as the element's JSON, naming column name", st.failed)
			}
			if ws := srv.WriteStats(); ws.StreamsCreated != 2 {
				t.Errorf("server %+v: want 2 streams (the first, left by the retry, and the retry's)", ws)
			}
		})
	}
}

// TestStreamAppendErrorsFail (issue 37 item 2): an append the service
// answers with an error that is no refusal of rows (PERMISSION_DENIED or
// NOT_FOUND of a table that is not new, INVALID_ARGUMENT without
// row_errors, a code the write does not know) fails the write, naming the
// table, the stream, the offset and the code first; nothing goes to
// FailedRows, and the rows of the appends before it are flushed once.
// (Before, the batch's rows went to FailedRows and the job went on.)
func TestStreamAppendErrorsFail(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition, codes.DataLoss} {
		t.Run(code.String(), func(t *testing.T) {
			srv := newStreamServer(t)
			if err := srv.AddTable("p.d.s", bqtest.Table{Schema: mustInfer(t), Created: time.Now().Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			st := newStreamSteps(t, srv)
			const n = 1000
			bs := st.batches(newFakeState(), 0, n)
			srv.SetWriteFaults(bqtest.WriteFaults{AppendErrorCode: code, AppendErrorMessage: "Refused by the test.", AppendErrorAfter: 1})
			ops, err := st.tryAppend(newFakeState(), bs)
			if err == nil {
				t.Fatalf("the write went on: %d FailedRows, %d ops", len(st.failed), len(ops))
			}
			want := "bqwrite.Write to p.d.s: stream projects/p/datasets/d/tables/s/streams/"
			wantCode := fmt.Sprintf(" at offset %d: %s: Refused by the test.", len(bs[0].Rows), codeName(code))
			if msg := err.Error(); !strings.HasPrefix(msg, want) || !strings.Contains(msg, wantCode) || status.Code(err) != code {
				t.Errorf("error %q (code %v): want it to begin %q and hold %q, wrapping the code", msg, status.Code(err), want, wantCode)
			}
			if len(st.failed) != 0 {
				t.Errorf("%d FailedRows, want none", len(st.failed))
			}
			if got := st.flushAll(ops); got != int64(len(bs[0].Rows)) {
				t.Errorf("flushed %d rows, want the first batch's %d", got, len(bs[0].Rows))
			}
		})
	}
}

// TestNewTableSettles (issue 37 item 2): NOT_FOUND and PERMISSION_DENIED
// about a table made a moment ago (the service answers so for a while
// after a table is made, and while a grant propagates) are retried until
// the table is DefaultTableSettle old, by the streaming append and stream
// creation and by the batch write's stream creation and appends: every row
// written once, none in FailedRows. The same answers for a table made an
// hour ago fail the write at once, naming the table and the code.
func TestNewTableSettles(t *testing.T) {
	for _, code := range []codes.Code{codes.NotFound, codes.PermissionDenied} {
		for _, old := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v old %v", code, old), func(t *testing.T) {
				srv := newStreamServer(t)
				created := time.Now()
				if old {
					created = created.Add(-time.Hour)
				}
				if err := srv.AddTable("p.d.s", bqtest.Table{Schema: mustInfer(t), Created: created}); err != nil {
					t.Fatal(err)
				}
				// Streaming: the first stream creation and the first two
				// appends refused.
				st := newStreamSteps(t, srv)
				const n = 1000
				bs := st.batches(newFakeState(), 0, n)
				refuse := func(call int) error {
					if call <= 2 {
						return status.Errorf(code, "Not yet: table p.d.s (call %d)", call)
					}
					return nil
				}
				srv.SetWriteFaults(bqtest.WriteFaults{CreateErrorCode: code, CreateErrorCalls: 1, OnAppend: refuse})
				ops, err := st.tryAppend(newFakeState(), bs)
				if old {
					if err == nil || !strings.HasPrefix(err.Error(), "bqwrite.Write to p.d.s: "+codeName(code)+": bqtest: injected CreateWriteStream failure") ||
						!strings.Contains(err.Error(), "the table was made over 2m0s ago") {
						t.Errorf("a table made an hour ago: error %v, want the write failed at once naming the code", err)
					}
					if len(st.failed) != 0 {
						t.Errorf("%d FailedRows, want none", len(st.failed))
					}
					return
				}
				if err != nil {
					t.Fatalf("a new table: %v", err)
				}
				if got := st.flushAll(ops); got != n || len(st.failed) != 0 {
					t.Errorf("flushed %d rows, %d FailedRows, want %d and none", got, len(st.failed), n)
				}
				checkIDsOnce(t, srv, n)

				// The batch write: its PENDING stream's creation and first
				// append refused.
				srv.SetWriteFaults(bqtest.WriteFaults{CreateErrorCode: code, CreateErrorCalls: 1, OnAppend: refuse})
				if err := srv.AddTable("p.d.b", bqtest.Table{Schema: mustInfer(t)}); err != nil {
					t.Fatal(err)
				}
				cfg := writeTestConfig(t, srv, "p.d.b")
				fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[onceRow]()}, TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fixedTable)}}
				fn.Setup()
				defer fn.Teardown()
				ctx := context.Background()
				var done []streamDone
				emit := func(_ string, sd streamDone) { done = append(done, sd) }
				var failed []FailedRow
				fail := func(r FailedRow) { failed = append(failed, r) }
				fn.StartBundle(ctx, emit, fail)
				for _, x := range onceRows(n) {
					if err := fn.ProcessElement(ctx, x, emit, fail); err != nil {
						t.Fatal(err)
					}
				}
				if err := fn.FinishBundle(ctx, emit, fail); err != nil {
					t.Fatal(err)
				}
				if len(done) != 1 || done[0].Err != "" || done[0].Rows != n || len(failed) != 0 {
					t.Errorf("batch write: reports %+v, %d FailedRows: want one stream of %d rows", done, len(failed), n)
				}
			})
		}
	}
}

// shapeRow has a flexible column name, a DATE, a TIMESTAMP, a NUMERIC, a
// REPEATED column and a RECORD, for TestFailedRowOneShape.
type shapeRow struct {
	ID    int64      `bigquery:"id"`
	Flex  string     `bigquery:"naïve-col"`
	Day   civil.Date `bigquery:"day"`
	At    time.Time  `bigquery:"at"`
	Price *big.Rat   `bigquery:"price"`
	Tags  []string   `bigquery:"tags"`
	Where shapeSub   `bigquery:"where"`
	Maybe bigquery.NullInt64
}

type shapeSub struct {
	City string `bigquery:"city"`
	Zip  int32  `bigquery:"zip"`
}

var shapeSchema = bigquery.Schema{
	{Name: "id", Type: bigquery.IntegerFieldType},
	{Name: "naïve-col", Type: bigquery.StringFieldType},
	{Name: "day", Type: bigquery.DateFieldType},
	{Name: "at", Type: bigquery.TimestampFieldType},
	{Name: "price", Type: bigquery.NumericFieldType},
	{Name: "tags", Type: bigquery.StringFieldType, Repeated: true},
	{Name: "where", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{
		{Name: "city", Type: bigquery.StringFieldType}, {Name: "zip", Type: bigquery.IntegerFieldType}}},
	{Name: "Maybe", Type: bigquery.IntegerFieldType},
}

func shapeRows(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = shapeRow{ID: int64(i), Flex: fmt.Sprintf("ü %d", i), Day: civil.Date{Year: 2026, Month: 12, Day: 1 + i%28},
			At: time.Date(2026, 12, 7, 8, 9, 10, 123456000, time.UTC).Add(time.Duration(i) * time.Second), Price: big.NewRat(int64(i)*3, 4),
			Tags: []string{"a", fmt.Sprint(i)}, Where: shapeSub{City: "Zürich", Zip: int32(8000 + i)}, Maybe: bigquery.NullInt64{Int64: int64(i), Valid: i%2 == 0}}
	}
	return out
}

// shapeRowsAsRows is shapeRows as bqwrite.Row values, as Read gives
// them (int64, civil.Date, time.Time in UTC, *big.Rat, []bigquery.Value, a
// RECORD as map[string]bigquery.Value).
func shapeRowsAsRows(n int) []any {
	out := make([]any, n)
	for i, x := range shapeRows(n) {
		r := x.(shapeRow)
		row := Row{"id": r.ID, "naïve-col": r.Flex, "day": r.Day, "at": r.At, "price": r.Price,
			"tags": []bigquery.Value{r.Tags[0], r.Tags[1]}, "where": map[string]bigquery.Value{"city": r.Where.City, "zip": int64(r.Where.Zip)}}
		if r.Maybe.Valid {
			row["Maybe"] = r.Maybe.Int64
		}
		out[i] = row
	}
	return out
}

// TestFailedRowOneShape (issue 37 item 3): the same row refused by the
// service is the same FailedRow from the batch write and the streaming
// write, for structs and for Rows: the element as encoding/json (a
// flexible column name, DATE, TIMESTAMP, NUMERIC, REPEATED, RECORD and a
// NullInt64 included), the column the service's message names (by its
// proto name col_<base64>, as a flexible column is sent, or by its path in
// a RECORD), and the service's message. (Before, the streaming write gave
// protojson of the encoded row: camel-cased proto names, col_<base64>
// keys, DATE as a day count, TIMESTAMP as a string of microseconds, and
// no column.)
func TestFailedRowOneShape(t *testing.T) {
	const n, bad1, bad2 = 40, 7, 30
	for _, c := range []struct {
		name string
		typ  reflect.Type
		rows []any
	}{
		{"struct", reflect.TypeFor[shapeRow](), shapeRows(n)},
		{"Row", typeOfRow, shapeRowsAsRows(n)},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newStreamServer(t)
			for _, tbl := range []string{"p.d.batch", "p.d.s"} {
				if err := srv.AddTable(tbl, bqtest.Table{Schema: shapeSchema}); err != nil {
					t.Fatal(err)
				}
			}
			flex := protoFieldName("naïve-col")
			srv.SetWriteFaults(bqtest.WriteFaults{RefuseRow: func(_ string, row []bigquery.Value) string {
				switch row[0] {
				case int64(bad1):
					return "Field " + flex + ": the test refuses the row."
				case int64(bad2):
					return "Required field where.city is wrong (the test)."
				}
				return ""
			}})
			ctx := context.Background()

			cfg := writeTestConfig(t, srv, "p.d.batch", WithSchema(shapeSchema))
			fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: c.typ}, TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fixedTable)}}
			fn.Setup()
			defer fn.Teardown()
			var batch []FailedRow
			fail := func(r FailedRow) { batch = append(batch, r) }
			emit := func(string, streamDone) {}
			fn.StartBundle(ctx, emit, fail)
			for _, x := range c.rows {
				if err := fn.ProcessElement(ctx, x, emit, fail); err != nil {
					t.Fatal(err)
				}
			}
			if err := fn.FinishBundle(ctx, emit, fail); err != nil {
				t.Fatal(err)
			}

			st := newStreamStepsOf(t, writeTestConfig(t, srv, "p.d.s", WithNumStreams(1), WithSchema(shapeSchema)), c.typ)
			st.flushAll(st.appendAll(newFakeState(), st.batchRows(newFakeState(), c.rows)))
			streaming := st.failed

			if len(batch) != 2 || len(streaming) != 2 {
				t.Fatalf("FailedRows: batch %+v, streaming %+v: want 2 each", batch, streaming)
			}
			for i, bad := range []int{bad1, bad2} {
				b, s := batch[i], streaming[i]
				if want := rowJSON(c.rows[bad]); b.Row != want {
					t.Errorf("batch FailedRow %+v: want the element's JSON %s", b, want)
				}
				t.Logf("streaming FailedRow %+v", s)
				b.Table = "p.d.s"
				if s != b {
					t.Errorf("row %d: streaming FailedRow\n%+v\nwant the batch write's\n%+v", bad, s, b)
				}
			}
			if batch[0].Column != "naïve-col" || batch[1].Column != "where.city" {
				t.Errorf("columns %q and %q, want naïve-col and where.city", batch[0].Column, batch[1].Column)
			}
			if rows, _ := srv.TableRows("p.d.s"); len(rows) != n-2 {
				t.Errorf("p.d.s holds %d rows, want %d", len(rows), n-2)
			}
		})
	}
}

// TestCreatedTableLogged (issue 37 item 14): a table the write makes
// (CreateIfNeeded) is logged at INFO with its spec: the columns, the
// partitioning, the clustering, the primary key, the labels; a table that
// exists is not.
func TestCreatedTableLogged(t *testing.T) {
	log := logtest.Capture(t)
	srv := newStreamServer(t)
	type row struct {
		ID  int64     `bigquery:"id"`
		At  time.Time `bigquery:"at"`
		Tag []string  `bigquery:"tag"`
	}
	cfg := writeTestConfig(t, srv, "p.d.made", WithTimePartitioning(TimePartitioning{Unit: PartitionByDay, Column: "at"}),
		WithClustering("id"), WithPrimaryKey("id"), WithTableLabels(map[string]string{"team": "x", "app": "y"}))
	for _, tbl := range []string{"made", "made"} { // the second time it exists
		fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[row]()}}
		fn.Setup()
		if _, err := fn.table(context.Background(), "projects/p/datasets/d/tables/"+tbl); err != nil {
			t.Fatal(err)
		}
		fn.Teardown()
	}
	want := "bqwrite.Write: created table p.d.made (CreateIfNeeded): columns (id INTEGER REQUIRED, at TIMESTAMP REQUIRED, tag STRING REPEATED), " +
		"time partitioning {Unit:DAY Column:at Expiration:0s}, clustering id, primary key (id), labels app=y,team=x"
	var made []string
	for _, m := range log.Messages() {
		if strings.Contains(m, "created table") {
			made = append(made, m)
		}
	}
	if len(made) != 1 || made[0] != want {
		t.Errorf("logged %q\nwant once %q", made, want)
	}
	if st := srv.WriteStats(); st.TablesCreated != 1 {
		t.Errorf("%d tables made, want 1", st.TablesCreated)
	}
}
