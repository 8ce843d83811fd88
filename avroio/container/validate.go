package container

import (
	"errors"
	"fmt"
	"math"
	"time"

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
//     recurses once per level (Limits.MaxDepth);
//   - a block whose records could decode into more than Limits.MaxAlloc
//     (see budget.go): the walk adds up what each record will take;
//   - a time-micros that the Go type reads into a time.Duration, which
//     holds ±2^63 ns: a larger value would wrap (ErrRange).
//
// It also checks that the records a block declares use exactly its bytes.

type vnode struct {
	typ    avro.Type
	size   int      // fixed size; enum symbol count
	sub    *vnode   // array items; map values
	subs   []*vnode // record fields; union branches
	names  []string // record field names, for the paths in errors
	min    int64    // minimum encoded size in bytes
	micros bool     // a long of logical type time-micros
	// cost is what decoding a datum of the node allocates, by profile
	// (budget.go).
	cost   [numProfiles]nodeCost
	inProg bool
}

type schemaInfo struct {
	root           *vnode
	recursive      bool
	zeroWidthItems bool
	maxFixed       int
	hasMicros      bool // some long is a time-micros
	// depth is the deepest nesting of records, arrays and maps a datum of
	// a non-recursive schema has (the top record is 1).
	depth int
	// bound is, by profile, the affine bound of a record's decoded size
	// (budget.go).
	bound [numProfiles]costBound
	nodes int // vnodes compiled
}

// elemSchema is the schema of an array's items or of a map's values.
func elemSchema(s avro.Schema) avro.Schema {
	if a, ok := s.(*avro.ArraySchema); ok {
		return a.Items()
	}
	return s.(*avro.MapSchema).Values()
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
				if l := t.Logical(); l != nil && l.Type() == avro.TimeMicros && t.Type() == avro.Long {
					n.micros, info.hasMicros = true, true
				}
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
		case *avro.ArraySchema, *avro.MapSchema:
			n.min = 1
			sub, err := compile(elemSchema(t))
			if err != nil {
				return nil, err
			}
			n.sub = sub
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
				n.names = append(n.names, f.Name())
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
	info.nodes = len(memo)
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
	info.nodes = len(all)
	if !info.recursive {
		info.depth = staticDepth(root)
	}
	setCosts(info, all)
	return info, nil
}

// staticDepth is the deepest nesting of records, arrays and maps in the
// non-recursive schema of n.
func staticDepth(n *vnode) int {
	memo := map[*vnode]int{}
	var depth func(n *vnode) int
	depth = func(n *vnode) int {
		if d, ok := memo[n]; ok {
			return d
		}
		d := 0
		if n.sub != nil {
			d = depth(n.sub)
		}
		for _, c := range n.subs {
			d = max(d, depth(c))
		}
		switch n.typ {
		case avro.Record, avro.Error, avro.Array, avro.Map:
			d++
		}
		memo[n] = d
		return d
	}
	return depth(n)
}

// errShort marks a datum that runs past the end of the block's data.
var errShort = errors.New("data ends inside the datum")

// maxMicros is the largest time-micros a time.Duration holds.
const maxMicros = math.MaxInt64 / 1000

// FieldError is a problem with one value of a datum: Path names the value
// by the fields from the top record (fields joined by dots, "[]" for an
// array's items, "{}" for a map's values), as in "stops[].at".
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return fieldName(e.Path) + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// InField places err one level further out when it holds a FieldError:
// the problem lies inside the value of field name (or "[]", an array's
// items; "{}", a map's values). A decoder calls it as an error rises
// through the levels of a datum. Other errors are returned as they are.
func InField(name string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		if fe.Path != "" && fe.Path[0] != '[' && fe.Path[0] != '{' {
			name += "."
		}
		fe.Path = name + fe.Path
	}
	return err
}

// MicrosDuration is the time.Duration of the time-micros x, or a
// FieldError of ErrRange when a Duration cannot hold it.
func MicrosDuration(x int64) (time.Duration, error) {
	if x > maxMicros || x < -maxMicros {
		return 0, &FieldError{Err: microsRangeError(x, -1)}
	}
	return time.Duration(x) * time.Microsecond, nil
}

