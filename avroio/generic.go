package avroio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

// This file decodes Avro datums into Records and encodes Records into Avro
// datums, by a tree of nodes compiled once per schema. It replaces
// hamba/avro's generic decoding for Records: it is several times faster
// (field names and branch names are computed once, not per datum), and it
// gives unions the shape Record documents, which keeps the branch wherever
// two branches of a union share a Go type.

type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kLong
	kFloat
	kDouble
	kString
	kBytes
	kDate
	kTimeMillis
	kTimeMicros
	kTimestampMillis
	kTimestampMicros
	kLocalTimestampMillis
	kLocalTimestampMicros
	kDecimalBytes
	kDecimalFixed
	kDuration
	kFixed
	kEnum
	kArray
	kMap
	kRecord
	kUnion
)

// node is the compiled form of one schema.
type node struct {
	kind     kind
	avroType avro.Type
	aliases  []string // of a named type, full names
	name     string   // the branch name of the schema in a union (hamba's: full name, or type.logical)
	// goType names the Go type of the node's values, to find unions whose
	// branches share one.
	goType string

	// record
	fields []*field
	// array items, map values
	elem *node
	// union
	branches []*node
	wrap     []bool // branch i is given as map[string]any{name: value}
	nullIdx  int    // index of the null branch, or -1
	// enum
	symbols     []string
	enumDefault string
	// fixed, decimal fixed
	size        int
	arrType     reflect.Type
	arrTypeWord unsafe.Pointer // typeWord of arrType
	scale       int
	// enum symbols as interfaces, boxed once
	symbolValues []any
}

type field struct {
	name    string
	aliases []string
	node    *node
	hasDef  bool
	def     any // the default in Record form
}

// compiled schemas, by schema pointer: every file of a read shares one
// parsed writer schema, and so one compiled tree.
var compiled = newBoundedCache[avro.Schema, *node](maxCachedSchemas)

// compileSchema compiles s, or returns the tree compiled before.
func compileSchema(s avro.Schema) (*node, error) {
	if n, ok := compiled.get(s); ok {
		return n, nil
	}
	c := compiler{named: map[string]*node{}}
	n, err := c.compile(s)
	if err != nil {
		return nil, err
	}
	compiled.put(s, n)
	return n, nil
}

type compiler struct {
	named map[string]*node // records by full name, for recursive schemas
}

