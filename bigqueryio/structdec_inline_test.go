package bigqueryio

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
)

// inlineRow has a field of each kind decodeAvro reads inline (avroCol).
type inlineRow struct {
	I  int64
	NI bigquery.NullInt64
	F  float64
	NF bigquery.NullFloat64
	B  bool
	NB bigquery.NullBool
	S  string
	NS bigquery.NullString
	PI int // nullable column into a plain field: NULL fails
	J  string
}

var inlineSchema = bigquery.Schema{
	{Name: "i", Type: bigquery.IntegerFieldType, Required: true},
	{Name: "ni", Type: bigquery.IntegerFieldType},
	{Name: "f", Type: bigquery.FloatFieldType, Required: true},
	{Name: "nf", Type: bigquery.FloatFieldType},
	{Name: "b", Type: bigquery.BooleanFieldType, Required: true},
	{Name: "nb", Type: bigquery.BooleanFieldType},
	{Name: "s", Type: bigquery.StringFieldType, Required: true},
	{Name: "ns", Type: bigquery.StringFieldType},
	{Name: "pi", Type: bigquery.IntegerFieldType},
	{Name: "j", Type: bigquery.JSONFieldType, Required: true},
}

// avroRow appends the Avro encoding of a row of inlineSchema; a nil
// value of a nullable column is NULL.
func avroRow(b []byte, i int64, ni *int64, f float64, nf *float64, bo bool, nb *bool, s string, ns *string, pi *int64, j string) []byte {
	long := func(v int64) { b = binary.AppendVarint(b, v) }
	str := func(s string) { long(int64(len(s))); b = append(b, s...) }
	dbl := func(v float64) { b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v)) }
	boo := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	// branch writes the union branch of a nullable column: 1 for a
	// value, 0 for NULL.
	branch := func(value bool) bool {
		if value {
			long(1)
		} else {
			long(0)
		}
		return value
	}
	long(i)
	if branch(ni != nil) {
		long(*ni)
	}
	dbl(f)
	if branch(nf != nil) {
		dbl(*nf)
	}
	boo(bo)
	if branch(nb != nil) {
		boo(*nb)
	}
	str(s)
	if branch(ns != nil) {
		str(*ns)
	}
	if branch(pi != nil) {
		long(*pi)
	}
	str(j)
	return b
}

// TestAvroRowInline checks that the inline row decoder (rowInline) gives
// what the column by column one gives (readColumn through the avroOps),
// value for value and error for error, on valid rows and on every
// truncation and many one-byte corruptions of them.
func TestAvroRowInline(t *testing.T) {
	d, err := newStructDecoder(reflect.TypeOf(inlineRow{}), inlineSchema, int32(Avro), nil, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	if !d.inline {
		t.Fatal("the decoder of inlineRow does not decode inline")
	}
	slow := *d
	slow.inline = false
	// The column by column path, through the avroOps themselves.
	slow.cols = make([]avroCol, len(d.cols))
	slow.r = avroReader{}
	p := func(v int64) *int64 { return &v }
	pf := func(v float64) *float64 { return &v }
	pb := func(v bool) *bool { return &v }
	ps := func(v string) *string { return &v }
	var payload []byte
	payload = avroRow(payload, 0, p(1), 0.5, pf(-2), true, pb(false), "", ps("x"), p(7), "{}")
	payload = avroRow(payload, -1<<40, nil, math.Inf(-1), nil, false, nil, "héllo", nil, p(-64), `{"a":1}`)
	payload = avroRow(payload, math.MaxInt64, p(math.MinInt64), math.NaN(), pf(0), true, pb(true), strings.Repeat("long", 100), ps(strings.Repeat("y", 300)), p(63), "")
	threeRows := len(payload)
	payload = avroRow(payload, 64, p(-65), 1, pf(1), false, pb(true), "s", ps(""), nil, "j") // NULL into PI: fails
	rows := int64(4)

	check := func(name string, payload []byte, n int64) {
		t.Helper()
		var fb, sb batch
		ferr := d.decodeBatch(payload, n, &fb)
		serr := slow.decodeBatch(payload, n, &sb)
		if fmt.Sprint(ferr) != fmt.Sprint(serr) {
			t.Fatalf("%s: inline error %v, column by column %v", name, ferr, serr)
		}
		if fb.len != sb.len {
			t.Fatalf("%s: inline decoded %d rows, column by column %d", name, fb.len, sb.len)
		}
		for i := 0; i < fb.len; i++ {
			fv, sv := *(*inlineRow)(fb.row(i)), *(*inlineRow)(sb.row(i))
			// NaN != NaN: compare the bits.
			if math.Float64bits(fv.F) != math.Float64bits(sv.F) {
				t.Fatalf("%s: row %d: F %v, column by column %v", name, i, fv.F, sv.F)
			}
			fv.F, sv.F = 0, 0
			if !reflect.DeepEqual(fv, sv) {
				t.Fatalf("%s: row %d: inline %+v, column by column %+v", name, i, fv, sv)
			}
		}
	}
	check("whole", payload, rows)
	check("three rows", payload[:threeRows], 3)
	for k := 0; k < len(payload); k++ {
		check(fmt.Sprintf("cut at %d", k), payload[:k], rows)
		for _, c := range []byte{0, 1, 2, 3, 4, 0x7f, 0x80, 0x81, 0xfe, 0xff} {
			bad := append([]byte(nil), payload...)
			bad[k] = c
			check(fmt.Sprintf("byte %d = %#x", k, c), bad, rows)
		}
	}
	// A long union branch (0x82 0x00 is 1 in two bytes) is read column by
	// column.
	long := []byte{0, 0x82, 0, 2}
	long = binary.LittleEndian.AppendUint64(long, 0)
	long = append(long, 0, 0, 0, 0, 0, 2, 0) // nf NULL, b false, nb NULL, s "", ns NULL, pi 0
	long = append(long, 2, 'j')
	check("long branch", long, 1)
	var b batch
	if err := d.decodeBatch(long, 1, &b); err != nil || b.len != 1 || (*(*inlineRow)(b.row(0))).NI != (bigquery.NullInt64{Int64: 1, Valid: true}) {
		t.Errorf("long branch: %v, %d rows", err, b.len)
	}
}
