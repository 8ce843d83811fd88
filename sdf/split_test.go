package sdf

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSplitIntoBundles(t *testing.T) {
	type R = OffsetRange
	cases := []struct {
		name                     string
		rng                      R
		desired, minSize, perOff int64
		want                     []R
	}{
		{"even pieces", R{0, 100}, 25, 0, 1, []R{{0, 25}, {25, 50}, {50, 75}, {75, 100}}},
		{"offset start", R{1000, 1100}, 50, 0, 1, []R{{1000, 1050}, {1050, 1100}}},
		// At 75 the rest after [75, 100) is 10 >= 25/4: a small last piece.
		{"small last piece kept", R{0, 110}, 25, 0, 1, []R{{0, 25}, {25, 50}, {50, 75}, {75, 100}, {100, 110}}},
		// At 75 the rest after [75, 100) is 4 < 25/4 = 6: merged.
		{"last piece merged below a quarter", R{0, 104}, 25, 0, 1, []R{{0, 25}, {25, 50}, {50, 75}, {75, 104}}},
		// 6 is not < 25/4 = 6 (integer division): kept.
		{"a quarter exactly is kept", R{0, 106}, 25, 0, 1, []R{{0, 25}, {25, 50}, {50, 75}, {75, 100}, {100, 106}}},
		{"last piece merged below minBundleSize", R{0, 100}, 30, 20, 1, []R{{0, 30}, {30, 60}, {60, 100}}},
		{"minBundleSize raises the desired size", R{0, 100}, 5, 20, 1, []R{{0, 20}, {20, 40}, {40, 60}, {60, 80}, {80, 100}}},
		{"range smaller than minBundleSize", R{0, 10}, 5, 100, 1, []R{{0, 10}}},
		{"range smaller than desired", R{5, 8}, 100, 0, 1, []R{{5, 8}}},
		{"bytesPerOffset", R{0, 300}, 1000, 0, 10, []R{{0, 100}, {100, 200}, {200, 300}}},
		{"bytesPerOffset rounds down", R{0, 300}, 1009, 0, 10, []R{{0, 100}, {100, 200}, {200, 300}}},
		{"bytesPerOffset larger than desired", R{0, 3}, 5, 0, 10, []R{{0, 1}, {1, 2}, {2, 3}}},
		{"bytesPerOffset <= 0 counts as 1", R{0, 50}, 25, 0, 0, []R{{0, 25}, {25, 50}}},
		{"desired 0 means 1 offset", R{0, 3}, 0, 0, 1, []R{{0, 1}, {1, 2}, {2, 3}}},
		{"empty range", R{5, 5}, 10, 0, 1, nil},
		{"inverted range", R{9, 5}, 10, 0, 1, nil},
		{"unbounded is whole", R{7, Unbounded}, 10, 0, 1, []R{{7, Unbounded}}},
		{"near the largest offset", R{Unbounded - 30, Unbounded - 1}, 10, 0, 1,
			[]R{{Unbounded - 30, Unbounded - 20}, {Unbounded - 20, Unbounded - 10}, {Unbounded - 10, Unbounded - 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SplitIntoBundles(c.rng, c.desired, c.minSize, c.perOff)
			if !slices.Equal(got, c.want) {
				t.Errorf("SplitIntoBundles(%v, %d, %d, %d) = %v, want %v", c.rng, c.desired, c.minSize, c.perOff, got, c.want)
			}
		})
	}
}

// javaSplit is Java's OffsetRange.split(desired, min) as the oracle, with
// the desired size computed as in OffsetBasedSource.split.
func javaSplit(r OffsetRange, desiredBytes, minSize, perOff int64) []OffsetRange {
	desired := max(max(1, desiredBytes/perOff), minSize)
	var out []OffsetRange
	for start := r.Start; start < r.End; {
		end := min(start+desired, r.End)
		if rest := r.End - end; rest < desired/4 || rest < minSize {
			end = r.End
		}
		out = append(out, OffsetRange{start, end})
		start = end
	}
	return out
}

// The pieces tile the range exactly and agree with Java's rule.
func TestSplitIntoBundlesProperties(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		start := rnd.Int64N(1000)
		r := OffsetRange{start, start + rnd.Int64N(2000)}
		desired := rnd.Int64N(700)
		minSize := rnd.Int64N(300)
		perOff := 1 + rnd.Int64N(4)
		got := SplitIntoBundles(r, desired, minSize, perOff)
		if want := javaSplit(r, desired, minSize, perOff); !slices.Equal(got, want) {
			t.Fatalf("SplitIntoBundles(%v, %d, %d, %d) = %v, Java gives %v", r, desired, minSize, perOff, got, want)
		}
		next := r.Start
		size := max(max(1, desired/perOff), minSize)
		for i, p := range got {
			if p.Start != next || p.End <= p.Start {
				t.Fatalf("SplitIntoBundles(%v, %d, %d, %d) = %v: piece %d does not follow", r, desired, minSize, perOff, got, i)
			}
			if i < len(got)-1 && p.Size() != size {
				t.Fatalf("SplitIntoBundles(%v, %d, %d, %d) = %v: piece %d is not the desired size %d", r, desired, minSize, perOff, got, i, size)
			}
			next = p.End
		}
		if next != r.End && !r.IsEmpty() {
			t.Fatalf("SplitIntoBundles(%v, %d, %d, %d) = %v: does not reach the end", r, desired, minSize, perOff, got)
		}
		if last := len(got) - 1; last > 0 && (got[last].Size() < size/4 || got[last].Size() < minSize) {
			t.Fatalf("SplitIntoBundles(%v, %d, %d, %d) = %v: last piece too small", r, desired, minSize, perOff, got)
		}
	}
}
