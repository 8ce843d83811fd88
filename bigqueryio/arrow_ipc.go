package bigqueryio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
)

// The Arrow IPC data of the Storage Read API (the session's schema
// message, then the record batch messages of each response) is read by
// github.com/apache/arrow/go/v15's ipc package (arrow_read.go), the reader
// cloud.google.com/go/bigquery uses, so that every Arrow type it knows is
// read, whatever types the service sends later. Kept here, in front of and
// behind it, is what that reader lacks, each shown by a test:
//
//   - checkArrowFraming: ipc trusts the lengths of its input: a negative
//     metadata length panics in make, a metadata or body length of
//     gigabytes is allocated before the read of it fails
//     (TestArrowHostileFraming), and so, by its source, are a buffer's
//     length and a compressed buffer's uncompressed size. Every message's
//     lengths and buffers are checked against the bytes there are first,
//     with the small bounds-checked flatbuffer reader below (ipc reads
//     flatbuffers without checks), and compressed batches, which this
//     package does not ask for, are refused.
//   - checkArrowSchemaShape: ipc follows every reference of a schema's
//     flatbuffer, so one field table referred to from many places is
//     expanded exponentially (TestArrowSchemaRefused, "shared fields").
//   - validateArrowArray: ipc makes arrays of whatever lengths the batch
//     says, over buffers that may be shorter, and Arrow's arrays index
//     their buffers without checks (TestArrowHostileFraming damages every
//     byte of a payload and wants errors, not panics).
//   - batchArena: ipc copies the message body, then every buffer out of it,
//     into memory from its allocator; the arena reuses that memory from
//     one response to the next (BenchmarkDecode/arrow).
//
// A panic inside ipc becomes an error (see arrowBatches), which the read
// loop wraps with the table, session, stream and offset
// (TestArrowPanicNamesStream).

// checkArrowFraming walks the encapsulated IPC messages of b (an optional
// 0xFFFFFFFF continuation marker, an int32 metadata length, the metadata
// flatbuffer, a Message, then Message.bodyLength bytes of body) and fails
// on a length that is negative or runs past the end of b. It stops at an
// end-of-stream marker (arrowBatches then refuses bytes after it).
func checkArrowFraming(b []byte) error {
	for off := 0; off < len(b); {
		next, eos, err := arrowFrame(b, off)
		if err != nil || eos {
			return err
		}
		off = next
	}
	return nil
}

// arrowFrame checks the framing of the message at b[off:] and returns the
// offset after it, or eos true at an end-of-stream marker (with the
// offset after the marker).
func arrowFrame(b []byte, off int) (next int, eos bool, err error) {
	at := off
	if len(b)-off < 4 {
		return 0, false, fmt.Errorf("Arrow IPC message at byte %d: %d bytes, too short for its length", at, len(b)-off)
	}
	n := binary.LittleEndian.Uint32(b[off:])
	off += 4
	if n == 0xFFFFFFFF {
		if len(b)-off < 4 {
			return 0, false, fmt.Errorf("Arrow IPC message at byte %d: truncated after its continuation marker", at)
		}
		n = binary.LittleEndian.Uint32(b[off:])
		off += 4
	}
	if n == 0 {
		return off, true, nil
	}
	meta := int64(int32(n))
	if meta < 8 || meta > int64(len(b)-off) {
		return 0, false, fmt.Errorf("Arrow IPC message at byte %d: metadata of %d bytes, with %d bytes left", at, meta, len(b)-off)
	}
	body, err := messageBodyLength(b[off : off+int(meta)])
	if err != nil {
		return 0, false, fmt.Errorf("Arrow IPC message at byte %d: %w", at, err)
	}
	off += int(meta)
	if body < 0 || body > int64(len(b)-off) {
		return 0, false, fmt.Errorf("Arrow IPC message at byte %d: a body of %d bytes, with %d bytes left", at, body, len(b)-off)
	}
	return off + int(body), false, nil
}

// fbTable is a table of a flatbuffer, every read of it checked against
// the buffer's bounds (Arrow's Go flatbuffers are read without checks).
type fbTable struct {
	b   []byte
	pos int64
}

