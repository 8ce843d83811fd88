package bqtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"cloud.google.com/go/bigquery/storage/managedwriter/adapt"
	vdata "cloud.google.com/go/bigquery/storage/managedwriter/testdata"
	"cloud.google.com/go/civil"
	"github.com/googleapis/gax-go/v2"
	"github.com/googleapis/gax-go/v2/apierror"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// writeEnv is a server with the clients a writer uses: managedwriter for
// the Write API, and the official BigQuery client (REST and the Storage
// Read API) to read back.
type writeEnv struct {
	srv *bqtest.Server
	mw  *managedwriter.Client
	bq  *bigquery.Client
	raw *bqstorage.BigQueryWriteClient
	ctx context.Context
}

func newWriteEnv(t *testing.T, opts ...bqtest.Option) *writeEnv {
	t.Helper()
	srv, err := bqtest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	mw, err := managedwriter.NewClient(ctx, "proj", srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mw.Close() })
	bq, err := bigquery.NewClient(ctx, "proj", srv.RESTClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bq.Close() })
	if err := bq.EnableStorageReadClient(ctx, srv.ClientOptions()...); err != nil {
		t.Fatal(err)
	}
	raw, err := bqstorage.NewBigQueryWriteClient(ctx, srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return &writeEnv{srv: srv, mw: mw, bq: bq, raw: raw, ctx: ctx}
}

// stream opens a managed stream of type typ on the table res with the
// writer schema dp.
func (e *writeEnv) stream(t *testing.T, res string, typ managedwriter.StreamType, dp *descriptorpb.DescriptorProto, opts ...managedwriter.WriterOption) *managedwriter.ManagedStream {
	t.Helper()
	opts = append([]managedwriter.WriterOption{managedwriter.WithDestinationTable(res), managedwriter.WithType(typ), managedwriter.WithSchemaDescriptor(dp)}, opts...)
	ms, err := e.mw.NewManagedStream(e.ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	return ms
}

// table defines an empty table proj.ds.<name> and returns its resource
// name.
func (e *writeEnv) table(t *testing.T, name string, schema bigquery.Schema) string {
	t.Helper()
	if err := e.srv.AddTable("proj.ds."+name, bqtest.Table{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	return "projects/proj/datasets/ds/tables/" + name
}

// read reads a table back with the official client over the Storage Read
// API.
func (e *writeEnv) read(t *testing.T, name string) [][]bigquery.Value {
	t.Helper()
	it := e.bq.DatasetInProject("proj", "ds").Table(name).Read(e.ctx)
	var rows [][]bigquery.Value
	for {
		var row []bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return rows
		}
		if err != nil {
			t.Fatalf("reading %s back: %v", name, err)
		}
		rows = append(rows, row)
	}
}

// schemaDescriptor is the writer schema a generic writer derives from a
// table schema: adapt's proto2 message, normalized.
func schemaDescriptor(t *testing.T, schema bigquery.Schema) (protoreflect.MessageDescriptor, *descriptorpb.DescriptorProto) {
	t.Helper()
	ts, err := adapt.BQSchemaToStorageTableSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	d, err := adapt.StorageSchemaToProto2Descriptor(ts, "root")
	if err != nil {
		t.Fatal(err)
	}
	md := d.(protoreflect.MessageDescriptor)
	dp, err := adapt.NormalizeDescriptor(md)
	if err != nil {
		t.Fatal(err)
	}
	return md, dp
}

// message builds a message type of the given fields (proto2), as a writer
// with its own message types would.
func message(t *testing.T, name string, fields ...*descriptorpb.FieldDescriptorProto) (protoreflect.MessageDescriptor, *descriptorpb.DescriptorProto) {
	t.Helper()
	return fileMessage(t, &descriptorpb.FileDescriptorProto{
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String(name), Field: fields}},
	})
}

// fileMessage builds the proto2 file f (named for its first message, in
// package test, importing the well-known types) and returns its first
// message and that message's normalized descriptor.
func fileMessage(t *testing.T, f *descriptorpb.FileDescriptorProto) (protoreflect.MessageDescriptor, *descriptorpb.DescriptorProto) {
	t.Helper()
	f.Name = proto.String(f.GetMessageType()[0].GetName() + ".proto")
	f.Package = proto.String("test")
	f.Syntax = proto.String("proto2")
	f.Dependency = []string{"google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"}
	fd, err := protodesc.NewFile(f, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	md := fd.Messages().Get(0)
	dp, err := adapt.NormalizeDescriptor(md)
	if err != nil {
		t.Fatal(err)
	}
	return md, dp
}

func field(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto {
	return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ.Enum(),
		Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}
}

// encode serializes a message of md with the fields set.
func encode(t *testing.T, md protoreflect.MessageDescriptor, set map[string]any) []byte {
	t.Helper()
	m := dynamicpb.NewMessage(md)
	for name, v := range set {
		fd := md.Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			t.Fatalf("%s has no field %s", md.FullName(), name)
		}
		m.Set(fd, protoValue(t, m, fd, v))
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func protoValue(t *testing.T, m protoreflect.Message, fd protoreflect.FieldDescriptor, v any) protoreflect.Value {
	if fd.IsList() {
		l := m.NewField(fd).List()
		for _, it := range v.([]any) {
			l.Append(scalarValue(t, l.NewElement, fd, it))
		}
		return protoreflect.ValueOfList(l)
	}
	return scalarValue(t, func() protoreflect.Value { return m.NewField(fd) }, fd, v)
}

func scalarValue(t *testing.T, newField func() protoreflect.Value, fd protoreflect.FieldDescriptor, v any) protoreflect.Value {
	if sub, ok := v.(map[string]any); ok {
		sm := newField().Message()
		for name, sv := range sub {
			sfd := sm.Descriptor().Fields().ByName(protoreflect.Name(name))
			if sfd == nil {
				t.Fatalf("%s has no field %s", sm.Descriptor().FullName(), name)
			}
			sm.Set(sfd, protoValue(t, sm, sfd, sv))
		}
		return protoreflect.ValueOfMessage(sm)
	}
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(v.(int)))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		switch x := v.(type) {
		case int:
			return protoreflect.ValueOfInt64(int64(x))
		case int64:
			return protoreflect.ValueOfInt64(x)
		}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(v.(int)))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(v.(int)))
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(v.(int)))
	}
	return protoreflect.ValueOf(v)
}

// packTime and packDateTime are CivilTimeEncoder's encodings (checked
// against its published vectors in TestCivilEncoders).
func packTime(t civil.Time) int64 {
	return (int64(t.Hour)<<12|int64(t.Minute)<<6|int64(t.Second))<<20 | int64(t.Nanosecond/1000)
}

func packDateTime(dt civil.DateTime) int64 {
	d := dt.Date
	return (int64(d.Year)<<26|int64(d.Month)<<22|int64(d.Day)<<17)<<20 | packTime(dt.Time)
}