func (c *compiler) compile(s avro.Schema) (*node, error) {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	n := &node{name: branchName(s), avroType: s.Type()}
	if ns, ok := s.(avro.NamedSchema); ok {
		n.aliases = ns.Aliases()
	}
	var lt avro.LogicalType
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		lt = l.Logical().Type()
	}
	switch s.Type() {
	case avro.Null:
		n.kind, n.goType = kNull, "nil"
	case avro.Boolean:
		n.kind, n.goType = kBool, "bool"
	case avro.Int:
		switch lt {
		case avro.Date:
			n.kind, n.goType = kDate, "time.Time"
		case avro.TimeMillis:
			n.kind, n.goType = kTimeMillis, "time.Duration"
		default:
			n.kind, n.goType = kInt, "int"
		}
	case avro.Long:
		switch lt {
		case avro.TimeMicros:
			n.kind, n.goType = kTimeMicros, "time.Duration"
		case avro.TimestampMillis:
			n.kind, n.goType = kTimestampMillis, "time.Time"
		case avro.TimestampMicros:
			n.kind, n.goType = kTimestampMicros, "time.Time"
		case avro.LocalTimestampMillis:
			n.kind, n.goType = kLocalTimestampMillis, "time.Time"
		case avro.LocalTimestampMicros:
			n.kind, n.goType = kLocalTimestampMicros, "time.Time"
		default:
			n.kind, n.goType = kLong, "int64"
		}
	case avro.Float:
		n.kind, n.goType = kFloat, "float32"
	case avro.Double:
		n.kind, n.goType = kDouble, "float64"
	case avro.String:
		n.kind, n.goType = kString, "string"
	case avro.Bytes:
		if d, ok := s.(*avro.PrimitiveSchema).Logical().(*avro.DecimalLogicalSchema); ok && lt == avro.Decimal {
			n.kind, n.goType, n.scale = kDecimalBytes, "*big.Rat", d.Scale()
		} else {
			n.kind, n.goType = kBytes, "[]byte"
		}
	case avro.Fixed:
		fs := s.(*avro.FixedSchema)
		n.size = fs.Size()
		switch d, _ := fs.Logical().(*avro.DecimalLogicalSchema); {
		case lt == avro.Decimal && d != nil:
			n.kind, n.goType, n.scale = kDecimalFixed, "*big.Rat", d.Scale()
		case lt == avro.Duration && n.size == 12:
			n.kind, n.goType = kDuration, "avro.LogicalDuration"
		default:
			n.kind, n.goType = kFixed, "["+strconv.Itoa(n.size)+"]byte"
			n.arrType = reflect.ArrayOf(n.size, reflect.TypeFor[byte]())
			n.arrTypeWord = typeWord(reflect.Zero(n.arrType).Interface())
		}
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		n.kind, n.goType, n.symbols, n.enumDefault = kEnum, "string", es.Symbols(), es.Default()
		n.symbolValues = make([]any, len(n.symbols))
		for i, sym := range n.symbols {
			n.symbolValues[i] = sym
		}
	case avro.Array:
		n.kind, n.goType = kArray, "[]any"
		elem, err := c.compile(s.(*avro.ArraySchema).Items())
		if err != nil {
			return nil, err
		}
		n.elem = elem
	case avro.Map:
		n.kind, n.goType = kMap, "map[string]any"
		elem, err := c.compile(s.(*avro.MapSchema).Values())
		if err != nil {
			return nil, err
		}
		n.elem = elem
	case avro.Record:
		rs := s.(*avro.RecordSchema)
		if done, ok := c.named[rs.FullName()]; ok {
			return done, nil
		}
		n.kind, n.goType = kRecord, "map[string]any"
		c.named[rs.FullName()] = n
		for _, f := range rs.Fields() {
			fn, err := c.compile(f.Type())
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.Name(), err)
			}
			fl := &field{name: f.Name(), aliases: f.Aliases(), node: fn, hasDef: f.HasDefault()}
			if fl.hasDef {
				if fl.def, err = defaultValue(fn, f.Default()); err != nil {
					return nil, fmt.Errorf("field %s: default: %w", f.Name(), err)
				}
			}
			n.fields = append(n.fields, fl)
		}
	case avro.Union:
		n.kind, n.goType, n.nullIdx = kUnion, "union", -1
		count := map[string]int{}
		for i, b := range s.(*avro.UnionSchema).Types() {
			bn, err := c.compile(b)
			if err != nil {
				return nil, err
			}
			if bn.kind == kNull {
				n.nullIdx = i
			}
			n.branches = append(n.branches, bn)
			count[bn.goType]++
		}
		n.wrap = make([]bool, len(n.branches))
		for i, b := range n.branches {
			n.wrap[i] = b.kind != kNull && count[b.goType] > 1
		}
	default:
		return nil, fmt.Errorf("unsupported Avro type %s", s.Type())
	}
	return n, nil
}

func (n *node) hasAlias(name string) bool {
	for _, a := range n.aliases {
		if a == name {
			return true
		}
	}
	return false
}

// branchName is the name of s as a branch of a union: its full name for
// named types, else its type, with the logical type after a dot
// ("long.timestamp-millis"), as hamba/avro names union branches.
func branchName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	name := string(s.Type())
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		name += "." + string(l.Logical().Type())
	}
	return name
}

