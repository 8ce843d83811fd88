package avroio

// The read's source and reader under its tracker, without a pipeline: the
// split contract (sdftest's exhaustive and concurrent checks) for every
// codec, and exact split positions.

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// subject is what the split-contract harness exercises: the read's
// CreateInitialRestriction, CreateTracker and ProcessElement loop on src.
func subject(t testing.TB, src offsetsource.Source[beam.X]) sdftest.Subject[beam.X] {
	t.Helper()
	r, err := offsetsource.InitialRestriction(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return sdftest.Subject[beam.X]{
		Restriction: r,
		NewTracker:  func(rest any) beamsdf.RTracker { return sdf.NewTracker(rest.(sdf.OffsetRange)) },
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(beam.X)) error {
			return offsetsource.ReadRestriction(ctx, src, rt.(*sdf.Tracker), emit)
		},
	}
}

// javaSplits makes s split with Java's whole-range SplitAtFraction.
func javaSplits(s sdftest.Subject[beam.X]) sdftest.Subject[beam.X] {
	s.Split = func(rt beamsdf.RTracker, f float64) (any, any, error) {
		tr := rt.(*sdf.Tracker)
		res, ok := tr.SplitAtFraction(f)
		if !ok {
			return tr.Range(), nil, nil
		}
		return tr.Range(), res, nil
	}
	return s
}

