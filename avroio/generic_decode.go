package avroio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/box"
)

// The decoding of Avro datums into Records (see generic_schema.go).

// maxDatumDepth bounds the nesting of a decoded datum, counting unions as
// levels too. Recursive schemas are validated by the container reader
// before they are decoded, to the read's WithMaxDepth (records, arrays and
// maps, at most container.MaxMaxDepth); this is the last line, above
// anything a WithMaxDepth lets through.
const maxDatumDepth = 2*container.MaxMaxDepth + 8

var errDepth = errors.New("datum nested too deep")

func fail(r *avro.Reader, err error) {
	if r.Error == nil {
		r.Error = err
	}
}

// datumDecoder decodes datums into Record values. Go would allocate every
// number, string, byte slice, list and time it puts in an interface on its
// own; the decoder instead boxes them into interfaces that point into
// chunks of at most chunkBytes that it fills one value after the other (an
// interface never copies or changes what it points to). Values of a few
// consecutive records may share a chunk, so a value kept alive keeps at
// most chunkBytes of other records' values alive per kind, as hamba/avro's
// reader does with the bytes of strings and byte slices. A decoder is for
// one reader at a time.
type datumDecoder struct {
	words chunk[uint64] // int, int64, float32, float64, time.Duration
	strs  chunk[string]
	bytes chunk[[]byte]
	lists chunk[[]any]
	items chunk[any] // the items of short arrays
	times chunk[time.Time]
}

// chunkBytes is the size of the chunks values are boxed into.
const chunkBytes = 1024

// maxChunkedItems is the longest array block whose items are taken from a
// chunk rather than allocated.
const maxChunkedItems = 16

type chunk[T any] struct{ free []T }

// next is a fresh element to box a value in.
func (c *chunk[T]) next() *T {
	if len(c.free) == 0 {
		var zero T
		c.free = make([]T, max(1, chunkBytes/int(unsafe.Sizeof(zero))))
	}
	p := &c.free[0]
	c.free = c.free[1:]
	return p
}

// take is an empty slice of capacity n <= maxChunkedItems: appending more
// than n reallocates it, and so never writes into another value.
func (c *chunk[T]) take(n int) []T {
	if n == 0 {
		return []T{} // empty, not nil (no allocation)
	}
	if len(c.free) < n {
		var zero T
		c.free = make([]T, max(n, chunkBytes/int(unsafe.Sizeof(zero))))
	}
	s := c.free[:0:n]
	c.free = c.free[n:]
	return s
}

// Values are boxed by internal/box: an interface of a fixed type (a
// TypeWord) pointing at a value in a chunk, which is never written again.
var (
	typInt      = box.TypeWord(int(0))
	typInt64    = box.TypeWord(int64(0))
	typFloat32  = box.TypeWord(float32(0))
	typFloat64  = box.TypeWord(float64(0))
	typDuration = box.TypeWord(time.Duration(0))
	typString   = box.TypeWord("")
	typBytes    = box.TypeWord([]byte(nil))
	typList     = box.TypeWord([]any(nil))
	typTime     = box.TypeWord(time.Time{})
)

// word boxes the 8 bytes v as a value of typ (int, int64, float64 or
// time.Duration). Go boxes values below 256 without allocating; the
// caller has them boxed by Go.
func (d *datumDecoder) word(typ unsafe.Pointer, v uint64) any {
	p := d.words.next()
	*p = v
	return box.Pack(typ, unsafe.Pointer(p))
}

func (d *datumDecoder) int64v(v int64) any {
	if uint64(v) < 256 {
		return v
	}
	return d.word(typInt64, uint64(v))
}

func (d *datumDecoder) intv(v int) any {
	if uint(v) < 256 {
		return v
	}
	return d.word(typInt, uint64(v))
}

func (d *datumDecoder) float64v(f float64) any { return d.word(typFloat64, math.Float64bits(f)) }

func (d *datumDecoder) float32v(f float32) any {
	p := d.words.next()
	*(*float32)(unsafe.Pointer(p)) = f
	return box.Pack(typFloat32, unsafe.Pointer(p))
}

func (d *datumDecoder) durationv(v time.Duration) any {
	return d.word(typDuration, uint64(v))
}

