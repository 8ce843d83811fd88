package container

import (
	"math"

	"github.com/hamba/avro/v2"
)

// The decoded-size budget (Limits.MaxAlloc) of a record.
//
// A block's bytes are bounded by MaxAlloc, but what its records decode
// into is not: an array of booleans takes a byte per item in the file and
// 16 bytes per item in a []any, a map of nulls a byte per entry and about
// 50 bytes per entry in a Go map, a fixed of 60 MB declared in the schema
// takes 60 MB per value. The reader therefore estimates, before decoding a
// block, what each of its records will allocate, and refuses a record
// whose estimate exceeds MaxAlloc (ErrLimit) before allocating anything
// for it.
//
// The estimate adds, for every value of the datum, what the Go value takes
// where it is held (its slot: a struct field, a slice element, a map
// entry, an interface's box) and what it allocates beyond that (string and
// byte contents, slice backing arrays, map tables, pointers' targets), by
// one of two profiles: profileGeneric for the generic values of avroio's
// Records and of map[string]any / any (every value an interface, every
// record a map), and profileTyped for Go structs, counted by the smallest
// Go type hamba/avro decodes each Avro type into (a bool per boolean, an
// int32 per int, a string header per string, a struct's fields inline).
// It is an estimate, not an accounting: a struct whose fields are wider
// than needed (int64 for an int) takes more, and garbage left by growing
// slices is not counted.
//
// Walking a block costs about 40% of decoding it, so the walk runs only
// when it can matter: every datum's estimate is bounded by a + b×E, where
// E is its encoded size and a and b follow from the schema (costBound),
// and a block of data whose records can then not reach MaxAlloc is not
// walked. Schemas with zero-width array items or recursion are walked
// anyway (validate.go).

// profile is the shape of the Go values records decode into.
type profile int

const (
	profileTyped profile = iota
	profileGeneric
	numProfiles
)

// nodeCost is what the values of a schema node cost in one profile.
type nodeCost struct {
	slot    int64 // the value's own size where its container holds it
	fixed   int64 // bytes a datum allocates beyond its slot, whatever its data
	perByte int64 // strings and bytes: bytes allocated per byte of content
	// perItem is, for an array, the slot of each item in the backing
	// array; for a map, each entry's table slot, key header and value
	// slot; for a union, the box or pointer that a non-null branch's value
	// is held in.
	perItem int64
}

// costBound bounds the decoded size H of every datum of a node in one
// profile by its encoded size E: lo <= H <= a + b×E. unbounded: no such
// bound (recursion, zero-width array items).
type costBound struct {
	a, b, lo  int64
	unbounded bool
}

// sat caps estimates far above any limit, so that sums cannot overflow.
const sat = math.MaxInt64 / 8

func satAdd(x, y int64) int64 { return min(x+y, sat) }

func satMul(x, y int64) int64 {
	if x == 0 || y == 0 {
		return 0
	}
	if x > sat/y {
		return sat
	}
	return x * y
}

// Generic values: every value is an interface (16 bytes) whose numbers,
// strings, times and lists are boxed; records and maps are Go maps.
const (
	ifaceSize    = 16
	mapHeader    = 48 // a Go map's header and first table
	mapEntry     = 48 // a map entry: key and value slots, control word, load
	wrappedUnion = mapHeader + mapEntry
)

// setCosts fills in every node's costs and the root's bounds.
func setCosts(info *schemaInfo, all []*vnode) {
	for _, n := range all {
		n.cost[profileGeneric] = genericCost(n)
	}
	// Typed slots nest (a struct's slot is the sum of its fields'): leaves
	// first, by a fixed point over the graph (recursive records only ever
	// hold themselves through a pointer, slice or map, whose slot is fixed).
	for _, n := range all {
		n.cost[profileTyped] = typedLeafCost(n)
	}
	for pass, changed := 0, true; changed && pass <= len(all)+1; pass++ {
		changed = false
		for _, n := range all {
			c := typedCost(n)
			if c != n.cost[profileTyped] {
				n.cost[profileTyped], changed = c, true
			}
		}
	}
	for p := range numProfiles {
		info.bound[p] = bounds(info, profile(p))
	}
}

