package bqcore

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/internal/wire"
)

// Row is a generic row: Read(s, table, reflect.TypeOf(bigqueryio.Row{}))
// reads every selected column by name, as the official client's
// RowIterator.Next fills a map[string]bigquery.Value: NULL is nil; INTEGER
// int64; FLOAT float64; BOOLEAN bool; STRING, GEOGRAPHY (WKT) and JSON
// string; BYTES []byte; NUMERIC and BIGNUMERIC *big.Rat; DATE civil.Date;
// TIME civil.Time; DATETIME civil.DateTime; TIMESTAMP time.Time (UTC); a
// RECORD a map[string]bigquery.Value of its fields; a repeated column a
// []bigquery.Value of its items (empty, never nil, when it has none).
//
// Row has a Beam coder of its own (registered by this package) that keeps
// every one of those values exactly, so rows can go through a GroupByKey or
// a Reshuffle. It refuses values of any other Go type, naming the column.
type Row map[string]bigquery.Value

func init() {
	beam.RegisterType(reflect.TypeOf(Row(nil)))
	beam.RegisterCoder(reflect.TypeOf(Row(nil)), EncodeRow, DecodeRow)
}

var TypeOfRow = reflect.TypeOf(Row(nil))

// RowOf is the Row of the values of one row of schema; it keeps nothing of
// vals (records and repeated values are new slices of the decoders).
func RowOf(schema bigquery.Schema, vals []bigquery.Value) Row {
	r := make(Row, len(schema))
	fillMap(r, schema, vals)
	return r
}

func fillMap(m map[string]bigquery.Value, schema bigquery.Schema, vals []bigquery.Value) {
	for i, f := range schema {
		m[f.Name] = genericValue(f, vals[i], false)
	}
}

func genericValue(f *bigquery.FieldSchema, v bigquery.Value, item bool) bigquery.Value {
	switch {
	case f.Repeated && !item:
		items, _ := v.([]bigquery.Value)
		if items == nil {
			return []bigquery.Value{}
		}
		if f.Type == bigquery.RecordFieldType {
			for k, it := range items {
				items[k] = genericValue(f, it, true)
			}
		}
		return items
	case v == nil:
		return nil
	case f.Type == bigquery.RecordFieldType:
		m := make(map[string]bigquery.Value, len(f.Schema))
		fillMap(m, f.Schema, v.([]bigquery.Value))
		return m
	}
	return v
}

// The tags of the values in a Row's encoding.
const (
	tagNull byte = iota
	tagInt64
	tagFloat64
	tagBool
	tagString
	tagBytes
	tagRat
	tagDate
	tagTime
	tagDateTime
	tagTimestamp
	tagList
	tagMap
)

// maxRowDepth bounds the nesting of records and lists in an encoded Row
// (BigQuery allows 15 levels of RECORD).
const maxRowDepth = 64

// EncodeRow is Row's Beam coder: each column, in the order of the names, as
// its name and a tagged value. It fails on a value of a type that Row does
// not hold, naming the column.
func EncodeRow(r Row) ([]byte, error) {
	b := binary.AppendUvarint(nil, uint64(len(r)))
	return appendMap(b, r, 0)
}

func appendMap(b []byte, m map[string]bigquery.Value, depth int) ([]byte, error) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b = appendString(b, k)
		var err error
		if b, err = appendValue(b, m[k], depth); err != nil {
			return nil, fmt.Errorf("column %s: %w", k, err)
		}
	}
	return b, nil
}

func appendString(b []byte, s string) []byte { return wire.AppendString(b, s) }

func appendBigInt(b []byte, n *big.Int) []byte {
	sign := byte(0)
	if n.Sign() < 0 {
		sign = 1
	}
	abs := n.Bytes()
	b = append(b, sign)
	b = binary.AppendUvarint(b, uint64(len(abs)))
	return append(b, abs...)
}

func appendValue(b []byte, v bigquery.Value, depth int) ([]byte, error) {
	if depth > maxRowDepth {
		return nil, fmt.Errorf("values nested deeper than %d levels", maxRowDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(b, tagNull), nil
	case int64:
		return binary.AppendVarint(append(b, tagInt64), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat64), math.Float64bits(x)), nil
	case bool:
		if x {
			return append(b, tagBool, 1), nil
		}
		return append(b, tagBool, 0), nil
	case string:
		return appendString(append(b, tagString), x), nil
	case []byte:
		if x == nil {
			return append(b, tagNull), nil
		}
		return append(binary.AppendUvarint(append(b, tagBytes), uint64(len(x))), x...), nil
	case *big.Rat:
		if x == nil {
			return append(b, tagNull), nil
		}
		return appendBigInt(appendBigInt(append(b, tagRat), x.Num()), x.Denom()), nil
	case civil.Date:
		return appendDate(append(b, tagDate), x), nil
	case civil.Time:
		return appendTime(append(b, tagTime), x), nil
	case civil.DateTime:
		return appendTime(appendDate(append(b, tagDateTime), x.Date), x.Time), nil
	case time.Time:
		b = binary.AppendVarint(append(b, tagTimestamp), x.Unix())
		return binary.AppendUvarint(b, uint64(x.Nanosecond())), nil
	case []bigquery.Value:
		b = binary.AppendUvarint(append(b, tagList), uint64(len(x)))
		for i, it := range x {
			var err error
			if b, err = appendValue(b, it, depth+1); err != nil {
				return nil, fmt.Errorf("item %d: %w", i, err)
			}
		}
		return b, nil
	case map[string]bigquery.Value:
		b = binary.AppendUvarint(append(b, tagMap), uint64(len(x)))
		return appendMap(b, x, depth+1)
	case Row:
		b = binary.AppendUvarint(append(b, tagMap), uint64(len(x)))
		return appendMap(b, x, depth+1)
	}
	return nil, fmt.Errorf("a bigqueryio.Row holds no values of type %T", v)
}

