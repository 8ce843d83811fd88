package bigqueryio

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"time"
	"unsafe"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"

	"github.com/sdfio/sdfio/internal/box"
)

// A batchDecoder decodes the rows of one ReadRows response into a batch of
// the values the reader emits. The values are new: they outlive the next
// call.
type batchDecoder interface {
	decodeBatch(payload []byte, n int64, b *batch) error
}

// batch is the values of the rows of one response, in order: for a struct
// type T, len structs in new [rowChunk]T chunks (b.size apart), each
// emitted as an interface value pointing at its struct (internal/box: no
// copy, no allocation per row; chunks are never written again, since a
// fused downstream DoFn may keep a value long after it was emitted); for
// other types, vals.
type batch struct {
	chunks []unsafe.Pointer
	size   uintptr
	box    box.Boxer
	vals   []any
	len    int
}

// rowChunk is how many rows of a response share an allocation: a row a
// downstream DoFn keeps keeps the others of its chunk alive (and their
// strings), not the whole response's (thousands of rows).
const rowChunk = 32

// at is the value of row i of the batch.
func (b *batch) at(i int) any {
	if b.vals != nil {
		return b.vals[i]
	}
	return b.box.Box(b.row(i))
}

// row is the address of struct i of the batch.
func (b *batch) row(i int) unsafe.Pointer {
	return unsafe.Add(b.chunks[i/rowChunk], uintptr(i%rowChunk)*b.size)
}

// valuesDecoder makes values of the rows of a rowDecoder with conv (conv
// must copy what it keeps of the row).
type valuesDecoder struct {
	rows rowDecoder
	conv func([]bigquery.Value) (any, error)
}

func (d valuesDecoder) decodeBatch(payload []byte, n int64, b *batch) error {
	// The count is the server's: the capacity is bounded by the payload.
	out := make([]any, 0, min(max(n, 0), int64(len(payload))+1))
	err := d.rows.decode(payload, n, func(row []bigquery.Value) error {
		v, err := d.conv(row)
		if err != nil {
			return fmt.Errorf("row %d of %d in the response: %w", len(out), n, err)
		}
		out = append(out, v)
		return nil
	})
	*b = batch{vals: out, len: len(out)}
	return err
}

// structDecoder decodes rows straight into a new []T per response, T a
// struct type, with no bigquery.Value in between for the common column
// types (see fastAvro and fastArrow): each column is compiled to an
// operation writing its field. Other columns (RECORD, repeated, NUMERIC,
// BYTES, TIME, DATETIME, narrow integer fields) go through the
// []bigquery.Value decoders and the loader, one column at a time.
type structDecoder struct {
	typ    reflect.Type
	chunks *[rowChunk + 1]reflect.Type // [k]typ, a chunk of k rows
	format int32
	box    box.Boxer
	schema bigquery.Schema
	avro   []avroOp  // one per column, for AVRO
	cols   []avroCol // one per column, for AVRO: how decodeAvro reads it
	inline bool      // every column is inline (no avroViaOp): rows go through rowInline
	arrow  []arrowOp // one per column, for ARROW
	header []byte    // the session's IPC schema message, for ARROW
	r      avroReader
	arrowScratch
}

// avroOp decodes one column of a row into the struct at p.
type avroOp func(r *avroReader, p unsafe.Pointer) error

// avroInlineKind is a column decodeAvro reads inline, with no call through
// its avroOp (two indirect calls per column and row): a scalar column into
// a field of its own Go type, the common case. Every other column is
// avroViaOp. When every column of a row is inline, rowInline reads the
// whole row from the payload's bytes (issue 39: about a third less decoding
// CPU per row than column by column, BenchmarkDecode avro/struct against
// avro/struct_columns).
type avroInlineKind uint8

const (
	avroViaOp avroInlineKind = iota // through the column's avroOp
	avroInt64
	avroNullInt64
	avroFloat64
	avroNullFloat64
	avroBool
	avroNullBool
	avroString // STRING, GEOGRAPHY or JSON into a string field
	avroNullString
)

// avroCol is how decodeAvro reads one column: what avroColumn's fast path
// does, inline.
type avroCol struct {
	kind     avroInlineKind
	nullable bool    // the column is a union with null (not REQUIRED)
	null     bool    // the field holds NULL (a bigquery.Null type)
	off      uintptr // the field's offset in the struct
	field    structField
}

