package container

import (
	"errors"
	"fmt"
	"math"

	"github.com/hamba/avro/v2"
)

// The validator walks serialized datums against the writer schema without
// allocating anything. The record reader runs it over a whole block before
// decoding when the schema lets hostile data cost memory or stack that the
// block's size does not bound:
//
//   - an array whose items can encode to zero bytes (null, fixed(0), records
//     of such fields) can claim any number of items in a few bytes, and the
//     decoder allocates them all;
//   - a recursive schema nests as deep as the data says, and decoding
//     recurses once per level.
//
// It also checks that the records a block declares use exactly its bytes.

// maxDepth bounds datum nesting for recursive schemas.
const maxDepth = 1000

type vnode struct {
	typ    avro.Type
	size   int      // fixed size; enum symbol count
	sub    *vnode   // array items; map values
	subs   []*vnode // record fields; union branches
	min    int64    // minimum encoded size in bytes
	inProg bool
}

type schemaInfo struct {
	root           *vnode
	recursive      bool
	zeroWidthItems bool
	maxFixed       int
}

// analyze compiles the writer schema for the validator and reports the
// properties the record reader needs.
func analyze(s avro.Schema) (*schemaInfo, error) {
	info := &schemaInfo{}
	memo := map[avro.NamedSchema]*vnode{}
	var compile func(s avro.Schema) (*vnode, error)
	compile = func(s avro.Schema) (*vnode, error) {
		if ref, ok := s.(*avro.RefSchema); ok {
			s = ref.Schema()
		}
		if ns, ok := s.(avro.NamedSchema); ok {
			if n, ok := memo[ns]; ok {
				if n.inProg {
					info.recursive = true
				}
				return n, nil
			}
		}
		n := &vnode{typ: s.Type()}
		switch t := s.(type) {
		case *avro.PrimitiveSchema:
			switch t.Type() {
			case avro.Null:
			case avro.Boolean, avro.Int, avro.Long, avro.String, avro.Bytes:
				n.min = 1
			case avro.Float:
				n.min = 4
			case avro.Double:
				n.min = 8
			default:
				return nil, fmt.Errorf("unknown primitive type %q", t.Type())
			}
		case *avro.NullSchema:
			n.typ = avro.Null
		case *avro.FixedSchema:
			n.size, n.min = t.Size(), int64(t.Size())
			info.maxFixed = max(info.maxFixed, t.Size())
			memo[t] = n
		case *avro.EnumSchema:
			n.size, n.min = len(t.Symbols()), 1
			if n.size == 0 {
				return nil, fmt.Errorf("enum %s has no symbols", t.FullName())
			}
			memo[t] = n
		case *avro.ArraySchema:
			n.min = 1
			it, err := compile(t.Items())
			if err != nil {
				return nil, err
			}
			n.sub = it
		case *avro.MapSchema:
			n.min = 1
			v, err := compile(t.Values())
			if err != nil {
				return nil, err
			}
			n.sub = v
		case *avro.UnionSchema:
			n.min = 1
			for _, b := range t.Types() {
				c, err := compile(b)
				if err != nil {
					return nil, err
				}
				n.subs = append(n.subs, c)
			}
			if len(n.subs) == 0 {
				return nil, errors.New("union with no branches")
			}
		case *avro.RecordSchema:
			memo[t] = n
			n.inProg = true
			for _, f := range t.Fields() {
				c, err := compile(f.Type())
				if err != nil {
					return nil, err
				}
				n.subs = append(n.subs, c)
			}
			n.inProg = false
		default:
			return nil, fmt.Errorf("unsupported schema type %q", s.Type())
		}
		return n, nil
	}
	root, err := compile(s)
	if err != nil {
		return nil, err
	}
	info.root = root
	// Minimum sizes need the whole graph: iterate to a fixed point from the
	// leaves' values (records and unions start at their lower bounds and only
	// grow, so this terminates; recursive references are bounded by the
	// union or array that breaks the cycle).
	var all []*vnode
	seen := map[*vnode]bool{}
	var walk func(n *vnode)
	walk = func(n *vnode) {
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		all = append(all, n)
		walk(n.sub)
		for _, c := range n.subs {
			walk(c)
		}
	}
	walk(root)
	for pass, changed := 0, true; changed; pass++ {
		if pass > len(all)+1 {
			// Sizes still grow: a record contains itself with no union,
			// array or map in between, so no datum of it is finite.
			return nil, errors.New("schema is infinitely recursive")
		}
		changed = false
		for _, n := range all {
			var m int64
			switch n.typ {
			case avro.Record, avro.Error:
				for _, c := range n.subs {
					m += c.min
				}
			case avro.Union:
				m = math.MaxInt32
				for _, c := range n.subs {
					m = min(m, c.min)
				}
				m++
			default:
				continue
			}
			m = min(m, math.MaxInt32)
			if m > n.min {
				n.min, changed = m, true
			}
		}
	}
	for _, n := range all {
		if n.typ == avro.Array && n.sub.min == 0 {
			info.zeroWidthItems = true
		}
	}
	return info, nil
}

