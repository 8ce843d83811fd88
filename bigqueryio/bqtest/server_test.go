package bqtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/civil"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/hamba/avro/v2"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

const table = "proj.ds.nums"

func newServer(t *testing.T, rows int, opts ...bqtest.Option) (*bqtest.Server, *bqstorage.BigQueryReadClient) {
	t.Helper()
	srv, err := bqtest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	schema := bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
	}
	var data [][]bigquery.Value
	for i := 0; i < rows; i++ {
		var name bigquery.Value
		if i%5 != 0 {
			name = "n" + string(rune('a'+i%26))
		}
		data = append(data, []bigquery.Value{int64(i), name, float64(i) / 2})
	}
	if err := srv.AddTable(table, bqtest.Table{Schema: schema, Rows: data}); err != nil {
		t.Fatal(err)
	}
	c, err := bqstorage.NewBigQueryReadClient(context.Background(), srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

func session(t *testing.T, c *bqstorage.BigQueryReadClient, format storagepb.DataFormat, streams int32, opts *storagepb.ReadSession_TableReadOptions) *storagepb.ReadSession {
	t.Helper()
	s, err := c.CreateReadSession(context.Background(), &storagepb.CreateReadSessionRequest{
		Parent:         "projects/billing",
		MaxStreamCount: streams,
		ReadSession: &storagepb.ReadSession{
			Table:       "projects/proj/datasets/ds/tables/nums",
			DataFormat:  format,
			ReadOptions: opts,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readIDs reads a stream from offset and returns the id column (the first).
func readIDs(t *testing.T, c *bqstorage.BigQueryReadClient, s *storagepb.ReadSession, stream string, offset int64) ([]int64, error) {
	t.Helper()
	rc, err := c.ReadRows(context.Background(), &storagepb.ReadRowsRequest{ReadStream: stream, Offset: offset})
	if err != nil {
		return nil, err
	}
	var ids []int64
	for {
		resp, err := rc.Recv()
		if errors.Is(err, io.EOF) {
			return ids, nil
		}
		if err != nil {
			return ids, err
		}
		p := resp.GetStats().GetProgress()
		if p.GetAtResponseStart() < 0 || p.GetAtResponseEnd() > 1 || p.GetAtResponseStart() >= p.GetAtResponseEnd() {
			t.Fatalf("progress %v..%v", p.GetAtResponseStart(), p.GetAtResponseEnd())
		}
		switch s.GetDataFormat() {
		case storagepb.DataFormat_AVRO:
			sch := avro.MustParse(s.GetAvroSchema().GetSchema())
			r := avro.NewReader(bytes.NewReader(resp.GetAvroRows().GetSerializedBinaryRows()), 1024)
			for i := int64(0); i < resp.GetRowCount(); i++ {
				rec := r.ReadNext(sch).(map[string]any)
				ids = append(ids, rec["id"].(int64))
			}
			if r.Error != nil {
				t.Fatal(r.Error)
			}
		case storagepb.DataFormat_ARROW:
			buf := append(append([]byte(nil), s.GetArrowSchema().GetSerializedSchema()...), resp.GetArrowRecordBatch().GetSerializedRecordBatch()...)
			ar, err := ipc.NewReader(bytes.NewReader(buf))
			if err != nil {
				t.Fatal(err)
			}
			n := int64(0)
			for ar.Next() {
				rec := ar.Record()
				col := rec.Column(0).(*array.Int64)
				for i := 0; i < col.Len(); i++ {
					ids = append(ids, col.Value(i))
				}
				n += rec.NumRows()
			}
			if ar.Err() != nil {
				t.Fatal(ar.Err())
			}
			if n != resp.GetRowCount() {
				t.Fatalf("batch has %d rows, row_count %d", n, resp.GetRowCount())
			}
			ar.Release()
		}
	}
}

func TestStreamsCoverTable(t *testing.T) {
	for _, format := range []storagepb.DataFormat{storagepb.DataFormat_AVRO, storagepb.DataFormat_ARROW} {
		t.Run(format.String(), func(t *testing.T) {
			srv, c := newServer(t, 1000, bqtest.WithBlockRows(10), bqtest.WithResponseRows(33))
			s := session(t, c, format, 7, nil)
			if len(s.GetStreams()) != 7 {
				t.Fatalf("%d streams, want 7", len(s.GetStreams()))
			}
			var all []int64
			for _, st := range s.GetStreams() {
				ids, err := readIDs(t, c, s, st.GetName(), 0)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, ids...)
			}
			for i, id := range all {
				if id != int64(i) {
					t.Fatalf("row %d has id %d", i, id)
				}
			}
			if len(all) != 1000 {
				t.Fatalf("%d rows", len(all))
			}
			if got := srv.Stats().RowsSent; got != 1000 {
				t.Fatalf("RowsSent %d", got)
			}
		})
	}
}

func TestOffsetAndFilter(t *testing.T) {
	_, c := newServer(t, 200, bqtest.WithBlockRows(10))
	s := session(t, c, storagepb.DataFormat_AVRO, 1, &storagepb.ReadSession_TableReadOptions{
		SelectedFields: []string{"score", "ID"},
		RowRestriction: "(id < 50 AND name IS NOT NULL) OR id IN (100, 101, 199) OR NOT (score <= 90)",
	})
	ids, err := readIDs(t, c, s, s.GetStreams()[0].GetName(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for i := int64(0); i < 200; i++ {
		if (i < 50 && i%5 != 0) || i == 100 || i == 101 || i == 199 || float64(i)/2 > 90 {
			want = append(want, i)
		}
	}
	if !equal(ids, want) {
		t.Fatalf("filtered ids %v\nwant %v", ids, want)
	}
	tail, err := readIDs(t, c, s, s.GetStreams()[0].GetName(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if !equal(tail, want[7:]) {
		t.Fatalf("from offset 7: %v", tail)
	}
	if _, err := readIDs(t, c, s, s.GetStreams()[0].GetName(), int64(len(want)+1)); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("offset past the end: %v", err)
	}
	for _, bad := range []string{"nope = 1", "id = 'x'", "id >", "(id = 1", "name < 3"} {
		_, err := c.CreateReadSession(context.Background(), &storagepb.CreateReadSessionRequest{
			Parent: "projects/billing",
			ReadSession: &storagepb.ReadSession{Table: "projects/proj/datasets/ds/tables/nums", DataFormat: storagepb.DataFormat_AVRO,
				ReadOptions: &storagepb.ReadSession_TableReadOptions{RowRestriction: bad}},
		})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("restriction %q: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSplitSemantics(t *testing.T) {
	srv, c := newServer(t, 100, bqtest.WithBlockRows(10), bqtest.WithResponseRows(7))
	s := session(t, c, storagepb.DataFormat_ARROW, 1, &storagepb.ReadSession_TableReadOptions{RowRestriction: "name IS NOT NULL"})
	orig := s.GetStreams()[0].GetName()
	all, _ := readIDs(t, c, s, orig, 0)
	resp, err := c.SplitReadStream(context.Background(), &storagepb.SplitReadStreamRequest{Name: orig, Fraction: 0.42})
	if err != nil {
		t.Fatal(err)
	}
	prim, err := readIDs(t, c, s, resp.GetPrimaryStream().GetName(), 0)
	if err != nil {
		t.Fatal(err)
	}
	rem, err := readIDs(t, c, s, resp.GetRemainderStream().GetName(), 0)
	if err != nil {
		t.Fatal(err)
	}
	j := len(prim)
	if j != 32 || !equal(prim, all[:j]) || !equal(rem, all[j:]) {
		t.Fatalf("split at 0.42 of 80 rows: primary %v remainder %v", prim, rem)
	}
	again, _ := readIDs(t, c, s, orig, 0)
	if !equal(again, all) {
		t.Fatal("original changed after a split")
	}
	// A stream of one block cannot be split.
	resp, err = c.SplitReadStream(context.Background(), &storagepb.SplitReadStreamRequest{Name: orig, Fraction: 0.01})
	if err != nil || resp.GetPrimaryStream() != nil || resp.GetRemainderStream() != nil {
		t.Fatalf("split at 0.01: %v %v", resp, err)
	}
	srv.SetFaults(bqtest.Faults{SplitRefuseShare: 1})
	resp, err = c.SplitReadStream(context.Background(), &storagepb.SplitReadStreamRequest{Name: orig, Fraction: 0.5})
	if err != nil || resp.GetPrimaryStream() != nil {
		t.Fatalf("refused split: %v %v", resp, err)
	}
	if st := srv.Stats(); st.SplitsAccepted != 1 || st.SplitsRefused != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFaults(t *testing.T) {
	srv, c := newServer(t, 100, bqtest.WithResponseRows(10))
	s := session(t, c, storagepb.DataFormat_AVRO, 1, nil)
	srv.SetFaults(bqtest.Faults{UnavailableAfterRows: 25})
	ids, err := readIDs(t, c, s, s.GetStreams()[0].GetName(), 0)
	if status.Code(err) != codes.Unavailable || len(ids) != 25 {
		t.Fatalf("%d rows then %v", len(ids), err)
	}
	srv.SetFaults(bqtest.Faults{SplitDelay: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.SplitReadStream(ctx, &storagepb.SplitReadStreamRequest{Name: s.GetStreams()[0].GetName(), Fraction: 0.5}); status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow split: %v", err)
	}
}

func TestErrors(t *testing.T) {
	srv, c := newServer(t, 10)
	if err := srv.AddTable("proj.ds.denied", bqtest.Table{Schema: bigquery.Schema{{Name: "x", Type: bigquery.IntegerFieldType}}, Denied: true}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]codes.Code{
		"projects/proj/datasets/ds/tables/missing": codes.NotFound,
		"projects/proj/datasets/ds/tables/denied":  codes.PermissionDenied,
	} {
		_, err := c.CreateReadSession(context.Background(), &storagepb.CreateReadSessionRequest{
			Parent: "projects/billing", ReadSession: &storagepb.ReadSession{Table: name, DataFormat: storagepb.DataFormat_AVRO}})
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	err := srv.AddTable("proj.ds.bad", bqtest.Table{Schema: bigquery.Schema{{Name: "x", Type: bigquery.IntegerFieldType}}, Rows: [][]bigquery.Value{{"no"}}})
	if err == nil {
		t.Fatal("a string in an INTEGER column was accepted")
	}
	if err := srv.AddTable("proj.ds.empty", bqtest.Table{Schema: bigquery.Schema{{Name: "x", Type: bigquery.IntegerFieldType}}}); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateReadSession(context.Background(), &storagepb.CreateReadSessionRequest{
		Parent: "projects/billing", ReadSession: &storagepb.ReadSession{Table: "projects/proj/datasets/ds/tables/empty", DataFormat: storagepb.DataFormat_AVRO}})
	if err != nil || len(s.GetStreams()) != 0 {
		t.Fatalf("empty table: %v streams, %v", len(s.GetStreams()), err)
	}
}

// TestAllTypes checks that every BigQuery type encodes in both formats and
// decodes back with generic Avro and Arrow readers.
func TestAllTypes(t *testing.T) {
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	schema := bigquery.Schema{
		{Name: "i", Type: bigquery.IntegerFieldType},
		{Name: "n", Type: bigquery.NumericFieldType},
		{Name: "bn", Type: bigquery.BigNumericFieldType},
		{Name: "d", Type: bigquery.DateFieldType},
		{Name: "tm", Type: bigquery.TimeFieldType},
		{Name: "dt", Type: bigquery.DateTimeFieldType},
		{Name: "ts", Type: bigquery.TimestampFieldType},
		{Name: "g", Type: bigquery.GeographyFieldType},
		{Name: "j", Type: bigquery.JSONFieldType},
		{Name: "b", Type: bigquery.BytesFieldType},
		{Name: "ok", Type: bigquery.BooleanFieldType},
		{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}, {Name: "tags", Type: bigquery.IntegerFieldType, Repeated: true}}},
		{Name: "rs", Type: bigquery.RecordFieldType, Repeated: true, Schema: bigquery.Schema{{Name: "x", Type: bigquery.FloatFieldType}}},
	}
	row := []bigquery.Value{int64(-3), big.NewRat(-12345, 1000), big.NewRat(1, 3), civil.Date{Year: 2024, Month: 2, Day: 29},
		civil.Time{Hour: 23, Minute: 59, Second: 58, Nanosecond: 123456000}, civil.DateTime{Date: civil.Date{Year: 1999, Month: 12, Day: 31}, Time: civil.Time{Hour: 1}},
		time.Date(2020, 5, 6, 7, 8, 9, 10000, time.UTC), "POINT(1 2)", `{"a":1}`, []byte{0, 1, 255}, true,
		[]bigquery.Value{"x", []bigquery.Value{int64(1), int64(2)}}, []bigquery.Value{[]bigquery.Value{1.5}, []bigquery.Value{-2.5}}}
	nulls := []bigquery.Value{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
	if err := srv.AddTable("p.d.types", bqtest.Table{Schema: schema, Rows: [][]bigquery.Value{row, nulls}}); err != nil {
		t.Fatal(err)
	}
	c, err := bqstorage.NewBigQueryReadClient(context.Background(), srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, format := range []storagepb.DataFormat{storagepb.DataFormat_AVRO, storagepb.DataFormat_ARROW} {
		s, err := c.CreateReadSession(context.Background(), &storagepb.CreateReadSessionRequest{
			Parent: "projects/p", ReadSession: &storagepb.ReadSession{Table: "projects/p/datasets/d/tables/types", DataFormat: format}})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := c.ReadRows(context.Background(), &storagepb.ReadRowsRequest{ReadStream: s.GetStreams()[0].GetName()})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rc.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetRowCount() != 2 {
			t.Fatalf("%v: %d rows", format, resp.GetRowCount())
		}
		if format == storagepb.DataFormat_AVRO {
			sch, err := avro.Parse(s.GetAvroSchema().GetSchema())
			if err != nil {
				t.Fatal(err)
			}
			r := avro.NewReader(bytes.NewReader(resp.GetAvroRows().GetSerializedBinaryRows()), 1024)
			rec := r.ReadNext(sch).(map[string]any)
			if n := rec["n"].(map[string]any)["bytes.decimal"].(*big.Rat); n.Cmp(big.NewRat(-12345, 1000)) != 0 {
				t.Errorf("numeric %v", n)
			}
			if ts := rec["ts"].(map[string]any)["long.timestamp-micros"].(time.Time); !ts.Equal(row[6].(time.Time)) {
				t.Errorf("timestamp %v", ts)
			}
			r.ReadNext(sch)
			if r.Error != nil {
				t.Fatal(r.Error)
			}
		} else {
			buf := append(append([]byte(nil), s.GetArrowSchema().GetSerializedSchema()...), resp.GetArrowRecordBatch().GetSerializedRecordBatch()...)
			ar, err := ipc.NewReader(bytes.NewReader(buf))
			if err != nil {
				t.Fatal(err)
			}
			if !ar.Next() {
				t.Fatal(ar.Err())
			}
			rec := ar.Record()
			if rec.NumRows() != 2 || rec.NumCols() != 13 || rec.Column(0).IsValid(1) {
				t.Fatalf("arrow batch %v", rec)
			}
			ar.Release()
		}
	}
}

// TestOfficialClientReader reads a table with the official client's own
// Storage API reader (bigquery.Client with EnableStorageReadClient), which
// gets the table's schema through REST first.
func TestOfficialClientReader(t *testing.T) {
	srv, _ := newServer(t, 3000, bqtest.WithBlockRows(100))
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "billing", srv.RESTClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.EnableStorageReadClient(ctx, srv.ClientOptions()...); err != nil {
		t.Fatal(err)
	}
	it := c.DatasetInProject("proj", "ds").Table("nums").Read(ctx)
	seen := map[int64]bool{}
	for {
		var row []bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[row[0].(int64)] = true
	}
	if len(seen) != 3000 || it.TotalRows != 3000 {
		t.Fatalf("%d distinct ids, TotalRows %d", len(seen), it.TotalRows)
	}
	if srv.Stats().Sessions != 1 {
		t.Fatalf("stats %+v: the client did not read through the Storage API", srv.Stats())
	}
}

func TestTableResource(t *testing.T) {
	for in, want := range map[string]string{
		"p.d.t":                          "projects/p/datasets/d/tables/t",
		"p:d.t":                          "projects/p/datasets/d/tables/t",
		"example.com:proj:ds.tb":         "projects/example.com:proj/datasets/ds/tables/tb",
		"example.com:proj.ds.tb":         "projects/example.com:proj/datasets/ds/tables/tb",
		"projects/p/datasets/d/tables/t": "projects/p/datasets/d/tables/t",
	} {
		if got, err := bqtest.TableResource(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "p.d", "p.d.t.x", "p:d", "example.com:proj", "example.com:p:q:d.t", "projects/p/datasets/d"} {
		if _, err := bqtest.TableResource(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// readRecords reads a stream of an Avro session from offset, each row as
// hamba/avro's generic map.
func readRecords(t *testing.T, c *bqstorage.BigQueryReadClient, s *storagepb.ReadSession, stream string, offset int64) []map[string]any {
	t.Helper()
	rc, err := c.ReadRows(context.Background(), &storagepb.ReadRowsRequest{ReadStream: stream, Offset: offset})
	if err != nil {
		t.Fatal(err)
	}
	sch := avro.MustParse(s.GetAvroSchema().GetSchema())
	var recs []map[string]any
	for {
		resp, err := rc.Recv()
		if errors.Is(err, io.EOF) {
			return recs
		}
		if err != nil {
			t.Fatal(err)
		}
		r := avro.NewReader(bytes.NewReader(resp.GetAvroRows().GetSerializedBinaryRows()), 1024)
		for i := int64(0); i < resp.GetRowCount(); i++ {
			recs = append(recs, r.ReadNext(sch).(map[string]any))
		}
		if r.Error != nil {
			t.Fatal(r.Error)
		}
	}
}

// TestResponseCache reads the same table from a server with
// WithResponseCache and one without, in sessions that share responses
// (the same streams again) and sessions that must not (other columns, other
// stream boundaries, an offset, a row restriction): every read gives the
// same rows, and the repeated ones come from the cache.
func TestResponseCache(t *testing.T) {
	cached, cc := newServer(t, 1000, bqtest.WithBlockRows(10), bqtest.WithResponseRows(33), bqtest.WithResponseCache())
	_, pc := newServer(t, 1000, bqtest.WithBlockRows(10), bqtest.WithResponseRows(33))
	type read struct {
		streams int32
		opts    *storagepb.ReadSession_TableReadOptions
		offset  int64
	}
	reads := []read{
		{7, nil, 0},
		{7, nil, 0}, // the same responses again: from the cache
		{3, nil, 0},
		{7, &storagepb.ReadSession_TableReadOptions{SelectedFields: []string{"score"}}, 0},
		{7, &storagepb.ReadSession_TableReadOptions{SelectedFields: []string{"name", "id"}}, 0},
		{7, &storagepb.ReadSession_TableReadOptions{SelectedFields: []string{"id", "name"}}, 0},
		{7, nil, 5},
		{7, &storagepb.ReadSession_TableReadOptions{RowRestriction: "id > 500 OR name IS NULL"}, 0},
	}
	for i, r := range reads {
		cs := session(t, cc, storagepb.DataFormat_AVRO, r.streams, r.opts)
		ps := session(t, pc, storagepb.DataFormat_AVRO, r.streams, r.opts)
		before := cached.Stats().CachedResponses
		n := 0
		for k, st := range cs.GetStreams() {
			got := readRecords(t, cc, cs, st.GetName(), r.offset)
			want := readRecords(t, pc, ps, ps.GetStreams()[k].GetName(), r.offset)
			if len(got) != len(want) {
				t.Fatalf("read %d, stream %d: %d rows cached, %d not", i, k, len(got), len(want))
			}
			for j := range got {
				if fmt.Sprint(got[j]) != fmt.Sprint(want[j]) {
					t.Fatalf("read %d, stream %d, row %d: cached %v, not cached %v", i, k, j, got[j], want[j])
				}
			}
			n += len(got)
		}
		if n == 0 {
			t.Fatalf("read %d gave no rows", i)
		}
		hits := cached.Stats().CachedResponses - before
		switch i {
		case 1, 5: // read 0 again; read 4's columns (a session's columns are in table order)
			if hits == 0 {
				t.Errorf("read %d was not served from the cache", i)
			}
		case 2: // 3 streams: the first response of stream 0 is read 0's
		default:
			if hits != 0 {
				t.Errorf("read %d: %d responses from the cache, which holds none of its responses", i, hits)
			}
		}
	}
}
