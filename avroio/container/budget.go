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
// for it: the walk (validate.go) adds each value's cost as it meets it
// and fails at the value that takes the record over, naming its field; a
// collection's entries are charged as its count is read.
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
//
// Go's maps (swiss tables, Go 1.24 on) cost far more than their entries:
// a map of up to 8 entries is a 48-byte header and one group of 8 slots
// and a control word (336 bytes for map[string]any, made for 1 entry or
// 8); a larger one is a directory of tables of up to 1024 slots, split
// when 7/8 full, each rounded up to whole pages. Measured on Go 1.26,
// filling a map[string]any from a hint of 64 allocates 105-168 bytes per
// entry (the tables it outgrew included; 52-84 live), 111 for a
// map[string]int64: genericMapEntry and mapEntryCost bound that. A []any
// grown by append allocates about 5.5 times its final 16 bytes per item
// (88 per item for a million). What decoding allocates, garbage
// included, bounds the heap it can make the process take, whatever the
// collector does: the estimate bounds allocation, not what stays live.
//
// In a pipeline a record is also encoded by its PCollection's coder:
// Beam Go samples element sizes by encoding the first elements of every
// bundle and about one in ten after. The Record coder writes each value
// with a tag byte, each record's field names, and sorts each map's keys
// (a 16-byte string header per key): encCost bounds that per value.
const (
	ifaceSize       = 16
	mapHeader       = 48  // a Go map's header
	smallMap        = 336 // a map[string]any of at most 8 entries: header and one group
	genericMapEntry = 172 // an entry of a map[string]any grown from a hint of 64, growth included
	genericListItem = 88  // an item of a []any grown by append, growth included
	// encCost is what the Record coder writes for a value beside its
	// content: a tag and a length or varint of up to 10 bytes.
	encCost = 11
	// keyEncCost is what the coder takes per map entry beside the key's
	// bytes: the sorted key's string header and its length prefix.
	keyEncCost = 16 + 10
	// wrappedUnion is a branch wrapped in a one-key map, and the coder's
	// key and tag for it.
	wrappedUnion = smallMap + encCost + 64
)

// mapEntryCost is what an entry of a Go map whose key and value slots
// take slot bytes together allocates, growth included: the measured
// 168 bytes of a map[string]any (32-byte slots) scaled by the group's
// size.
func mapEntryCost(slot int64) int64 { return (slot + 1) * 21 / 4 }

// hintedMapCost is what a Go map made for n entries (of slot bytes each)
// and filled with them allocates: a small map up to 8, else a table of
// a power of two of slots over n*8/7, in groups of 8 slots and a control
// word, rounded up to the allocator's size classes (at most a quarter).
func hintedMapCost(n int, slot int64) int64 {
	group := 8 + 8*slot
	if n <= 8 {
		return mapHeader + group + group/8
	}
	slots := int64(8)
	for slots*7 < int64(n)*8 {
		slots *= 2
	}
	return mapHeader + 64 + (slots/8)*group*5/4
}

// keyPerByte is what a map key's byte costs: copied out of the block,
// and again by the coder.
const keyPerByte = 2

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
	case avro.Null, avro.Boolean:
		c.fixed = encCost
	case avro.Int, avro.Long, avro.Float, avro.Double:
		c.fixed = 8 + encCost // boxed
	case avro.Enum:
		c.fixed = encCost + 64 // its symbol, written by the coder
	case avro.String:
		// The bytes copied out of the block, and again by the coder.
		c.fixed, c.perByte = ifaceSize+encCost, 2
	case avro.Bytes:
		c.fixed, c.perByte = 24+encCost, 2
	case avro.Fixed:
		c.fixed = 2*int64(n.size) + encCost
	case avro.Array:
		c.fixed, c.perItem = 24+encCost, genericListItem
	case avro.Map:
		c.fixed, c.perItem = smallMap+encCost, genericMapEntry+keyEncCost
	case avro.Record, avro.Error:
		c.fixed = hintedMapCost(len(n.subs), 2*ifaceSize) + encCost
		for _, name := range n.names {
			c.fixed += keyEncCost + int64(len(name))
		}
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
		// The bytes copied out of the block, and again by a coder in a
		// pipeline.
		c.slot, c.perByte = 16, 2
	case avro.Bytes:
		c.slot, c.perByte = 24, 2
	case avro.Fixed:
		c.slot, c.fixed = int64(n.size), int64(n.size)
	case avro.Array:
		// hamba/avro grows a slice block by block, to at most twice
		// what it needs: the items' slots up to three times over.
		c.slot, c.perItem = 24, 3*n.sub.cost[profileTyped].slot
	case avro.Map:
		c.slot, c.fixed, c.perItem = 8, mapHeader, mapEntryCost(16+n.sub.cost[profileTyped].slot)+keyEncCost
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
				b.b = satAdd(b.b, keyPerByte) // the key's bytes
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