var errFlatbuffer = errors.New("malformed metadata")

// fbRoot is the root table of the flatbuffer b.
func fbRoot(b []byte) (fbTable, error) {
	if len(b) < 4 {
		return fbTable{}, errFlatbuffer
	}
	return fbTable{b, 0}.indirect(0)
}

// indirect is the table a uoffset at pos points to.
func (t fbTable) indirect(pos int64) (fbTable, error) {
	if pos < 0 || pos+4 > int64(len(t.b)) {
		return fbTable{}, errFlatbuffer
	}
	p := pos + int64(binary.LittleEndian.Uint32(t.b[pos:]))
	if p+4 > int64(len(t.b)) {
		return fbTable{}, errFlatbuffer
	}
	return fbTable{t.b, p}, nil
}

// field is the position of field i of t, and whether it is present.
func (t fbTable) field(i int, size int64) (int64, bool, error) {
	vt := t.pos - int64(int32(binary.LittleEndian.Uint32(t.b[t.pos:])))
	if vt < 0 || vt+4 > int64(len(t.b)) {
		return 0, false, errFlatbuffer
	}
	slot := int64(4 + 2*i)
	if int64(binary.LittleEndian.Uint16(t.b[vt:])) < slot+2 {
		return 0, false, nil
	}
	if vt+slot+2 > int64(len(t.b)) {
		return 0, false, errFlatbuffer
	}
	fo := int64(binary.LittleEndian.Uint16(t.b[vt+slot:]))
	if fo == 0 {
		return 0, false, nil
	}
	if t.pos+fo+size > int64(len(t.b)) {
		return 0, false, errFlatbuffer
	}
	return t.pos + fo, true, nil
}

// long is field i of t as a long (0 when absent).
func (t fbTable) long(i int) (int64, error) {
	p, ok, err := t.field(i, 8)
	if !ok || err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(t.b[p:])), nil
}

// byteField is field i of t as a ubyte (0 when absent).
func (t fbTable) byteField(i int) (byte, error) {
	p, ok, err := t.field(i, 1)
	if !ok || err != nil {
		return 0, err
	}
	return t.b[p], nil
}

// table is the table field i of t points to, and whether it is present.
func (t fbTable) table(i int) (fbTable, bool, error) {
	p, ok, err := t.field(i, 4)
	if !ok || err != nil {
		return fbTable{}, false, err
	}
	sub, err := t.indirect(p)
	return sub, err == nil, err
}

// structs is the vector of structs of elem bytes field i of t points to:
// where its elements start, and their count.
func (t fbTable) structs(i int, elem int64) (int64, int64, error) {
	p, ok, err := t.field(i, 4)
	if !ok || err != nil {
		return 0, 0, err
	}
	v := p + int64(binary.LittleEndian.Uint32(t.b[p:]))
	if v+4 > int64(len(t.b)) {
		return 0, 0, errFlatbuffer
	}
	n := int64(binary.LittleEndian.Uint32(t.b[v:]))
	if n > (int64(len(t.b))-v-4)/elem {
		return 0, 0, errFlatbuffer
	}
	return v + 4, n, nil
}

// Arrow's MessageHeader union: the types of a Message's header.
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
)

// maxArrowDepth bounds the nesting of a schema's fields (BigQuery allows
// 15 levels of RECORD, each a struct and maybe a list): a deeper one is
// refused rather than recursed into. maxArrowFields bounds the fields of
// a schema, nested ones counted (a table has at most 10,000 columns, its
// nested fields counted): a flatbuffer may point to one table from many
// places, and ipc, which follows every reference, would expand such a
// schema exponentially with its depth.
const (
	maxArrowDepth  = 64
	maxArrowFields = 1 << 15
)

