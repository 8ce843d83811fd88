package datastoreio

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf16"

	"cloud.google.com/go/datastore"
)

// unicodeNames spans Unicode where orders can differ: NUL, ASCII, Latin-1,
// a combining mark after its base and precomposed, CJK of the BMP, the
// last BMP code points before the surrogates, the private use area
// U+E000-U+F8FF, U+FFFD and U+FFFF, the first supplementary code point,
// emoji, CJK extension B and the last code point.
var unicodeNames = []string{
	"", "\x00", "\x00a", "a", "a\x00", "ab", "z", "\u00e9", "e\u0301", "e\u0301\u0323", "\u4e2d", "\u4e2d\u6587",
	"\ud7ff", "\ue000", "\ue000\U0001f600", "\uf8ff", "\ufffd", "\uffff", "\uffffz",
	"\U00010000", "\U0001f600", "\U0001f600\ue000", "\U00020000", "\U0010ffff", "a\U0001f600", "a\ufffd",
}

// TestKeyOrdersCompareStrings checks both orders on every pair of names
// against their definitions: UTF-8 bytes, and UTF-16 code units as Java
// compares strings.
func TestKeyOrdersCompareStrings(t *testing.T) {
	units := func(s string) []uint16 { return utf16.Encode([]rune(s)) }
	disagree := 0
	for _, a := range unicodeNames {
		for _, b := range unicodeNames {
			if got, want := UTF8Order.compareStrings(a, b), strings.Compare(a, b); got != want {
				t.Errorf("UTF-8: %+q vs %+q = %d, want %d", a, b, got, want)
			}
			want16 := slices.Compare(units(a), units(b))
			if got := UTF16Order.compareStrings(a, b); got != want16 {
				t.Errorf("UTF-16: %+q vs %+q = %d, want %d", a, b, got, want16)
			}
			if want16 != strings.Compare(a, b) {
				disagree++
				// serverKeyOrder relies on this: without a character of
				// U+E000 and up on one side, the orders agree.
				if !strings.ContainsFunc(a, wideRune) || !strings.ContainsFunc(b, wideRune) {
					t.Errorf("%+q vs %+q: the orders disagree, though one side has no character of U+E000 and up", a, b)
				}
			}
			ka, kb := datastore.NameKey("K", a, nil), datastore.NameKey("K", b, nil)
			if a != "" && b != "" && UTF16Order.Compare(ka, kb) != want16 {
				t.Errorf("UTF-16 keys %+q vs %+q", a, b)
			}
		}
	}
	if disagree == 0 {
		t.Fatal("no pair on which the orders disagree: the names miss the point")
	}
	// The one difference: U+E000-U+FFFF against supplementary characters.
	if UTF8Order.compareStrings("\uffff", "\U00010000") != -1 || UTF16Order.compareStrings("\uffff", "\U00010000") != 1 {
		t.Error("U+FFFF and U+10000 ordered wrongly")
	}
	// Kinds of ancestors are compared the same way.
	pa, pb := datastore.NameKey("P\ue000", "x", nil), datastore.NameKey("P\U0001f600", "x", nil)
	if UTF8Order.Compare(datastore.IDKey("K", 1, pa), datastore.IDKey("K", 1, pb)) != -1 ||
		UTF16Order.Compare(datastore.IDKey("K", 1, pa), datastore.IDKey("K", 1, pb)) != 1 {
		t.Error("kinds of ancestors ordered wrongly")
	}
}

// TestOrderWitness: for a key holding a character of U+E000 and up in its
// leaf name, an ancestor's name, an ancestor's kind or its own kind, the
// witness is a key of the same kind that the two orders place on opposite
// sides of it, as orderWitness says; a key without one has no witness.
func TestOrderWitness(t *testing.T) {
	parent := func(kind, name string) *datastore.Key {
		k := datastore.NameKey(kind, name, nil)
		k.Namespace = "ns"
		return k
	}
	child := func(kind, name string, p *datastore.Key) *datastore.Key {
		k := datastore.NameKey(kind, name, p)
		k.Namespace = "ns"
		return k
	}
	for _, k := range []*datastore.Key{
		child("K", "ab\ue000cd", nil),
		child("K", "ab\U0001f600cd", nil),
		child("K", "x", parent("P", "\ufffd")),
		child("K", "x", parent("P\U00020000", "p")),
		child("K\uffff", "x", nil),
		child("K", "\U0010ffff", parent("P", "\ue000")),
	} {
		w, before, ok := orderWitness(k)
		if !ok {
			t.Fatalf("%s: no witness", keyString(k, ""))
		}
		if w.Kind != k.Kind || w.Namespace != k.Namespace {
			t.Errorf("%s: witness %s is not of kind %s in its namespace", keyString(k, ""), keyString(w, ""), k.Kind)
		}
		c8, c16 := UTF8Order.Compare(w, k), UTF16Order.Compare(w, k)
		if c8 == c16 || c8 == 0 || (c16 < 0) != before {
			t.Errorf("%s: witness %s compares %d in UTF-8, %d in UTF-16 (before in UTF-16: %v)", keyString(k, ""), keyString(w, ""), c8, c16, before)
		}
	}
	for _, k := range []*datastore.Key{child("K", "e\u0301\ud7ff\x00", parent("P", "\u4e2d")), datastore.IDKey("K", 5, nil)} {
		if _, _, ok := orderWitness(k); ok {
			t.Errorf("%s: a witness, though no character of U+E000 and up", keyString(k, ""))
		}
	}
}
