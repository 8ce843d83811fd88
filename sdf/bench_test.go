package sdf

import (
	"testing"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
)

// The benchmarks come in groups: BenchmarkX/sdfio is this package's Tracker,
// BenchmarkX/beam_lock_offsetrange is Beam Go's offsetrange.Tracker behind
// sdf.NewLockRTracker, which is what Beam's textio pays per record. The bench
// report (internal/cmd/benchreport) pairs the members of each group.

const benchEnd = 1 << 62

func newBeamLockTracker(start, end int64) *beamsdf.LockRTracker {
	return beamsdf.NewLockRTracker(offsetrange.NewTracker(offsetrange.Restriction{Start: start, End: end}))
}

// BenchmarkClaim is one claimed split point per op; the sdfio member uses the
// typed TryClaimSplitPoint that readers holding a *Tracker call.
func BenchmarkClaim(b *testing.B) {
	b.Run("sdfio", func(b *testing.B) {
		tr := NewTracker(OffsetRange{0, benchEnd})
		b.ReportAllocs()
		for i := range int64(b.N) {
			if !tr.TryClaimSplitPoint(i) {
				b.Fatal("claim refused")
			}
		}
	})
	b.Run("beam_lock_offsetrange", func(b *testing.B) {
		tr := newBeamLockTracker(0, benchEnd)
		b.ReportAllocs()
		for i := range int64(b.N) {
			if !tr.TryClaim(i) {
				b.Fatal("claim refused")
			}
		}
	})
}

// BenchmarkClaimAny is the same through the RTracker interface: TryClaim(any)
// on an RTracker-typed value, as generic Beam code calls it.
func BenchmarkClaimAny(b *testing.B) {
	run := func(b *testing.B, rt beamsdf.RTracker) {
		b.ReportAllocs()
		for i := range int64(b.N) {
			if !rt.TryClaim(i) {
				b.Fatal("claim refused")
			}
		}
	}
	b.Run("sdfio", func(b *testing.B) { run(b, NewTracker(OffsetRange{0, benchEnd})) })
	b.Run("beam_lock_offsetrange", func(b *testing.B) { run(b, newBeamLockTracker(0, benchEnd)) })
}

// BenchmarkClaimRecord is a block-based reader's per-record cost: a split
// point followed by 15 records of its block (16 claims per op/16). Beam's
// offsetrange has no records that are not split points, so there is no anchor.
func BenchmarkClaimRecord(b *testing.B) {
	b.Run("sdfio", func(b *testing.B) {
		tr := NewTracker(OffsetRange{0, benchEnd})
		b.ReportAllocs()
		var block int64
		for i := range b.N {
			if i%16 == 0 {
				block = int64(i)
				if !tr.TryClaimSplitPoint(block) {
					b.Fatal("claim refused")
				}
				continue
			}
			if !tr.TryClaimRecord(block, false) {
				b.Fatal("claim refused")
			}
		}
	})
}

// BenchmarkSplit is one accepted TrySplit per op: each split keeps 99.9% of
// the remainder, and the tracker is renewed every splitsPerTracker splits so
// that splits keep being accepted. Both members pay the same renewals.
func BenchmarkSplit(b *testing.B) {
	const splitsPerTracker = 8192
	run := func(b *testing.B, newTracker func() beamsdf.RTracker) {
		b.ReportAllocs()
		var rt beamsdf.RTracker
		for i := range b.N {
			if i%splitsPerTracker == 0 {
				rt = newTracker()
				if !rt.TryClaim(int64(0)) {
					b.Fatal("claim refused")
				}
			}
			if _, r, err := rt.TrySplit(0.999); r == nil || err != nil {
				b.Fatalf("split %d refused: %v", i%splitsPerTracker, err)
			}
		}
	}
	b.Run("sdfio", func(b *testing.B) {
		run(b, func() beamsdf.RTracker { return NewTracker(OffsetRange{0, benchEnd}) })
	})
	b.Run("beam_lock_offsetrange", func(b *testing.B) {
		run(b, func() beamsdf.RTracker { return newBeamLockTracker(0, benchEnd) })
	})
}

// BenchmarkProgress is one GetProgress per op, as the runner polls it.
func BenchmarkProgress(b *testing.B) {
	run := func(b *testing.B, rt beamsdf.RTracker) {
		if !rt.TryClaim(int64(1000)) {
			b.Fatal("claim refused")
		}
		b.ReportAllocs()
		var sink float64
		for range b.N {
			d, r := rt.GetProgress()
			sink += d + r
		}
		if sink < 0 {
			b.Fatal(sink)
		}
	}
	b.Run("sdfio", func(b *testing.B) { run(b, NewTracker(OffsetRange{0, benchEnd})) })
	b.Run("beam_lock_offsetrange", func(b *testing.B) { run(b, newBeamLockTracker(0, benchEnd)) })
}
