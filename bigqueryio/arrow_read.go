package bigqueryio

import (
	"encoding/binary"
	"fmt"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// The Arrow IPC format (https://arrow.apache.org/docs/format/Columnar.html
// and its Message.fbs and Schema.fbs), the part the Storage Read API
// sends: a schema message (the session's), then responses of record batch
// messages, uncompressed, without dictionaries, of the types arrowType
// lists.

// Arrow's MessageHeader union: the schema's type (the batches' are in
// arrow_ipc.go).
const headerSchema = 1

// Arrow's Type union, the members the Storage Read API sends.
const (
	typeInt           = 2
	typeFloatingPoint = 3
	typeBinary        = 4
	typeUtf8          = 5
	typeBool          = 6
	typeDecimal       = 7
	typeDate          = 8
	typeTime          = 9
	typeTimestamp     = 10
	typeList          = 12
	typeStruct        = 13
)

// maxArrowDepth bounds the nesting of a schema's fields (BigQuery allows
// 15 levels of RECORD, each a struct and maybe a list): a deeper one is
// refused rather than recursed into. maxArrowFields bounds the fields of
// a schema, nested ones counted (a table has at most 10,000 columns, its
// nested fields counted): a flatbuffer may point to one table from many
// places, and a schema read so could grow exponentially with its depth.
const (
	maxArrowDepth  = 64
	maxArrowFields = 1 << 15
)

// ipcMessage is one encapsulated message of an IPC stream: its header's
// type and table, its metadata flatbuffer and its body.
type ipcMessage struct {
	kind   byte
	header fbTable
	body   []byte
}

// nextIPCMessage reads the message at b[off:] (whose framing
// checkArrowFraming checked): it returns the message and the offset after
// it, or ok false at an end-of-stream marker or the end of b, with the
// offset after the marker.
func nextIPCMessage(b []byte, off int) (m ipcMessage, next int, ok bool, err error) {
	if off >= len(b) {
		return m, off, false, nil
	}
	n := binary.LittleEndian.Uint32(b[off:])
	off += 4
	if n == 0xFFFFFFFF {
		n = binary.LittleEndian.Uint32(b[off:])
		off += 4
	}
	if n == 0 {
		return m, off, false, nil
	}
	meta := b[off : off+int(n)]
	off += int(n)
	msg, err := fbRoot(meta)
	if err != nil {
		return m, off, false, err
	}
	body, err := msg.long(3)
	if err != nil {
		return m, off, false, err
	}
	if m.kind, err = msg.byteField(1); err != nil {
		return m, off, false, err
	}
	h, present, err := msg.table(2)
	if err != nil {
		return m, off, false, err
	}
	if !present {
		return m, off, false, fmt.Errorf("an Arrow IPC message without a header")
	}
	m.header, m.body = h, b[off:off+int(body)]
	return m, off + int(body), true, nil
}

// parseArrowSchema decodes the IPC schema message of a read session.
func parseArrowSchema(b []byte) (*arrow.Schema, error) {
	s, err := readArrowSchema(b)
	if err != nil {
		return nil, fmt.Errorf("the session's Arrow schema: %w", err)
	}
	return s, nil
}

// readArrowSchema is the schema of the IPC stream b's first message,
// which must be a schema and all b holds (with an end-of-stream marker or
// not).
func readArrowSchema(b []byte) (*arrow.Schema, error) {
	if err := checkArrowFraming(b); err != nil {
		return nil, err
	}
	m, next, ok, err := nextIPCMessage(b, 0)
	if err != nil {
		return nil, err
	}
	if !ok || m.kind != headerSchema {
		return nil, fmt.Errorf("the IPC stream does not begin with a schema message (header type %d)", m.kind)
	}
	if _, after, more, err := nextIPCMessage(b, next); err != nil || more || after != len(b) {
		if err == nil {
			err = fmt.Errorf("%d bytes after the schema message", len(b)-next)
		}
		return nil, err
	}
	start, n, err := m.header.structs(1, 4)
	if err != nil {
		return nil, err
	}
	fields := make([]arrow.Field, 0, min(n, 1<<10))
	budget := maxArrowFields
	for k := range n {
		ft, err := m.header.indirect(start + 4*k)
		if err != nil {
			return nil, err
		}
		f, err := arrowFieldOf(ft, 0, &budget)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
	}
	return arrow.NewSchema(fields, nil), nil
}

// arrowFieldOf is the Field table t, at depth depth of nesting; budget is
// how many more fields the schema may have.
func arrowFieldOf(t fbTable, depth int, budget *int) (arrow.Field, error) {
	if depth > maxArrowDepth {
		return arrow.Field{}, fmt.Errorf("Arrow fields nested over %d levels", maxArrowDepth)
	}
	if *budget--; *budget < 0 {
		return arrow.Field{}, fmt.Errorf("an Arrow schema of over %d fields, nested ones counted", maxArrowFields)
	}
	name, err := t.str(0)
	if err != nil {
		return arrow.Field{}, err
	}
	f := arrow.Field{Name: name}
	fail := func(format string, args ...any) (arrow.Field, error) {
		return arrow.Field{}, fmt.Errorf("Arrow field %q: %s", name, fmt.Sprintf(format, args...))
	}
	nullable, err := t.byteField(1)
	if err != nil {
		return arrow.Field{}, err
	}
	f.Nullable = nullable != 0
	kind, err := t.byteField(2)
	if err != nil {
		return arrow.Field{}, err
	}
	typ, hasType, err := t.table(3)
	if err != nil {
		return arrow.Field{}, err
	}
	if _, dict, err := t.field(4, 4); err != nil || dict {
		if err == nil {
			return fail("dictionary encoded, which the Storage Read API does not send")
		}
		return arrow.Field{}, err
	}
	var children []arrow.Field
	cstart, cn, err := t.structs(5, 4)
	if err != nil {
		return arrow.Field{}, err
	}
	for k := range cn {
		ct, err := t.indirect(cstart + 4*k)
		if err != nil {
			return arrow.Field{}, err
		}
		c, err := arrowFieldOf(ct, depth+1, budget)
		if err != nil {
			return arrow.Field{}, err
		}
		children = append(children, c)
	}
	mstart, mn, err := t.structs(6, 4)
	if err != nil {
		return arrow.Field{}, err
	}
	if mn > 0 {
		keys, vals := make([]string, 0, min(mn, 64)), make([]string, 0, min(mn, 64))
		for k := range mn {
			kv, err := t.indirect(mstart + 4*k)
			if err != nil {
				return arrow.Field{}, err
			}
			key, err := kv.str(0)
			if err != nil {
				return arrow.Field{}, err
			}
			val, err := kv.str(1)
			if err != nil {
				return arrow.Field{}, err
			}
			keys, vals = append(keys, key), append(vals, val)
		}
		f.Metadata = arrow.NewMetadata(keys, vals)
	}
	if !hasType && kind != typeUtf8 && kind != typeBinary && kind != typeBool && kind != typeStruct && kind != typeList {
		return fail("type %d without its parameters", kind)
	}
	if len(children) > 0 && kind != typeStruct && kind != typeList {
		return fail("type %d with %d child fields", kind, len(children))
	}
	switch kind {
	case typeInt:
		bits, err := typ.int32Field(0, 0)
		if err != nil {
			return arrow.Field{}, err
		}
		signed, err := typ.byteField(1)
		if err != nil {
			return arrow.Field{}, err
		}
		if bits != 64 || signed == 0 {
			return fail("an integer of %d bits, signed %v, where the Storage Read API sends signed 64-bit ones", bits, signed != 0)
		}
		f.Type = arrow.PrimitiveTypes.Int64
	case typeFloatingPoint:
		prec, err := typ.int16Field(0, 0)
		if err != nil {
			return arrow.Field{}, err
		}
		if prec != 2 {
			return fail("a floating point of precision %d, where the Storage Read API sends doubles", prec)
		}
		f.Type = arrow.PrimitiveTypes.Float64
	case typeBinary:
		f.Type = arrow.BinaryTypes.Binary
	case typeUtf8:
		f.Type = arrow.BinaryTypes.String
	case typeBool:
		f.Type = arrow.FixedWidthTypes.Boolean
	case typeDecimal:
		prec, err := typ.int32Field(0, 0)
		if err != nil {
			return arrow.Field{}, err
		}
		scale, err := typ.int32Field(1, 0)
		if err != nil {
			return arrow.Field{}, err
		}
		bits, err := typ.int32Field(2, 128)
		if err != nil {
			return arrow.Field{}, err
		}
		switch {
		case bits == 128 && prec > 0 && prec <= 38 && scale >= 0 && scale <= prec:
			f.Type = &arrow.Decimal128Type{Precision: prec, Scale: scale}
		case bits == 256 && prec > 0 && prec <= 76 && scale >= 0 && scale <= prec:
			f.Type = &arrow.Decimal256Type{Precision: prec, Scale: scale}
		default:
			return fail("a decimal of %d bits, precision %d and scale %d", bits, prec, scale)
		}
	case typeDate:
		unit, err := typ.int16Field(0, 1)
		if err != nil {
			return arrow.Field{}, err
		}
		if unit != 0 {
			return fail("a date in unit %d, where the Storage Read API sends days", unit)
		}
		f.Type = arrow.FixedWidthTypes.Date32
	case typeTime:
		unit, err := typ.int16Field(0, 1)
		if err != nil {
			return arrow.Field{}, err
		}
		bits, err := typ.int32Field(1, 32)
		if err != nil {
			return arrow.Field{}, err
		}
		if unit != 2 || bits != 64 {
			return fail("a time in unit %d of %d bits, where the Storage Read API sends 64-bit microseconds", unit, bits)
		}
		f.Type = arrow.FixedWidthTypes.Time64us
	case typeTimestamp:
		unit, err := typ.int16Field(0, 0)
		if err != nil {
			return arrow.Field{}, err
		}
		if unit != 2 {
			return fail("a timestamp in unit %d, where the Storage Read API sends microseconds", unit)
		}
		tz, err := typ.str(1)
		if err != nil {
			return arrow.Field{}, err
		}
		f.Type = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: tz}
	case typeList:
		if len(children) != 1 {
			return fail("a list of %d fields", len(children))
		}
		f.Type = arrow.ListOfField(children[0])
	case typeStruct:
		f.Type = arrow.StructOf(children...)
	default:
		return fail("Arrow type %d, not one the Storage Read API sends", kind)
	}
	return f, nil
}

