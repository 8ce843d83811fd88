package bqtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/decimal128"
	"github.com/apache/arrow/go/v15/arrow/decimal256"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// extensionKey is the field metadata key under which the service names the
// SQL type of GEOGRAPHY and JSON columns sent as Arrow strings.
const extensionKey = "ARROW:extension:name"

// arrowSchema is the Arrow schema the service sends for a table schema:
// NUMERIC as decimal128(38, 9), BIGNUMERIC as decimal256(76, 38), DATE as
// date32, TIME as time64[us], TIMESTAMP as timestamp[us, UTC], DATETIME as
// timestamp[us] without a zone, GEOGRAPHY and JSON as strings marked with
// the extension names google:sqlType:geography and google:sqlType:json,
// records as structs and repeated columns as lists.
func arrowSchema(schema bigquery.Schema) (*arrow.Schema, error) {
	fields, err := arrowFields(schema, nil)
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

func arrowFields(schema bigquery.Schema, path []string) ([]arrow.Field, error) {
	out := make([]arrow.Field, 0, len(schema))
	for _, f := range schema {
		p := append(path, f.Name)
		var t arrow.DataType
		var md arrow.Metadata
		switch f.Type {
		case bigquery.IntegerFieldType:
			t = arrow.PrimitiveTypes.Int64
		case bigquery.FloatFieldType:
			t = arrow.PrimitiveTypes.Float64
		case bigquery.BooleanFieldType:
			t = arrow.FixedWidthTypes.Boolean
		case bigquery.StringFieldType:
			t = arrow.BinaryTypes.String
		case bigquery.BytesFieldType:
			t = arrow.BinaryTypes.Binary
		case bigquery.NumericFieldType:
			t = &arrow.Decimal128Type{Precision: 38, Scale: 9}
		case bigquery.BigNumericFieldType:
			t = &arrow.Decimal256Type{Precision: 76, Scale: 38}
		case bigquery.DateFieldType:
			t = arrow.FixedWidthTypes.Date32
		case bigquery.TimeFieldType:
			t = arrow.FixedWidthTypes.Time64us
		case bigquery.TimestampFieldType:
			t = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
		case bigquery.DateTimeFieldType:
			t = &arrow.TimestampType{Unit: arrow.Microsecond}
		case bigquery.GeographyFieldType:
			t = arrow.BinaryTypes.String
			md = arrow.NewMetadata([]string{extensionKey}, []string{"google:sqlType:geography"})
		case bigquery.JSONFieldType:
			t = arrow.BinaryTypes.String
			md = arrow.NewMetadata([]string{extensionKey}, []string{"google:sqlType:json"})
		case bigquery.RecordFieldType:
			sub, err := arrowFields(f.Schema, p)
			if err != nil {
				return nil, err
			}
			t = arrow.StructOf(sub...)
		default:
			return nil, fmt.Errorf("bqtest: column %s has type %s, which bqtest does not serve", strings.Join(p, "."), f.Type)
		}
		if f.Repeated {
			t = arrow.ListOfField(arrow.Field{Name: "item", Type: t, Nullable: false, Metadata: md})
			md = arrow.Metadata{}
		}
		out = append(out, arrow.Field{Name: f.Name, Type: t, Nullable: !f.Required && !f.Repeated, Metadata: md})
	}
	return out, nil
}

// arrowSchemaBytes is the IPC-encapsulated schema message, as
// ArrowSchema.serialized_schema carries it.
func arrowSchemaBytes(s *arrow.Schema) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Close(); err != nil { // writes the schema and the end-of-stream marker
		return nil, err
	}
	b := buf.Bytes()
	if len(b) < 8 || binary.LittleEndian.Uint32(b) != 0xFFFFFFFF {
		return nil, fmt.Errorf("bqtest: unexpected Arrow IPC framing")
	}
	n := 8 + int(binary.LittleEndian.Uint32(b[4:]))
	return append([]byte(nil), b[:n]...), nil
}

// arrowBatch encodes rows as one IPC record batch message (without the
// schema), as ArrowRecordBatch.serialized_record_batch carries it.
func arrowBatch(s *arrow.Schema, schema bigquery.Schema, schemaBytes []byte, rows [][]bigquery.Value) ([]byte, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	for _, row := range rows {
		for i, f := range schema {
			appendArrow(b.Field(i), f, row[i], false)
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(s))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	if !bytes.HasPrefix(out, schemaBytes) {
		return nil, fmt.Errorf("bqtest: Arrow IPC stream does not start with its schema message")
	}
	out = out[len(schemaBytes):]
	out = out[:len(out)-8] // end-of-stream marker
	return append([]byte(nil), out...), nil
}

func appendArrow(b array.Builder, f *bigquery.FieldSchema, v bigquery.Value, item bool) {
	if f.Repeated && !item {
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		items, _ := v.([]bigquery.Value)
		for _, it := range items {
			appendArrow(lb.ValueBuilder(), f, it, true)
		}
		return
	}
	if v == nil {
		b.AppendNull()
		return
	}
	switch f.Type {
	case bigquery.IntegerFieldType:
		b.(*array.Int64Builder).Append(v.(int64))
	case bigquery.FloatFieldType:
		b.(*array.Float64Builder).Append(v.(float64))
	case bigquery.BooleanFieldType:
		b.(*array.BooleanBuilder).Append(v.(bool))
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		b.(*array.StringBuilder).Append(v.(string))
	case bigquery.BytesFieldType:
		b.(*array.BinaryBuilder).Append(v.([]byte))
	case bigquery.NumericFieldType:
		b.(*array.Decimal128Builder).Append(decimal128.FromBigInt(scaled(v.(*big.Rat), 9)))
	case bigquery.BigNumericFieldType:
		b.(*array.Decimal256Builder).Append(decimal256Of(scaled(v.(*big.Rat), 38)))
	case bigquery.DateFieldType:
		b.(*array.Date32Builder).Append(arrow.Date32(dateDays(v.(civil.Date))))
	case bigquery.TimeFieldType:
		b.(*array.Time64Builder).Append(arrow.Time64(timeMicros(v.(civil.Time))))
	case bigquery.TimestampFieldType:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.(time.Time).UnixMicro()))
	case bigquery.DateTimeFieldType:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.(civil.DateTime).In(time.UTC).UnixMicro()))
	case bigquery.RecordFieldType:
		sb := b.(*array.StructBuilder)
		sb.Append(true)
		vals := v.([]bigquery.Value)
		for i, sf := range f.Schema {
			appendArrow(sb.FieldBuilder(i), sf, vals[i], false)
		}
	}
}

// decimal256Of is decimal256.FromBigInt, which refuses -2^255 (the unscaled
// BIGNUMERIC minimum) though it fits.
func decimal256Of(n *big.Int) decimal256.Num {
	if n.Sign() < 0 && n.BitLen() == 256 && n.TrailingZeroBits() == 255 {
		return decimal256.New(1<<63, 0, 0, 0)
	}
	return decimal256.FromBigInt(n)
}