func (d *datumDecoder) stringv(s string) any {
	if s == "" {
		return ""
	}
	p := d.strs.next()
	*p = s
	return box.Pack(typString, unsafe.Pointer(p))
}

func (d *datumDecoder) bytesv(b []byte) any {
	p := d.bytes.next()
	// hamba/avro hands out byte slices of a shared slab: cap them, so
	// that appending to one never writes into another value.
	*p = b[:len(b):len(b)]
	return box.Pack(typBytes, unsafe.Pointer(p))
}

func (d *datumDecoder) listv(l []any) any {
	p := d.lists.next()
	*p = l
	return box.Pack(typList, unsafe.Pointer(p))
}

func (d *datumDecoder) timev(t time.Time) any {
	p := d.times.next()
	*p = t
	return box.Pack(typTime, unsafe.Pointer(p))
}

// nextBlock reads the header of the next block of an array or a map: its
// count of items, or 0 after the last block or once r.Error is set.
func nextBlock(r *avro.Reader) int64 {
	if r.Error != nil {
		return 0
	}
	c, _ := r.ReadBlockHeader()
	if c <= 0 || r.Error != nil {
		return 0
	}
	return c
}

// arrayBlock reads the header of an array's next block (nextBlock), whose
// c items are to be appended to out: out is nil before the first block,
// which gives it room for them.
func (d *datumDecoder) arrayBlock(r *avro.Reader, out []any) ([]any, int64) {
	c := nextBlock(r)
	if c > 0 && out == nil {
		if c <= maxChunkedItems {
			out = d.items.take(int(c))
		} else {
			out = make([]any, 0, min(c, 1024))
		}
	}
	return out, c
}

// arrayEnd is the array of the items out, after arrayBlock's last block:
// an error is put in the array ("[]"), and no items are an empty array.
func (d *datumDecoder) arrayEnd(r *avro.Reader, out []any) any {
	if r.Error != nil {
		r.Error = container.InField("[]", r.Error)
	}
	if out == nil {
		out = []any{}
	}
	return d.listv(out)
}

// mapBlock is arrayBlock for a map: out is nil before the first block,
// which makes it for its entries.
func mapBlock(r *avro.Reader, out map[string]any) (map[string]any, int64) {
	c := nextBlock(r)
	if c > 0 && out == nil {
		out = make(map[string]any, min(c, 64))
	}
	return out, c
}

// mapEnd is arrayEnd for a map: an error is put in the map ("{}"), and no
// entries are an empty map.
func mapEnd(r *avro.Reader, out map[string]any) map[string]any {
	if r.Error != nil {
		r.Error = container.InField("{}", r.Error)
	}
	if out == nil {
		out = map[string]any{}
	}
	return out
}