// arrowBatches reads the IPC record batches of payload, of the session's
// schema message header (parsed once per s), calling fn for each with the
// count of the rows of the batches before it; each must have the schema's
// columns. It returns the count of all their rows, by the batches' own
// lengths. fn's batch is valid only during the call (its buffers are in
// s's arena, reused by the next call).
func arrowBatches(s *arrowScratch, header, payload []byte, schema bigquery.Schema, fn func(rec arrow.Record, before int64) error) (int64, error) {
	if s.schema == nil || string(s.header) != string(header) {
		as, err := readArrowSchema(header)
		if err != nil {
			return 0, fmt.Errorf("Arrow record batch: the session's schema: %w", err)
		}
		s.schema, s.header = as, header
	}
	if s.schema.NumFields() != len(schema) {
		return 0, fmt.Errorf("Arrow record batch: the session's Arrow schema has %d fields, its table schema %d", s.schema.NumFields(), len(schema))
	}
	if err := checkArrowFraming(payload); err != nil {
		return 0, fmt.Errorf("Arrow record batch: %w", err)
	}
	s.mem.reset()
	var got int64
	off := 0
	for {
		m, next, ok, err := nextIPCMessage(payload, off)
		if err != nil {
			return got, fmt.Errorf("Arrow record batch at byte %d: %w", off, err)
		}
		if !ok {
			if next != len(payload) {
				return got, fmt.Errorf("%d bytes after the Arrow record batches of the response", len(payload)-next)
			}
			break
		}
		if m.kind != headerRecordBatch {
			return got, fmt.Errorf("Arrow IPC message at byte %d: header type %d where the response holds record batches", off, m.kind)
		}
		rec, err := loadBatch(s, m)
		if err != nil {
			return got, fmt.Errorf("Arrow record batch at byte %d: %w", off, err)
		}
		err = func() error {
			defer rec.Release()
			if err := arrowRows(rec.NumRows(), got, payload); err != nil {
				return err
			}
			return fn(rec, got)
		}()
		if err != nil {
			return got, err
		}
		got += rec.NumRows()
		off = next
	}
	return got, nil
}

