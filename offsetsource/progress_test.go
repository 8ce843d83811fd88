package offsetsource_test

import (
	"context"
	"testing"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// With 4 bytes per offset, the read reports progress in bytes, the unit of
// RestrictionSize; the fraction is that of the offsets.
func TestProgressInBytes(t *testing.T) {
	src := memSource{Items: memRecords(10), MaxEnd: 100, BPO: 4, End: 100}
	fn := offsetsource.NewReadFn[string, memSource]()
	rest := sdf.OffsetRange{Start: 0, End: 100}
	rt := fn.CreateTracker(rest)
	type sample struct{ done, remaining float64 }
	var got []sample
	err := offsetsource.ReadRestriction(context.Background(), src, rt, func(string) {
		d, r := rt.GetProgress()
		got = append(got, sample{d, r})
	})
	if err != nil {
		t.Fatal(err)
	}
	size := fn.RestrictionSize(src, rest)
	if size != 400 {
		t.Fatalf("RestrictionSize = %v, want 400", size)
	}
	for i, s := range got {
		// Record i lies at offset 10i: 40i bytes done of 400.
		if s.done+s.remaining != size || s.done != float64(40*i) {
			t.Errorf("record %d: GetProgress() = %v, %v; want %d, %v (bytes, RestrictionSize %v)", i, s.done, s.remaining, 40*i, size-float64(40*i), size)
		}
	}
	if d, r := rt.GetProgress(); d != size || r != 0 {
		t.Errorf("GetProgress() = %v, %v when done; want %v, 0", d, r, size)
	}
}

// The split-contract harness, told the DoFn's RestrictionSize, checks that
// every tracker's progress agrees with it, primaries and residuals included.
// The tracker is scaled as ProcessElement scales it before its first claim.
func TestProgressSameUnitAsSize(t *testing.T) {
	items := memRecords(12)
	for i := range items {
		items[i].BlockSize, items[i].BlockRecords = 10, 1
	}
	src := memSource{Items: items, MaxEnd: 120, BPO: 4, End: 120}
	fn := offsetsource.NewReadFn[string, memSource]()
	s := sdftest.Subject[string]{
		Restriction: sdf.OffsetRange{Start: 0, End: 120},
		NewTracker: func(rest any) beamsdf.RTracker {
			rt := fn.CreateTracker(rest.(sdf.OffsetRange))
			rt.SetProgressScale(float64(src.BytesPerOffset()))
			return rt
		},
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
			return offsetsource.ReadRestriction(ctx, src, rt.(*sdf.Tracker), emit)
		},
		Size: func(rest any) float64 { return fn.RestrictionSize(src, rest.(sdf.OffsetRange)) },
	}
	sdftest.AssertSplitAtFractionExhaustive(t, s)
}
