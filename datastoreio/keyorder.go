package datastoreio

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// KeyOrder is an order of Datastore keys: path element by element from the
// root, an ancestor before its descendants; within an element by kind, then
// numeric ids before names, ids numerically, names as strings; namespaces
// first, though a query never mixes them. Orders differ in how they compare
// strings (kinds, names and namespaces), and only there.
//
// Two orders are known, and they differ only between a character of
// U+E000-U+FFFF and one outside the Basic Multilingual Plane (U+10000 and
// up): Firestore in Datastore mode documents UTF-8 byte order (Unicode code
// point order), where U+E000 < U+10000; Java's String.compareTo, Beam Java's
// key comparator and the Cloud Datastore emulator compare UTF-16 code units,
// where the surrogates of U+10000 (0xD800...) come before U+E000. The read
// does not assume either: see the package doc, "Key order".
type KeyOrder uint8

const (
	// UTF8Order compares strings by their UTF-8 bytes, which is Unicode
	// code point order: Firestore's and Datastore mode's documented order
	// of text strings.
	UTF8Order KeyOrder = 1
	// UTF16Order compares strings by their UTF-16 code units, as Java's
	// String.compareTo does: the order of the Cloud Datastore emulator and
	// of Beam Java's key comparator.
	UTF16Order KeyOrder = 2
)

func (o KeyOrder) String() string {
	switch o {
	case UTF8Order:
		return "UTF-8"
	case UTF16Order:
		return "UTF-16"
	}
	return fmt.Sprintf("KeyOrder(%d)", uint8(o))
}

// keyOrderOf parses the form a Range carries (KeyOrder.String).
func keyOrderOf(s string) (KeyOrder, error) {
	switch s {
	case "", UTF8Order.String():
		return UTF8Order, nil
	case UTF16Order.String():
		return UTF16Order, nil
	}
	return 0, fmt.Errorf("datastoreio: unknown key order %q", s)
}