// checkArrowSchemaShape checks the schema message whose metadata
// flatbuffer is m: a Schema header, of at most maxArrowFields fields
// nested at most maxArrowDepth deep, before ipc expands it.
func checkArrowSchemaShape(m []byte) error {
	msg, err := fbRoot(m)
	if err != nil {
		return err
	}
	kind, err := msg.byteField(1)
	if err != nil {
		return err
	}
	if kind != headerSchema {
		return fmt.Errorf("the IPC stream does not begin with a schema message (header type %d)", kind)
	}
	s, ok, err := msg.table(2)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("an Arrow IPC schema message without its schema")
	}
	budget := maxArrowFields
	return checkArrowFields(s, 1, 0, &budget)
}

// checkArrowFields checks the vector of Field tables that field i of t
// points to, at depth depth; budget is how many more fields the schema
// may have.
func checkArrowFields(t fbTable, i, depth int, budget *int) error {
	start, n, err := t.structs(i, 4)
	if err != nil {
		return err
	}
	if n > 0 && depth > maxArrowDepth {
		return fmt.Errorf("Arrow fields nested over %d levels", maxArrowDepth)
	}
	for k := range n {
		if *budget--; *budget < 0 {
			return fmt.Errorf("an Arrow schema of over %d fields, nested ones counted", maxArrowFields)
		}
		f, err := t.indirect(start + 4*k)
		if err != nil {
			return err
		}
		if err := checkArrowFields(f, 5, depth+1, budget); err != nil {
			return err
		}
	}
	return nil
}

// messageBodyLength is the bodyLength of the Arrow Message flatbuffer m,
// once the buffers its record batch (or dictionary batch) declares are
// checked to lie in a body of that length, one after another (their
// lengths add up to at most the body's), and the batch is checked to be
// uncompressed (this package asks for no compression, and a compressed
// buffer's uncompressed size is allocated as the file says).
func messageBodyLength(m []byte) (int64, error) {
	msg, err := fbRoot(m)
	if err != nil {
		return 0, err
	}
	body, err := msg.long(3)
	if err != nil {
		return 0, err
	}
	kind, err := msg.byteField(1)
	if err != nil {
		return 0, err
	}
	if kind != headerRecordBatch && kind != headerDictionaryBatch {
		return body, nil
	}
	rb, ok, err := msg.table(2)
	if err != nil || !ok {
		return body, err
	}
	if kind == headerDictionaryBatch {
		if rb, ok, err = rb.table(1); err != nil || !ok {
			return body, err
		}
	}
	if _, compressed, err := rb.field(3, 4); err != nil || compressed {
		if err == nil {
			err = fmt.Errorf("a compressed record batch, which this package does not ask for")
		}
		return 0, err
	}
	start, n, err := rb.structs(2, 16)
	if err != nil {
		return 0, err
	}
	var sum int64
	for k := range n {
		off := int64(binary.LittleEndian.Uint64(m[start+16*k:]))
		l := int64(binary.LittleEndian.Uint64(m[start+16*k+8:]))
		if off < 0 || l < 0 || body < 0 || off > body || l > body-off || l > body-sum {
			return 0, fmt.Errorf("buffer %d of [%d, %d+%d) in a body of %d bytes (after %d bytes of buffers)", k, off, off, l, body, sum)
		}
		sum += l
	}
	return body, nil
}