// microsRangeError is the error of a time-micros x (at data byte p, or -1)
// that a time.Duration cannot hold.
func microsRangeError(x int64, p int) error {
	at := ""
	if p >= 0 {
		at = fmt.Sprintf(" at data byte %d", p)
	}
	return RangeError("time-micros %d%s is beyond what a time.Duration holds (±%d µs, about 292 years); read it into a Go int, or with a reader schema in which the field is a plain long, to get the number itself", x, at, int64(maxMicros))
}

type validator struct {
	b          []byte
	zeroBudget int64
	maxDepth   int
	micros     bool // check that time-micros values fit a time.Duration
	// costing adds what the datums decode into, by profile prof, to cost,
	// and fails a datum as soon as cost is over limit (charge).
	costing bool
	prof    profile
	cost    int64
	limit   int64
}

// charge adds c bytes to the record's estimate and, once the estimate is
// over the limit, fails with a FieldError (of kind ErrLimit) that the
// records, arrays and maps around the value at data byte p name as it
// rises: the value that took the record over the limit is named, and
// nothing of it has been decoded.
func (v *validator) charge(c int64, p int) error {
	v.cost = satAdd(v.cost, c)
	if v.cost <= v.limit {
		return nil
	}
	return &FieldError{Err: LimitError("the value at data byte %d takes the record to about %d bytes decoded (estimated from its strings, bytes, arrays, maps and fixed values), over the %d-byte limit (Limits.MaxAlloc; avroio.WithMaxAlloc)", p, v.cost, v.limit)}
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

// errDepth is the error of a datum nested deeper than the limit.
func errDepth(limit, p int) error {
	return LimitError("the datum at data byte %d nests records, arrays and maps deeper than the limit of %d levels (Limits.MaxDepth; avroio.WithMaxDepth)", p, limit)
}

// datum checks the datum of node n at data position p and returns the
// position after it. depth is the number of records, arrays and maps
// around it.
func (v *validator) datum(n *vnode, p, depth int) (int, error) {
	if v.costing {
		if err := v.charge(n.cost[v.prof].fixed, p); err != nil {
			return p, err
		}
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
		if err == nil && n.micros && v.micros && (x > maxMicros || x < -maxMicros) {
			err = &FieldError{Err: microsRangeError(x, p)}
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
		if v.costing {
			if err := v.charge(satMul(l, n.cost[v.prof].perByte), p); err != nil {
				return p, err
			}
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
		if v.costing && n.subs[x].typ != avro.Null {
			if err := v.charge(n.cost[v.prof].perItem, p); err != nil {
				return p, err
			}
		}
		return v.datum(n.subs[x], q, depth)
	case avro.Record, avro.Error:
		if depth++; depth > v.maxDepth {
			return p, errDepth(v.maxDepth, p)
		}
		var err error
		for i, f := range n.subs {
			if p, err = v.datum(f, p, depth); err != nil {
				return p, InField(n.names[i], err)
			}
		}
		return p, nil
	case avro.Array, avro.Map:
		if depth++; depth > v.maxDepth {
			return p, errDepth(v.maxDepth, p)
		}
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
			if v.costing {
				// What the items take where they are held (a slice's
				// elements, a map's entries), before their own values:
				// a block over the limit fails here, before any of its
				// items is decoded.
				if err := v.charge(satMul(count, n.cost[v.prof].perItem), at); err != nil {
					return at, err
				}
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
					if v.costing {
						if err := v.charge(keyPerByte*l, p); err != nil {
							return p, err
						}
					}
				}
				if p, err = v.datum(n.sub, p, depth); err != nil {
					what := "[]"
					if n.typ == avro.Map {
						what = "{}"
					}
					return p, InField(what, err)
				}
			}
		}
	}
	return p, fmt.Errorf("unsupported type %q", n.typ)
}