// errShort marks a datum that runs past the end of the block's data.
var errShort = errors.New("data ends inside the datum")

type validator struct {
	b          []byte
	zeroBudget int64
}

func (v *validator) long(p int) (int64, int, error) {
	x, n := uvarintLong(v.b[p:])
	if n == 0 {
		return 0, p, errShort
	}
	if n < 0 {
		return 0, p, fmt.Errorf("varint at data byte %d overflows 64 bits", p)
	}
	return x, p + n, nil
}

// datum checks the datum of node n at data position p and returns the
// position after it.
func (v *validator) datum(n *vnode, p, depth int) (int, error) {
	if depth > maxDepth {
		return p, fmt.Errorf("datum nests deeper than %d levels", maxDepth)
	}
	switch n.typ {
	case avro.Null:
		return p, nil
	case avro.Boolean:
		if p >= len(v.b) {
			return p, errShort
		}
		if v.b[p] > 1 {
			return p, fmt.Errorf("boolean byte 0x%02x at data byte %d", v.b[p], p)
		}
		return p + 1, nil
	case avro.Int, avro.Long:
		x, q, err := v.long(p)
		if err == nil && n.typ == avro.Int && (x < math.MinInt32 || x > math.MaxInt32) {
			err = fmt.Errorf("int at data byte %d overflows 32 bits", p)
		}
		return q, err
	case avro.Float, avro.Double:
		if int64(len(v.b)-p) < n.min {
			return p, errShort
		}
		return p + int(n.min), nil
	case avro.String, avro.Bytes:
		l, q, err := v.long(p)
		if err != nil {
			return q, err
		}
		if l < 0 {
			return p, fmt.Errorf("negative length %d at data byte %d", l, p)
		}
		if l > int64(len(v.b)-q) {
			return p, fmt.Errorf("%w: length %d at data byte %d, %d bytes left", errShort, l, p, len(v.b)-q)
		}
		return q + int(l), nil
	case avro.Fixed:
		if n.size > len(v.b)-p {
			return p, errShort
		}
		return p + n.size, nil
	case avro.Enum:
		x, q, err := v.long(p)
		if err == nil && (x < 0 || x >= int64(n.size)) {
			err = fmt.Errorf("enum index %d at data byte %d, %d symbols", x, p, n.size)
		}
		return q, err
	case avro.Union:
		x, q, err := v.long(p)
		if err != nil {
			return q, err
		}
		if x < 0 || x >= int64(len(n.subs)) {
			return p, fmt.Errorf("union index %d at data byte %d, %d branches", x, p, len(n.subs))
		}
		return v.datum(n.subs[x], q, depth+1)
	case avro.Record, avro.Error:
		var err error
		for _, f := range n.subs {
			if p, err = v.datum(f, p, depth+1); err != nil {
				return p, err
			}
		}
		return p, nil
	case avro.Array, avro.Map:
		for {
			at := p
			count, q, err := v.long(p)
			if err != nil {
				return q, err
			}
			p = q
			if count == 0 {
				return p, nil
			}
			if count < 0 {
				if count == math.MinInt64 {
					return at, fmt.Errorf("item count overflows at data byte %d", at)
				}
				count = -count
				size, q, err := v.long(p)
				if err != nil {
					return q, err
				}
				if size < 0 {
					return p, fmt.Errorf("negative block size %d at data byte %d", size, p)
				}
				p = q
			}
			per := n.sub.min
			if n.typ == avro.Map {
				per++ // the key
			}
			if per == 0 {
				if v.zeroBudget -= count; v.zeroBudget < 0 {
					return at, fmt.Errorf("%w: more zero-width array items than the block's limit", ErrLimit)
				}
			} else if count > int64(len(v.b)-p)/per {
				return at, fmt.Errorf("%w: %d items of at least %d bytes at data byte %d, %d bytes left", errShort, count, per, at, len(v.b)-p)
			}
			for i := int64(0); i < count; i++ {
				if n.typ == avro.Map {
					l, q, err := v.long(p)
					if err != nil {
						return q, err
					}
					if l < 0 || l > int64(len(v.b)-q) {
						return p, fmt.Errorf("%w: map key length %d at data byte %d", errShort, l, p)
					}
					p = q + int(l)
				}
				if p, err = v.datum(n.sub, p, depth+1); err != nil {
					return p, err
				}
			}
		}
	}
	return p, fmt.Errorf("unsupported type %q", n.typ)
}