// decode decodes one datum of n from r. On bad data it sets r.Error and
// returns what it has; loops stop as soon as r.Error is set.
func (d *datumDecoder) decode(r *avro.Reader, n *node, depth int) any {
	switch n.kind {
	case kNull:
		return nil
	case kBool:
		return r.ReadBool()
	case kInt:
		return d.intv(int(r.ReadInt()))
	case kLong:
		return d.int64v(r.ReadLong())
	case kFloat:
		return d.float32v(r.ReadFloat())
	case kDouble:
		return d.float64v(r.ReadDouble())
	case kEnum:
		i := r.ReadInt()
		if r.Error != nil {
			return ""
		}
		if i < 0 || int(i) >= len(n.symbols) {
			fail(r, fmt.Errorf("enum %s: symbol index %d out of range [0, %d)", n.name, i, len(n.symbols)))
			return ""
		}
		return n.symbolValues[i]
	case kString:
		return d.stringv(r.ReadString())
	case kBytes:
		b := r.ReadBytes()
		if b == nil {
			return []byte(nil)
		}
		return d.bytesv(b)
	case kDate:
		return d.timev(time.Unix(int64(r.ReadInt())*86400, 0).UTC())
	case kTimeMillis:
		return d.durationv(time.Duration(r.ReadInt()) * time.Millisecond)
	case kTimeMicros:
		v, err := container.MicrosDuration(r.ReadLong())
		if err != nil {
			fail(r, err)
			return nil
		}
		return d.durationv(v)
	case kTimestampMillis, kLocalTimestampMillis:
		return d.timev(time.UnixMilli(r.ReadLong()).UTC())
	case kTimestampMicros, kLocalTimestampMicros:
		return d.timev(time.UnixMicro(r.ReadLong()).UTC())
	case kDecimalBytes:
		b := r.ReadBytes()
		if r.Error != nil {
			return nil
		}
		return ratFromBytes(b, n.scale)
	case kDecimalFixed:
		b := make([]byte, n.size)
		r.Read(b)
		return ratFromBytes(b, n.scale)
	case kDuration:
		var b [12]byte
		r.Read(b[:])
		return avro.LogicalDuration{
			Months:       binary.LittleEndian.Uint32(b[0:]),
			Days:         binary.LittleEndian.Uint32(b[4:]),
			Milliseconds: binary.LittleEndian.Uint32(b[8:]),
		}
	case kFixed:
		a := reflect.New(n.arrType)
		r.Read(unsafe.Slice((*byte)(a.UnsafePointer()), n.size))
		return box.Pack(n.arrTypeWord, a.UnsafePointer())
	case kArray:
		if depth > maxDatumDepth {
			fail(r, errDepth)
			return nil
		}
		out, c := d.arrayBlock(r, nil)
		for ; c > 0; out, c = d.arrayBlock(r, out) {
			for i := int64(0); i < c && r.Error == nil; i++ {
				out = append(out, d.decode(r, n.elem, depth+1))
			}
		}
		return d.arrayEnd(r, out)
	case kMap:
		if depth > maxDatumDepth {
			fail(r, errDepth)
			return nil
		}
		out, c := mapBlock(r, nil)
		for ; c > 0; out, c = mapBlock(r, out) {
			for i := int64(0); i < c && r.Error == nil; i++ {
				k := r.ReadString()
				out[k] = d.decode(r, n.elem, depth+1)
			}
		}
		return mapEnd(r, out)
	case kRecord:
		if depth > maxDatumDepth {
			fail(r, errDepth)
			return nil
		}
		m := make(map[string]any, len(n.fields))
		for _, f := range n.fields {
			m[f.name] = d.decode(r, f.node, depth+1)
			if r.Error != nil {
				r.Error = container.InField(f.name, r.Error)
				break
			}
		}
		return m
	case kUnion:
		i, ok := branchIndex(r, len(n.branches))
		if !ok {
			return nil
		}
		b := n.branches[i]
		v := d.decode(r, b, depth+1)
		if n.wrap[i] {
			return map[string]any{b.name: v}
		}
		return v
	}
	fail(r, fmt.Errorf("unknown node kind %d", n.kind))
	return nil
}

// branchIndex reads the index of the branch of a union of count branches
// that a datum takes; false once r.Error is set, as an index out of range
// sets it.
func branchIndex(r *avro.Reader, count int) (int, bool) {
	i := r.ReadLong()
	if r.Error != nil {
		return 0, false
	}
	if i < 0 || i >= int64(count) {
		fail(r, fmt.Errorf("union branch index %d out of range [0, %d)", i, count))
		return 0, false
	}
	return int(i), true
}

var bigTen = big.NewInt(10)

// ratFromBytes is the decimal of the big-endian two's complement unscaled
// value b and scale.
func ratFromBytes(b []byte, scale int) *big.Rat {
	num := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		num.Sub(num, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	den := new(big.Int).Exp(bigTen, big.NewInt(int64(scale)), nil)
	return new(big.Rat).SetFrac(num, den)
}

// recordDecoder is a container.Reader's decoder of Records: an
// avro.ValDecoder whose pointer is a *Record. Each reader has its own (dec
// set); one without dec decodes with a decoder of its own each time.
type recordDecoder struct {
	root *node
	dec  *datumDecoder
}

func (d recordDecoder) Decode(ptr unsafe.Pointer, r *avro.Reader) {
	dec := d.dec
	if dec == nil {
		dec = new(datumDecoder)
	}
	v := dec.decode(r, d.root, 0)
	m, _ := v.(map[string]any)
	*(*Record)(ptr) = m
}
