package datastoreio

import (
	"math"
	"math/rand/v2"
	"testing"

	"cloud.google.com/go/datastore"
)

func idk(kind string, id int64, parent *datastore.Key) *datastore.Key {
	return datastore.IDKey(kind, id, parent)
}

func namek(kind, name string, parent *datastore.Key) *datastore.Key {
	return datastore.NameKey(kind, name, parent)
}

// TestCompareKeysOrder pins Datastore's key order on a list written out in
// the order the server sorts it: numeric ids across the whole positive
// int64 range (numerically, not as decimal strings), ids before names, names
// bytewise, kinds bytewise, ancestors before their descendants and
// descendants grouped under their ancestor.
func TestCompareKeysOrder(t *testing.T) {
	a1 := idk("A", 1, nil)
	aName := namek("A", "x", nil)
	ordered := []*datastore.Key{
		idk("A", 1, nil),
		idk("A", 1, a1).Parent, // same as the previous: equal keys may repeat
		idk("B", 1, a1),        // A:1/B:1
		idk("B", math.MaxInt64, a1),
		namek("B", "", a1), // never stored, but ordered as a name
		namek("B", "a", a1),
		idk("A", 2, nil),
		idk("A", 9, nil),
		idk("A", 10, nil), // 10 after 9: numeric, not "10" < "9"
		idk("A", 1<<31, nil),
		idk("A", 1<<32+1, nil),
		idk("A", 1<<53+1, nil), // beyond float64's exact integers
		idk("A", 1<<53+2, nil),
		idk("A", math.MaxInt64-1, nil),
		idk("A", math.MaxInt64, nil),
		namek("A", "", nil),
		namek("A", "0", nil), // names after every id
		namek("A", "10", nil),
		namek("A", "9", nil), // bytewise: "10" < "9"
		namek("A", "Z", nil),
		namek("A", "a", nil),
		aName,
		idk("A", 5, aName), // A:"x"/A:5 after A:"x"
		namek("A", "x\x00", nil),
		namek("A", "xa", nil),
		namek("A", "é", nil), // UTF-8 bytes 0xC3 0xA9 after ASCII
		idk("AA", 1, nil),    // kind "A" < "AA"
		idk("B", 1, nil),
		idk("a", 1, nil), // 'B' < 'a'
	}
	for i := range ordered {
		for j := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if i == 0 && j == 1 || i == 1 && j == 0 {
				want = 0
			}
			if got := CompareKeys(ordered[i], ordered[j]); got != want {
				t.Errorf("CompareKeys(%s, %s) = %d, want %d", keyString(ordered[i], ""), keyString(ordered[j], ""), got, want)
			}
		}
	}
	shuffled := append([]*datastore.Key(nil), ordered...)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	SortKeys(shuffled)
	for i := range ordered {
		if CompareKeys(shuffled[i], ordered[i]) != 0 {
			t.Fatalf("SortKeys: position %d is %s, want %s", i, keyString(shuffled[i], ""), keyString(ordered[i], ""))
		}
	}
}

// TestCompareKeysRandomIDs checks numeric order on random ids of the whole
// positive int64 range, where sorting by decimal string (as Beam Go's
// datastoreio does) goes wrong.
func TestCompareKeysRandomIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	keys := make([]*datastore.Key, 2000)
	for i := range keys {
		keys[i] = idk("K", 1+r.Int64N(math.MaxInt64), nil)
	}
	SortKeys(keys)
	for i := 1; i < len(keys); i++ {
		if keys[i-1].ID > keys[i].ID {
			t.Fatalf("ids %d before %d", keys[i-1].ID, keys[i].ID)
		}
	}
}