// defaultValue converts a field's default as hamba/avro parsed it from
// JSON into the Record form of n. A union's default is of its first branch.
func defaultValue(n *node, v any) (any, error) {
	if n.kind == kUnion {
		b := n.branches[0]
		d, err := defaultValue(b, v)
		if err != nil || !n.wrap[0] {
			return d, err
		}
		return map[string]any{b.name: d}, nil
	}
	// Round trip through the binary encoding: the encoder accepts what
	// JSON defaults hold (float64 numbers, strings for bytes, maps).
	b, err := appendDatum(nil, n, jsonDefault(n, v))
	if err != nil {
		return nil, err
	}
	r := avro.NewReader(nil, 0)
	r.Reset(b)
	d := new(datumDecoder).decode(r, n, 0)
	return d, r.Error
}

// jsonDefault turns what hamba/avro keeps of a JSON default into a value
// appendDatum takes.
func jsonDefault(n *node, v any) any {
	switch n.kind {
	case kFloat:
		// JSON has doubles only: a float's default is rounded to a float,
		// as Avro Java reads it.
		if f, ok := v.(float64); ok {
			return float32(f)
		}
	case kDate, kTimeMillis, kTimeMicros, kTimestampMillis, kTimestampMicros, kLocalTimestampMillis, kLocalTimestampMicros:
		// A logical type's default is the number it is encoded as.
		if x, ok := asInt64(v); ok {
			switch n.kind {
			case kDate:
				return time.Unix(x*86400, 0).UTC()
			case kTimeMillis:
				return time.Duration(x) * time.Millisecond
			case kTimeMicros:
				if d, err := container.MicrosDuration(x); err == nil {
					return d
				}
			case kTimestampMillis, kLocalTimestampMillis:
				return time.UnixMilli(x).UTC()
			default:
				return time.UnixMicro(x).UTC()
			}
		}
	case kBytes, kFixed, kDecimalBytes, kDecimalFixed, kDuration:
		if s, ok := v.(string); ok {
			b := make([]byte, 0, len(s))
			for _, r := range s {
				b = append(b, byte(r))
			}
			if n.kind == kDecimalBytes || n.kind == kDecimalFixed {
				return ratFromBytes(b, n.scale)
			}
			if n.kind == kFixed || n.kind == kDuration {
				return b
			}
			return b
		}
	case kArray:
		if l, ok := v.([]any); ok {
			out := make([]any, len(l))
			for i, e := range l {
				out[i] = jsonDefault(n.elem, e)
			}
			return out
		}
	case kMap:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for k, e := range m {
				out[k] = jsonDefault(n.elem, e)
			}
			return out
		}
	case kRecord:
		if m, ok := v.(map[string]any); ok {
			out := make(map[string]any, len(m))
			for _, f := range n.fields {
				if e, ok := m[f.name]; ok {
					out[f.name] = jsonDefault(f.node, e)
				}
			}
			return out
		}
	case kUnion:
		return jsonDefault(n.branches[0], v)
	}
	return v
}

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

// eface is the layout of an interface{}: its type word and a pointer to
// its value (for all types boxed here, which are not pointer-shaped).
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

func typeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

// pack is the interface of type typ (a typeWord) whose value is at p,
// without copying it; the value at p must never change.
func pack(typ, p unsafe.Pointer) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, p
	return v
}

var (
	typInt      = typeWord(int(0))
	typInt64    = typeWord(int64(0))
	typFloat32  = typeWord(float32(0))
	typFloat64  = typeWord(float64(0))
	typDuration = typeWord(time.Duration(0))
	typString   = typeWord("")
	typBytes    = typeWord([]byte(nil))
	typList     = typeWord([]any(nil))
	typTime     = typeWord(time.Time{})
)

// word boxes the 8 bytes v as a value of typ (int, int64, float64 or
// time.Duration). Go boxes values below 256 without allocating; the
// caller has them boxed by Go.
func (d *datumDecoder) word(typ unsafe.Pointer, v uint64) any {
	p := d.words.next()
	*p = v
	return pack(typ, unsafe.Pointer(p))
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
	return pack(typFloat32, unsafe.Pointer(p))
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
	return pack(typString, unsafe.Pointer(p))
}

