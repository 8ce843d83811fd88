package bqtest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
)

// avroSchemaJSON is the Avro schema the service sends for a (projected)
// table schema: a record named __root__, nullable columns as a union with
// null, repeated columns as arrays, BigQuery types mapped as the Storage Read
// API documents (NUMERIC and BIGNUMERIC as decimal bytes, DATE as date,
// TIME as time-micros, TIMESTAMP as timestamp-micros, DATETIME as a string of
// logical type datetime, GEOGRAPHY and JSON as strings with an sqlType).
// With dtSQL, DATETIME is a string with sqlType DATETIME instead, as in
// BigQuery's Avro exports.
func avroSchemaJSON(schema bigquery.Schema, dtSQL bool) (string, error) {
	root, err := avroRecord("__root__", schema, nil, dtSQL)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(root)
	return string(b), err
}

func avroRecord(name string, schema bigquery.Schema, path []string, dtSQL bool) (map[string]any, error) {
	fields := make([]any, 0, len(schema))
	for _, f := range schema {
		t, err := avroFieldType(f, append(path, f.Name), dtSQL)
		if err != nil {
			return nil, err
		}
		fields = append(fields, map[string]any{"name": f.Name, "type": t})
	}
	return map[string]any{"type": "record", "name": name, "fields": fields}, nil
}

// avroAnnotated is the Avro type of the columns sent as an annotated
// primitive: the primitive, the annotation (logicalType or sqlType) and its
// value.
var avroAnnotated = map[bigquery.FieldType][3]string{
	bigquery.DateFieldType:      {"int", "logicalType", "date"},
	bigquery.TimeFieldType:      {"long", "logicalType", "time-micros"},
	bigquery.TimestampFieldType: {"long", "logicalType", "timestamp-micros"},
	bigquery.DateTimeFieldType:  {"string", "logicalType", "datetime"},
	bigquery.GeographyFieldType: {"string", "sqlType", "GEOGRAPHY"},
	bigquery.JSONFieldType:      {"string", "sqlType", "JSON"},
}

func avroFieldType(f *bigquery.FieldSchema, path []string, dtSQL bool) (any, error) {
	var t any
	switch f.Type {
	case bigquery.IntegerFieldType:
		t = "long"
	case bigquery.FloatFieldType:
		t = "double"
	case bigquery.BooleanFieldType:
		t = "boolean"
	case bigquery.StringFieldType:
		t = "string"
	case bigquery.BytesFieldType:
		t = "bytes"
	case bigquery.NumericFieldType:
		t = map[string]any{"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9}
	case bigquery.BigNumericFieldType:
		t = map[string]any{"type": "bytes", "logicalType": "decimal", "precision": 77, "scale": 38}
	case bigquery.DateFieldType, bigquery.TimeFieldType, bigquery.TimestampFieldType, bigquery.DateTimeFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		a := avroAnnotated[f.Type]
		if f.Type == bigquery.DateTimeFieldType && dtSQL {
			a = [3]string{"string", "sqlType", "DATETIME"}
		}
		t = map[string]any{"type": a[0], a[1]: a[2]}
	case bigquery.RecordFieldType:
		r, err := avroRecord("__"+strings.Join(path, "__"), f.Schema, path, dtSQL)
		if err != nil {
			return nil, err
		}
		t = r
	default:
		return nil, fmt.Errorf("bqtest: column %s has type %s, which bqtest does not serve", strings.Join(path, "."), f.Type)
	}
	switch {
	case f.Repeated:
		return map[string]any{"type": "array", "items": t}, nil
	case f.Required:
		return t, nil
	}
	return []any{"null", t}, nil
}

// avroEncoder appends Avro binary datums.
type avroEncoder struct{ buf []byte }

func (e *avroEncoder) long(v int64) {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		e.buf = append(e.buf, byte(u)|0x80)
		u >>= 7
	}
	e.buf = append(e.buf, byte(u))
}

func (e *avroEncoder) bytes(b []byte) {
	e.long(int64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *avroEncoder) row(schema bigquery.Schema, row []bigquery.Value) {
	for i, f := range schema {
		e.field(f, row[i])
	}
}

// projected appends the row of schema whose column i is full[cols[i]].
func (e *avroEncoder) projected(schema bigquery.Schema, full []bigquery.Value, cols []int) {
	for i, f := range schema {
		e.field(f, full[cols[i]])
	}
}

func (e *avroEncoder) field(f *bigquery.FieldSchema, v bigquery.Value) {
	switch {
	case f.Repeated:
		items, _ := v.([]bigquery.Value)
		if len(items) > 0 {
			e.long(int64(len(items)))
			for _, it := range items {
				e.value(f, it)
			}
		}
		e.long(0)
	case f.Required:
		e.value(f, v)
	case v == nil:
		e.long(0)
	default:
		e.long(1)
		e.value(f, v)
	}
}

func (e *avroEncoder) value(f *bigquery.FieldSchema, v bigquery.Value) {
	switch f.Type {
	case bigquery.IntegerFieldType:
		e.long(v.(int64))
	case bigquery.FloatFieldType:
		b := math.Float64bits(v.(float64))
		e.buf = append(e.buf, byte(b), byte(b>>8), byte(b>>16), byte(b>>24), byte(b>>32), byte(b>>40), byte(b>>48), byte(b>>56))
	case bigquery.BooleanFieldType:
		if v.(bool) {
			e.buf = append(e.buf, 1)
		} else {
			e.buf = append(e.buf, 0)
		}
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		s := v.(string)
		e.long(int64(len(s)))
		e.buf = append(e.buf, s...)
	case bigquery.BytesFieldType:
		e.bytes(v.([]byte))
	case bigquery.NumericFieldType:
		e.bytes(decimalBytes(v.(*big.Rat), 9))
	case bigquery.BigNumericFieldType:
		e.bytes(decimalBytes(v.(*big.Rat), 38))
	case bigquery.DateFieldType:
		e.long(dateDays(v.(civil.Date)))
	case bigquery.TimeFieldType:
		e.long(timeMicros(v.(civil.Time)))
	case bigquery.TimestampFieldType:
		e.long(v.(time.Time).UnixMicro())
	case bigquery.DateTimeFieldType:
		e.bytes([]byte(v.(civil.DateTime).String()))
	case bigquery.RecordFieldType:
		e.row(f.Schema, v.([]bigquery.Value))
	}
}

// scaled returns r * 10^scale, rounded toward zero.
func scaled(r *big.Rat, scale int) *big.Int {
	n := new(big.Int).Mul(r.Num(), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
	return n.Quo(n, r.Denom())
}

// decimalBytes is the Avro decimal encoding: the unscaled value as a
// big-endian two's-complement integer.
func decimalBytes(r *big.Rat, scale int) []byte {
	n := scaled(r, scale)
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// Two's complement of a negative number in the fewest bytes.
	l := len(n.Bytes()) + 1
	m := new(big.Int).Lsh(big.NewInt(1), uint(8*l))
	b := new(big.Int).Add(m, n).Bytes()
	for len(b) < l {
		b = append([]byte{0xff}, b...)
	}
	for len(b) > 1 && b[0] == 0xff && b[1]&0x80 != 0 {
		b = b[1:]
	}
	return b
}

var epochDate = civil.Date{Year: 1970, Month: time.January, Day: 1}

func dateDays(d civil.Date) int64 { return int64(d.DaysSince(epochDate)) }

func timeMicros(t civil.Time) int64 {
	return ((int64(t.Hour)*60+int64(t.Minute))*60+int64(t.Second))*1e6 + int64(t.Nanosecond)/1e3
}