func TestKeyCoderRoundTrip(t *testing.T) {
	root := namek("Root", "r/1", nil)
	root.Namespace = "ns1"
	k := idk("Child", math.MaxInt64, root)
	k.Namespace = "ns1"
	for _, key := range []*datastore.Key{k, root, idk("A", 1, nil), nil} {
		b, err := encodeKeyCoder(key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeKeyCoder(b)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(key) && !(got == nil && key == nil) {
			t.Errorf("round trip of %v gave %v", key, got)
		}
		s := encodeKey(key)
		got, err = decodeKey(s)
		if err != nil || (key != nil && !got.Equal(key)) {
			t.Errorf("encodeKey round trip of %v gave %v, %v", key, got, err)
		}
	}
	if _, err := decodeKeyCoder([]byte{0xff, 0xff}); err == nil {
		t.Error("decoding garbage gave no error")
	}
}

func TestGroupBoundaries(t *testing.T) {
	var keys []*datastore.Key
	for i := 1; i <= 9; i++ {
		keys = append(keys, idk("K", int64(i*10), nil))
	}
	keys = append(keys, idk("K", 30, nil)) // a duplicate is dropped
	SortKeys(keys)
	// 9 distinct keys: 10 sub-ranges into 3 bundles of 3, 3, 4.
	b := groupBoundaries(UTF8Order, keys, 3)
	if len(b) != 3 {
		t.Fatalf("%d bundles, want 3", len(b))
	}
	check := func(i int, lo, hi int64, inner ...int64) {
		t.Helper()
		g := b[i]
		if (lo == 0) != (g.lo == nil) || (g.lo != nil && g.lo.ID != lo) || (hi == 0) != (g.hi == nil) || (g.hi != nil && g.hi.ID != hi) {
			t.Errorf("bundle %d is [%s, %s), want [%d, %d)", i, keyString(g.lo, "-inf"), keyString(g.hi, "+inf"), lo, hi)
		}
		if len(g.inner) != len(inner) {
			t.Fatalf("bundle %d has %d inner keys, want %d", i, len(g.inner), len(inner))
		}
		for j, id := range inner {
			if g.inner[j].ID != id {
				t.Errorf("bundle %d inner %d is %d, want %d", i, j, g.inner[j].ID, id)
			}
		}
	}
	check(0, 0, 30, 10, 20)
	check(1, 30, 60, 40, 50)
	check(2, 60, 0, 70, 80, 90)
	// Fewer sub-ranges than asked: one bundle per sub-range.
	if b := groupBoundaries(UTF8Order, keys[:2], 8); len(b) != 3 {
		t.Errorf("2 keys, 8 asked: %d bundles, want 3", len(b))
	}
	if b := groupBoundaries(UTF8Order, nil, 8); len(b) != 1 || b[0].lo != nil || b[0].hi != nil {
		t.Errorf("no keys: %+v, want one open bundle", b)
	}
}

func TestSplitsFromSize(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  int
	}{
		{0, 12}, {BytesPerSplit, 12}, {12 * BytesPerSplit, 12}, {20*BytesPerSplit + BytesPerSplit/2 - 1, 20},
		{20*BytesPerSplit + BytesPerSplit/2, 21}, {MaxQuerySplits * BytesPerSplit, MaxQuerySplits},
		{math.MaxInt64, MaxQuerySplits},
	} {
		if got := splitsFromSize(c.bytes); got != c.want {
			t.Errorf("splitsFromSize(%d) = %d, want %d", c.bytes, got, c.want)
		}
	}
}

func TestSampleAndThin(t *testing.T) {
	for _, c := range []struct{ n, k, want int }{{1, 32, 31}, {1, 1, 0}, {2, 32, 32}, {8, 4, 28}, {200, 1, 199}} {
		if got := sampleSize(c.n, c.k); got != c.want {
			t.Errorf("sampleSize(%d, %d) = %d, want %d", c.n, c.k, got, c.want)
		}
	}
	for _, c := range []struct{ k, g, want int }{{32, 8, 4}, {32, 32, 1}, {4, 8, 1}, {32, 5, 6}, {32, 0, 32}} {
		if got := keyStride(c.k, c.g); got != c.want {
			t.Errorf("keyStride(%d, %d) = %d, want %d", c.k, c.g, got, c.want)
		}
	}
	var keys []*datastore.Key
	for i := 1; i <= 10; i++ {
		keys = append(keys, idk("K", int64(i), nil))
	}
	keys = append(keys, idk("K", 3, nil), idk("K", 3, nil)) // duplicates count once
	SortKeys(keys)
	got := thinKeys(UTF8Order, keys, 3)
	if len(got) != 3 || got[0].ID != 3 || got[1].ID != 6 || got[2].ID != 9 {
		t.Errorf("thinKeys(1..10, 3) = %v, want 3 6 9", got)
	}
	if got := thinKeys(UTF8Order, keys, 1); len(got) != 10 {
		t.Errorf("thinKeys(stride 1) kept %d of 10 distinct keys", len(got))
	}
	// The default rule: a full sample of one split gives 8 sub-ranges.
	var sample []*datastore.Key
	for i := range sampleSize(1, DefaultKeysPerSplit) {
		sample = append(sample, idk("K", int64(i+1), nil))
	}
	b := groupBoundaries(UTF8Order, thinKeys(UTF8Order, sample, keyStride(DefaultKeysPerSplit, DefaultSubRangesPerSplit)), 1)
	if len(b) != 1 || len(b[0].inner)+1 != DefaultSubRangesPerSplit {
		t.Errorf("one split, default keys: %d bundles, %d sub-ranges; want 1, %d", len(b), len(b[0].inner)+1, DefaultSubRangesPerSplit)
	}
}