func appendDate(b []byte, d civil.Date) []byte {
	b = binary.AppendVarint(b, int64(d.Year))
	b = binary.AppendVarint(b, int64(d.Month))
	return binary.AppendVarint(b, int64(d.Day))
}

func appendTime(b []byte, t civil.Time) []byte {
	b = binary.AppendVarint(b, int64(t.Hour))
	b = binary.AppendVarint(b, int64(t.Minute))
	b = binary.AppendVarint(b, int64(t.Second))
	return binary.AppendVarint(b, int64(t.Nanosecond))
}

// DecodeRow is the inverse of EncodeRow. Bad input is an error naming the
// byte offset, never a panic; no count in it allocates more than its bytes
// can hold.
func DecodeRow(b []byte) (Row, error) {
	d := rowReader{wire.NewReader(b)}
	n := d.Count(1)
	r := make(Row, n)
	d.fillMap(r, n, 0)
	if err := d.Done("row"); err != nil {
		return nil, fmt.Errorf("bigqueryio: decoding a Row: %w", err)
	}
	return r, nil
}

// rowReader decodes EncodeRow's encoding (internal/wire: errors name the
// byte offset; no count allocates more than the bytes left can hold).
type rowReader struct{ *wire.Reader }

func (d rowReader) bigInt() *big.Int {
	neg := d.Byte()
	n := new(big.Int).SetBytes(d.Bytes())
	if neg == 1 {
		n.Neg(n)
	}
	return n
}

func (d rowReader) fillMap(m map[string]bigquery.Value, n, depth int) {
	for i := 0; i < n && d.Err() == nil; i++ {
		k := d.Str()
		m[k] = d.value(depth)
	}
}

func (d rowReader) date() civil.Date {
	y, mo, day := d.Int32("date or time part"), d.Int32("date or time part"), d.Int32("date or time part")
	return civil.Date{Year: y, Month: time.Month(mo), Day: day}
}

func (d rowReader) civilTime() civil.Time {
	h, mi, s, ns := d.Int32("date or time part"), d.Int32("date or time part"), d.Int32("date or time part"), d.Int32("date or time part")
	return civil.Time{Hour: h, Minute: mi, Second: s, Nanosecond: ns}
}

func (d rowReader) value(depth int) bigquery.Value {
	if depth > maxRowDepth {
		d.Fail("values nested deeper than %d levels", maxRowDepth)
		return nil
	}
	switch tag := d.Byte(); tag {
	case tagNull:
		return nil
	case tagInt64:
		return d.Varint()
	case tagFloat64:
		v := math.Float64frombits(d.Uint64())
		if d.Err() != nil {
			return nil
		}
		return v
	case tagBool:
		return d.Byte() != 0
	case tagString:
		return d.Str()
	case tagBytes:
		return append([]byte{}, d.Bytes()...)
	case tagRat:
		num, den := d.bigInt(), d.bigInt()
		if d.Err() == nil && den.Sign() == 0 {
			d.Fail("a NUMERIC with denominator 0")
		}
		if d.Err() != nil {
			return nil
		}
		return new(big.Rat).SetFrac(num, den)
	case tagDate:
		return d.date()
	case tagTime:
		return d.civilTime()
	case tagDateTime:
		dt := d.date()
		return civil.DateTime{Date: dt, Time: d.civilTime()}
	case tagTimestamp:
		s := d.Varint()
		ns := d.Uvarint()
		if ns >= 1e9 {
			d.Fail("a TIMESTAMP with %d nanoseconds", ns)
		}
		return time.Unix(s, int64(ns)).UTC()
	case tagList:
		n := d.Count(1)
		items := make([]bigquery.Value, 0, n)
		for i := 0; i < n && d.Err() == nil; i++ {
			items = append(items, d.value(depth+1))
		}
		return items
	case tagMap:
		n := d.Count(1)
		m := make(map[string]bigquery.Value, n)
		d.fillMap(m, n, depth+1)
		return m
	default:
		d.FailAt(d.Offset()-1, "unknown value tag %d", tag)
		return nil
	}
}