// batchLoader hands out a record batch's field nodes and buffers in the
// order of its schema's fields, depth first, as the format lays them out.
type batchLoader struct {
	rb          fbTable
	body        []byte
	mem         *batchArena
	nodes, bufs int64 // where the vectors' elements start
	nNode, nBuf int64
	node, buf   int64 // the next of each
}

// loadBatch is the record of the record batch message m, of s's schema.
func loadBatch(s *arrowScratch, m ipcMessage) (arrow.Record, error) {
	l := batchLoader{rb: m.header, body: m.body, mem: &s.mem}
	n, err := m.header.long(0)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("a length of %d rows", n)
	}
	if l.nodes, l.nNode, err = m.header.structs(1, 16); err != nil {
		return nil, err
	}
	if l.bufs, l.nBuf, err = m.header.structs(2, 16); err != nil {
		return nil, err
	}
	cols := make([]arrow.Array, 0, s.schema.NumFields())
	release := func() {
		for _, c := range cols {
			c.Release()
		}
	}
	for i, f := range s.schema.Fields() {
		d, err := l.load(f.Type, 0)
		if err != nil {
			release()
			return nil, fmt.Errorf("column %d (%s): %w", i, f.Name, err)
		}
		if int64(d.Len()) != n {
			d.Release()
			release()
			return nil, fmt.Errorf("column %d (%s) has %d values in a batch of %d rows", i, f.Name, d.Len(), n)
		}
		// Arrow's arrays slice their buffers by their lengths without
		// checks: the buffers must hold them before an array is made.
		if err := validateArrowArray(d); err != nil {
			d.Release()
			release()
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		cols = append(cols, array.MakeFromData(d))
		d.Release()
	}
	if l.node != l.nNode || l.buf != l.nBuf {
		release()
		return nil, fmt.Errorf("%d field nodes and %d buffers for a schema that takes %d and %d", l.nNode, l.nBuf, l.node, l.buf)
	}
	rec := array.NewRecord(s.schema, cols, n)
	release()
	return rec, nil
}