func (d *datumDecoder) bytesv(b []byte) any {
	p := d.bytes.next()
	// hamba/avro hands out byte slices of a shared slab: cap them, so
	// that appending to one never writes into another value.
	*p = b[:len(b):len(b)]
	return pack(typBytes, unsafe.Pointer(p))
}

func (d *datumDecoder) listv(l []any) any {
	p := d.lists.next()
	*p = l
	return pack(typList, unsafe.Pointer(p))
}

func (d *datumDecoder) timev(t time.Time) any {
	p := d.times.next()
	*p = t
	return pack(typTime, unsafe.Pointer(p))
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
		return pack(n.arrTypeWord, a.UnsafePointer())
	case kArray:
		if depth > maxDatumDepth {
			fail(r, errDepth)
			return nil
		}
		var out []any
		for r.Error == nil {
			c, _ := r.ReadBlockHeader()
			if c <= 0 || r.Error != nil {
				break
			}
			if out == nil {
				if c <= maxChunkedItems {
					out = d.items.take(int(c))
				} else {
					out = make([]any, 0, min(c, 1024))
				}
			}
			for i := int64(0); i < c && r.Error == nil; i++ {
				out = append(out, d.decode(r, n.elem, depth+1))
			}
		}
		if r.Error != nil {
			r.Error = container.InField("[]", r.Error)
		}
		if out == nil {
			out = []any{}
		}
		return d.listv(out)
	case kMap:
		if depth > maxDatumDepth {
			fail(r, errDepth)
			return nil
		}
		var out map[string]any
		for r.Error == nil {
			c, _ := r.ReadBlockHeader()
			if c <= 0 || r.Error != nil {
				break
			}
			if out == nil {
				out = make(map[string]any, min(c, 64))
			}
			for i := int64(0); i < c && r.Error == nil; i++ {
				k := r.ReadString()
				out[k] = d.decode(r, n.elem, depth+1)
			}
		}
		if r.Error != nil {
			r.Error = container.InField("{}", r.Error)
		}
		if out == nil {
			out = map[string]any{}
		}
		return out
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
		i := r.ReadLong()
		if r.Error != nil {
			return nil
		}
		if i < 0 || i >= int64(len(n.branches)) {
			fail(r, fmt.Errorf("union branch index %d out of range [0, %d)", i, len(n.branches)))
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

// decimalBytes is the big-endian two's complement unscaled value of r at
// scale, in size bytes (0: as few as it takes).
func decimalBytes(r *big.Rat, scale, size int) ([]byte, error) {
	v := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(bigTen, big.NewInt(int64(scale)), nil)))
	if !v.IsInt() {
		return nil, fmt.Errorf("decimal %s has more than %d digits after the point", r.RatString(), scale)
	}
	n := v.Num()
	var b []byte
	if n.Sign() >= 0 {
		b = n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	} else {
		// Two's complement: 2^(8k) + n for the smallest k that fits.
		k := (n.BitLen() + 8) / 8
		t := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(k)*8), n)
		b = t.Bytes()
		for len(b) < k {
			b = append([]byte{0}, b...)
		}
		if b[0]&0x80 == 0 {
			b = append([]byte{0xff}, b...)
		}
	}
	if size == 0 {
		return b, nil
	}
	// Drop or add sign bytes to make size.
	for len(b) > size && (b[0] == 0 && b[1]&0x80 == 0 || b[0] == 0xff && b[1]&0x80 != 0) {
		b = b[1:]
	}
	if len(b) > size {
		return nil, fmt.Errorf("decimal %s does not fit in %d bytes", r.RatString(), size)
	}
	pad := byte(0)
	if b[0]&0x80 != 0 {
		pad = 0xff
	}
	out := make([]byte, size)
	for i := range size - len(b) {
		out[i] = pad
	}
	copy(out[size-len(b):], b)
	return out, nil
}

