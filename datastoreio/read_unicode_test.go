package datastoreio_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/sdf"
)

// The unicode data set: 400 entities of kind Uni whose names, and the
// kinds and names of their ancestors, are drawn from across Unicode, where
// UTF-8 byte order and UTF-16 code unit order (the emulator's) disagree;
// and 150 of a kind whose own name holds such characters. The emulator
// gives about every second entity a __scatter__ property (Cloud Datastore
// one in 128), so 400 are enough for about 50 boundaries (every 4th
// sampled key, the default rule) and as many initial splits. It lives in a
// project of its own (see the data sets in read_test.go), loaded in the
// background by TestMain. Namespace ids are limited to [0-9A-Za-z._-] (the
// emulator refuses others, "Illegal string ... in namespace id", as Cloud
// Datastore documents), so the orders cannot disagree on them; the set has
// decoys in a second namespace all the same.
var unicodeSet dataSet

// uniKind is the second kind: its name holds U+E000 and U+1F600.
const uniKind = "U\ue000\U0001f600"

// uniRunes are the characters names are made of: NUL, ASCII, Latin-1, a
// combining mark, CJK of the BMP, the last code point below the
// surrogates, U+E000, the end of the private use area, U+FFFD, U+FFFF, and
// supplementary characters from U+10000 to U+10FFFF (emoji, CJK extension
// B).
var uniRunes = []rune{0, 'a', 'z', 'é', '\u0301', '中', 0xD7FF, 0xE000, 0xF8FF, 0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x20000, 0x10FFFF}

func uniName(r *rand.Rand) string {
	var b strings.Builder
	for n := 1 + r.IntN(4); n > 0; n-- {
		b.WriteRune(uniRunes[r.IntN(len(uniRunes))])
	}
	return b.String()
}

// unicodeItems makes n entities of kind in ns: 60% root names, 10% ids, 30%
// children (names or ids) of 10 parents of kinds P, P<U+E000> and
// P<U+1F600>, with unicode names.
func unicodeItems(ns, kind string, n int, seed uint64) []item {
	r := rand.New(rand.NewPCG(seed, seed+7))
	var parents []*datastore.Key
	for i := range 10 {
		p := datastore.NameKey([]string{"P", "P\ue000", "P\U0001f600"}[i%3], uniName(r), nil)
		p.Namespace = ns
		parents = append(parents, p)
	}
	seen := map[string]bool{}
	var out []item
	for len(out) < n {
		var k *datastore.Key
		switch x := r.IntN(10); {
		case x < 6:
			k = datastore.NameKey(kind, uniName(r), nil)
		case x < 7:
			k = datastore.IDKey(kind, 1+r.Int64N(1<<62), nil)
		case x < 9:
			k = datastore.NameKey(kind, uniName(r), parents[r.IntN(len(parents))])
		default:
			k = datastore.IDKey(kind, 1+r.Int64N(1000), parents[r.IntN(len(parents))])
		}
		k.Namespace = ns
		if seen[k.String()] {
			continue
		}
		seen[k.String()] = true
		i := len(out)
		out = append(out, item{K: k, N: int64(i), Name: fmt.Sprintf("e%d", i), Tags: []string{"t", fmt.Sprint(i % 3)}, Inner: inner{A: int64(i) * 2, B: kind}})
	}
	return out
}

func startUnicode() {
	unicodeSet.start(func(e *dstest.Emulator) string { return e.Project() + "-unicode" }, "unicode",
		func(ns string, decoy bool) []item {
			if decoy {
				return unicodeItems(ns, "Uni", 200, 99)
			}
			return append(unicodeItems(ns, "Uni", 400, 5), unicodeItems(ns, uniKind, 150, 6)...)
		}, nil)
}

func loadUnicode(t *testing.T) (project string, uni, second []item) {
	startUnicode()
	project = unicodeSet.wait(t)
	return project, unicodeSet.items[:400], unicodeSet.items[400:]
}

