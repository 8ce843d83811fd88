package bigqueryio

import (
	"bytes"
	"context"
	"io"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/googleapis/gax-go/v2"

	"github.com/sdfio/sdfio/sdf"
)

// arrowStream writes batches of s with arrow/ipc's writer and returns the
// schema message (the session's serialized_schema) and each batch's
// message (a response's serialized_record_batch).
func arrowStream(t *testing.T, s *arrow.Schema, batches ...arrow.Record) (header []byte, payloads [][]byte) {
	t.Helper()
	// The schema message: a stream of no batches, less its 8 bytes of
	// end-of-stream marker.
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	header = bytes.Clone(buf.Bytes()[:buf.Len()-8])
	buf.Reset()
	w = ipc.NewWriter(&buf, ipc.WithSchema(s))
	at := len(header)
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes()[:len(header)], header) {
			t.Fatal("the writer's schema message differs")
		}
		payloads = append(payloads, bytes.Clone(buf.Bytes()[at:]))
		at = buf.Len()
	}
	return header, payloads
}

// evolvingSession is a session whose Arrow schema has, beside an int64
// column, columns of types the Storage Read API did not send when the
// package's own reader was written (int32, an interval, a timestamp in
// nanoseconds): two batches, the first with those columns all NULL, the
// second with values in them.
func evolvingSession(t *testing.T) (sessionInfo, [][]byte) {
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "small", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "span", Type: arrow.FixedWidthTypes.MonthDayNanoInterval, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	batch := func(withValues bool) arrow.Record {
		for i := range 3 {
			b.Field(0).(*array.Int64Builder).Append(int64(i))
			if withValues {
				b.Field(1).(*array.Int32Builder).Append(int32(i))
				b.Field(2).(*array.MonthDayNanoIntervalBuilder).Append(arrow.MonthDayNanoInterval{Months: 1, Days: int32(i)})
				b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(i))
			} else {
				for c := 1; c < 4; c++ {
					b.Field(c).AppendNull()
				}
			}
		}
		return b.NewRecord()
	}
	nulls, vals := batch(false), batch(true)
	defer nulls.Release()
	defer vals.Release()
	header, payloads := arrowStream(t, s, nulls, vals)
	return sessionInfo{Table: "projects/p/datasets/d/tables/t", Session: "sessions/evolving", Format: int32(storagepb.DataFormat_ARROW), Arrow: header}, payloads
}