// appendDatum appends the Avro binary encoding of v by n to b.
func appendDatum(b []byte, n *node, v any) ([]byte, error) {
	return appendDatumDepth(b, n, v, 0)
}

func typeErr(n *node, v any) error {
	return fmt.Errorf("a %T cannot be written as Avro %s (want %s)", v, n.name, n.goType)
}

func putLong(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

func putBytes(b []byte, p []byte) []byte {
	return append(putLong(b, int64(len(p))), p...)
}

// asInt64 is v as an integer, for Go integer types.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case float64: // JSON defaults
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x), true
		}
	}
	return 0, false
}

func appendDatumDepth(b []byte, n *node, v any, depth int) ([]byte, error) {
	if depth > maxDatumDepth {
		return nil, errDepth
	}
	switch n.kind {
	case kNull:
		if v != nil {
			return nil, typeErr(n, v)
		}
		return b, nil
	case kBool:
		x, ok := v.(bool)
		if !ok {
			return nil, typeErr(n, v)
		}
		if x {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case kInt, kLong:
		x, ok := asInt64(v)
		if !ok {
			return nil, typeErr(n, v)
		}
		if n.kind == kInt && (x < math.MinInt32 || x > math.MaxInt32) {
			return nil, fmt.Errorf("%d does not fit Avro int", x)
		}
		return putLong(b, x), nil
	case kFloat:
		var f float32
		switch x := v.(type) {
		case float32:
			f = x
		case float64:
			f = float32(x)
			if float64(f) != x && !math.IsNaN(x) {
				return nil, fmt.Errorf("the float64 %v is not a float32 (an Avro float holds %v): convert it with float32(x) to round it", x, f)
			}
		default:
			i, ok := asInt64(v)
			if !ok {
				return nil, typeErr(n, v)
			}
			f = float32(i)
			if !exactInt(float64(f), i) {
				return nil, fmt.Errorf("the integer %d is not a float32 (an Avro float holds %v)", i, f)
			}
		}
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(f)), nil
	case kDouble:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			i, ok := asInt64(v)
			if !ok {
				return nil, typeErr(n, v)
			}
			f = float64(i)
			if !exactInt(f, i) {
				return nil, fmt.Errorf("the integer %d is not a float64 (an Avro double holds %v)", i, f)
			}
		}
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
	case kString:
		switch x := v.(type) {
		case string:
			return append(putLong(b, int64(len(x))), x...), nil
		case []byte:
			return putBytes(b, x), nil
		}
		return nil, typeErr(n, v)
	case kBytes:
		switch x := v.(type) {
		case []byte:
			return putBytes(b, x), nil
		case string:
			return append(putLong(b, int64(len(x))), x...), nil
		}
		return nil, typeErr(n, v)
	case kEnum:
		s, ok := v.(string)
		if !ok {
			return nil, typeErr(n, v)
		}
		for i, sym := range n.symbols {
			if sym == s {
				return putLong(b, int64(i)), nil
			}
		}
		return nil, fmt.Errorf("%q is not a symbol of enum %s", s, n.name)
	case kDate, kTimestampMillis, kTimestampMicros, kLocalTimestampMillis, kLocalTimestampMicros:
		t, ok := v.(time.Time)
		if !ok {
			return nil, typeErr(n, v)
		}
		// A local timestamp is the wall clock of t's UTC fields, whatever
		// t's location (localtime.go): the same long as a timestamp.
		var x int64
		var err error
		switch n.kind {
		case kDate:
			x, err = dateOf(t)
		case kTimestampMillis, kLocalTimestampMillis:
			x, err = unixUnits(t, 1000)
		default:
			x, err = unixUnits(t, 1000000)
		}
		if err != nil {
			return nil, err
		}
		return putLong(b, x), nil
	case kTimeMillis, kTimeMicros:
		d, ok := v.(time.Duration)
		if !ok {
			return nil, typeErr(n, v)
		}
		if n.kind == kTimeMillis {
			ms, err := timeMillisOf(d)
			if err != nil {
				return nil, err
			}
			return putLong(b, ms), nil
		}
		return putLong(b, int64(d/time.Microsecond)), nil
	case kDecimalBytes, kDecimalFixed:
		r, ok := v.(*big.Rat)
		if !ok || r == nil {
			return nil, typeErr(n, v)
		}
		size := 0
		if n.kind == kDecimalFixed {
			size = n.size
		}
		p, err := decimalBytes(r, n.scale, size)
		if err != nil {
			return nil, err
		}
		if n.kind == kDecimalFixed {
			return append(b, p...), nil
		}
		return putBytes(b, p), nil
	case kDuration:
		d, ok := v.(avro.LogicalDuration)
		if !ok {
			if p, isBytes := v.([]byte); isBytes && len(p) == 12 {
				return append(b, p...), nil
			}
			return nil, typeErr(n, v)
		}
		b = binary.LittleEndian.AppendUint32(b, d.Months)
		b = binary.LittleEndian.AppendUint32(b, d.Days)
		return binary.LittleEndian.AppendUint32(b, d.Milliseconds), nil
	case kFixed:
		if p, ok := v.([]byte); ok {
			if len(p) != n.size {
				return nil, fmt.Errorf("%d bytes for fixed %s of %d", len(p), n.name, n.size)
			}
			return append(b, p...), nil
		}
		rv := reflect.ValueOf(v)
		if !rv.IsValid() || rv.Kind() != reflect.Array || rv.Type().Elem().Kind() != reflect.Uint8 || rv.Len() != n.size {
			return nil, typeErr(n, v)
		}
		for i := range n.size {
			b = append(b, byte(rv.Index(i).Uint()))
		}
		return b, nil
	case kArray:
		l, ok := v.([]any)
		if !ok {
			if v == nil {
				return nil, fmt.Errorf("nil for an Avro array, which has no null: give an empty []any{}, or make the schema a union with null")
			}
			return nil, typeErr(n, v)
		}
		if len(l) > 0 {
			b = putLong(b, int64(len(l)))
			var err error
			for i, e := range l {
				if b, err = appendDatumDepth(b, n.elem, e, depth+1); err != nil {
					return nil, fmt.Errorf("item %d: %w", i, err)
				}
			}
		}
		return append(b, 0), nil
	case kMap:
		m, ok := asMap(v)
		if !ok {
			if v == nil {
				return nil, fmt.Errorf("nil for an Avro map, which has no null: give an empty map[string]any{}, or make the schema a union with null")
			}
			return nil, typeErr(n, v)
		}
		if len(m) > 0 {
			b = putLong(b, int64(len(m)))
			var err error
			for k, e := range m {
				b = append(putLong(b, int64(len(k))), k...)
				if b, err = appendDatumDepth(b, n.elem, e, depth+1); err != nil {
					return nil, fmt.Errorf("key %q: %w", k, err)
				}
			}
		}
		return append(b, 0), nil
	case kRecord:
		m, ok := asMap(v)
		if !ok {
			return nil, typeErr(n, v)
		}
		var err error
		found := 0
		for _, f := range n.fields {
			fv, ok := m[f.name]
			if !ok {
				if !f.hasDef {
					return nil, fmt.Errorf("record %s: field %q is missing and has no default", n.name, f.name)
				}
				fv = f.def
			} else {
				found++
			}
			if b, err = appendDatumDepth(b, f.node, fv, depth+1); err != nil {
				return nil, fmt.Errorf("field %s: %w", f.name, err)
			}
		}
		if found < len(m) {
			return nil, n.unknownKeys(m)
		}
		return b, nil
	case kUnion:
		i, inner, err := n.branchOf(v)
		if err != nil {
			return nil, err
		}
		b = putLong(b, int64(i))
		b, err = appendDatumDepth(b, n.branches[i], inner, depth+1)
		if err != nil {
			return nil, fmt.Errorf("union branch %s: %w", n.branches[i].name, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown node kind %d", n.kind)
}

// unknownKeys is the error of a Record whose keys name fields record n
// does not have: their values would be dropped.
func (n *node) unknownKeys(m map[string]any) error {
	var extra, names []string
	for k := range m {
		if !slices.ContainsFunc(n.fields, func(f *field) bool { return f.name == k }) {
			extra = append(extra, strconv.Quote(k))
		}
	}
	for _, f := range n.fields {
		names = append(names, f.name)
	}
	slices.Sort(extra)
	return fmt.Errorf("record %s has no field %s (its fields: %s): the value would be lost", n.name, strings.Join(extra, ", "), strings.Join(names, ", "))
}

// exactInt reports whether the float f is exactly the integer i.
func exactInt(f float64, i int64) bool {
	return f >= -(1<<63) && f < 1<<63 && int64(f) == i
}

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case Record:
		return m, true
	}
	return nil, false
}