// avroInline is how decodeAvro reads column sf into field f (ok false: no
// field): the cases of fastAvro that avroInlineKind names, else avroViaOp.
func avroInline(sf *bigquery.FieldSchema, f structField, ok bool) avroCol {
	if !ok || sf.Repeated || f.ViaPtr {
		return avroCol{}
	}
	ft := f.Typ
	k := avroViaOp
	switch sf.Type {
	case bigquery.IntegerFieldType:
		switch {
		case ft.Kind() == reflect.Int64 || ft.Kind() == reflect.Int && ft.Size() == 8:
			k = avroInt64
		case ft == typeOfNullInt64:
			k = avroNullInt64
		}
	case bigquery.FloatFieldType:
		switch {
		case ft.Kind() == reflect.Float64:
			k = avroFloat64
		case ft == typeOfNullFloat64:
			k = avroNullFloat64
		}
	case bigquery.BooleanFieldType:
		switch {
		case ft.Kind() == reflect.Bool:
			k = avroBool
		case ft == typeOfNullBool:
			k = avroNullBool
		}
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		switch {
		case ft.Kind() == reflect.String:
			k = avroString
		case ft == typeOfNullString:
			k = avroNullString
		}
	}
	if k == avroViaOp {
		return avroCol{}
	}
	null := k == avroNullInt64 || k == avroNullFloat64 || k == avroNullBool || k == avroNullString
	return avroCol{kind: k, nullable: !sf.Required, null: null, off: f.Offset, field: f}
}

// arrowOp decodes the values first to first+n-1 of one column into the
// structs at base, base+stride...
type arrowOp func(a arrow.Array, first int, base unsafe.Pointer, stride uintptr, n int) error

func newStructDecoder(t reflect.Type, schema bigquery.Schema, format int32, header []byte, r fieldRules) (*structDecoder, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("bigqueryio: rows load into structs, not %s", t)
	}
	d := &structDecoder{typ: t, chunks: new([rowChunk + 1]reflect.Type), format: format, box: box.For(t), schema: schema, header: header}
	for k := 1; k <= rowChunk; k++ {
		d.chunks[k] = reflect.ArrayOf(k, t) // read only from now on: decoders of several streams share it
	}
	fields, ops, has, err := columnOps(t, schema, r, "", "the session")
	if err != nil {
		return nil, err
	}
	for i, sf := range schema {
		switch format {
		case int32(Avro):
			d.avro = append(d.avro, avroColumn(t, sf, fields[i], has[i], ops[i]))
			d.cols = append(d.cols, avroInline(sf, fields[i], has[i]))
		default:
			d.arrow = append(d.arrow, arrowColumn(t, sf, fields[i], has[i], ops[i]))
		}
	}
	d.inline = len(d.cols) > 0
	for _, c := range d.cols {
		d.inline = d.inline && c.kind != avroViaOp
	}
	return d, nil
}

func (d *structDecoder) decodeBatch(payload []byte, n int64, b *batch) error {
	*b = batch{size: d.typ.Size(), box: d.box}
	if d.format == int32(Avro) {
		return d.decodeAvro(payload, n, b)
	}
	return d.decodeArrow(payload, n, b)
}

// decode appends the values of the n rows of payload to out: decodeBatch
// for tests and benchmarks.
func (d *structDecoder) decode(payload []byte, n int64, out []any) ([]any, error) {
	var b batch
	err := d.decodeBatch(payload, n, &b)
	for i := 0; i < b.len; i++ {
		out = append(out, b.at(i))
	}
	return out, err
}

// grow adds the chunks that take b's structs up to n rows: one
// allocation each.
func (d *structDecoder) grow(b *batch, n int) {
	for have := len(b.chunks) * rowChunk; have < n; have += rowChunk {
		b.chunks = append(b.chunks, reflect.New(d.chunks[min(rowChunk, n-have)]).UnsafePointer())
	}
}