// decimalLE is BigDecimalByteStringEncoder's encoding: r times 10^scale as
// a little-endian two's-complement integer, in the fewest bytes.
func decimalLE(r *big.Rat, scale int) []byte {
	n := new(big.Int).Mul(r.Num(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	n.Quo(n, r.Denom())
	l := len(n.Bytes()) + 1
	if n.Sign() < 0 {
		n.Add(n, new(big.Int).Lsh(big.NewInt(1), uint(8*l)))
	}
	be := n.FillBytes(make([]byte, l))
	for len(be) > 1 && ((be[0] == 0 && be[1]&0x80 == 0) || (be[0] == 0xff && be[1]&0x80 != 0)) {
		be = be[1:]
	}
	le := make([]byte, len(be))
	for i, b := range be {
		le[len(be)-1-i] = b
	}
	return le
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

func TestCivilEncoders(t *testing.T) {
	// The vectors of the Java client's CivilTimeEncoderTest.
	for _, c := range []struct {
		got, want int64
	}{
		{packDateTime(civil.DateTime{Date: civil.Date{Year: 1, Month: 1, Day: 1}}), 0x442000000000},
		{packDateTime(civil.DateTime{Date: civil.Date{Year: 1, Month: 2, Day: 3}, Time: civil.Time{Minute: 1, Second: 2, Nanosecond: 3000000}}), 0x486004200BB8},
		{packTime(civil.Time{Hour: 13, Minute: 14, Second: 15, Nanosecond: 16000000}), 0xD38F03E80},
		{packTime(civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999000000}), 0x17EFBF3E58},
	} {
		if c.got != c.want {
			t.Errorf("got %#x, want %#x", c.got, c.want)
		}
	}
	if b := decimalLE(big.NewRat(-1, 1), 0); !bytes.Equal(b, []byte{0xff}) {
		t.Errorf("-1: %x", b)
	}
	if b := decimalLE(big.NewRat(128, 1), 0); !bytes.Equal(b, []byte{0x80, 0}) {
		t.Errorf("128: %x", b)
	}
}

// equalValue compares a written value with one read back: decimals by
// value, times by instant, an empty repeated column as NULL.
func equalValue(a, b bigquery.Value) bool {
	switch x := a.(type) {
	case *big.Rat:
		y, ok := b.(*big.Rat)
		return ok && x.Cmp(y) == 0
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case []bigquery.Value:
		y, _ := b.([]bigquery.Value)
		if b != nil && y == nil {
			return false
		}
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case nil:
		if y, ok := b.([]bigquery.Value); ok {
			return len(y) == 0
		}
		return b == nil
	}
	return a == b
}

func equalRows(t *testing.T, what string, got, want [][]bigquery.Value) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d:\n%v", what, len(got), len(want), got)
	}
	for i := range want {
		if !equalValue(want[i], got[i]) {
			t.Errorf("%s row %d:\n got %v\nwant %v", what, i, got[i], want[i])
		}
	}
}

var allTypes = bigquery.Schema{
	{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
	{Name: "f", Type: bigquery.FloatFieldType},
	{Name: "ok", Type: bigquery.BooleanFieldType},
	{Name: "s", Type: bigquery.StringFieldType},
	{Name: "by", Type: bigquery.BytesFieldType},
	{Name: "n", Type: bigquery.NumericFieldType},
	{Name: "bn", Type: bigquery.BigNumericFieldType},
	{Name: "d", Type: bigquery.DateFieldType},
	{Name: "tm", Type: bigquery.TimeFieldType},
	{Name: "dt", Type: bigquery.DateTimeFieldType},
	{Name: "ts", Type: bigquery.TimestampFieldType},
	{Name: "g", Type: bigquery.GeographyFieldType},
	{Name: "j", Type: bigquery.JSONFieldType},
	{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{
		{Name: "a", Type: bigquery.StringFieldType},
		{Name: "tags", Type: bigquery.IntegerFieldType, Repeated: true},
		{Name: "inner", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "z", Type: bigquery.DateFieldType}}},
	}},
	{Name: "rs", Type: bigquery.RecordFieldType, Repeated: true, Schema: bigquery.Schema{{Name: "x", Type: bigquery.FloatFieldType}}},
	{Name: "strs", Type: bigquery.StringFieldType, Repeated: true},
	{Name: "nums", Type: bigquery.NumericFieldType, Repeated: true},
}

// TestWriteAllTypes writes every column type with managedwriter through a
// PENDING stream (the descriptor adapt derives from the table schema, as a
// generic writer does) and reads the table back with the official client:
// NULLs, repeated and nested columns, NUMERIC and BIGNUMERIC extremes,
// times at year 1 and 9999.
func TestWriteAllTypes(t *testing.T) {
	e := newWriteEnv(t)
	res := e.table(t, "types", allTypes)
	md, dp := schemaDescriptor(t, allTypes)

	maxDT := civil.DateTime{Date: civil.Date{Year: 9999, Month: 12, Day: 31}, Time: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000}}
	minDT := civil.DateTime{Date: civil.Date{Year: 1, Month: 1, Day: 1}}
	maxTS := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	minTS := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	numMax, numMin := rat("99999999999999999999999999999.999999999"), rat("-99999999999999999999999999999.999999999")
	bnMax := rat("578960446186580977117854925043439539266.34992332820282019728792003956564819967")
	bnMin := rat("-578960446186580977117854925043439539266.34992332820282019728792003956564819968")
	someDT := civil.DateTime{Date: civil.Date{Year: 2024, Month: 2, Day: 29}, Time: civil.Time{Hour: 12, Minute: 34, Second: 56, Nanosecond: 789012000}}
	someTS := time.Date(2020, 5, 6, 7, 8, 9, 10000, time.UTC)
	days := func(d civil.Date) int { return d.DaysSince(civil.Date{Year: 1970, Month: 1, Day: 1}) }

	type row struct {
		set  map[string]any
		want []bigquery.Value
	}
	rows := []row{
		{map[string]any{"id": 1, "f": 1.7976931348623157e308, "ok": true, "s": "high ✓", "by": []byte{0, 255},
			"n": decimalLE(numMax, 9), "bn": decimalLE(bnMax, 38), "d": days(maxDT.Date), "tm": packTime(maxDT.Time),
			"dt": packDateTime(maxDT), "ts": maxTS.UnixMicro(), "g": "POINT(180 90)", "j": `{"a":[1,2]}`},
			[]bigquery.Value{int64(1), 1.7976931348623157e308, true, "high ✓", []byte{0, 255}, numMax, bnMax, maxDT.Date, maxDT.Time, maxDT, maxTS,
				"POINT(180 90)", `{"a":[1,2]}`, nil, nil, nil, nil}},
		{map[string]any{"id": -2, "f": -5e-324, "ok": false, "s": "", "by": []byte{},
			"n": decimalLE(numMin, 9), "bn": decimalLE(bnMin, 38), "d": days(minDT.Date), "tm": packTime(civil.Time{}),
			"dt": packDateTime(minDT), "ts": minTS.UnixMicro(), "g": `{"type":"Point","coordinates":[0,0]}`, "j": "null"},
			[]bigquery.Value{int64(-2), -5e-324, false, "", []byte{}, numMin, bnMin, minDT.Date, civil.Time{}, minDT, minTS,
				`{"type":"Point","coordinates":[0,0]}`, "null", nil, nil, nil, nil}},
		{map[string]any{"id": 3}, // every NULLABLE column NULL, every repeated one empty
			[]bigquery.Value{int64(3), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}},
		{map[string]any{"id": 4, "n": decimalLE(rat("-0.000000001"), 9), "bn": decimalLE(rat("1/3"), 38), "dt": packDateTime(someDT), "ts": someTS.UnixMicro(),
			"rec":  map[string]any{"a": "x", "tags": []any{int64(1), int64(-2)}, "inner": map[string]any{"z": days(someDT.Date)}},
			"rs":   []any{map[string]any{"x": 1.5}, map[string]any{}, map[string]any{"x": -2.5}},
			"strs": []any{"a", "", "c"}, "nums": []any{decimalLE(big.NewRat(1, 2), 9), decimalLE(big.NewRat(0, 1), 9)}},
			[]bigquery.Value{int64(4), nil, nil, nil, nil, rat("-0.000000001"), rat("0.33333333333333333333333333333333333333"), nil, nil, someDT, someTS, nil, nil,
				[]bigquery.Value{"x", []bigquery.Value{int64(1), int64(-2)}, []bigquery.Value{someDT.Date}},
				[]bigquery.Value{[]bigquery.Value{1.5}, []bigquery.Value{nil}, []bigquery.Value{-2.5}},
				[]bigquery.Value{"a", "", "c"}, []bigquery.Value{big.NewRat(1, 2), new(big.Rat)}}},
	}
	var data [][]byte
	var want [][]bigquery.Value
	for _, r := range rows {
		data = append(data, encode(t, md, r.set))
		want = append(want, r.want)
	}

	ms := e.stream(t, res, managedwriter.PendingStream, dp)
	r1, err := ms.AppendRows(e.ctx, data[:2], managedwriter.WithOffset(0))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := ms.AppendRows(e.ctx, data[2:], managedwriter.WithOffset(2))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range []*managedwriter.AppendResult{r1, r2} {
		if off, err := r.GetResult(e.ctx); err != nil || off != int64(2*i) {
			t.Fatalf("append %d: offset %d, %v", i, off, err)
		}
	}
	if got := e.read(t, "types"); len(got) != 0 {
		t.Fatalf("%d rows visible before the commit", len(got))
	}
	if n, err := ms.Finalize(e.ctx); err != nil || n != 4 {
		t.Fatalf("finalize: %d rows, %v", n, err)
	}
	resp, err := e.mw.BatchCommitWriteStreams(e.ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: []string{ms.StreamName()}})
	if err != nil || len(resp.GetStreamErrors()) > 0 || resp.GetCommitTime() == nil {
		t.Fatalf("commit: %v, %v", resp, err)
	}
	equalRows(t, "read back", e.read(t, "types"), want)
	stored, err := e.srv.TableRows("proj.ds.types")
	if err != nil {
		t.Fatal(err)
	}
	equalRows(t, "TableRows", stored, want)
}