// branchOf finds the branch of union n that v is a value of, and the value
// to encode by it: nil is the null branch; a one-key map naming a wrapped
// branch is that branch (any branch, when no branch is a bare record or
// map); otherwise the one unwrapped branch of v's Go type.
func (n *node) branchOf(v any) (int, any, error) {
	if v == nil {
		if n.nullIdx < 0 {
			return 0, nil, fmt.Errorf("nil for a union without null (%s)", n.unionNames())
		}
		return n.nullIdx, nil, nil
	}
	if m, ok := asMap(v); ok && len(m) == 1 {
		bareMap := false
		for i, b := range n.branches {
			if !n.wrap[i] && b.goType == "map[string]any" {
				bareMap = true
			}
		}
		for k, inner := range m {
			for i, b := range n.branches {
				if b.name == k && (n.wrap[i] || !bareMap) {
					return i, inner, nil
				}
			}
		}
	}
	gt := goTypeOf(v)
	for i, b := range n.branches {
		if !n.wrap[i] && b.goType == gt {
			return i, v, nil
		}
	}
	// Numbers of another Go type: the first numeric branch that takes them.
	if _, ok := asInt64(v); ok {
		for i, b := range n.branches {
			if !n.wrap[i] && (b.kind == kLong || b.kind == kInt || b.kind == kDouble || b.kind == kFloat) {
				return i, v, nil
			}
		}
	}
	for i, b := range n.branches {
		if n.wrap[i] && b.goType == gt {
			return 0, nil, fmt.Errorf("a %T in union %s is ambiguous: give it as map[string]any{%q: value}", v, n.unionNames(), b.name)
		}
	}
	return 0, nil, fmt.Errorf("a %T is none of the branches of union %s", v, n.unionNames())
}

func (n *node) unionNames() string {
	s := "["
	for i, b := range n.branches {
		if i > 0 {
			s += ", "
		}
		s += b.name
	}
	return s + "]"
}

// goTypeOf names v's Go type as node.goType does.
func goTypeOf(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case int:
		return "int"
	case int64:
		return "int64"
	case float32:
		return "float32"
	case float64:
		return "float64"
	case string:
		return "string"
	case []byte:
		return "[]byte"
	case time.Time:
		return "time.Time"
	case time.Duration:
		return "time.Duration"
	case *big.Rat:
		return "*big.Rat"
	case avro.LogicalDuration:
		return "avro.LogicalDuration"
	case []any:
		return "[]any"
	case map[string]any, Record:
		return "map[string]any"
	}
	if t := reflect.TypeOf(v); t.Kind() == reflect.Array && t.Elem().Kind() == reflect.Uint8 {
		return "[" + strconv.Itoa(t.Len()) + "]byte"
	}
	return reflect.TypeOf(v).String()
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
