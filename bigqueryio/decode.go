package bigqueryio

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
)

// rowDecoder turns the rows of one ReadRows response into values, as the
// official client's RowIterator yields them ([]bigquery.Value per row).
type rowDecoder interface {
	// decode decodes every row of a response's payload, calling fn for
	// each in order; fn's row is valid only during the call. It fails when
	// the payload does not hold n rows, the response's count (after the
	// calls: the caller drops what fn kept).
	decode(payload []byte, n int64, fn func(row []bigquery.Value) error) error
}

// avroDecoder decodes the concatenated Avro datums of AvroRows with an
// avroReader, by the session's BigQuery schema.
type avroDecoder struct {
	schema bigquery.Schema
	r      avroReader
	row    []bigquery.Value
}

func newAvroDecoder(schema bigquery.Schema) *avroDecoder {
	return &avroDecoder{schema: schema, row: make([]bigquery.Value, len(schema))}
}

func (d *avroDecoder) decode(payload []byte, n int64, fn func([]bigquery.Value) error) error {
	r := &d.r
	r.reset(payload)
	// Rows until the bytes end: the schema has a column, so every row
	// takes a byte at least.
	var i int64
	for ; r.more(); i++ {
		for c, f := range d.schema {
			d.row[c] = readAvroField(r, f)
		}
		if err := r.err(); err != nil {
			return fmt.Errorf("Avro row %d of the response (whose row count is %d): %w", i, n, err)
		}
		if i < n {
			if err := fn(d.row); err != nil {
				return err
			}
		}
	}
	if i != n {
		return countMismatch(n, i)
	}
	return nil
}

func readAvroField(r *avroReader, f *bigquery.FieldSchema) bigquery.Value {
	switch {
	case f.Repeated:
		var items []bigquery.Value
		for {
			l := r.blockCount(f.Name)
			if l == 0 || r.Err() != nil {
				break
			}
			// Every item takes at least a byte (a RECORD has a field): a
			// hostile count ends at the end of the payload, with an error,
			// not in a huge allocation.
			for k := int64(0); k < l && r.Err() == nil; k++ {
				items = append(items, readAvroValue(r, f))
			}
		}
		if items == nil {
			items = []bigquery.Value{}
		}
		return items
	case f.Required:
		return readAvroValue(r, f)
	}
	off := r.Offset()
	switch idx := r.long(); idx {
	case 0:
		return nil
	case 1:
		return readAvroValue(r, f)
	default:
		r.FailAt(off, "union: branch %d of nullable column %s", idx, f.Name)
		return nil
	}
}

func readAvroValue(r *avroReader, f *bigquery.FieldSchema) bigquery.Value {
	switch f.Type {
	case bigquery.IntegerFieldType:
		return r.long()
	case bigquery.FloatFieldType:
		return r.double()
	case bigquery.BooleanFieldType:
		return r.boolean()
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		return r.str()
	case bigquery.BytesFieldType:
		return append([]byte{}, r.bytes()...)
	case bigquery.NumericFieldType, bigquery.BigNumericFieldType:
		return ratOf(twosComplement(r.bytes()), int(f.Scale))
	case bigquery.DateFieldType:
		return dateOf(int64(r.int("DATE")))
	case bigquery.TimeFieldType:
		return timeOf(r.long())
	case bigquery.TimestampFieldType:
		return time.UnixMicro(r.long()).UTC()
	case bigquery.DateTimeFieldType:
		off := r.Offset()
		s := r.str()
		if r.Err() != nil {
			return civil.DateTime{}
		}
		dt, err := civil.ParseDateTime(strings.Replace(s, " ", "T", 1))
		if err != nil {
			r.FailAt(off, "datetime: column %s of type DATETIME: %w", f.Name, err)
		}
		return dt
	case bigquery.RecordFieldType:
		vals := make([]bigquery.Value, len(f.Schema))
		for i, sf := range f.Schema {
			vals[i] = readAvroField(r, sf)
		}
		return vals
	}
	r.Fail("decode: column %s of type %s", f.Name, f.Type)
	return nil
}

func twosComplement(b []byte) *big.Int {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return n
}

var pow10 = func() []*big.Int {
	p := make([]*big.Int, 78)
	p[0] = big.NewInt(1)
	for i := 1; i < len(p); i++ {
		p[i] = new(big.Int).Mul(p[i-1], big.NewInt(10))
	}
	return p
}()