// TestWriteConversions writes each column from the other proto types the
// service's table of supported types lists (strings for NUMERIC and the
// civil types, numbers for BOOL and NUMERIC, google.protobuf.Timestamp,
// wrappers, enums), on the COMMITTED stream type, visible on append.
func TestWriteConversions(t *testing.T) {
	e := newWriteEnv(t)
	schema := bigquery.Schema{
		{Name: "n_str", Type: bigquery.NumericFieldType}, {Name: "n_dbl", Type: bigquery.NumericFieldType},
		{Name: "n_int", Type: bigquery.NumericFieldType}, {Name: "bn_str", Type: bigquery.BigNumericFieldType},
		{Name: "d_str", Type: bigquery.DateFieldType}, {Name: "d_i64", Type: bigquery.DateFieldType},
		{Name: "dt_str", Type: bigquery.DateTimeFieldType}, {Name: "tm_str", Type: bigquery.TimeFieldType},
		{Name: "ts_msg", Type: bigquery.TimestampFieldType}, {Name: "ts_i32", Type: bigquery.TimestampFieldType},
		{Name: "b_int", Type: bigquery.BooleanFieldType}, {Name: "by_str", Type: bigquery.BytesFieldType},
		{Name: "s_enum", Type: bigquery.StringFieldType}, {Name: "i_enum", Type: bigquery.IntegerFieldType},
		{Name: "i_wrap", Type: bigquery.IntegerFieldType}, {Name: "f_float", Type: bigquery.FloatFieldType},
		{Name: "i_u32", Type: bigquery.IntegerFieldType},
	}
	res := e.table(t, "conv", schema)
	T := descriptorpb.FieldDescriptorProto_TYPE_STRING
	enum := &descriptorpb.EnumDescriptorProto{Name: proto.String("Color"), Value: []*descriptorpb.EnumValueDescriptorProto{
		{Name: proto.String("RED"), Number: proto.Int32(0)}, {Name: proto.String("GREEN"), Number: proto.Int32(7)}}}
	enumField := func(name string, num int32) *descriptorpb.FieldDescriptorProto {
		f := field(name, num, descriptorpb.FieldDescriptorProto_TYPE_ENUM)
		f.TypeName = proto.String(".test.Color")
		return f
	}
	msgField := func(name string, num int32, typ string) *descriptorpb.FieldDescriptorProto {
		f := field(name, num, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE)
		f.TypeName = proto.String(typ)
		return f
	}
	md, dp := fileMessage(t, &descriptorpb.FileDescriptorProto{
		EnumType: []*descriptorpb.EnumDescriptorProto{enum},
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Conv"), Field: []*descriptorpb.FieldDescriptorProto{
			field("n_str", 1, T), field("n_dbl", 2, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE),
			field("n_int", 3, descriptorpb.FieldDescriptorProto_TYPE_SINT64), field("bn_str", 4, T),
			field("d_str", 5, T), field("d_i64", 6, descriptorpb.FieldDescriptorProto_TYPE_INT64),
			field("dt_str", 7, T), field("tm_str", 8, T), msgField("ts_msg", 9, ".google.protobuf.Timestamp"),
			field("ts_i32", 10, descriptorpb.FieldDescriptorProto_TYPE_INT32), field("b_int", 11, descriptorpb.FieldDescriptorProto_TYPE_UINT64),
			field("by_str", 12, T), enumField("s_enum", 13), enumField("i_enum", 14),
			msgField("i_wrap", 15, ".google.protobuf.Int64Value"), field("f_float", 16, descriptorpb.FieldDescriptorProto_TYPE_FLOAT),
			field("i_u32", 17, descriptorpb.FieldDescriptorProto_TYPE_FIXED32),
		}}},
	})
	row := encode(t, md, map[string]any{
		"n_str": "-123.4567890125", "n_dbl": 0.1, "n_int": -42, "bn_str": "1e-38",
		"d_str": "2024-2-9", "d_i64": 19000, "dt_str": "2020-10-01 12:00:00.5", "tm_str": "20:51:10.1234",
		"ts_msg": map[string]any{"seconds": int64(1663821424), "nanos": 123456789}, "ts_i32": -1,
		"b_int": 2, "by_str": "raw", "s_enum": 7, "i_enum": 7, "i_wrap": map[string]any{"value": int64(-9)},
		"f_float": float32(2.22), "i_u32": 4000000000,
	})
	ms := e.stream(t, res, managedwriter.CommittedStream, dp)
	r, err := ms.AppendRows(e.ctx, [][]byte{row})
	if err != nil {
		t.Fatal(err)
	}
	if off, err := r.GetResult(e.ctx); err != nil || off != 0 {
		t.Fatalf("offset %d, %v", off, err)
	}
	want := [][]bigquery.Value{{
		rat("-123.456789013"), rat("0.1"), big.NewRat(-42, 1), rat("0.00000000000000000000000000000000000001"),
		civil.Date{Year: 2024, Month: 2, Day: 9}, civil.Date{Year: 2022, Month: 1, Day: 8},
		civil.DateTime{Date: civil.Date{Year: 2020, Month: 10, Day: 1}, Time: civil.Time{Hour: 12, Nanosecond: 500000000}},
		civil.Time{Hour: 20, Minute: 51, Second: 10, Nanosecond: 123400000},
		time.Unix(1663821424, 123456000).UTC(), time.UnixMicro(-1).UTC(),
		true, []byte("raw"), "GREEN", int64(7), int64(-9), float64(float32(2.22)), int64(4000000000),
	}}
	equalRows(t, "read back (COMMITTED: visible on append)", e.read(t, "conv"), want)
}

