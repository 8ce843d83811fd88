package bigqueryio

import (
	"encoding/binary"
	"math"
	"math/big"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
)

func avroRecord(fields string) string {
	return `{"type":"record","name":"__root__","fields":[` + fields + `]}`
}

// TestAvroSchemaJSON: every BigQuery type as the Storage Read API writes
// it in a session's Avro schema becomes its BigQuery field.
func TestAvroSchemaJSON(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  bigquery.FieldSchema
	}{
		{`{"name":"c","type":"long"}`, bigquery.FieldSchema{Type: bigquery.IntegerFieldType, Required: true}},
		{`{"name":"c","type":["null","long"]}`, bigquery.FieldSchema{Type: bigquery.IntegerFieldType}},
		{`{"name":"c","type":{"type":"long"}}`, bigquery.FieldSchema{Type: bigquery.IntegerFieldType, Required: true}},
		{`{"name":"c","type":"int"}`, bigquery.FieldSchema{Type: bigquery.IntegerFieldType, Required: true}},
		{`{"name":"c","type":["null","double"]}`, bigquery.FieldSchema{Type: bigquery.FloatFieldType}},
		{`{"name":"c","type":["null","boolean"]}`, bigquery.FieldSchema{Type: bigquery.BooleanFieldType}},
		{`{"name":"c","type":["null","string"]}`, bigquery.FieldSchema{Type: bigquery.StringFieldType}},
		{`{"name":"c","type":["null","bytes"]}`, bigquery.FieldSchema{Type: bigquery.BytesFieldType}},
		{`{"name":"c","type":["null",{"type":"bytes","logicalType":"decimal","precision":38,"scale":9}]}`,
			bigquery.FieldSchema{Type: bigquery.NumericFieldType, Precision: 38, Scale: 9}},
		{`{"name":"c","type":{"type":"bytes","logicalType":"decimal","precision":10}}`,
			bigquery.FieldSchema{Type: bigquery.NumericFieldType, Precision: 10, Required: true}},
		{`{"name":"c","type":["null",{"type":"bytes","logicalType":"decimal","precision":77,"scale":38}]}`,
			bigquery.FieldSchema{Type: bigquery.BigNumericFieldType, Precision: 77, Scale: 38}},
		{`{"name":"c","type":["null",{"type":"int","logicalType":"date"}]}`, bigquery.FieldSchema{Type: bigquery.DateFieldType}},
		{`{"name":"c","type":["null",{"type":"long","logicalType":"time-micros"}]}`, bigquery.FieldSchema{Type: bigquery.TimeFieldType}},
		{`{"name":"c","type":["null",{"type":"long","logicalType":"timestamp-micros"}]}`, bigquery.FieldSchema{Type: bigquery.TimestampFieldType}},
		// A logical type BigQuery does not send is its primitive, as before.
		{`{"name":"c","type":{"type":"long","logicalType":"local-timestamp-micros"}}`, bigquery.FieldSchema{Type: bigquery.IntegerFieldType, Required: true}},
		{`{"name":"c","type":["null",{"type":"string","logicalType":"datetime"}]}`, bigquery.FieldSchema{Type: bigquery.DateTimeFieldType}},
		{`{"name":"c","type":["null",{"type":"string","sqlType":"DATETIME"}]}`, bigquery.FieldSchema{Type: bigquery.DateTimeFieldType}},
		{`{"name":"c","type":["null",{"type":"string","sqlType":"GEOGRAPHY"}]}`, bigquery.FieldSchema{Type: bigquery.GeographyFieldType}},
		{`{"name":"c","type":["null",{"type":"string","sqlType":"JSON"}]}`, bigquery.FieldSchema{Type: bigquery.JSONFieldType}},
		{`{"name":"c","type":{"type":"array","items":"long"}}`, bigquery.FieldSchema{Type: bigquery.IntegerFieldType, Repeated: true}},
		{`{"name":"c","type":["null",{"type":"array","items":{"type":"int","logicalType":"date"}}]}`, bigquery.FieldSchema{Type: bigquery.DateFieldType, Repeated: true}},
		{`{"name":"c","type":["null",{"type":"record","name":"c","namespace":"__root__.c","fields":[{"name":"a","type":"long"},{"name":"b","type":["null","string"]}]}]}`,
			bigquery.FieldSchema{Type: bigquery.RecordFieldType, Schema: bigquery.Schema{
				{Name: "a", Type: bigquery.IntegerFieldType, Required: true}, {Name: "b", Type: bigquery.StringFieldType}}}},
		{`{"name":"c","type":{"type":"array","items":{"type":"record","name":"c","fields":[{"name":"a","type":{"type":"array","items":"double"}}]}}}`,
			bigquery.FieldSchema{Type: bigquery.RecordFieldType, Repeated: true, Schema: bigquery.Schema{
				{Name: "a", Type: bigquery.FloatFieldType, Repeated: true}}}},
	} {
		schema, err := schemaFromAvroJSON(avroRecord(tc.field))
		if err != nil {
			t.Errorf("%s: %v", tc.field, err)
			continue
		}
		want := tc.want
		want.Name = "c"
		if len(schema) != 1 || !reflect.DeepEqual(*schema[0], want) {
			t.Errorf("%s: %+v, want %+v", tc.field, schema[0], want)
		}
	}
	// A record defined once and referred to by name, in its namespace.
	schema, err := schemaFromAvroJSON(`{"type":"record","name":"__root__","fields":[
		{"name":"a","type":{"type":"record","name":"pt","namespace":"ns","fields":[{"name":"x","type":"double"}]}},
		{"name":"b","type":["null","ns.pt"]},
		{"name":"c","type":{"type":"array","items":"ns.pt"}}]}`)
	if err != nil || len(schema) != 3 || schema[1].Type != bigquery.RecordFieldType || schema[1].Required ||
		!schema[2].Repeated || len(schema[2].Schema) != 1 || schema[2].Schema[0].Name != "x" {
		t.Errorf("references: %v, %v", schema, err)
	}
}

