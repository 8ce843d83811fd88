package avroio

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/box"
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
			// The type word without a value: a zero value of a
			// [60_000_000]byte would cost 60 MB per fixed type of
			// the schema, decoded or not.
			n.arrTypeWord = box.TypeWordOf(n.arrType)
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
		return c.withElem(n, s.(*avro.ArraySchema).Items())
	case avro.Map:
		n.kind, n.goType = kMap, "map[string]any"
		return c.withElem(n, s.(*avro.MapSchema).Values())
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
		k, ok := plainKinds[typeLogical{s.Type(), lt}]
		if !ok {
			k, ok = plainKinds[typeLogical{s.Type(), ""}]
		}
		if !ok {
			return nil, fmt.Errorf("unsupported Avro type %s", s.Type())
		}
		n.kind, n.goType = k.kind, k.goType
	}
	return n, nil
}

// typeLogical is an Avro type with a logical type, or "" for none.
type typeLogical struct {
	t  avro.Type
	lt avro.LogicalType
}

// plainKinds are the kinds and Go types of the schemas that their type
// and logical type decide alone; a logical type not listed for a type
// (under "") is ignored.
var plainKinds = map[typeLogical]struct {
	kind   kind
	goType string
}{
	{avro.Null, ""}:                        {kNull, "nil"},
	{avro.Boolean, ""}:                     {kBool, "bool"},
	{avro.Int, ""}:                         {kInt, "int"},
	{avro.Int, avro.Date}:                  {kDate, "time.Time"},
	{avro.Int, avro.TimeMillis}:            {kTimeMillis, "time.Duration"},
	{avro.Long, ""}:                        {kLong, "int64"},
	{avro.Long, avro.TimeMicros}:           {kTimeMicros, "time.Duration"},
	{avro.Long, avro.TimestampMillis}:      {kTimestampMillis, "time.Time"},
	{avro.Long, avro.TimestampMicros}:      {kTimestampMicros, "time.Time"},
	{avro.Long, avro.LocalTimestampMillis}: {kLocalTimestampMillis, "time.Time"},
	{avro.Long, avro.LocalTimestampMicros}: {kLocalTimestampMicros, "time.Time"},
	{avro.Float, ""}:                       {kFloat, "float32"},
	{avro.Double, ""}:                      {kDouble, "float64"},
	{avro.String, ""}:                      {kString, "string"},
}

// withElem is n, an array or a map, with the node of its items or values
// compiled from s.
func (c *compiler) withElem(n *node, s avro.Schema) (*node, error) {
	elem, err := c.compile(s)
	if err != nil {
		return nil, err
	}
	n.elem = elem
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