var (
	validationBase        = vdata.ValidationBaseSchema
	validationRepeated    = vdata.ValidationRepeatedSchema
	validationAnnotations = vdata.ValidationColumnAnnotations
)

// TestWriteGoogleValidation replays the cases of managedwriter's
// TestValidation_Values, which Google runs against the real service, with
// the values that test expects: proto2 optional fields unset are NULL,
// proto2 declared defaults are written, proto3 implicit fields are their
// zero values, repeated fields packed or not, column_name annotations.
func TestWriteGoogleValidation(t *testing.T) {
	e := newWriteEnv(t)
	cases := []struct {
		name   string
		schema bigquery.Schema
		row    proto.Message
		want   []bigquery.Value
	}{
		{"p2 optional nulls", validationBase, &vdata.ValidationP2Optional{}, make([]bigquery.Value, 14)},
		{"p2 optional values", validationBase, &vdata.ValidationP2Optional{
			DoubleField: proto.Float64(3.5), FloatField: proto.Float32(2.0), Int32Field: proto.Int32(11), Int64Field: proto.Int64(-22),
			Uint32Field: proto.Uint32(365), Sint32Field: proto.Int32(123), Sint64Field: proto.Int64(45), Fixed32Field: proto.Uint32(1000),
			Sfixed32Field: proto.Int32(999), Sfixed64Field: proto.Int64(33), BoolField: proto.Bool(true), StringField: proto.String("test"),
			BytesField: []byte("some byte data"), EnumField: vdata.Proto2ExampleEnum_P2_THING.Enum()},
			[]bigquery.Value{3.5, 2.0, int64(11), int64(-22), int64(365), int64(123), int64(45), int64(1000), int64(999), int64(33), true, "test", []byte("some byte data"), int64(vdata.Proto2ExampleEnum_P2_THING)}},
		{"p2 defaults", validationBase, &vdata.ValidationP2OptionalWithDefaults{},
			[]bigquery.Value{1.11, float64(float32(2.22)), int64(3), int64(4), int64(5), int64(7), int64(8), int64(9), int64(11), int64(12), true, "custom default", []byte("optional bytes"), int64(vdata.Proto2ExampleEnum_P2_OTHER_THING)}},
		{"p3 defaults", validationBase, &vdata.ValidationP3Defaults{},
			[]bigquery.Value{0.0, 0.0, int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), false, "", []byte{}, int64(0)}},
		{"p3 optional", validationBase, &vdata.ValidationP3Optional{}, make([]bigquery.Value, 14)},
		{"p2 packed repeated", validationRepeated, &vdata.ValidationP2PackedRepeated{Id: proto.Int64(2022), Int32Repeated: []int32{2, 4}, BoolRepeated: []bool{true, false},
			EnumRepeated: []vdata.Proto2ExampleEnum{vdata.Proto2ExampleEnum_P2_THIRD_THING}},
			[]bigquery.Value{int64(2022), nil, nil, []bigquery.Value{int64(2), int64(4)}, nil, nil, nil, nil, nil, nil, nil, []bigquery.Value{true, false}, []bigquery.Value{int64(vdata.Proto2ExampleEnum_P2_THIRD_THING)}}},
		{"p3 packed repeated", validationRepeated, &vdata.ValidationP3PackedRepeated{Id: proto.Int64(7), FloatRepeated: []float32{-4.5}, Sint64Repeated: []int64{-2, 3}},
			[]bigquery.Value{int64(7), nil, []bigquery.Value{-4.5}, nil, nil, nil, nil, []bigquery.Value{int64(-2), int64(3)}, nil, nil, nil, nil, nil}},
		{"column annotations", validationAnnotations, &vdata.ValidationP2ColumnAnnotations{First: proto.String("first_val"), Second: proto.String("second_val"), Third: proto.String("third_val")},
			[]bigquery.Value{"first_val", "third_val", "second_val"}},
	}
	for i, c := range cases {
		name := fmt.Sprintf("v%d", i)
		res := e.table(t, name, c.schema)
		dp, err := adapt.NormalizeDescriptor(c.row.ProtoReflect().Descriptor())
		if err != nil {
			t.Fatal(err)
		}
		ms := e.stream(t, res, managedwriter.DefaultStream, dp)
		b, err := proto.Marshal(c.row)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ms.AppendRows(e.ctx, [][]byte{b})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetResult(e.ctx); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ms.Close()
		equalRows(t, c.name, e.read(t, name), [][]bigquery.Value{c.want})
	}
}

// storageError returns the StorageError an error of the Write API carries.
func storageError(t *testing.T, err error) (codes.Code, *storagepb.StorageError) {
	t.Helper()
	ae, ok := apierror.FromError(err)
	if !ok {
		t.Fatalf("not an API error: %v", err)
	}
	se := &storagepb.StorageError{}
	if err := ae.Details().ExtractProtoMessage(se); err != nil {
		t.Fatalf("%v: no StorageError: %v", err, err)
	}
	return ae.GRPCStatus().Code(), se
}

var simpleSchema = bigquery.Schema{
	{Name: "name", Type: bigquery.StringFieldType, Required: true},
	{Name: "value", Type: bigquery.IntegerFieldType},
}

func simpleRows(t *testing.T, md protoreflect.MessageDescriptor, from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = encode(t, md, map[string]any{"name": fmt.Sprintf("r%d", from+i), "value": from + i})
	}
	return out
}

func names(rows [][]bigquery.Value) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[0].(string))
	}
	return out
}