// disagreeing counts the pairs of adjacent boundaries of rs that UTF-8 order
// sorts the other way.
func disagreeing(t *testing.T, rs []datastoreio.Range) (bounds, pairs int) {
	t.Helper()
	var keys []*datastore.Key
	for _, r := range rs {
		for _, s := range append([]string{r.Lo}, r.Bounds...) {
			if s == "" {
				continue
			}
			k, err := datastore.DecodeKey(s)
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
	}
	for i := 1; i < len(keys); i++ {
		if datastoreio.UTF16Order.Compare(keys[i-1], keys[i]) >= 0 {
			t.Fatalf("boundaries %v, %v are not in UTF-16 order", keys[i-1], keys[i])
		}
		for j := 0; j < i; j++ {
			if datastoreio.UTF8Order.Compare(keys[j], keys[i]) > 0 {
				pairs++
			}
		}
	}
	return len(keys), pairs
}

// TestReadUnicodeKeys reads kinds whose keys hold names from across
// Unicode at 1, 7, 64 and 1,000 splits asked (about 50 made for the last
// two, as many as the boundaries allow): the
// read finds that the emulator orders names by UTF-16 code units, its
// boundaries are sorted so, and the multiset read is exactly the one
// written (sorted by UTF-8 bytes, the sub-ranges overlapped and entities
// were read twice). So are a kind with such a name and an ancestor query
// under a parent of such a kind.
func TestReadUnicodeKeys(t *testing.T) {
	t.Parallel()
	project, uni, second := loadUnicode(t)
	ns := unicodeSet.ns
	ctx := context.Background()
	read := func(q datastoreio.Query, splits int) ([]datastoreio.Range, []item) {
		t.Helper()
		start := time.Now()
		opts := []datastoreio.ReadOption{datastoreio.WithNamespace(ns), datastoreio.WithNumQuerySplits(splits)}
		if splits == 1 {
			opts = append(opts, datastoreio.WithSubRangesPerSplit(32)) // every sampled key a boundary
		}
		ranges, got, err := readRanges(ctx, project, q, opts...)
		if err != nil {
			t.Fatalf("%d splits: %v", splits, err)
		}
		t.Logf("%s, %d splits asked: %d ranges, %d entities in %v", q.Kind, splits, len(ranges), len(got), time.Since(start))
		return ranges, got
	}
	planned := map[int][]datastoreio.Range{}
	for _, splits := range []int{1, 7, 64, 1000} {
		ranges, got := read(datastoreio.NewQuery("Uni"), splits)
		sameMultiset(t, fmt.Sprintf("Uni, %d splits", splits), ids(got), ids(uni))
		planned[splits] = ranges
	}
	for splits, ranges := range planned {
		for _, r := range ranges {
			if r.KeyOrder != datastoreio.UTF16Order.String() {
				t.Fatalf("%d splits: range %d is read in key order %q, want the emulator's, UTF-16", splits, r.Index, r.KeyOrder)
			}
		}
		bounds, pairs := disagreeing(t, ranges)
		if want := min(splits, bounds+1); len(ranges) != want {
			t.Errorf("%d splits asked, %d boundaries: %d ranges, want %d", splits, bounds, len(ranges), want)
		}
		if bounds < 20 || pairs == 0 {
			t.Fatalf("%d splits: %d boundaries, %d pairs that UTF-8 orders otherwise: the data set misses the point", splits, bounds, pairs)
		}
	}
	_, got := read(datastoreio.NewQuery(uniKind), 7)
	sameMultiset(t, uniKind, ids(got), ids(second))

	// The children of the parent with the most, split by the kind's
	// boundaries.
	count := map[string]int{}
	var parent *datastore.Key
	for _, it := range uni {
		if p := it.K.Parent; p != nil && p.Kind == "P\U0001f600" {
			if count[p.String()]++; parent == nil || count[p.String()] > count[parent.String()] {
				parent = p
			}
		}
	}
	var want []item
	for _, it := range uni {
		if it.K.Parent != nil && it.K.Parent.Equal(parent) {
			want = append(want, it)
		}
	}
	_, got = read(datastoreio.NewQuery("Uni").Ancestor(parent), 7)
	if len(want) < 10 {
		t.Fatalf("the largest family has %d children", len(want))
	}
	sameMultiset(t, "ancestor", ids(got), ids(want))
}

// TestReadUnicodeRunnerSplits splits a read of the unicode kind (one split
// of 32 sub-ranges) the way a runner does, on the tracker (TrySplit,
// fractions of the remainder) after 0, 1, 50, 200 and 399 entities, then
// splits each residual again
// after its first entity: primaries and residuals together read exactly
// the kind, in every case.
func TestReadUnicodeRunnerSplits(t *testing.T) {
	t.Parallel()
	project, uni, _ := loadUnicode(t)
	ctx := context.Background()
	ranges, err := datastoreio.Plan(ctx, project, datastoreio.NewQuery("Uni"), datastoreio.WithNamespace(unicodeSet.ns),
		datastoreio.WithNumQuerySplits(1), datastoreio.WithSubRangesPerSplit(32), datastoreio.WithClientOptions("memo"))
	if err != nil {
		t.Fatal(err)
	}
	r := ranges[0]
	rr, err := datastoreio.NewRangeReader(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	// readSplit reads rest, splitting at fraction f after `after` entities;
	// it returns what it read and the residual (nil: none).
	readSplit := func(rest sdf.OffsetRange, after int, f float64) ([]item, *sdf.OffsetRange) {
		rt := sdf.NewTracker(rest)
		var got []item
		var residual *sdf.OffsetRange
		split := func() {
			if _, res, err := rt.TrySplit(f); err != nil {
				t.Fatal(err)
			} else if res != nil {
				o := res.(sdf.OffsetRange)
				residual = &o
			}
		}
		if after == 0 {
			split()
		}
		err := rr.Read(ctx, r, rt, reflect.TypeFor[item](), func(v any) {
			got = append(got, v.(item))
			if len(got) == after {
				split()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, residual
	}
	for _, c := range []struct {
		after int
		f     float64
	}{{0, 0.5}, {1, 0.5}, {50, 0.1}, {200, 0.5}, {399, 0.9}} {
		got, residual := readSplit(r.Restriction(), c.after, c.f)
		splits := 0
		for residual != nil {
			splits++
			var more []item
			more, residual = readSplit(*residual, 1, 0.5)
			got = append(got, more...)
		}
		sameMultiset(t, fmt.Sprintf("split after %d at %v", c.after, c.f), ids(got), ids(uni))
		if splits == 0 && c.after < 399 {
			t.Errorf("split after %d at %v: refused", c.after, c.f)
		}
	}
}

// TestReadWrongKeyOrderFails is the safety net: a range whose boundaries
// are sorted in UTF-8 order, as if the server ordered keys so, read from the
// emulator (which orders them by UTF-16) fails as soon as the server
// returns a key outside its sub-range, naming the key and the bounds, so
// that a wrong order cannot turn into entities read twice.
func TestReadWrongKeyOrderFails(t *testing.T) {
	t.Parallel()
	project, _, _ := loadUnicode(t)
	ctx := context.Background()
	ranges, err := datastoreio.Plan(ctx, project, datastoreio.NewQuery("Uni"), datastoreio.WithNamespace(unicodeSet.ns),
		datastoreio.WithNumQuerySplits(1), datastoreio.WithSubRangesPerSplit(32), datastoreio.WithClientOptions("memo"))
	if err != nil {
		t.Fatal(err)
	}
	r := ranges[0]
	var keys []*datastore.Key
	for _, s := range r.Bounds {
		k, _ := datastore.DecodeKey(s)
		keys = append(keys, k)
	}
	before := fmt.Sprint(keys)
	datastoreio.UTF8Order.Sort(keys)
	if fmt.Sprint(keys) == before {
		t.Fatalf("the %d boundaries sort alike in both orders: the data set misses the point", len(keys))
	}
	r.Bounds, r.KeyOrder = nil, datastoreio.UTF8Order.String()
	for _, k := range keys {
		r.Bounds = append(r.Bounds, k.Encode())
	}
	rr, err := datastoreio.NewRangeReader(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	seen := map[string]int{}
	rt := sdf.NewTracker(r.Restriction())
	err = rr.Read(ctx, r, rt, reflect.TypeFor[item](), func(v any) { seen[v.(item).id()]++ })
	if err == nil || !strings.Contains(err.Error(), "outside the sub-range [") || !strings.Contains(err.Error(), "in UTF-8 key order") {
		t.Fatalf("reading UTF-8-sorted boundaries from the emulator: %v", err)
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("%s read %d times before the read failed", id, n)
		}
	}
	if rt.GetError() == nil {
		t.Error("the tracker holds no error")
	}
	t.Logf("%d entities before: %v", len(seen), err)
}