// TestAvroSchemaJSONRefused: what the Storage Read API does not send, or
// a decoder could not read, is refused, naming the column.
func TestAvroSchemaJSONRefused(t *testing.T) {
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"record"`, "not JSON"},
		{avroRecord(`{"name":"c","type":"long"}`) + ` {}`, "data after the schema"},
		{`"long"`, "is a long, want a record"},
		{`["null","long"]`, "is a union, want a record"},
		{avroRecord(`{"name":"c","type":["long","null"]}`), `column c: union ["long","null"] is not a nullable type`},
		{avroRecord(`{"name":"c","type":["null","long","string"]}`), "column c: union"},
		{avroRecord(`{"name":"c","type":["null","null"]}`), "column c: union"},
		{avroRecord(`{"name":"c","type":"float"}`), "column c: Avro type float is not one the Storage Read API sends"},
		{avroRecord(`{"name":"c","type":{"type":"map","values":"long"}}`), "column c: Avro type map"},
		{avroRecord(`{"name":"c","type":{"type":"enum","name":"e","symbols":["A"]}}`), "column c: Avro type enum"},
		{avroRecord(`{"name":"c","type":{"type":"fixed","name":"f","size":4}}`), "column c: Avro type fixed"},
		{avroRecord(`{"name":"c","type":{"type":"array","items":["null","long"]}}`), "column c: Avro type union"},
		{avroRecord(`{"name":"c","type":"nosuch"}`), `column c: type "nosuch" is not defined`},
		{avroRecord(`{"name":"c","type":{"type":"record","name":"r","fields":[]}}`), "column c: a record of no fields"},
		{avroRecord(`{"name":"c","type":{"type":"record","name":"r","fields":[{"name":"self","type":["null","r"]}]}}`), "records nested deeper than"},
		{avroRecord(`{"name":"c","type":"long"},{"name":"c","type":"long"}`), "column c: defined twice"},
		{avroRecord(`{"type":"long"}`), "a field with no name"},
		{avroRecord(`{"name":"c","type":{"type":"bytes","logicalType":"decimal"}}`), "column c: a decimal of precision"},
		{avroRecord(`{"name":"c","type":{"type":"bytes","logicalType":"decimal","precision":5,"scale":6}}`), "column c: a decimal of precision 5 and scale 6"},
		{avroRecord(`{"name":"c","type":{"type":"bytes","logicalType":"decimal","precision":5.5}}`), "column c: a decimal"},
		{avroRecord(`{"name":"r","type":{"type":"record","name":"r","fields":[{"name":"d","type":{"type":"string","logicalType":"json","sqlType":"GEOGRAPHY"}}]}}`), "column r.d: its Avro string is annotated"},
		{`{"type":"record","name":"x"}`, "no fields list"},
	} {
		schema, err := schemaFromAvroJSON(tc.schema)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, %v: want an error saying %q", tc.schema, schema, err, tc.want)
		}
	}
}

// avroBytes appends Avro bytes (or a string).
func avroBytes(b []byte, p string) []byte { return append(binary.AppendVarint(b, int64(len(p))), p...) }

// TestAvroDecodeEncodings: the Avro encodings of every type decode to the
// values the official client gives, including arrays in blocks of a
// negative count (followed by their size) and strings over 1 MiB.
func TestAvroDecodeEncodings(t *testing.T) {
	schema, err := schemaFromAvroJSON(avroRecord(`
		{"name":"i","type":"long"},
		{"name":"f","type":"double"},
		{"name":"b","type":"boolean"},
		{"name":"s","type":["null","string"]},
		{"name":"y","type":"bytes"},
		{"name":"n","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":9}},
		{"name":"d","type":{"type":"int","logicalType":"date"}},
		{"name":"t","type":{"type":"long","logicalType":"time-micros"}},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
		{"name":"dt","type":{"type":"string","logicalType":"datetime"}},
		{"name":"a","type":{"type":"array","items":"long"}},
		{"name":"r","type":["null",{"type":"record","name":"r","fields":[{"name":"x","type":"long"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 3<<20)
	var p []byte
	p = binary.AppendVarint(p, -5)
	p = binary.LittleEndian.AppendUint64(p, math.Float64bits(2.5))
	p = append(p, 1)
	p = avroBytes(binary.AppendVarint(p, 1), long)
	p = avroBytes(p, "\x00\xff")
	p = avroBytes(p, "\xff\x38") // -200, scale 9
	p = binary.AppendVarint(p, -1)
	p = binary.AppendVarint(p, 3_723_000_004)     // 01:02:03.000004
	p = binary.AppendVarint(p, 1_000_000_000_123) // 2001-09-09T01:46:40.000123Z
	p = avroBytes(p, "2020-01-02 03:04:05.5")
	p = binary.AppendVarint(p, -2) // a block of 2 items, of 2 bytes
	p = binary.AppendVarint(p, 2)
	p = binary.AppendVarint(binary.AppendVarint(p, 7), 8)
	p = binary.AppendVarint(p, 1) // a block of 1
	p = binary.AppendVarint(binary.AppendVarint(p, 9), 0)
	p = binary.AppendVarint(binary.AppendVarint(p, 1), 42)
	var got []bigquery.Value
	if err := newAvroDecoder(schema).decode(p, 1, func(row []bigquery.Value) error {
		got = append([]bigquery.Value{}, row...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []bigquery.Value{int64(-5), 2.5, true, long, []byte{0, 0xff}, big.NewRat(-200, 1e9),
		civil.Date{Year: 1969, Month: 12, Day: 31}, civil.Time{Hour: 1, Minute: 2, Second: 3, Nanosecond: 4000},
		time.UnixMicro(1_000_000_000_123).UTC(), civil.DateTime{Date: civil.Date{Year: 2020, Month: 1, Day: 2}, Time: civil.Time{Hour: 3, Minute: 4, Second: 5, Nanosecond: 5e8}},
		[]bigquery.Value{int64(7), int64(8), int64(9)}, []bigquery.Value{int64(42)}}
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameValue(got[i], want[i]) {
			t.Errorf("column %s: %#v, want %#v", schema[i].Name, got[i], want[i])
		}
	}
}

// TestAvroDecodeHostile: truncated and hostile encodings fail with an
// error naming the row and the byte, and allocate nothing of the size
// they claim.
func TestAvroDecodeHostile(t *testing.T) {
	v := func(xs ...int64) []byte {
		var b []byte
		for _, x := range xs {
			b = binary.AppendVarint(b, x)
		}
		return b
	}
	for _, tc := range []struct {
		name, field string
		payload     []byte
		want        []string
	}{
		{"huge array block", `{"name":"c","type":{"type":"array","items":"long"}}`, v(1<<60, 1, 2), []string{"Avro row 0", "EOF"}},
		{"huge negative array block", `{"name":"c","type":{"type":"array","items":"long"}}`, v(-(1 << 60), 3, 1), []string{"Avro row 0", "EOF"}},
		{"min array block", `{"name":"c","type":{"type":"array","items":"long"}}`, v(math.MinInt64, 0), []string{"a block of -9223372036854775808 items for column c"}},
		{"array cut short", `{"name":"c","type":{"type":"array","items":"long"}}`, v(2, 1), []string{"Avro row 0", "EOF"}},
		{"huge array of records", `{"name":"c","type":{"type":"array","items":{"type":"record","name":"r","fields":[{"name":"x","type":"string"}]}}}`, v(1<<62, 0, 0), []string{"EOF"}},
		{"huge string", `{"name":"c","type":"string"}`, v(1 << 62), []string{"Avro row 0", "at byte 0", "a length of 4611686018427387904 with 0 bytes left", "EOF"}},
		{"negative string", `{"name":"c","type":"string"}`, v(-3), []string{"at byte 0: a length of -3"}},
		{"huge bytes", `{"name":"c","type":"bytes"}`, v(1<<40, 1), []string{"EOF"}},
		{"huge decimal", `{"name":"c","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":9}}`, v(1 << 50), []string{"EOF"}},
		{"bad boolean", `{"name":"c","type":"boolean"}`, []byte{2}, []string{"at byte 0: boolean: byte 2"}},
		{"short double", `{"name":"c","type":"double"}`, []byte{1, 2, 3}, []string{"EOF"}},
		{"date out of range", `{"name":"c","type":{"type":"int","logicalType":"date"}}`, v(1 << 40), []string{"DATE 1099511627776 out of range"}},
		{"long overflow", `{"name":"c","type":"long"}`, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, []string{"overflows 64 bits"}},
		{"bad branch", `{"name":"c","type":["null","long"]}`, v(4, 1), []string{"at byte 0: union: branch 4 of nullable column c"}},
		{"bad datetime", `{"name":"c","type":{"type":"string","logicalType":"datetime"}}`, avroBytes(nil, "yesterday"), []string{"at byte 0: datetime: column c of type DATETIME"}},
	} {
		schema, err := schemaFromAvroJSON(avroRecord(tc.field))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err = newAvroDecoder(schema).decode(tc.payload, 1, func([]bigquery.Value) error { return nil })
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the error does not say %q: %v", tc.name, w, err)
			}
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Errorf("%s: allocated %d bytes", tc.name, d)
		}
		// The struct decoder, on the same bytes, fails too.
		sd, err := newStructDecoder(reflect.TypeOf(struct{ C any }{}), schema, int32(Avro), nil, fieldRules{})
		if err != nil {
			continue // a column type no field of type any takes
		}
		if _, err := sd.decode(tc.payload, 1, nil); err == nil {
			t.Errorf("%s: the struct decoder: no error", tc.name)
		}
	}
}

// FuzzAvroDecode: no payload makes the decoders of a schema of every type
// panic or allocate beyond what its bytes could hold.
func FuzzAvroDecode(f *testing.F) {
	schema, err := schemaFromAvroJSON(avroRecord(`
		{"name":"i","type":["null","long"]},
		{"name":"s","type":{"type":"array","items":"string"}},
		{"name":"n","type":["null",{"type":"bytes","logicalType":"decimal","precision":77,"scale":38}]},
		{"name":"d","type":{"type":"int","logicalType":"date"}},
		{"name":"dt","type":["null",{"type":"string","logicalType":"datetime"}]},
		{"name":"r","type":{"type":"array","items":{"type":"record","name":"r","fields":[{"name":"b","type":"boolean"},{"name":"f","type":"double"}]}}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0}, int64(1))
	f.Add([]byte{2, 2, 0, 2, 2, 0xff, 2, 0, 1, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, int64(1))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40}, int64(3))
	f.Fuzz(func(t *testing.T, payload []byte, n int64) {
		_ = newAvroDecoder(schema).decode(payload, n, func([]bigquery.Value) error { return nil })
		type row struct {
			I  bigquery.NullInt64
			S  []string
			N  *big.Rat
			D  civil.Date
			Dt bigquery.NullDateTime
			R  []struct {
				B bool
				F float64
			}
		}
		sd, err := newStructDecoder(reflect.TypeOf(row{}), schema, int32(Avro), nil, fieldRules{})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = sd.decode(payload, n, nil)
	})
}