// Compare returns -1, 0 or +1 as a sorts before, with or after b in order o.
// A nil key sorts before every other key.
func (o KeyOrder) Compare(a, b *datastore.Key) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	if c := o.compareStrings(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	pa, pb := keyPath(a), keyPath(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if c := o.compareElem(pa[i], pb[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(pa) < len(pb):
		return -1
	case len(pa) > len(pb):
		return 1
	}
	return 0
}

func (o KeyOrder) compareElem(a, b *datastore.Key) int {
	if c := o.compareStrings(a.Kind, b.Kind); c != 0 {
		return c
	}
	aName, bName := a.ID == 0, b.ID == 0 // a name (or an incomplete element)
	switch {
	case !aName && bName:
		return -1
	case aName && !bName:
		return 1
	case !aName:
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	}
	return o.compareStrings(a.Name, b.Name)
}

// compareStrings compares two strings in order o. Strings that are not
// valid UTF-8 (which the service refuses) are compared bytewise.
func (o KeyOrder) compareStrings(a, b string) int {
	if o != UTF16Order || !utf8.ValidString(a) || !utf8.ValidString(b) {
		return strings.Compare(a, b) // UTF-8 bytes: code point order
	}
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return compareRunesUTF16(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

// compareRunesUTF16 compares two different runes by their UTF-16 code
// units: by code point when both are in the Basic Multilingual Plane or
// both outside it; otherwise the BMP rune against the high surrogate
// (0xD800-0xDBFF) of the other, which it never equals (valid UTF-8 holds no
// surrogates).
func compareRunesUTF16(a, b rune) int {
	ua, ub := a, b
	if (a >= 0x10000) != (b >= 0x10000) {
		if a >= 0x10000 {
			ua, _ = utf16.EncodeRune(a)
		} else {
			ub, _ = utf16.EncodeRune(b)
		}
	}
	if ua < ub {
		return -1
	}
	return 1
}

// Sort sorts keys in order o.
func (o KeyOrder) Sort(keys []*datastore.Key) {
	sort.SliceStable(keys, func(i, j int) bool { return o.Compare(keys[i], keys[j]) < 0 })
}

// CompareKeys orders keys in UTF8Order, the order Firestore in Datastore mode
// documents for text strings (UTF-8 bytes, Unicode code points). The Cloud
// Datastore emulator orders names by UTF-16 code units instead
// (UTF16Order.Compare); see KeyOrder. It returns -1, 0 or +1.
func CompareKeys(a, b *datastore.Key) int { return UTF8Order.Compare(a, b) }

// SortKeys sorts keys in UTF8Order (CompareKeys).
func SortKeys(keys []*datastore.Key) { UTF8Order.Sort(keys) }

// wideRune reports a rune where the two orders can disagree: U+E000 and
// above (U+E000-U+FFFF, and everything outside the BMP).
func wideRune(r rune) bool { return r >= 0xE000 }

// orderWitness looks for a string of k's path (a kind or a name) holding a
// rune where the orders can disagree, and returns a key w that the two
// orders place on different sides of k: k's path up to that element, with
// that string cut after the rune and the rune replaced by one of the other
// class (U+10000 for U+E000-U+FFFF, U+E000 for U+10000 and up), followed,
// when the element was an ancestor or its kind was changed, by an element
// of k's kind so that w stays a key of the query's kind. w sorts before k
// in UTF-16 order when k's rune is in U+E000-U+FFFF and after it in UTF-8
// order; the other way round when k's rune is supplementary. before reports
// whether w sorts before k in UTF16Order. ok is false when k holds no such
// rune.
func orderWitness(k *datastore.Key) (w *datastore.Key, beforeInUTF16 bool, ok bool) {
	path := keyPath(k)
	for i, e := range path {
		for _, field := range []string{"kind", "name"} {
			s := e.Kind
			if field == "name" {
				if e.ID != 0 {
					continue
				}
				s = e.Name
			}
			for j, r := range s {
				if !wideRune(r) {
					continue
				}
				repl := rune(0x10000)
				before := true // U+10000 sorts before U+E000-U+FFFF in UTF-16
				if r >= 0x10000 {
					repl, before = 0xE000, false
				}
				cut := s[:j] + string(repl)
				var parent *datastore.Key
				if i > 0 {
					parent = path[i-1]
				}
				el := &datastore.Key{Kind: e.Kind, ID: e.ID, Name: e.Name, Parent: parent, Namespace: k.Namespace}
				if field == "kind" {
					el.Kind, el.ID, el.Name = cut, 0, "w"
				} else {
					el.Name = cut
				}
				w = el
				if i < len(path)-1 || field == "kind" {
					// Keep w a key of the query's kind: a child of the
					// changed element. It changes nothing in the order: the
					// keys differ at the changed element already.
					w = &datastore.Key{Kind: k.Kind, Name: "w", Parent: el, Namespace: k.Namespace}
				}
				return w, before, true
			}
		}
	}
	return nil, false, false
}

// serverKeyOrder finds how the server orders the keys of kind in ns, when
// it matters for sampled: the orders disagree only where a string holds a
// rune of U+E000 and up, so when no sampled key holds one they agree on
// every comparison against the sampled keys (and so on every boundary and
// every check of a read) and UTF8Order is returned without a query.
// Otherwise a sampled key k holding such a rune, which exists at readTime,
// is located by the server against its witness w (orderWitness): a
// keys-only query for [w, k] and one for [k, w]; exactly one returns k,
// and which one says the server's order. A server that returns k for both,
// or (after three keys tried) for neither, is an error: the read does not
// guess.
func serverKeyOrder(ctx context.Context, c *conn, ns, kind string, sampled []*datastore.Key, readTime time.Time) (KeyOrder, error) {
	tried := 0
	for _, k := range sampled {
		w, before, ok := orderWitness(k)
		if !ok {
			continue
		}
		tried++
		wFirst, err := keyInRange(ctx, c, ns, kind, w, k, readTime)
		if err != nil {
			return 0, err
		}
		kFirst, err := keyInRange(ctx, c, ns, kind, k, w, readTime)
		if err != nil {
			return 0, err
		}
		switch {
		case wFirst && kFirst:
			return 0, fmt.Errorf("datastoreio: project %s namespace %q kind %s: the server returned key %s for both [%s, %s] and [%s, %s]: it does not order keys totally",
				c.project, ns, kind, keyString(k, ""), keyString(w, ""), keyString(k, ""), keyString(k, ""), keyString(w, ""))
		case wFirst == before && kFirst != before:
			return UTF16Order, nil
		case wFirst != before && kFirst == before:
			return UTF8Order, nil
		}
		// Neither: k is gone (a read of the latest data); try another.
		if tried == 3 {
			break
		}
	}
	if tried == 0 {
		return UTF8Order, nil
	}
	return 0, fmt.Errorf("datastoreio: project %s namespace %q kind %s: cannot tell how the server orders key names: %d sampled keys holding characters of U+E000 and up were not found again", c.project, ns, kind, tried)
}

// keyInRange reports whether a keys-only query of kind for [lo, hi] returns
// anything.
func keyInRange(ctx context.Context, c *conn, ns, kind string, lo, hi *datastore.Key, readTime time.Time) (bool, error) {
	resp, err := c.runRaw(ctx, ns, readTime, &pb.Query{
		Kind:       []*pb.KindExpression{{Name: kind}},
		Projection: []*pb.Projection{{Property: &pb.PropertyReference{Name: "__key__"}}},
		Filter: &pb.Filter{FilterType: &pb.Filter_CompositeFilter{CompositeFilter: &pb.CompositeFilter{
			Op: pb.CompositeFilter_AND,
			Filters: []*pb.Filter{
				propertyFilter("__key__", pb.PropertyFilter_GREATER_THAN_OR_EQUAL, &pb.Value{ValueType: &pb.Value_KeyValue{KeyValue: keyToProto(lo)}}),
				propertyFilter("__key__", pb.PropertyFilter_LESS_THAN_OR_EQUAL, &pb.Value{ValueType: &pb.Value_KeyValue{KeyValue: keyToProto(hi)}}),
			},
		}}},
		Limit: wrapperspb.Int32(1),
	})
	if err != nil {
		return false, fmt.Errorf("datastoreio: key order probe of kind %s in project %s namespace %q: %w", kind, c.project, ns, err)
	}
	return len(resp.GetBatch().GetEntityResults()) > 0, nil
}