// decodeAvro decodes every row of the payload into b, failing when they
// are not n; b.len counts the rows decoded whole, also when it fails.
func (d *structDecoder) decodeAvro(payload []byte, n int64, b *batch) error {
	if n < 0 {
		return fmt.Errorf("the response's row count is %d", n)
	}
	// Every row takes at least a byte (the schema has a column): at most
	// len(payload) rows, whatever the count says.
	capRows := min(n, int64(len(payload)))
	b.chunks = make([]unsafe.Pointer, 0, (capRows+rowChunk-1)/rowChunk)
	r := &d.r
	r.reset(payload)
	var i int64
	for ; r.more(); i++ {
		if i == capRows {
			// More rows than the count says: count them, for the error.
			return d.countAvro(r, i, n)
		}
		if i%rowChunk == 0 {
			d.grow(b, int(min(i+rowChunk, capRows)))
		}
		p := b.row(int(i))
		if d.inline && d.rowInline(r, p) {
			b.len++
			continue
		}
		for c := range d.cols {
			if err := d.readColumn(r, c, p); err != nil {
				return fmt.Errorf("Avro row %d of the response (whose row count is %d), column %s: %w", i, n, d.schema[c].Name, err)
			}
		}
		if err := r.err(); err != nil {
			return fmt.Errorf("Avro row %d of the response (whose row count is %d): %w", i, n, err)
		}
		b.len++
	}
	if i != n {
		return countMismatch(n, i)
	}
	return nil
}

// rowInline decodes the row at r's offset into the struct at p when every
// column is inline (d.inline), reading the payload's bytes itself, with no
// call through wire.Reader per value, and reports whether it did. It
// stops at anything out of the ordinary (the payload ends, a varint longer
// than 64 bits, a length past the end, a union branch other than a
// one-byte 0 or 1, NULL into a field that cannot hold it, a boolean byte
// other than 0 or 1): then it has consumed nothing, and the caller decodes
// the row column by column (readColumn), which reads the same bytes into
// the same fields, and fails with the error it always gave, or reads it
// (a long union branch).
func (d *structDecoder) rowInline(r *avroReader, p unsafe.Pointer) bool {
	b := r.buf
	start := r.Offset()
	i := start
	for c := range d.cols {
		col := &d.cols[c]
		q := unsafe.Add(p, col.off)
		if col.nullable {
			if i >= len(b) {
				return false
			}
			switch b[i] {
			case 2: // branch 1: the value
				i++
			case 0: // branch 0: NULL, the zero of a fresh chunk's field
				if !col.null {
					return false
				}
				i++
				continue
			default:
				return false
			}
		}
		switch col.kind {
		case avroInt64, avroNullInt64:
			u, n := binary.Uvarint(b[i:])
			if n <= 0 {
				return false
			}
			i += n
			v := int64(u>>1) ^ -int64(u&1)
			if col.kind == avroInt64 {
				*(*int64)(q) = v
			} else {
				*(*bigquery.NullInt64)(q) = bigquery.NullInt64{Int64: v, Valid: true}
			}
		case avroFloat64, avroNullFloat64:
			if len(b)-i < 8 {
				return false
			}
			v := math.Float64frombits(binary.LittleEndian.Uint64(b[i:]))
			i += 8
			if col.kind == avroFloat64 {
				*(*float64)(q) = v
			} else {
				*(*bigquery.NullFloat64)(q) = bigquery.NullFloat64{Float64: v, Valid: true}
			}
		case avroBool, avroNullBool:
			if i >= len(b) || b[i] > 1 {
				return false
			}
			v := b[i] == 1
			i++
			if col.kind == avroBool {
				*(*bool)(q) = v
			} else {
				*(*bigquery.NullBool)(q) = bigquery.NullBool{Bool: v, Valid: true}
			}
		case avroString, avroNullString:
			u, n := binary.Uvarint(b[i:])
			if n <= 0 {
				return false
			}
			l := int64(u>>1) ^ -int64(u&1)
			if l < 0 || l > int64(len(b)-i-n) {
				return false
			}
			i += n
			v := r.copyStr(b[i : i+int(l)])
			i += int(l)
			if col.kind == avroString {
				*(*string)(q) = v
			} else {
				*(*bigquery.NullString)(q) = bigquery.NullString{StringVal: v, Valid: true}
			}
		default:
			return false
		}
	}
	r.Fixed(i - start)
	return true
}

