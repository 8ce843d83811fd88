package bqtest

import (
	"math/big"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/managedwriter/adapt"
	"cloud.google.com/go/civil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

func TestParseTimestamp(t *testing.T) {
	utc := func(y, mo, d, h, mi, s, ns int) time.Time {
		return time.Date(y, time.Month(mo), d, h, mi, s, ns, time.UTC)
	}
	for in, want := range map[string]time.Time{
		"2020-05-06T07:08:09.00001Z":           utc(2020, 5, 6, 7, 8, 9, 10000),
		"2020-05-06 07:08:09 UTC":              utc(2020, 5, 6, 7, 8, 9, 0),
		"2020-05-06 07:08:09.123456789+05:30":  utc(2020, 5, 6, 1, 38, 9, 123456000),
		"2020-05-06T07:08:09-07:00":            utc(2020, 5, 6, 14, 8, 9, 0),
		"2020-05-06 07:08:09 +02":              utc(2020, 5, 6, 5, 8, 9, 0),
		"2020-5-6":                             utc(2020, 5, 6, 0, 0, 0, 0),
		"1.5":                                  utc(1970, 1, 1, 0, 0, 1, 500000000),
		"-1":                                   utc(1969, 12, 31, 23, 59, 59, 0),
		"0001-01-01 00:00:00":                  utc(1, 1, 1, 0, 0, 0, 0),
		"9999-12-31T23:59:59.999999Z":          utc(9999, 12, 31, 23, 59, 59, 999999000),
		"2006-01-02T15:04:05.999999999-07:00 ": utc(2006, 1, 2, 22, 4, 5, 999999000),
	} {
		got, ok := parseTimestamp(in)
		if !ok || !got.Equal(want) {
			t.Errorf("%q: %v %v, want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "2020-13-01", "10000-01-01", "2020-05-06 25:00:00", "2020-05-06 07:08", "9999-12-31 23:59:59 -01:00", "now", "1e30", "2020-05-06 07:08:09 +15:00"} {
		if got, ok := parseTimestamp(in); ok {
			t.Errorf("%q: parsed as %v", in, got)
		}
	}
}

func TestParseCivil(t *testing.T) {
	for in, want := range map[string]civil.DateTime{
		"2020-1-2 3:04:05":           {Date: civil.Date{Year: 2020, Month: 1, Day: 2}, Time: civil.Time{Hour: 3, Minute: 4, Second: 5}},
		"2020-01-02T03:04:05.123456": {Date: civil.Date{Year: 2020, Month: 1, Day: 2}, Time: civil.Time{Hour: 3, Minute: 4, Second: 5, Nanosecond: 123456000}},
		"2020-01-02":                 {Date: civil.Date{Year: 2020, Month: 1, Day: 2}},
		"2024-02-29 00:00:00.5":      {Date: civil.Date{Year: 2024, Month: 2, Day: 29}, Time: civil.Time{Nanosecond: 500000000}},
	} {
		if got, ok := parseDateTime(in); !ok || got != want {
			t.Errorf("DATETIME %q: %v %v", in, got, ok)
		}
	}
	for _, in := range []string{"2020-01-02 03:04:05.1234567", "2020-01-02 03:04", "2023-02-29", "0000-01-01", "2020-01-02X03:04:05", "2020-01-02 24:00:00"} {
		if got, ok := parseDateTime(in); ok {
			t.Errorf("DATETIME %q: parsed as %v", in, got)
		}
	}
	if got, ok := parseTime("23:59:59.999999"); !ok || got != (civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000}) {
		t.Errorf("TIME: %v %v", got, ok)
	}
	for _, in := range []string{"24:00:00", "12:60:00", "1:2", "12:00:00.", "-1:00:00", "01:02:03.1000000", "01:02:03.9999995"} {
		if got, ok := parseTime(in); ok {
			t.Errorf("TIME %q: parsed as %v", in, got)
		}
	}
}

func TestUnpackCivil(t *testing.T) {
	// The decode vectors of the Java client's CivilTimeEncoderTest.
	for v, want := range map[int64]civil.Time{
		0x4200003:    {Minute: 1, Second: 2, Nanosecond: 3000},
		0xD38F00010:  {Hour: 13, Minute: 14, Second: 15, Nanosecond: 16000},
		0x17EFBF423F: {Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000},
	} {
		if got, ok := unpackTime(v); !ok || got != want {
			t.Errorf("TIME %#x: %v %v", v, got, ok)
		}
	}
	for _, v := range []int64{0x2000000000, 0xF4240, 0x3C00000, 0x1800000000, 0xF0000000, -1} {
		if got, ok := unpackTime(v); ok {
			t.Errorf("TIME %#x: decoded as %v", v, got)
		}
	}
	if got, ok := unpackDateTime(0x9C3F3F7EFB << 20); !ok || got.String() != "9999-12-31T23:59:59" {
		t.Errorf("DATETIME 9999-12-31: %v %v", got, ok)
	}
	feb30 := (int64(2023)<<26 | 2<<22 | 30<<17) << 20
	for _, v := range []int64{0x10004420000 << 20, 0x9C40420000 << 20, feb30, 0, -1} {
		if got, ok := unpackDateTime(v); ok {
			t.Errorf("DATETIME %#x: decoded as %v", v, got)
		}
	}
}

func TestDecimals(t *testing.T) {
	for in, want := range map[string]string{
		"0.0000000005": "0.000000001", "-0.0000000005": "-0.000000001", "0.00000000049": "0.000000000",
		"1e3": "1000.000000000", ".5": "0.500000000", "-0": "0.000000000", "+7": "7.000000000",
		"99999999999999999999999999999.999999999":   "99999999999999999999999999999.999999999",
		"99999999999999999999999999999.9999999994":  "99999999999999999999999999999.999999999",
		"-99999999999999999999999999999.9999999994": "-99999999999999999999999999999.999999999",
	} {
		v, err := decimalString(in, false)
		if err != nil || v.(*big.Rat).FloatString(9) != want {
			t.Errorf("NUMERIC %q: %v %v, want %s", in, v, err, want)
		}
	}
	for _, in := range []string{"1/3", "0x10", "1e2000", "", "1.2.3", "NaN", "99999999999999999999999999999.9999999995", "1e29"} {
		if v, err := decimalString(in, false); err == nil {
			t.Errorf("NUMERIC %q: %v", in, v)
		}
	}
	min := "-578960446186580977117854925043439539266.34992332820282019728792003956564819968"
	if v, err := decimalString(min, true); err != nil || v.(*big.Rat).FloatString(38) != min {
		t.Errorf("BIGNUMERIC min: %v %v", v, err)
	}
	if v, err := decimalString(strings.TrimSuffix(min, "8")+"9", true); err == nil {
		t.Errorf("below the BIGNUMERIC min: %v", v)
	}
	// A fixed-width encoding (as clients that pad to 16 bytes send) of -1
	// unit and of 2^64 units.
	neg := make([]byte, 16)
	for i := range neg {
		neg[i] = 0xff
	}
	if v, err := decimalBytesLE(neg, false); err != nil || v.(*big.Rat).Cmp(big.NewRat(-1, 1e9)) != 0 {
		t.Errorf("16 bytes of 0xff: %v %v", v, err)
	}
	if v, err := decimalBytesLE([]byte{0, 0, 0, 0, 0, 0, 0, 0, 1}, false); err != nil || v.(*big.Rat).Cmp(new(big.Rat).SetFrac(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(1e9))) != 0 {
		t.Errorf("2^64 units: %v %v", v, err)
	}
	if v, err := decimalBytesLE(nil, true); err != nil || v.(*big.Rat).Sign() != 0 {
		t.Errorf("no bytes: %v %v", v, err)
	}
	if _, err := decimalBytesLE(make([]byte, 65), true); err == nil {
		t.Error("65 bytes accepted")
	}
}

var fuzzSchema = bigquery.Schema{
	{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
	{Name: "n", Type: bigquery.NumericFieldType},
	{Name: "bn", Type: bigquery.BigNumericFieldType, Repeated: true},
	{Name: "d", Type: bigquery.DateFieldType},
	{Name: "tm", Type: bigquery.TimeFieldType},
	{Name: "dt", Type: bigquery.DateTimeFieldType},
	{Name: "ts", Type: bigquery.TimestampFieldType},
	{Name: "s", Type: bigquery.StringFieldType, MaxLength: 8},
	{Name: "j", Type: bigquery.JSONFieldType},
	{Name: "rec", Type: bigquery.RecordFieldType, Repeated: true, Schema: bigquery.Schema{
		{Name: "a", Type: bigquery.BooleanFieldType, Required: true},
		{Name: "g", Type: bigquery.GeographyFieldType},
	}},
}

// fuzzPlan is the plan of a writer whose descriptor adapt derives from
// fuzzSchema.
func fuzzPlan(t testing.TB) (*rowPlan, protoreflect.MessageDescriptor) {
	ts, err := adapt.BQSchemaToStorageTableSchema(fuzzSchema)
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
	ws, err := newWriterSchema(dp)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := newTable("projects/p/datasets/d/tables/t", Table{Schema: fuzzSchema})
	if err != nil {
		t.Fatal(err)
	}
	p, st := ws.plan(tb, "s")
	if st != nil {
		t.Fatal(st.Err())
	}
	return p, md
}

// FuzzDecodeRow: whatever bytes a row holds, decoding neither panics nor
// yields a row the read side could not serve (decodeRow checks each row it
// returns against the schema), and a refused request writes nothing.
func FuzzDecodeRow(f *testing.F) {
	_, md := fuzzPlan(f)
	m := dynamicpb.NewMessage(md)
	set := func(name string, v protoreflect.Value) { m.Set(md.Fields().ByName(protoreflect.Name(name)), v) }
	set("id", protoreflect.ValueOfInt64(1))
	set("n", protoreflect.ValueOfBytes([]byte{1, 2, 3}))
	set("d", protoreflect.ValueOfInt32(-719162))
	set("tm", protoreflect.ValueOfInt64(0x17EFBF423F))
	set("ts", protoreflect.ValueOfInt64(maxTimestampMicros))
	set("s", protoreflect.ValueOfString("héllo"))
	set("j", protoreflect.ValueOfString(`{"a":1}`))
	rec := m.Mutable(md.Fields().ByName("rec")).List()
	e := rec.NewElement()
	e.Message().Set(e.Message().Descriptor().Fields().ByName("a"), protoreflect.ValueOfBool(true))
	rec.Append(e)
	seed, err := proto.Marshal(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x01})
	f.Add(append(append([]byte{}, seed...), 0x78, 0x01))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, _ := fuzzPlan(t)
		rows, errs := p.decode([][]byte{b, b})
		if len(errs) > 0 && rows != nil {
			t.Fatalf("refused rows %v returned %d rows", errs, len(rows))
		}
		if len(errs) == 0 && len(rows) != 2 {
			t.Fatalf("%d rows", len(rows))
		}
		for _, re := range errs {
			if re.GetMessage() == "" || strings.Contains(re.GetMessage(), "internal error") {
				t.Fatalf("row error %q", re.GetMessage())
			}
		}
	})
}

// BenchmarkDecodeRows measures the server's side of an append: decoding
// and converting rows of fuzzSchema (per row; 500 rows a request).
func BenchmarkDecodeRows(b *testing.B) {
	p, md := fuzzPlan(b)
	m := dynamicpb.NewMessage(md)
	set := func(name string, v protoreflect.Value) { m.Set(md.Fields().ByName(protoreflect.Name(name)), v) }
	set("id", protoreflect.ValueOfInt64(123456))
	set("n", protoreflect.ValueOfBytes([]byte{1, 2, 3, 4, 5}))
	set("d", protoreflect.ValueOfInt32(19000))
	set("dt", protoreflect.ValueOfInt64(0x9C3F3F7EFB<<20))
	set("ts", protoreflect.ValueOfInt64(1700000000000000))
	set("s", protoreflect.ValueOfString("abcdefg"))
	row, err := proto.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	rows := make([][]byte, 500)
	for i := range rows {
		rows[i] = row
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(rows) {
		if _, errs := p.decode(rows); errs != nil {
			b.Fatal(errs)
		}
	}
}