// TestWriteOffsets: with an offset, an append at the stream's end is
// written; below it ALREADY_EXISTS, above it OUT_OF_RANGE, each with the
// service's StorageError and message, and the connection goes on; after
// FinalizeWriteStream appends fail with STREAM_FINALIZED.
func TestWriteOffsets(t *testing.T) {
	e := newWriteEnv(t)
	res := e.table(t, "offs", simpleSchema)
	md, dp := schemaDescriptor(t, simpleSchema)
	ms := e.stream(t, res, managedwriter.CommittedStream, dp)
	appendAt := func(off int64, rows [][]byte) (int64, error) {
		r, err := ms.AppendRows(e.ctx, rows, managedwriter.WithOffset(off))
		if err != nil {
			t.Fatal(err)
		}
		return r.GetResult(e.ctx)
	}
	_, err := appendAt(99, simpleRows(t, md, 0, 2))
	if c, se := storageError(t, err); c != codes.OutOfRange || se.GetCode() != storagepb.StorageError_OFFSET_OUT_OF_RANGE ||
		!strings.Contains(err.Error(), "The offset is beyond stream, expected offset 0, received 99") {
		t.Fatalf("offset 99 on an empty stream: %v %v %v", c, se, err)
	}
	if off, err := appendAt(0, simpleRows(t, md, 0, 2)); err != nil || off != 0 {
		t.Fatalf("offset 0: %d %v", off, err)
	}
	_, err = appendAt(0, simpleRows(t, md, 0, 2))
	if c, se := storageError(t, err); c != codes.AlreadyExists || se.GetCode() != storagepb.StorageError_OFFSET_ALREADY_EXISTS ||
		!strings.Contains(err.Error(), "The offset is within stream, expected offset 2, received 0") {
		t.Fatalf("offset 0 again: %v %v %v", c, se, err)
	}
	if off, err := appendAt(2, simpleRows(t, md, 2, 1)); err != nil || off != 2 {
		t.Fatalf("offset 2: %d %v", off, err)
	}
	r, err := ms.AppendRows(e.ctx, simpleRows(t, md, 3, 1)) // no offset: at the end
	if err != nil {
		t.Fatal(err)
	}
	if off, err := r.GetResult(e.ctx); err != nil || off != 3 {
		t.Fatalf("no offset: %d %v", off, err)
	}
	if n, err := ms.Finalize(e.ctx); err != nil || n != 4 {
		t.Fatalf("finalize: %d %v", n, err)
	}
	_, err = appendAt(4, simpleRows(t, md, 4, 1))
	if c, se := storageError(t, err); c != codes.InvalidArgument || se.GetCode() != storagepb.StorageError_STREAM_FINALIZED ||
		!strings.Contains(err.Error(), "Stream has been finalized") {
		t.Fatalf("append after finalize: %v %v %v", c, se, err)
	}
	if got := names(e.read(t, "offs")); strings.Join(got, ",") != "r0,r1,r2,r3" {
		t.Fatalf("table holds %v", got)
	}
	if st := e.srv.WriteStats(); st.RowsAppended != 4 || st.AppendErrors != 3 || st.StreamsFinalized != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestWriteRowErrors: rows that break the table's schema come back in
// row_errors (index, FIELDS_ERROR, message) and nothing of that request is
// written; the stream's offset does not move.
func TestWriteRowErrors(t *testing.T) {
	e := newWriteEnv(t)
	schema := bigquery.Schema{
		{Name: "name", Type: bigquery.StringFieldType, Required: true, MaxLength: 5},
		{Name: "ts", Type: bigquery.TimestampFieldType},
		{Name: "n", Type: bigquery.NumericFieldType},
		{Name: "d", Type: bigquery.DateFieldType},
		{Name: "j", Type: bigquery.JSONFieldType},
		{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "must", Type: bigquery.IntegerFieldType, Required: true}}},
	}
	res := e.table(t, "bad", schema)
	S := descriptorpb.FieldDescriptorProto_TYPE_STRING
	recDP := &descriptorpb.DescriptorProto{Name: proto.String("Rec"), Field: []*descriptorpb.FieldDescriptorProto{field("must", 1, descriptorpb.FieldDescriptorProto_TYPE_INT64)}}
	recField := field("rec", 6, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE)
	recField.TypeName = proto.String(".test.Rec")
	md, dp := fileMessage(t, &descriptorpb.FileDescriptorProto{
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Bad"), Field: []*descriptorpb.FieldDescriptorProto{field("name", 1, S),
				field("ts", 2, descriptorpb.FieldDescriptorProto_TYPE_INT64), field("n", 3, S), field("d", 4, descriptorpb.FieldDescriptorProto_TYPE_INT32),
				field("j", 5, S), recField}}, recDP},
	})
	good := encode(t, md, map[string]any{"name": "ok"})
	unknown := append(encode(t, md, map[string]any{"name": "ok"}), 0x78, 0x01) // field 15, varint 1
	rows := [][]byte{
		good,
		encode(t, md, map[string]any{"name": "toolong"}),
		encode(t, md, map[string]any{}), // REQUIRED name missing
		encode(t, md, map[string]any{"name": "a", "ts": int64(-9223372036854775808)}),
		encode(t, md, map[string]any{"name": "a", "n": "1e30"}),
		encode(t, md, map[string]any{"name": "a", "d": 2932897}),
		encode(t, md, map[string]any{"name": "a", "j": "{"}),
		encode(t, md, map[string]any{"name": "a", "rec": map[string]any{}}),
		unknown,
		{0xff, 0xff},
	}
	ms := e.stream(t, res, managedwriter.PendingStream, dp)
	r, err := ms.AppendRows(e.ctx, rows, managedwriter.WithOffset(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.GetResult(e.ctx)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "Errors found while processing rows") {
		t.Fatalf("append of bad rows: %v", err)
	}
	resp, err := r.FullResponse(e.ctx)
	if err != nil && resp == nil {
		t.Fatal(err)
	}
	wantMsgs := map[int64]string{
		1: "Field name: STRING(5) has maximum length 5 but got a value with length 7 on field name.",
		2: "Required field name is missing.",
		3: "Timestamp field value is out of range: -9223372036854775808 on field ts.",
		4: "out of range",
		5: "Date field value is out of range: 2932897 on field d.",
		6: "Invalid JSON value",
		7: "Required field rec.must is missing.",
		8: "field number 15",
		9: "Could not parse",
	}
	if len(resp.GetRowErrors()) != len(wantMsgs) {
		t.Fatalf("row errors %v", resp.GetRowErrors())
	}
	for _, re := range resp.GetRowErrors() {
		if re.GetCode() != storagepb.RowError_FIELDS_ERROR || !strings.Contains(re.GetMessage(), wantMsgs[re.GetIndex()]) {
			t.Errorf("row %d: %v %q, want %q", re.GetIndex(), re.GetCode(), re.GetMessage(), wantMsgs[re.GetIndex()])
		}
	}
	// Nothing was written: the good rows go at offset 0.
	r, err = ms.AppendRows(e.ctx, [][]byte{good, good}, managedwriter.WithOffset(0))
	if err != nil {
		t.Fatal(err)
	}
	if off, err := r.GetResult(e.ctx); err != nil || off != 0 {
		t.Fatalf("good rows: %d %v", off, err)
	}
	if ws := e.srv.WriteStreams("proj.ds.bad"); len(ws) != 1 || ws[0].Rows != 2 {
		t.Fatalf("streams %+v", ws)
	}
	if st := e.srv.WriteStats(); st.RowErrors != len(wantMsgs) {
		t.Fatalf("stats %+v", st)
	}
}