func readSource(t testing.TB, src offsetsource.Source[beam.X]) []beam.X {
	t.Helper()
	recs, err := sdftest.ReadAll(context.Background(), subject(t, src))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestSplitContractEveryCodec runs the exhaustive and concurrent split
// checks on files that python3-avro wrote (testdata/gen.py): 30 records in
// 10 blocks, one file per codec.
func TestSplitContractEveryCodec(t *testing.T) {
	for _, codec := range pyCodecs {
		t.Run(codec, func(t *testing.T) {
			t.Parallel()
			path := testdataPath(t, "events-"+codec+".avro")
			if n := len(blockOffsets(t, path)); n < 8 || n > 15 {
				t.Fatalf("%s has %d blocks, want 8 to 15", path, n)
			}
			src := newSource(t, path, reflect.TypeFor[event]())
			got := readSource(t, src)
			want := eventRecords(0, 30)
			if len(got) != len(want) {
				t.Fatalf("read %d records, want %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("record %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			rep := sdftest.AssertSplitAtFractionExhaustive(t, subject(t, src))
			if rep.Records != 30 {
				t.Errorf("the exhaustive check read %d records, want 30", rep.Records)
			}
		})
	}
}

// TestSplitContractVariants: generic records, Java's whole-range fractions,
// and a sub-range that starts and ends inside blocks.
func TestSplitContractVariants(t *testing.T) {
	path := testdataPath(t, "events-snappy.avro")
	offs := blockOffsets(t, path)
	t.Run("generic", func(t *testing.T) {
		t.Parallel()
		src := newSource(t, path, RecordType)
		got := readSource(t, src)
		for i, g := range got {
			if !reflect.DeepEqual(g, genericEvent(i)) {
				t.Fatalf("record %d = %#v, want %#v", i, g, genericEvent(i))
			}
		}
		sdftest.AssertSplitAtFractionExhaustive(t, subject(t, src))
	})
	t.Run("java fractions", func(t *testing.T) {
		t.Parallel()
		sdftest.AssertSplitAtFractionExhaustive(t, javaSplits(subject(t, newSource(t, path, reflect.TypeFor[event]()))))
	})
	t.Run("subrange", func(t *testing.T) {
		t.Parallel()
		// From inside block 2 to inside block 8.
		start, end := offs[2]+1, offs[8]+1
		src := newSource(t, path, reflect.TypeFor[*event]()).Subrange(start, end)
		got := readSource(t, src)
		var want []*event
		for i, o := range recordOffsets(t, path) {
			if o >= start && o < end {
				e := eventRecord(i)
				want = append(want, &e)
			}
		}
		if len(want) < 10 || !reflect.DeepEqual(anySlice(want), anySlice(got)) {
			t.Fatalf("subrange [%d, %d) read %d records, want the %d records of blocks 3 to 8", start, end, len(got), len(want))
		}
		sdftest.AssertSplitAtFractionExhaustive(t, subject(t, src))
	})
}

// TestSplitPositions checks where ranges and splits fall, byte by byte, on a
// file with blocks of 3, 1, 0 (empty), 4 and 2 records.
func TestSplitPositions(t *testing.T) {
	recs := eventRecords(0, 24)
	path, recOffs := writeLayoutFile(t, t.TempDir(), "layout.avro", "deflate", recs, []int{3, 1, 0, 4, 2})
	src := newSource(t, path, reflect.TypeFor[event]())
	size := src.File.Size

	// idsFrom reads [start, end) and returns the ids read.
	ids := func(start, end int64) []int64 {
		var out []int64
		for _, r := range readSource(t, src.Subrange(start, end)) {
			out = append(out, r.(event).ID)
		}
		return out
	}
	// want is the ids of the records whose block starts in [start, end).
	want := func(start, end int64) []int64 {
		var out []int64
		for i, o := range recOffs {
			if o >= start && o < end {
				out = append(out, int64(i))
			}
		}
		return out
	}
	t.Run("every start", func(t *testing.T) {
		for p := int64(0); p <= size; p++ {
			if got, w := ids(p, size), want(p, size); !reflect.DeepEqual(got, w) {
				t.Fatalf("[%d, %d) read ids %v, want %v", p, size, got, w)
			}
		}
	})
	t.Run("every split point", func(t *testing.T) {
		for p := int64(0); p <= size; p += 7 {
			a, b := ids(0, p), ids(p, size)
			if got := append(a, b...); !reflect.DeepEqual(got, want(0, size)) {
				t.Fatalf("[0, %d) + [%d, %d) read %v, want %v", p, p, size, got, want(0, size))
			}
		}
	})
	t.Run("try split", func(t *testing.T) {
		// Read the first record, then split half of the remainder off.
		rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: size})
		first := recOffs[0]
		var got []int64
		split := false
		err := offsetsource.ReadRestriction(context.Background(), src, rt, func(x beam.X) {
			got = append(got, x.(event).ID)
			if split {
				return
			}
			split = true
			if fc := rt.FractionConsumed(); math.Abs(fc-float64(recOffs[3]-first)/3/float64(size-first)) > 1e-9 {
				t.Errorf("fraction consumed after 1 of the 3 records of the first block = %v, want a third of the block", fc)
			}
			p, r, err := rt.TrySplit(0.5)
			if err != nil || r == nil {
				t.Fatalf("TrySplit(0.5) after the first record: %v, %v", r, err)
			}
			pos := first + int64(math.Ceil(0.5*float64(size-first)))
			if p.(sdf.OffsetRange) != (sdf.OffsetRange{Start: 0, End: pos}) || r.(sdf.OffsetRange) != (sdf.OffsetRange{Start: pos, End: size}) {
				t.Fatalf("TrySplit(0.5) gave %v and %v, want [0, %d) and [%d, %d)", p, r, pos, pos, size)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		pos := first + int64(math.Ceil(0.5*float64(size-first)))
		if w := want(0, pos); !reflect.DeepEqual(got, w) {
			t.Fatalf("the split reader read %v, want %v (the blocks before %d)", got, w, pos)
		}
		if rest := ids(pos, size); !reflect.DeepEqual(append(got, rest...), want(0, size)) {
			t.Fatalf("primary %v + residual %v, want %v", got, rest, want(0, size))
		}
	})
	t.Run("fraction inside blocks", func(t *testing.T) {
		// The 4-record block: records 4..7.
		rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: size})
		blk, next := recOffs[4], recOffs[8]
		n := 0
		err := offsetsource.ReadRestriction(context.Background(), src, rt, func(beam.X) {
			n++
			if n >= 5 && n <= 8 {
				k := float64(n - 4) // records read of the block
				want := (float64(blk) + float64(next-blk)*k/4 - float64(recOffs[0])) / float64(size-recOffs[0])
				if got := rt.FractionConsumed(); math.Abs(got-want) > 1e-9 {
					t.Errorf("after record %d: fraction consumed %v, want %v", n-1, got, want)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if fc := rt.FractionConsumed(); fc != 1 {
			t.Errorf("fraction consumed at the end = %v, want 1", fc)
		}
	})
	t.Run("single splits", func(t *testing.T) {
		s := subject(t, src)
		sdftest.AssertSplitAtFraction(t, s, 0, 0.5, sdftest.MustSucceedAndBeConsistent)
		// After the first record of the first block, a Java split a few
		// bytes on lands inside that block: its other records stay.
		res := sdftest.AssertSplitAtFraction(t, javaSplits(s), 1, 0.01, sdftest.MustSucceedAndBeConsistent)
		if res.PrimaryRecords != 3 {
			t.Errorf("split inside the first block: primary %v holds %d records, want the block's 3", res.Primary, res.PrimaryRecords)
		}
		sdftest.AssertSplitAtFraction(t, s, len(recs), 1, sdftest.MustFail)
	})
}