// readColumn reads column c of a row into the struct at p: inline for
// the kinds of avroCol, through the column's avroOp otherwise. It does what
// avroColumn's op does, error for error.
func (d *structDecoder) readColumn(r *avroReader, c int, p unsafe.Pointer) error {
	col := &d.cols[c]
	if col.kind == avroViaOp {
		return d.avro[c](r, p)
	}
	q := unsafe.Add(p, col.off)
	if col.nullable {
		at := r.Offset()
		switch idx := r.long(); idx {
		case 1:
		case 0:
			switch {
			case col.null:
				// A fresh chunk's field is zero already: NULL of every
				// bigquery.Null type.
				return nil
			case r.Err() != nil:
				return nil
			}
			return nullInto(col.field)
		default:
			r.FailAt(at, "union: branch %d of nullable column %s", idx, d.schema[c].Name)
			return nil
		}
	}
	switch col.kind {
	case avroInt64:
		*(*int64)(q) = r.long()
	case avroNullInt64:
		*(*bigquery.NullInt64)(q) = bigquery.NullInt64{Int64: r.long(), Valid: true}
	case avroFloat64:
		*(*float64)(q) = r.double()
	case avroNullFloat64:
		*(*bigquery.NullFloat64)(q) = bigquery.NullFloat64{Float64: r.double(), Valid: true}
	case avroBool:
		*(*bool)(q) = r.boolean()
	case avroNullBool:
		*(*bigquery.NullBool)(q) = bigquery.NullBool{Bool: r.boolean(), Valid: true}
	case avroString:
		*(*string)(q) = r.str()
	case avroNullString:
		*(*bigquery.NullString)(q) = bigquery.NullString{StringVal: r.str(), Valid: true}
	}
	return nil
}

// countAvro decodes the rows left in r, after the got rows the count n
// allowed, and returns the error of a payload of more rows than its count.
func (d *structDecoder) countAvro(r *avroReader, got, n int64) error {
	for ; r.more(); got++ {
		for _, f := range d.schema {
			readAvroField(r, f)
		}
		if err := r.err(); err != nil {
			return fmt.Errorf("Avro row %d of the response (whose row count is %d): %w", got, n, err)
		}
	}
	return countMismatch(n, got)
}