// nextNode is the next field node: its length and null count.
func (l *batchLoader) nextNode() (int64, int64, error) {
	if l.node >= l.nNode {
		return 0, 0, fmt.Errorf("%d field nodes, fewer than the schema's fields", l.nNode)
	}
	p := l.nodes + 16*l.node
	l.node++
	n := int64(binary.LittleEndian.Uint64(l.rb.b[p:]))
	nulls := int64(binary.LittleEndian.Uint64(l.rb.b[p+8:]))
	if n < 0 || nulls < 0 || nulls > n {
		return 0, 0, fmt.Errorf("a field node of %d values with %d nulls", n, nulls)
	}
	return n, nulls, nil
}

// nextBuffer is the next buffer, copied from the body into the arena (nil
// when empty). messageBodyLength checked that it lies in the body.
func (l *batchLoader) nextBuffer() (*memory.Buffer, error) {
	if l.buf >= l.nBuf {
		return nil, fmt.Errorf("%d buffers, fewer than the schema's fields take", l.nBuf)
	}
	p := l.bufs + 16*l.buf
	l.buf++
	off := int64(binary.LittleEndian.Uint64(l.rb.b[p:]))
	n := int64(binary.LittleEndian.Uint64(l.rb.b[p+8:]))
	if off < 0 || n < 0 || off > int64(len(l.body)) || n > int64(len(l.body))-off {
		return nil, fmt.Errorf("a buffer of [%d, %d+%d) in a body of %d bytes", off, off, n, len(l.body))
	}
	if n == 0 {
		return nil, nil
	}
	b := l.mem.Allocate(int(n))
	copy(b, l.body[off:off+n])
	return memory.NewBufferBytes(b), nil
}

// load is the array data of the next field, of type t, at depth depth.
func (l *batchLoader) load(t arrow.DataType, depth int) (arrow.ArrayData, error) {
	if depth > maxArrowDepth {
		return nil, fmt.Errorf("Arrow arrays nested over %d levels", maxArrowDepth)
	}
	n, nulls, err := l.nextNode()
	if err != nil {
		return nil, err
	}
	validity, err := l.nextBuffer()
	if err != nil {
		return nil, err
	}
	if nulls > 0 && validity == nil {
		return nil, fmt.Errorf("an Arrow %s array of %d values with %d nulls and no validity bitmap", t, n, nulls)
	}
	bufs := []*memory.Buffer{validity}
	var children []arrow.ArrayData
	defer func() {
		for _, c := range children {
			c.Release()
		}
	}()
	take := func(k int) error {
		for range k {
			b, err := l.nextBuffer()
			if err != nil {
				return err
			}
			bufs = append(bufs, b)
		}
		return nil
	}
	switch t.ID() {
	case arrow.INT64, arrow.FLOAT64, arrow.BOOL, arrow.DATE32, arrow.TIME64, arrow.TIMESTAMP, arrow.DECIMAL128, arrow.DECIMAL256:
		err = take(1)
	case arrow.STRING, arrow.BINARY:
		err = take(2)
	case arrow.LIST:
		if err = take(1); err == nil {
			var c arrow.ArrayData
			if c, err = l.load(t.(*arrow.ListType).Elem(), depth+1); err == nil {
				children = append(children, c)
			}
		}
	case arrow.STRUCT:
		for _, f := range t.(*arrow.StructType).Fields() {
			c, err := l.load(f.Type, depth+1)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name, err)
			}
			children = append(children, c)
		}
	default:
		return nil, fmt.Errorf("an Arrow %s array, not a type the Storage Read API sends", t)
	}
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(bufs); i++ {
		if bufs[i] == nil {
			// An empty buffer: Arrow's arrays read their values buffer
			// without a nil check, so give them an empty one.
			bufs[i] = memory.NewBufferBytes(nil)
		}
	}
	return array.NewData(t, int(n), bufs, children, int(nulls), 0), nil
}