// TestArrowEvolvingTypes: a session with columns of Arrow types the
// package's own reader did not list (int32, month_day_nano_interval,
// timestamp[ns]) is read: its schema gives those columns their Arrow
// type's name as type, their NULLs read as NULL (rows and structs), a
// struct without fields for them reads the other columns, and only a value
// of such a column fails, naming the column and the type, as the official
// client's convertArrowValue does; a struct field for one fails when the
// read's plan is made. The own reader refused the whole session
// ("an integer of 32 bits").
func TestArrowEvolvingTypes(t *testing.T) {
	info, payloads := evolvingSession(t)
	schema, rows, err := info.decoder()
	if err != nil {
		t.Fatalf("the session: %v", err)
	}
	for i, want := range []bigquery.FieldType{bigquery.IntegerFieldType, "int32", "month_day_nano_interval", "timestamp[ns, tz=UTC]"} {
		if schema[i].Type != want {
			t.Errorf("column %s: type %q, want %q", schema[i].Name, schema[i].Type, want)
		}
	}
	var got [][]bigquery.Value
	if err := rows.decode(payloads[0], 3, func(r []bigquery.Value) error {
		got = append(got, append([]bigquery.Value(nil), r...))
		return nil
	}); err != nil {
		t.Fatalf("a batch whose new-typed columns are NULL: %v", err)
	}
	for i, r := range got {
		if !reflect.DeepEqual(r, []bigquery.Value{int64(i), nil, nil, nil}) {
			t.Errorf("row %d: %v", i, r)
		}
	}
	err = rows.decode(payloads[1], 3, func([]bigquery.Value) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "column small") || !strings.Contains(err.Error(), "Arrow type int32") {
		t.Errorf("a value of the int32 column: %v, want an error naming column small and type int32", err)
	}

	type idOnly struct {
		ID int64 `bigquery:"id"`
	}
	sd, err := newStructDecoder(reflect.TypeOf(idOnly{}), schema, info.Format, info.Arrow, fieldRules{IgnoreUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range payloads {
		var b batch
		if err := sd.decodeBatch(p, 3, &b); err != nil || b.len != 3 {
			t.Fatalf("batch %d into a struct of the id only: %d rows, %v", k, b.len, err)
		}
		for i := range 3 {
			if got := b.at(i).(idOnly).ID; got != int64(i) {
				t.Errorf("batch %d row %d: id %d", k, i, got)
			}
		}
	}
	type withSmall struct {
		ID    int64 `bigquery:"id"`
		Small int32 `bigquery:"small"`
	}
	_, err = newStructDecoder(reflect.TypeOf(withSmall{}), schema, info.Format, info.Arrow, fieldRules{IgnoreUnknown: true})
	if err == nil || !strings.Contains(err.Error(), "column small of type int32") {
		t.Errorf("a struct field for the int32 column: %v, want an error naming column small and type int32", err)
	}
}

// fakeRows answers ReadRows with the given responses from the request's
// offset on (an offset between two responses is not asked for here).
type fakeRows struct{ resps []*storagepb.ReadRowsResponse }

func (f fakeRows) ReadRows(_ context.Context, req *storagepb.ReadRowsRequest, _ ...gax.CallOption) (storagepb.BigQueryRead_ReadRowsClient, error) {
	var off int64
	for i, r := range f.resps {
		if off >= req.GetOffset() {
			return &fakeRowsStream{resps: f.resps[i:]}, nil
		}
		off += r.GetRowCount()
	}
	return &fakeRowsStream{}, nil
}

type fakeRowsStream struct {
	storagepb.BigQueryRead_ReadRowsClient
	resps []*storagepb.ReadRowsResponse
}

func (s *fakeRowsStream) Recv() (*storagepb.ReadRowsResponse, error) {
	if len(s.resps) == 0 {
		return nil, io.EOF
	}
	r := s.resps[0]
	s.resps = s.resps[1:]
	return r, nil
}

// TestArrowPanicNamesStream: a response whose bytes pass the framing
// checks but make arrow/ipc panic (one byte of its metadata damaged; the
// test finds such a byte) fails the read with an error, not a panic, that
// names the stream and the offset of the response's first row, after the
// rows of the responses before it were emitted.
func TestArrowPanicNamesStream(t *testing.T) {
	info, payloads := evolvingSession(t)
	schema, rows, err := info.decoder()
	if err != nil {
		t.Fatal(err)
	}
	good := payloads[0]
	var bad []byte
	for i := 8; i < len(good) && bad == nil; i++ {
		for _, v := range []byte{0x00, 0x7f, 0x80, 0xff} {
			p := append([]byte(nil), good...)
			p[i] = v
			if checkArrowFraming(p) != nil {
				continue
			}
			err := rows.decode(p, 3, func([]bigquery.Value) error { return nil })
			if err != nil && strings.Contains(err.Error(), "panic") || err != nil && strings.Contains(err.Error(), "unknown error while reading") {
				bad = p
				t.Logf("byte %d set to %#x: %v", i, v, err)
				break
			}
		}
	}
	if bad == nil {
		t.Fatal("no damaged byte of the payload makes arrow/ipc panic")
	}
	resp := func(p []byte) *storagepb.ReadRowsResponse {
		return &storagepb.ReadRowsResponse{RowCount: 3, Rows: &storagepb.ReadRowsResponse_ArrowRecordBatch{
			ArrowRecordBatch: &storagepb.ArrowRecordBatch{SerializedRecordBatch: p}}}
	}
	const stream = "projects/p/locations/l/sessions/evolving/streams/s7"
	rt := NewStreamTracker(StreamRestriction{Stream: stream, End: sdf.Unbounded}, nil, 0)
	dec := valuesDecoder{rows: rows, conv: func(v []bigquery.Value) (any, error) { return rowOf(schema, v), nil }}
	emitted := 0
	var st readStats
	err = readStream(context.Background(), fakeRows{[]*storagepb.ReadRowsResponse{resp(good), resp(good), resp(bad)}},
		readConfig{}, info, rt, dec, func(any) error { emitted++; return nil }, &st)
	if err == nil || !strings.Contains(err.Error(), "stream "+stream+", offset 6") {
		t.Fatalf("%v, want an error naming stream %s and offset 6", err, stream)
	}
	if emitted != 6 {
		t.Errorf("%d rows emitted before the damaged response, want 6", emitted)
	}
	t.Log(err)
}