// decodeArrow decodes the rows of every record batch of the payload, by
// the batches' own lengths, into one []T, failing when they are not n;
// b.len counts the rows decoded, also when it fails.
func (d *structDecoder) decodeArrow(payload []byte, n int64, b *batch) error {
	if n < 0 {
		return fmt.Errorf("the response's row count is %d", n)
	}
	var recs []arrow.Record
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	total, err := arrowBatches(&d.arrowScratch, d.header, payload, d.schema, func(rec arrow.Record, _ int64) error {
		rec.Retain()
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		return err
	}
	if total != n {
		return countMismatch(n, total)
	}
	if total == 0 {
		return nil
	}
	d.grow(b, int(total))
	var got int64
	for _, rec := range recs {
		m := int(rec.NumRows())
		for c, op := range d.arrow {
			col := rec.Column(c)
			if col.Len() < m {
				return fmt.Errorf("Arrow column %s has %d values for %d rows", d.schema[c].Name, col.Len(), m)
			}
			// Rows [i, j) of the record fill a chunk or its rest.
			for i := 0; i < m; {
				at := int(got) + i
				j := min(m, i+rowChunk-at%rowChunk)
				if err := op(col, i, b.row(at), b.size, j-i); err != nil {
					return fmt.Errorf("Arrow rows %d-%d of the response, column %s: %w", got, got+int64(m)-1, d.schema[c].Name, err)
				}
				i = j
			}
		}
		got += int64(m)
		b.len = int(got)
	}
	return nil
}

func nullInto(f structField) error {
	return fmt.Errorf("NULL cannot be loaded into field %s of type %s", f.GoPath, f.Typ)
}

// avroColumn compiles column sf into field f (ok false: no field, the
// column is skipped).
func avroColumn(t reflect.Type, sf *bigquery.FieldSchema, f structField, ok bool, op loadOp) avroOp {
	if !ok {
		return func(r *avroReader, _ unsafe.Pointer) error { readAvroField(r, sf); return nil }
	}
	if !sf.Repeated && !f.ViaPtr {
		if read, null := fastAvro(sf, f); read != nil {
			off := f.Offset
			if sf.Required {
				return func(r *avroReader, p unsafe.Pointer) error { read(r, unsafe.Add(p, off)); return nil }
			}
			return func(r *avroReader, p unsafe.Pointer) error {
				at := r.Offset()
				switch idx := r.long(); idx {
				case 0:
					if null != nil {
						null(unsafe.Add(p, off))
						return nil
					}
					if r.Err() != nil {
						return nil
					}
					return nullInto(f)
				case 1:
					read(r, unsafe.Add(p, off))
				default:
					r.FailAt(at, "union: branch %d of nullable column %s", idx, sf.Name)
				}
				return nil
			}
		}
	}
	return func(r *avroReader, p unsafe.Pointer) error {
		x := readAvroField(r, sf)
		if r.Err() != nil {
			return nil
		}
		return op.apply(fieldAlloc(reflect.NewAt(t, p).Elem(), op.field), x)
	}
}

// fastAvro returns how a value of column sf is read into a field of f's
// type at p, and how NULL is stored (nil: it cannot be), or nil for the
// slow path.
func fastAvro(sf *bigquery.FieldSchema, f structField) (read func(*avroReader, unsafe.Pointer), null func(unsafe.Pointer)) {
	ft := f.Typ
	switch sf.Type {
	case bigquery.IntegerFieldType:
		switch {
		case ft.Kind() == reflect.Int64 || ft.Kind() == reflect.Int && ft.Size() == 8:
			return func(r *avroReader, p unsafe.Pointer) { *(*int64)(p) = r.long() }, nil
		case ft == typeOfNullInt64:
			return func(r *avroReader, p unsafe.Pointer) {
				*(*bigquery.NullInt64)(p) = bigquery.NullInt64{Int64: r.long(), Valid: true}
			}, func(p unsafe.Pointer) { *(*bigquery.NullInt64)(p) = bigquery.NullInt64{} }
		}
	case bigquery.FloatFieldType:
		switch {
		case ft.Kind() == reflect.Float64:
			return func(r *avroReader, p unsafe.Pointer) { *(*float64)(p) = r.double() }, nil
		case ft == typeOfNullFloat64:
			return func(r *avroReader, p unsafe.Pointer) {
				*(*bigquery.NullFloat64)(p) = bigquery.NullFloat64{Float64: r.double(), Valid: true}
			}, func(p unsafe.Pointer) { *(*bigquery.NullFloat64)(p) = bigquery.NullFloat64{} }
		}
	case bigquery.BooleanFieldType:
		switch {
		case ft.Kind() == reflect.Bool:
			return func(r *avroReader, p unsafe.Pointer) { *(*bool)(p) = r.boolean() }, nil
		case ft == typeOfNullBool:
			return func(r *avroReader, p unsafe.Pointer) {
				*(*bigquery.NullBool)(p) = bigquery.NullBool{Bool: r.boolean(), Valid: true}
			}, func(p unsafe.Pointer) { *(*bigquery.NullBool)(p) = bigquery.NullBool{} }
		}
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		switch {
		case ft.Kind() == reflect.String:
			return func(r *avroReader, p unsafe.Pointer) { *(*string)(p) = r.str() }, nil
		case ft == typeOfNullString:
			return func(r *avroReader, p unsafe.Pointer) {
				*(*bigquery.NullString)(p) = bigquery.NullString{StringVal: r.str(), Valid: true}
			}, func(p unsafe.Pointer) { *(*bigquery.NullString)(p) = bigquery.NullString{} }
		case ft == typeOfNullGeography:
			return func(r *avroReader, p unsafe.Pointer) {
				*(*bigquery.NullGeography)(p) = bigquery.NullGeography{GeographyVal: r.str(), Valid: true}
			}, func(p unsafe.Pointer) { *(*bigquery.NullGeography)(p) = bigquery.NullGeography{} }
		case ft == typeOfNullJSON:
			return func(r *avroReader, p unsafe.Pointer) {
				*(*bigquery.NullJSON)(p) = bigquery.NullJSON{JSONVal: r.str(), Valid: true}
			}, func(p unsafe.Pointer) { *(*bigquery.NullJSON)(p) = bigquery.NullJSON{} }
		}
	case bigquery.TimestampFieldType:
		switch ft {
		case typeOfTime:
			return func(r *avroReader, p unsafe.Pointer) { *(*time.Time)(p) = time.UnixMicro(r.long()).UTC() }, nil
		case typeOfNullTimestamp:
			return func(r *avroReader, p unsafe.Pointer) {
				*(*bigquery.NullTimestamp)(p) = bigquery.NullTimestamp{Timestamp: time.UnixMicro(r.long()).UTC(), Valid: true}
			}, func(p unsafe.Pointer) { *(*bigquery.NullTimestamp)(p) = bigquery.NullTimestamp{} }
		}
	case bigquery.DateFieldType:
		switch ft {
		case typeOfDate:
			return func(r *avroReader, p unsafe.Pointer) { *(*civil.Date)(p) = dateOf(int64(r.int("DATE"))) }, nil
		case typeOfNullDate:
			return func(r *avroReader, p unsafe.Pointer) {
				*(*bigquery.NullDate)(p) = bigquery.NullDate{Date: dateOf(int64(r.int("DATE"))), Valid: true}
			}, func(p unsafe.Pointer) { *(*bigquery.NullDate)(p) = bigquery.NullDate{} }
		}
	}
	return nil, nil
}

// arrowColumn compiles column sf into field f for Arrow (ok false: no
// field, nothing to do).
func arrowColumn(t reflect.Type, sf *bigquery.FieldSchema, f structField, ok bool, op loadOp) arrowOp {
	if !ok {
		return func(arrow.Array, int, unsafe.Pointer, uintptr, int) error { return nil }
	}
	if !sf.Repeated && !f.ViaPtr {
		if fast := fastArrow(sf, f); fast != nil {
			return fast
		}
	}
	return func(a arrow.Array, first int, base unsafe.Pointer, stride uintptr, n int) error {
		for i := first; i < first+n; i++ {
			x, err := arrowValue(a, i, sf, false)
			if err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
			fv := fieldAlloc(reflect.NewAt(t, unsafe.Add(base, uintptr(i-first)*stride)).Elem(), op.field)
			if err := op.apply(fv, x); err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
		}
		return nil
	}
}

// column builds an arrowOp over arrays of type A: set stores row i's value
// at p; null stores NULL (nil: NULL is an error). Fields a fresh []T holds
// are zero, which is every Null type's NULL.
func column[A arrow.Array](f structField, nullable bool, set func(a A, i int, p unsafe.Pointer)) arrowOp {
	off := f.Offset
	return func(arr arrow.Array, first int, base unsafe.Pointer, stride uintptr, n int) error {
		a, ok := arr.(A)
		if !ok {
			return fmt.Errorf("unexpected Arrow array %s", arr.DataType())
		}
		hasNulls := arr.NullN() > 0
		for i := first; i < first+n; i++ {
			if hasNulls && arr.IsNull(i) {
				if !nullable {
					return fmt.Errorf("row %d: %w", i, nullInto(f))
				}
				continue
			}
			set(a, i, unsafe.Add(base, uintptr(i-first)*stride+off))
		}
		return nil
	}
}

// stringColumn is column for strings: the value bytes of the rows of a
// call (the decoder's memory; the rows of one chunk) are copied into one
// string, and each row's value is a substring of it, with no allocation
// per row.
func stringColumn(f structField, nullable bool, set func(p unsafe.Pointer, v string)) arrowOp {
	off := f.Offset
	return func(arr arrow.Array, first int, base unsafe.Pointer, stride uintptr, n int) error {
		a, ok := arr.(*array.String)
		if !ok {
			return fmt.Errorf("unexpected Arrow array %s", arr.DataType())
		}
		vals := a.ValueBytes()
		offs := a.ValueOffsets()
		if len(offs) < first+n+1 {
			return fmt.Errorf("%d string offsets for rows %d-%d", len(offs), first, first+n-1)
		}
		// ValueBytes starts at the array's first offset.
		lo0, hi0 := int(offs[first])-int(offs[0]), int(offs[first+n])-int(offs[0])
		if lo0 < 0 || lo0 > hi0 || hi0 > len(vals) {
			return fmt.Errorf("rows %d-%d: string offsets %d-%d outside the %d bytes of values", first, first+n-1, lo0, hi0, len(vals))
		}
		all := string(vals[lo0:hi0])
		start := int(offs[first])
		hasNulls := arr.NullN() > 0
		for i := first; i < first+n; i++ {
			if hasNulls && arr.IsNull(i) {
				if !nullable {
					return fmt.Errorf("row %d: %w", i, nullInto(f))
				}
				continue
			}
			lo, hi := int(offs[i])-start, int(offs[i+1])-start
			if lo < 0 || lo > hi || hi > len(all) {
				return fmt.Errorf("row %d: string offsets %d-%d outside the %d bytes of values", i, lo, hi, len(all))
			}
			set(unsafe.Add(base, uintptr(i-first)*stride+off), all[lo:hi])
		}
		return nil
	}
}

func fastArrow(sf *bigquery.FieldSchema, f structField) arrowOp {
	ft := f.Typ
	switch sf.Type {
	case bigquery.IntegerFieldType:
		switch {
		case ft.Kind() == reflect.Int64 || ft.Kind() == reflect.Int && ft.Size() == 8:
			return column(f, false, func(a *array.Int64, i int, p unsafe.Pointer) { *(*int64)(p) = a.Value(i) })
		case ft == typeOfNullInt64:
			return column(f, true, func(a *array.Int64, i int, p unsafe.Pointer) {
				*(*bigquery.NullInt64)(p) = bigquery.NullInt64{Int64: a.Value(i), Valid: true}
			})
		}
	case bigquery.FloatFieldType:
		switch {
		case ft.Kind() == reflect.Float64:
			return column(f, false, func(a *array.Float64, i int, p unsafe.Pointer) { *(*float64)(p) = a.Value(i) })
		case ft == typeOfNullFloat64:
			return column(f, true, func(a *array.Float64, i int, p unsafe.Pointer) {
				*(*bigquery.NullFloat64)(p) = bigquery.NullFloat64{Float64: a.Value(i), Valid: true}
			})
		}
	case bigquery.BooleanFieldType:
		switch {
		case ft.Kind() == reflect.Bool:
			return column(f, false, func(a *array.Boolean, i int, p unsafe.Pointer) { *(*bool)(p) = a.Value(i) })
		case ft == typeOfNullBool:
			return column(f, true, func(a *array.Boolean, i int, p unsafe.Pointer) {
				*(*bigquery.NullBool)(p) = bigquery.NullBool{Bool: a.Value(i), Valid: true}
			})
		}
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		switch {
		case ft.Kind() == reflect.String:
			return stringColumn(f, false, func(p unsafe.Pointer, v string) { *(*string)(p) = v })
		case ft == typeOfNullString:
			return stringColumn(f, true, func(p unsafe.Pointer, v string) {
				*(*bigquery.NullString)(p) = bigquery.NullString{StringVal: v, Valid: true}
			})
		case ft == typeOfNullGeography:
			return stringColumn(f, true, func(p unsafe.Pointer, v string) {
				*(*bigquery.NullGeography)(p) = bigquery.NullGeography{GeographyVal: v, Valid: true}
			})
		case ft == typeOfNullJSON:
			return stringColumn(f, true, func(p unsafe.Pointer, v string) {
				*(*bigquery.NullJSON)(p) = bigquery.NullJSON{JSONVal: v, Valid: true}
			})
		}
	case bigquery.TimestampFieldType:
		switch ft {
		case typeOfTime:
			return column(f, false, func(a *array.Timestamp, i int, p unsafe.Pointer) {
				*(*time.Time)(p) = time.UnixMicro(int64(a.Value(i))).UTC()
			})
		case typeOfNullTimestamp:
			return column(f, true, func(a *array.Timestamp, i int, p unsafe.Pointer) {
				*(*bigquery.NullTimestamp)(p) = bigquery.NullTimestamp{Timestamp: time.UnixMicro(int64(a.Value(i))).UTC(), Valid: true}
			})
		}
	case bigquery.DateFieldType:
		switch ft {
		case typeOfDate:
			return column(f, false, func(a *array.Date32, i int, p unsafe.Pointer) { *(*civil.Date)(p) = dateOf(int64(a.Value(i))) })
		case typeOfNullDate:
			return column(f, true, func(a *array.Date32, i int, p unsafe.Pointer) {
				*(*bigquery.NullDate)(p) = bigquery.NullDate{Date: dateOf(int64(a.Value(i))), Valid: true}
			})
		}
	}
	return nil
}