func genericCost(n *vnode) nodeCost {
	c := nodeCost{slot: ifaceSize}
	switch n.typ {
	case avro.Int, avro.Long, avro.Float, avro.Double:
		c.fixed = 8 // boxed
	case avro.String:
		c.fixed, c.perByte = ifaceSize, 1
	case avro.Bytes:
		c.fixed, c.perByte = 24, 1
	case avro.Fixed:
		c.fixed = int64(n.size)
	case avro.Array:
		c.fixed, c.perItem = 24, ifaceSize
	case avro.Map:
		c.fixed, c.perItem = mapHeader, mapEntry
	case avro.Record, avro.Error:
		c.fixed = mapHeader + mapEntry*int64(len(n.subs))
	case avro.Union:
		nonNull := 0
		for _, b := range n.subs {
			if b.typ != avro.Null {
				nonNull++
			}
		}
		if nonNull > 1 {
			// Branches of one Go type are wrapped in a one-key map.
			c.fixed = wrappedUnion
		}
	}
	return c
}

// typedLeafCost is typedCost before the slots of records are known.
func typedLeafCost(n *vnode) nodeCost {
	switch n.typ {
	case avro.Record, avro.Error:
		return nodeCost{}
	}
	return typedCost(n)
}

func typedCost(n *vnode) nodeCost {
	var c nodeCost
	switch n.typ {
	case avro.Boolean:
		c.slot = 1
	case avro.Int, avro.Float:
		c.slot = 4
	case avro.Long, avro.Double, avro.Enum:
		c.slot = 8
	case avro.String:
		c.slot, c.perByte = 16, 1
	case avro.Bytes:
		c.slot, c.perByte = 24, 1
	case avro.Fixed:
		c.slot = int64(n.size)
	case avro.Array:
		c.slot, c.perItem = 24, n.sub.cost[profileTyped].slot
	case avro.Map:
		c.slot, c.fixed, c.perItem = 8, mapHeader, 16+8+n.sub.cost[profileTyped].slot
	case avro.Record, avro.Error:
		for _, f := range n.subs {
			c.slot = satAdd(c.slot, f.cost[profileTyped].slot)
		}
	case avro.Union:
		// A pointer for a nullable union, an interface otherwise; the
		// branch's value is allocated behind it.
		c.slot = 8
		var widest int64
		for _, b := range n.subs {
			widest = max(widest, b.cost[profileTyped].slot)
		}
		c.perItem = widest
		if len(n.subs) != 2 || (n.subs[0].typ != avro.Null && n.subs[1].typ != avro.Null) {
			c.slot = ifaceSize
		}
	}
	return c
}

// bounds computes the root's costBound in profile p.
func bounds(info *schemaInfo, p profile) costBound {
	if info.recursive {
		return costBound{unbounded: true}
	}
	memo := map[*vnode]costBound{}
	var bound func(n *vnode) costBound
	bound = func(n *vnode) costBound {
		if b, ok := memo[n]; ok {
			return b
		}
		c := n.cost[p]
		b := costBound{a: c.fixed, lo: c.fixed}
		switch n.typ {
		case avro.String, avro.Bytes:
			b.b = c.perByte
		case avro.Record, avro.Error:
			for _, f := range n.subs {
				fb := bound(f)
				b.a, b.lo, b.b = satAdd(b.a, fb.a), satAdd(b.lo, fb.lo), max(b.b, fb.b)
				b.unbounded = b.unbounded || fb.unbounded
			}
		case avro.Array, avro.Map:
			// Each item (entry) is at least a byte of the file (a map's
			// key length included): its cost per byte is at most its slot
			// plus its own bound at one byte.
			ib := bound(n.sub)
			if n.typ == avro.Array && n.sub.min == 0 {
				ib.unbounded = true
			}
			b.b = satAdd(satAdd(c.perItem, ib.a), ib.b)
			if n.typ == avro.Map {
				b.b = satAdd(b.b, 1) // the key's bytes
			}
			b.unbounded = ib.unbounded
		case avro.Union:
			b.lo = sat
			for _, br := range n.subs {
				bb := bound(br)
				extra := int64(0)
				if br.typ != avro.Null {
					extra = c.perItem
				}
				b.a = max(b.a, satAdd(satAdd(c.fixed, extra), bb.a))
				b.b = max(b.b, bb.b)
				b.lo = min(b.lo, satAdd(satAdd(c.fixed, extra), bb.lo))
				b.unbounded = b.unbounded || bb.unbounded
			}
		}
		memo[n] = b
		return b
	}
	return bound(info.root)
}

// mayExceed reports whether a record of the schema, in profile p with the
// record's own slot rootSlot, could decode into more than limit bytes
// when a block holds size bytes of data.
func (info *schemaInfo) mayExceed(p profile, rootSlot, size, limit int64) bool {
	b := info.bound[p]
	if b.unbounded {
		return true
	}
	return satAdd(satAdd(rootSlot, b.a), satMul(b.b, size)) > limit
}