// validateArrowArray checks that the buffers of a (a column of a record
// batch, as ipc loaded it) hold its values: ipc makes arrays of the
// lengths the batch says, and Arrow's arrays index their buffers without
// checks, so a batch whose buffers are shorter than its lengths say would
// panic in the decoders. Checked are the validity bitmap of every array,
// the values of every fixed-width type, the offsets of strings, binaries
// and lists and the children of lists and structs: all the decoders read.
// The other types' values are not read (arrowValue fails on them).
func validateArrowArray(a arrow.ArrayData) error {
	n, off := int64(a.Len()), int64(a.Offset())
	if n < 0 || off < 0 || n > 1<<48 || off > 1<<48 {
		return fmt.Errorf("an Arrow %s array of length %d at offset %d", a.DataType(), n, off)
	}
	end := n + off
	bufs := a.Buffers()
	size := func(i int) int64 {
		if i >= len(bufs) || bufs[i] == nil {
			return 0
		}
		return int64(bufs[i].Len())
	}
	short := func(what string, have, need int64) error {
		return fmt.Errorf("an Arrow %s array of %d values has %d bytes of %s, not %d", a.DataType(), n, have, what, need)
	}
	if len(bufs) > 0 && bufs[0] != nil && size(0) < (end+7)/8 {
		return short("validity bitmap", size(0), (end+7)/8)
	}
	switch t := a.DataType().(type) {
	case arrow.FixedWidthDataType:
		if len(bufs) > 1 {
			if need := (end*int64(t.BitWidth()) + 7) / 8; size(1) < need {
				return short("values", size(1), need)
			}
		}
	case *arrow.StringType, *arrow.BinaryType, *arrow.ListType:
		if size(1) < 4*(end+1) {
			return short("offsets", size(1), 4*(end+1))
		}
		offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())
		limit := size(2)
		if _, ok := t.(*arrow.ListType); ok {
			if len(a.Children()) != 1 {
				return fmt.Errorf("an Arrow list array with %d children", len(a.Children()))
			}
			child := a.Children()[0]
			limit = int64(child.Len())
			if err := validateArrowArray(child); err != nil {
				return err
			}
		}
		for i := off; i < end; i++ {
			if offs[i] < 0 || offs[i] > offs[i+1] || int64(offs[i+1]) > limit {
				return fmt.Errorf("an Arrow %s array's offsets [%d, %d) at value %d, beyond its %d values", a.DataType(), offs[i], offs[i+1], i-off, limit)
			}
		}
	case *arrow.StructType:
		for _, c := range a.Children() {
			if int64(c.Len()) < end {
				return fmt.Errorf("an Arrow struct array of %d values has a field of %d", end, c.Len())
			}
			if err := validateArrowArray(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// arrowScratch is what a decoder reuses from one response to the next:
// the session's schema message, checked once, and the memory ipc copies
// the batches into.
type arrowScratch struct {
	header []byte // the session's schema message as sent
	schema []byte // its one schema message, framing checked, no end-of-stream marker
	mem    batchArena
}

// batchArena is the memory.Allocator of one decoder's IPC reads: ipc
// copies a response's message bodies, then every buffer of their record
// batches, into memory it allocates, aligned for Arrow's typed views
// (which -race's checkptr checks), from blocks that the next response
// reuses. Nothing of a response's Arrow memory outlives its decode: values
// are copied out of it (strings, bytes, numbers) and its records released
// before decode returns, and the arena is reset only when the next decode
// starts. A decoder is used by one goroutine at a time. It keeps the
// blocks of its largest response.
type batchArena struct {
	blocks [][]byte
	cur    int // the block being carved
	used   int // the bytes of it given out
}

const (
	arenaAlign = 64      // Arrow's buffer alignment
	arenaBlock = 1 << 18 // the smallest block
)

func (a *batchArena) reset() { a.cur, a.used = 0, 0 }

// Allocate returns size zeroed bytes, aligned to 64 bytes, with their
// capacity rounded up to 64.
func (a *batchArena) Allocate(size int) []byte {
	size = max(size, 0)
	n := (size + arenaAlign - 1) &^ (arenaAlign - 1)
	for ; a.cur < len(a.blocks); a.cur, a.used = a.cur+1, 0 {
		if b := a.blocks[a.cur]; a.used+n <= len(b) {
			out := b[a.used : a.used+n : a.used+n]
			a.used += n
			clear(out)
			return out[:size]
		}
	}
	bs := max(n, arenaBlock)
	if k := len(a.blocks); k > 0 {
		bs = max(bs, min(2*len(a.blocks[k-1]), 64<<20))
	}
	raw := make([]byte, bs+arenaAlign)
	skip := int(uintptr(arenaAlign)-uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%arenaAlign) % arenaAlign
	a.blocks = append(a.blocks, raw[skip:skip+bs:skip+bs])
	a.cur, a.used = len(a.blocks)-1, n
	return a.blocks[a.cur][:size:n]
}

// Reallocate grows b to size bytes, its contents kept.
func (a *batchArena) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	return nb
}

// Free does nothing: the arena is reused whole.
func (a *batchArena) Free([]byte) {}