func ratOf(unscaled *big.Int, scale int) *big.Rat {
	if scale < 0 || scale >= len(pow10) {
		scale = 0
	}
	return new(big.Rat).SetFrac(unscaled, pow10[scale])
}

var epoch = civil.Date{Year: 1970, Month: time.January, Day: 1}

func dateOf(days int64) civil.Date { return epoch.AddDays(int(days)) }

func timeOf(micros int64) civil.Time {
	return civil.TimeOf(time.UnixMicro(micros).UTC())
}

// arrowDecoder decodes the IPC record batches of ArrowRecordBatch with
// Arrow's Go module, framing each batch after the session's schema message.
type arrowDecoder struct {
	schema bigquery.Schema
	header []byte // the session's IPC schema message
	arrowScratch
	row []bigquery.Value
}

func newArrowDecoder(schema bigquery.Schema, header []byte) *arrowDecoder {
	return &arrowDecoder{schema: schema, header: header, row: make([]bigquery.Value, len(schema))}
}

func (d *arrowDecoder) decode(payload []byte, n int64, fn func([]bigquery.Value) error) error {
	got, err := arrowBatches(&d.arrowScratch, d.header, payload, d.schema, func(rec arrow.Record, got int64) error {
		m := rec.NumRows()
		cols := rec.Columns()
		for c := range cols {
			if int64(cols[c].Len()) < m {
				return fmt.Errorf("Arrow column %s has %d values for %d rows", d.schema[c].Name, cols[c].Len(), m)
			}
		}
		for i := 0; i < int(m); i++ {
			for c, f := range d.schema {
				v, err := arrowValue(cols[c], i, f, false)
				if err != nil {
					return fmt.Errorf("Arrow row %d column %s: %w", got+int64(i), f.Name, err)
				}
				d.row[c] = v
			}
			if got+int64(i) < n {
				if err := fn(d.row); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if got != n {
		return countMismatch(n, got)
	}
	return nil
}

func arrowValue(a arrow.Array, i int, f *bigquery.FieldSchema, item bool) (bigquery.Value, error) {
	if f.Repeated && !item {
		l, ok := a.(*array.List)
		if !ok {
			return nil, fmt.Errorf("repeated column is a %s, want a list", a.DataType())
		}
		items := []bigquery.Value{}
		if l.IsNull(i) {
			return items, nil
		}
		start, end := l.ValueOffsets(i)
		for k := start; k < end; k++ {
			v, err := arrowValue(l.ListValues(), int(k), f, true)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return items, nil
	}
	if a.IsNull(i) {
		return nil, nil
	}
	switch x := a.(type) {
	case *array.Int64:
		return x.Value(i), nil
	case *array.Float64:
		return x.Value(i), nil
	case *array.Boolean:
		return x.Value(i), nil
	case *array.String:
		return strings.Clone(x.Value(i)), nil
	case *array.Binary:
		return append([]byte{}, x.Value(i)...), nil
	case *array.Decimal128:
		if f.Type != bigquery.NumericFieldType {
			break // a precision or scale BigQuery does not have
		}
		return ratOf(x.Value(i).BigInt(), int(x.DataType().(*arrow.Decimal128Type).Scale)), nil
	case *array.Decimal256:
		if f.Type != bigquery.BigNumericFieldType {
			break
		}
		return ratOf(x.Value(i).BigInt(), int(x.DataType().(*arrow.Decimal256Type).Scale)), nil
	case *array.Date32:
		return dateOf(int64(x.Value(i))), nil
	case *array.Time64:
		if f.Type != bigquery.TimeFieldType {
			break // another unit: a column of an unknown type
		}
		return timeOf(int64(x.Value(i))), nil
	case *array.Timestamp:
		if f.Type != bigquery.TimestampFieldType && f.Type != bigquery.DateTimeFieldType {
			break // another unit
		}
		t := time.UnixMicro(int64(x.Value(i))).UTC()
		if f.Type == bigquery.DateTimeFieldType {
			return civil.DateTimeOf(t), nil
		}
		return t, nil
	case *array.Struct:
		vals := make([]bigquery.Value, len(f.Schema))
		for k, sf := range f.Schema {
			v, err := arrowValue(x.Field(k), i, sf, false)
			if err != nil {
				return nil, err
			}
			vals[k] = v
		}
		return vals, nil
	}
	return nil, fmt.Errorf("a value of Arrow type %s (column type %s), which this package does not convert", a.DataType(), f.Type)
}