// TestWriteSchemaErrors: a writer schema with a field the table lacks is
// refused with SCHEMA_MISMATCH_EXTRA_FIELDS, one whose type does not fit
// the column with INVALID_ARGUMENT; a request over 10 MB with
// INVALID_ARGUMENT, after which the connection goes on.
func TestWriteSchemaErrors(t *testing.T) {
	e := newWriteEnv(t)
	res := e.table(t, "sch", simpleSchema)
	appendOnce := func(dp *descriptorpb.DescriptorProto, rows [][]byte) error {
		ms := e.stream(t, res, managedwriter.CommittedStream, dp)
		defer ms.Close()
		r, err := ms.AppendRows(e.ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.GetResult(e.ctx)
		return err
	}
	S := descriptorpb.FieldDescriptorProto_TYPE_STRING
	md, dp := message(t, "Extra", field("name", 1, S), field("extra", 2, S))
	err := appendOnce(dp, [][]byte{encode(t, md, map[string]any{"name": "x"})})
	if c, se := storageError(t, err); c != codes.InvalidArgument || se.GetCode() != storagepb.StorageError_SCHEMA_MISMATCH_EXTRA_FIELDS || !strings.Contains(err.Error(), "extra") {
		t.Fatalf("extra field: %v %v %v", c, se, err)
	}
	md, dp = message(t, "Wrong", field("name", 1, S), field("value", 2, S))
	err = appendOnce(dp, [][]byte{encode(t, md, map[string]any{"name": "x", "value": "1"})})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "mismatched with BigQuery field at value") {
		t.Fatalf("string for INTEGER: %v", err)
	}

	md, dp = schemaDescriptor(t, simpleSchema)
	ms := e.stream(t, res, managedwriter.CommittedStream, dp)
	big := encode(t, md, map[string]any{"name": strings.Repeat("x", 1<<20)})
	r, err := ms.AppendRows(e.ctx, [][]byte{big, big, big, big, big, big, big, big, big, big, big}, managedwriter.WithOffset(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetResult(e.ctx); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "AppendRows request too large") {
		t.Fatalf("11 MB request: %v", err)
	}
	r, err = ms.AppendRows(e.ctx, simpleRows(t, md, 0, 1), managedwriter.WithOffset(0))
	if err != nil {
		t.Fatal(err)
	}
	if off, err := r.GetResult(e.ctx); err != nil || off != 0 {
		t.Fatalf("after the large request: %d %v", off, err)
	}
	if got := names(e.read(t, "sch")); len(got) != 1 {
		t.Fatalf("table holds %v", got)
	}
}

// pendingStream creates a PENDING stream on res with rows [from, from+n).
func pendingStream(t *testing.T, e *writeEnv, res string, md protoreflect.MessageDescriptor, dp *descriptorpb.DescriptorProto, from, n int, finalize bool) *managedwriter.ManagedStream {
	t.Helper()
	ms := e.stream(t, res, managedwriter.PendingStream, dp)
	r, err := ms.AppendRows(e.ctx, simpleRows(t, md, from, n), managedwriter.WithOffset(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetResult(e.ctx); err != nil {
		t.Fatal(err)
	}
	if finalize {
		if _, err := ms.Finalize(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// TestWriteBatchCommit: PENDING streams are invisible until committed;
// BatchCommitWriteStreams commits all of a request's streams or none (an
// unfinalized stream, a COMMITTED one, one of another table or an unknown
// one each get a stream error and nothing is committed), and a stream at
// most once.
func TestWriteBatchCommit(t *testing.T) {
	e := newWriteEnv(t)
	res := e.table(t, "bc", simpleSchema)
	other := e.table(t, "other", simpleSchema)
	md, dp := schemaDescriptor(t, simpleSchema)
	a := pendingStream(t, e, res, md, dp, 0, 3, true)
	b := pendingStream(t, e, res, md, dp, 3, 2, true)
	c := pendingStream(t, e, res, md, dp, 5, 1, false)
	o := pendingStream(t, e, other, md, dp, 0, 1, true)
	committed, err := e.mw.CreateWriteStream(e.ctx, &storagepb.CreateWriteStreamRequest{Parent: res, WriteStream: &storagepb.WriteStream{Type: storagepb.WriteStream_COMMITTED}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(t, "bc"); len(got) != 0 {
		t.Fatalf("%d rows visible before any commit", len(got))
	}
	if p := e.srv.PendingStreams("proj.ds.bc"); len(p) != 3 || p[0].Rows != 3 || !p[0].Finalized || p[2].Finalized {
		t.Fatalf("pending streams %+v", p)
	}
	commit := func(streams ...string) *storagepb.BatchCommitWriteStreamsResponse {
		t.Helper()
		resp, err := e.mw.BatchCommitWriteStreams(e.ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: streams})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	codesOf := func(resp *storagepb.BatchCommitWriteStreamsResponse) map[string]storagepb.StorageError_StorageErrorCode {
		m := map[string]storagepb.StorageError_StorageErrorCode{}
		for _, se := range resp.GetStreamErrors() {
			m[se.GetEntity()] = se.GetCode()
		}
		return m
	}
	unknown := res + "/streams/nosuch"
	resp := commit(a.StreamName(), b.StreamName(), c.StreamName(), o.StreamName(), committed.GetName(), unknown)
	want := map[string]storagepb.StorageError_StorageErrorCode{
		c.StreamName(): storagepb.StorageError_INVALID_STREAM_STATE, o.StreamName(): storagepb.StorageError_STREAM_NOT_FOUND,
		committed.GetName(): storagepb.StorageError_INVALID_STREAM_TYPE, unknown: storagepb.StorageError_STREAM_NOT_FOUND,
	}
	if got := codesOf(resp); resp.GetCommitTime() != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("commit with bad streams: %v, errors %v, want %v", resp.GetCommitTime(), got, want)
	}
	if got := e.read(t, "bc"); len(got) != 0 {
		t.Fatalf("a failed commit made %d rows visible", len(got))
	}
	resp = commit(b.StreamName(), a.StreamName(), a.StreamName())
	if resp.GetCommitTime() == nil || len(resp.GetStreamErrors()) != 0 {
		t.Fatalf("commit: %v", resp)
	}
	if got := strings.Join(names(e.read(t, "bc")), ","); got != "r3,r4,r0,r1,r2" {
		t.Fatalf("after the commit the table holds %s", got)
	}
	resp = commit(a.StreamName())
	if got := codesOf(resp); resp.GetCommitTime() != nil || got[a.StreamName()] != storagepb.StorageError_STREAM_ALREADY_COMMITTED {
		t.Fatalf("second commit: %v", resp)
	}
	info, err := e.mw.GetWriteStream(e.ctx, &storagepb.GetWriteStreamRequest{Name: a.StreamName()})
	if err != nil || info.GetCommitTime() == nil || info.GetType() != storagepb.WriteStream_PENDING {
		t.Fatalf("GetWriteStream after commit: %v %v", info, err)
	}
	if _, err := c.Finalize(e.ctx); err != nil {
		t.Fatal(err)
	}
	if resp := commit(c.StreamName()); resp.GetCommitTime() == nil {
		t.Fatalf("commit of c: %v", resp)
	}
	if got := len(e.read(t, "bc")); got != 6 {
		t.Fatalf("%d rows", got)
	}
	if p := e.srv.PendingStreams("proj.ds.bc"); len(p) != 0 {
		t.Fatalf("pending after all commits: %+v", p)
	}
	if st := e.srv.WriteStats(); st.StreamsCommitted != 3 || st.Commits != 2 || st.CommitErrors != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestWriteStreamInfo: GetWriteStream and CreateWriteStream answer as the
// service does (the managedwriter integration test's expectations): the
// type, a create time for explicit streams and none for _default, the
// dataset's location, the table schema only in the FULL view.
func TestWriteStreamInfo(t *testing.T) {
	e := newWriteEnv(t)
	if err := e.srv.AddTable("proj.ds.info", bqtest.Table{Schema: simpleSchema, Location: "us-east1"}); err != nil {
		t.Fatal(err)
	}
	res := "projects/proj/datasets/ds/tables/info"
	created, err := e.mw.CreateWriteStream(e.ctx, &storagepb.CreateWriteStreamRequest{Parent: res, WriteStream: &storagepb.WriteStream{Type: storagepb.WriteStream_PENDING}})
	if err != nil {
		t.Fatal(err)
	}
	wantSchema, _ := adapt.BQSchemaToStorageTableSchema(simpleSchema)
	if !proto.Equal(created.GetTableSchema(), wantSchema) || created.GetCreateTime() == nil || !strings.HasPrefix(created.GetName(), res+"/streams/") {
		t.Fatalf("CreateWriteStream: %v", created)
	}
	for _, c := range []struct {
		name      string
		typ       storagepb.WriteStream_Type
		isDefault bool
	}{{res + "/streams/_default", storagepb.WriteStream_COMMITTED, true}, {created.GetName(), storagepb.WriteStream_PENDING, false}} {
		for _, view := range []storagepb.WriteStreamView{storagepb.WriteStreamView_BASIC, storagepb.WriteStreamView_FULL} {
			info, err := e.mw.GetWriteStream(e.ctx, &storagepb.GetWriteStreamRequest{Name: c.name, View: view})
			if err != nil {
				t.Fatal(err)
			}
			if info.GetType() != c.typ || info.GetLocation() != "us-east1" || info.GetCommitTime() != nil ||
				(info.GetCreateTime() == nil) != c.isDefault || (info.GetTableSchema() != nil) != (view == storagepb.WriteStreamView_FULL) {
				t.Errorf("%s %v: %v", c.name, view, info)
			}
		}
	}
	_, err = e.mw.GetWriteStream(e.ctx, &storagepb.GetWriteStreamRequest{Name: res + "/streams/nosuch"})
	if c, se := storageError(t, err); c != codes.NotFound || se.GetCode() != storagepb.StorageError_STREAM_NOT_FOUND {
		t.Fatalf("unknown stream: %v", err)
	}
	_, err = e.mw.CreateWriteStream(e.ctx, &storagepb.CreateWriteStreamRequest{Parent: "projects/proj/datasets/ds/tables/nosuch", WriteStream: &storagepb.WriteStream{Type: storagepb.WriteStream_PENDING}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("stream of an unknown table: %v", err)
	}
	_, err = e.raw.FinalizeWriteStream(e.ctx, &storagepb.FinalizeWriteStreamRequest{Name: res + "/streams/_default"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("finalize _default: %v", err)
	}
	cs, err := e.mw.CreateWriteStream(e.ctx, &storagepb.CreateWriteStreamRequest{Parent: res, WriteStream: &storagepb.WriteStream{Type: storagepb.WriteStream_COMMITTED}})
	if err != nil || !cs.GetCommitTime().AsTime().Equal(cs.GetCreateTime().AsTime()) {
		t.Fatalf("COMMITTED stream: %v %v", cs, err)
	}
}

// TestWriteDefaultStream: the _default stream exists implicitly, is
// committed, takes no offsets and answers no offset; a multiplexing
// client writes two tables' default streams over shared connections, its
// requests naming their stream.
func TestWriteDefaultStream(t *testing.T) {
	e := newWriteEnv(t)
	ctx := e.ctx
	mux, err := managedwriter.NewClient(ctx, "proj", append(e.srv.ClientOptions(), managedwriter.WithMultiplexing())...)
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	md, dp := schemaDescriptor(t, simpleSchema)
	var streams []*managedwriter.ManagedStream
	for _, name := range []string{"d1", "d2"} {
		res := e.table(t, name, simpleSchema)
		ms, err := mux.NewManagedStream(ctx, managedwriter.WithDestinationTable(res),
			managedwriter.WithType(managedwriter.DefaultStream), managedwriter.WithSchemaDescriptor(dp))
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, ms)
	}
	var results []*managedwriter.AppendResult
	for i := 0; i < 10; i++ {
		r, err := streams[i%2].AppendRows(ctx, simpleRows(t, md, i, 1))
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	for _, r := range results {
		resp, err := r.FullResponse(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetAppendResult() == nil || resp.GetAppendResult().GetOffset() != nil {
			t.Fatalf("default stream answer %v", resp)
		}
	}
	if got := strings.Join(names(e.read(t, "d1")), ","); got != "r0,r2,r4,r6,r8" {
		t.Fatalf("d1 holds %s", got)
	}
	if got := len(e.read(t, "d2")); got != 5 {
		t.Fatalf("d2 holds %d rows", got)
	}
	r, err := streams[0].AppendRows(ctx, simpleRows(t, md, 10, 1), managedwriter.WithOffset(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetResult(ctx); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("offset on _default: %v", err)
	}
	if st := e.srv.WriteStats(); st.AppendConnections != 1 {
		t.Fatalf("stats %+v: want both tables on one connection", st)
	}
	if ws := e.srv.WriteStreams("proj.ds.d1"); len(ws) != 0 {
		t.Fatalf("_default listed as a created stream: %+v", ws)
	}
}

// TestWriteBuffered: rows of a BUFFERED stream become visible up to and
// including the offset FlushRows names.
func TestWriteBuffered(t *testing.T) {
	e := newWriteEnv(t)
	res := e.table(t, "buf", simpleSchema)
	md, dp := schemaDescriptor(t, simpleSchema)
	ms := e.stream(t, res, managedwriter.BufferedStream, dp)
	r, err := ms.AppendRows(e.ctx, simpleRows(t, md, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetResult(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.read(t, "buf")); n != 0 {
		t.Fatalf("%d rows visible before a flush", n)
	}
	if off, err := ms.FlushRows(e.ctx, 1); err != nil || off != 1 {
		t.Fatalf("flush 1: %d %v", off, err)
	}
	if got := strings.Join(names(e.read(t, "buf")), ","); got != "r0,r1" {
		t.Fatalf("after flush 1: %s", got)
	}
	if p := e.srv.PendingStreams("proj.ds.buf"); len(p) != 1 || p[0].Visible != 2 || p[0].Rows != 3 {
		t.Fatalf("pending %+v", p)
	}
	if _, err := ms.FlushRows(e.ctx, 1); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("flush 1 again: %v", err)
	}
	if _, err := ms.FlushRows(e.ctx, 3); status.Code(err) != codes.OutOfRange {
		t.Fatalf("flush past the end: %v", err)
	}
	if off, err := ms.FlushRows(e.ctx, 2); err != nil || off != 2 {
		t.Fatalf("flush 2: %d %v", off, err)
	}
	if got := strings.Join(names(e.read(t, "buf")), ","); got != "r0,r1,r2" {
		t.Fatalf("after flush 2: %s", got)
	}
	pending, err := e.mw.CreateWriteStream(e.ctx, &storagepb.CreateWriteStreamRequest{Parent: res, WriteStream: &storagepb.WriteStream{Type: storagepb.WriteStream_PENDING}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.FlushRows(e.ctx, &storagepb.FlushRowsRequest{WriteStream: pending.GetName(), Offset: nil}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("flush of a PENDING stream: %v", err)
	}
}

// sessionRows counts the rows of a read session's streams.
func sessionRows(t *testing.T, c *bqstorage.BigQueryReadClient, s *storagepb.ReadSession) (int64, error) {
	var n int64
	for _, st := range s.GetStreams() {
		rc, err := c.ReadRows(context.Background(), &storagepb.ReadRowsRequest{ReadStream: st.GetName()})
		if err != nil {
			return n, err
		}
		for {
			resp, err := rc.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return n, err
			}
			n += resp.GetRowCount()
		}
	}
	return n, nil
}

// TestWriteReadSnapshot: a read session started before a commit reads the
// table as it was, to the end; one started after reads the new rows too; a
// table defined again under the same name refuses the old write streams.
func TestWriteReadSnapshot(t *testing.T) {
	e := newWriteEnv(t)
	md, dp := schemaDescriptor(t, simpleSchema)
	initial := make([][]bigquery.Value, 0, 200) // spare capacity the server must not write into
	for i := 0; i < 100; i++ {
		initial = append(initial, []bigquery.Value{fmt.Sprintf("i%d", i), int64(i)})
	}
	if err := e.srv.AddTable("proj.ds.snap", bqtest.Table{Schema: simpleSchema, Rows: initial}); err != nil {
		t.Fatal(err)
	}
	res := "projects/proj/datasets/ds/tables/snap"
	rc, err := bqstorage.NewBigQueryReadClient(e.ctx, e.srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	newSession := func() *storagepb.ReadSession {
		s, err := rc.CreateReadSession(e.ctx, &storagepb.CreateReadSessionRequest{Parent: "projects/proj",
			ReadSession: &storagepb.ReadSession{Table: res, DataFormat: storagepb.DataFormat_AVRO}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old := newSession()
	a := pendingStream(t, e, res, md, dp, 0, 2, true)
	if resp, err := e.mw.BatchCommitWriteStreams(e.ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: []string{a.StreamName()}}); err != nil || resp.GetCommitTime() == nil {
		t.Fatal(resp, err)
	}
	if n, err := sessionRows(t, rc, old); n != 100 || err != nil {
		t.Fatalf("the session started before the commit read %d rows, %v", n, err)
	}
	if n, err := sessionRows(t, rc, newSession()); n != 102 || err != nil {
		t.Fatalf("a session started after the commit read %d rows, %v", n, err)
	}
	if spare := initial[:101]; spare[100] != nil {
		t.Fatalf("the commit wrote into the caller's slice: %v", spare[100])
	}
	b := pendingStream(t, e, res, md, dp, 2, 1, true)
	if err := e.srv.AddTable("proj.ds.snap", bqtest.Table{Schema: simpleSchema}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.mw.BatchCommitWriteStreams(e.ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: []string{b.StreamName()}})
	if err != nil || len(resp.GetStreamErrors()) != 1 || resp.GetStreamErrors()[0].GetCode() != storagepb.StorageError_TABLE_NOT_FOUND {
		t.Fatalf("commit of a stream of a replaced table: %v %v", resp, err)
	}
	if n, err := sessionRows(t, rc, newSession()); n != 0 || err != nil {
		t.Fatalf("the replaced table has %d rows, %v", n, err)
	}
}

// TestWriteAppendProtocol drives AppendRows with the raw client: later
// requests may omit the stream and the writer schema; a request for another
// table must carry its schema; a first request without a stream ends the
// RPC.
func TestWriteAppendProtocol(t *testing.T) {
	e := newWriteEnv(t)
	a := e.table(t, "pa", simpleSchema)
	b := e.table(t, "pb", simpleSchema)
	md, dp := schemaDescriptor(t, simpleSchema)
	req := func(stream string, schema bool, from int, offset *int64) *storagepb.AppendRowsRequest {
		data := &storagepb.AppendRowsRequest_ProtoData{Rows: &storagepb.ProtoRows{SerializedRows: simpleRows(t, md, from, 1)}}
		if schema {
			data.WriterSchema = &storagepb.ProtoSchema{ProtoDescriptor: dp}
		}
		r := &storagepb.AppendRowsRequest{WriteStream: stream, Rows: &storagepb.AppendRowsRequest_ProtoRows{ProtoRows: data}}
		if offset != nil {
			r.Offset = wrapperspb.Int64(*offset)
		}
		return r
	}
	stream, err := e.raw.AppendRows(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := e.raw.CreateWriteStream(e.ctx, &storagepb.CreateWriteStreamRequest{Parent: a, WriteStream: &storagepb.WriteStream{Type: storagepb.WriteStream_COMMITTED}})
	if err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	for i, r := range []*storagepb.AppendRowsRequest{
		req(ws.GetName(), true, 0, nil),           // offset 0
		req("", false, 1, &one),                   // the connection's stream and schema
		req(b+"/streams/_default", false, 2, nil), // another table without its schema: refused
		req(b+"/_default", true, 3, nil),          // with it
		req("", false, 4, nil),                    // b's default stream again
	} {
		if err := stream.Send(r); err != nil {
			t.Fatal(i, err)
		}
	}
	var got []string
	for i := 0; i < 5; i++ {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s:%v:%v", resp.GetWriteStream()[len(a)-2:], status.Code(status.ErrorProto(resp.GetError())), resp.GetAppendResult().GetOffset().GetValue()))
	}
	want := []string{"pa/streams/" + ws.GetName()[len(a)+9:] + ":OK:0", "pa/streams/" + ws.GetName()[len(a)+9:] + ":OK:1",
		"pb/streams/_default:InvalidArgument:0", "pb/_default:OK:0", "pb/_default:OK:0"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("responses\n%v\nwant\n%v", got, want)
	}
	stream.CloseSend()
	if got := sortedNames(e.read(t, "pb")); got != "r3,r4" {
		t.Fatalf("pb holds %s", got)
	}

	stream, err = e.raw.AppendRows(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(req("", true, 0, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("first request without a stream: %v", err)
	}
}

// TestWriteFinalizeFaults: WriteFaults fail FinalizeWriteStream with a code
// before it finalizes the stream (a retry finalizes it) or after (the
// answer lost: the stream is finalized, a retry answers its row count, or
// STREAM_FINALIZED with FinalizeAgainRefused), as Google's client sees it.
func TestWriteFinalizeFaults(t *testing.T) {
	noRetry := gax.WithRetry(func() gax.Retryer { return nil })
	for _, tc := range []struct {
		name          string
		faults        bqtest.WriteFaults
		finalizedByIt bool // the failed call finalized the stream
	}{
		{"before", bqtest.WriteFaults{FinalizeErrorCode: codes.Internal, FinalizeErrorCalls: 1}, false},
		{"after", bqtest.WriteFaults{FinalizeErrorCode: codes.Internal, FinalizeErrorCalls: 1, FinalizeAfterApply: true}, true},
		{"after, refused again", bqtest.WriteFaults{FinalizeErrorCode: codes.Unavailable, FinalizeErrorCalls: 1, FinalizeAfterApply: true, FinalizeAgainRefused: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newWriteEnv(t)
			res := e.table(t, "fin", simpleSchema)
			md, dp := schemaDescriptor(t, simpleSchema)
			ms := pendingStream(t, e, res, md, dp, 0, 3, false)
			e.srv.SetWriteFaults(tc.faults)
			if _, err := ms.Finalize(e.ctx, noRetry); status.Code(err) != tc.faults.FinalizeErrorCode {
				t.Fatalf("first finalize: %v, want %v", err, tc.faults.FinalizeErrorCode)
			}
			if ws := e.srv.WriteStreams("proj.ds.fin"); len(ws) != 1 || ws[0].Finalized != tc.finalizedByIt || ws[0].Rows != 3 {
				t.Fatalf("streams %+v after the failed finalize", ws)
			}
			n, err := ms.Finalize(e.ctx, noRetry)
			if tc.faults.FinalizeAgainRefused {
				if code, se := storageError(t, err); code != codes.InvalidArgument || se.GetCode() != storagepb.StorageError_STREAM_FINALIZED || se.GetEntity() != ms.StreamName() {
					t.Fatalf("finalize again: %v, %v", code, se)
				}
			} else if err != nil || n != 3 {
				t.Fatalf("finalize again: %d rows, %v", n, err)
			}
			if st := e.srv.WriteStats(); st.InjectedFinalize != 1 || st.StreamsFinalized != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}
