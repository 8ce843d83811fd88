package sdf

import (
	"errors"
	"math"
	"testing"
)

// Issue 7 defect 9: ranges with negative or extreme positions. Every int64
// range is supported; these used to overflow (TrySplit(0.5) on
// [MinInt64, 10) returned an empty primary).
func TestExtremeRanges(t *testing.T) {
	t.Run("TrySplit on [MinInt64, 10)", func(t *testing.T) {
		tr := NewTracker(OffsetRange{math.MinInt64, 10})
		// last = MinInt64-1: pos = last + ceil(0.5*float64(2^63+11)) =
		// MinInt64-1 + 2^62.
		const want = -1<<62 - 1
		p, r, err := tr.TrySplit(0.5)
		if err != nil || r == nil {
			t.Fatalf("TrySplit(0.5) = %v, %v, %v; want a split", p, r, err)
		}
		if p != (OffsetRange{math.MinInt64, want}) || r != (OffsetRange{want, 10}) {
			t.Fatalf("TrySplit(0.5) = %v + %v, want [MinInt64, %d) + [%d, 10)", p, r, int64(want), int64(want))
		}
		if !tr.TryClaimSplitPoint(math.MinInt64) || !tr.TryClaimSplitPoint(want-1) || tr.TryClaimSplitPoint(want) {
			t.Errorf("claims do not follow the primary (tracker %v)", tr)
		}
		if !tr.IsDone() || tr.GetError() != nil {
			t.Errorf("IsDone %v, GetError %v", tr.IsDone(), tr.GetError())
		}
	})
	t.Run("after claiming MinInt64", func(t *testing.T) {
		tr := NewTracker(OffsetRange{math.MinInt64, 0})
		if !tr.TryClaimSplitPoint(math.MinInt64) || !tr.TryClaimSplitPoint(-1<<62) {
			t.Fatal("claims refused")
		}
		if d, r := tr.GetProgress(); d != 1<<62 || r != 1<<62 {
			t.Errorf("GetProgress() = %v, %v; want 2^62, 2^62", d, r)
		}
		if f := tr.FractionConsumed(); f != 0.5 {
			t.Errorf("FractionConsumed() = %v, want 0.5", f)
		}
		// -2^62 + ceil(0.5 * 2^62) = -2^61.
		if _, r, _ := tr.TrySplit(0.5); r != (OffsetRange{-1 << 61, 0}) {
			t.Errorf("TrySplit(0.5) residual %v, want [-2^61, 0)", r)
		}
	})
	t.Run("SplitAtFraction over all of int64", func(t *testing.T) {
		tr := NewTracker(OffsetRange{math.MinInt64, math.MaxInt64 - 1})
		if r, ok := tr.SplitAtFraction(0.5); !ok || r != (OffsetRange{0, math.MaxInt64 - 1}) {
			t.Errorf("SplitAtFraction(0.5) = %v, %v; want [0, MaxInt64-1)", r, ok)
		}
		// 3/4 of [MinInt64, 0) is MinInt64 + 3*2^61 = -2^61.
		if r, ok := tr.SplitAtFraction(0.75); !ok || r != (OffsetRange{-1 << 61, 0}) {
			t.Errorf("SplitAtFraction(0.75) = %v, %v; want [-2^61, 0)", r, ok)
		}
		if d, r := tr.GetProgress(); d != 0 || r != 3*(1<<61) {
			t.Errorf("GetProgress() = %v, %v before a claim; want 0, 3*2^61", d, r)
		}
	})
	t.Run("checkpoint of [MinInt64, unbounded)", func(t *testing.T) {
		tr := NewUnboundedTracker(OffsetRange{math.MinInt64, Unbounded}, nil)
		if tr.IsDone() {
			t.Fatal("done before a claim")
		}
		p, r, _ := tr.TrySplit(0)
		if p != (OffsetRange{math.MinInt64, math.MinInt64}) || r != (OffsetRange{math.MinInt64, Unbounded}) || !tr.IsDone() {
			t.Errorf("TrySplit(0) = %v + %v, IsDone %v", p, r, tr.IsDone())
		}
	})
	t.Run("estimated end over all of int64", func(t *testing.T) {
		tr := NewUnboundedTracker(OffsetRange{math.MinInt64, Unbounded}, newEstimate(math.MaxInt64-1))
		// ceil(0.5 * 2^64) = 2^63 from MinInt64-1.
		if _, r, _ := tr.TrySplit(0.5); r != (OffsetRange{-1, Unbounded}) {
			t.Errorf("TrySplit(0.5) residual %v, want [-1, unbounded)", r)
		}
	})
	t.Run("top of int64", func(t *testing.T) {
		tr := NewTracker(OffsetRange{math.MaxInt64 - 3, math.MaxInt64 - 1})
		if !tr.TryClaimSplitPoint(math.MaxInt64-3) || !tr.TryClaimSplitPoint(math.MaxInt64-2) {
			t.Fatal("claims refused")
		}
		if !tr.IsDone() || tr.SplitPointsRemaining() != 1 {
			t.Errorf("IsDone %v SplitPointsRemaining %d with the last position claimed", tr.IsDone(), tr.SplitPointsRemaining())
		}
		if _, r, _ := tr.TrySplit(0); r != nil {
			t.Errorf("checkpoint at the end gave %v", r)
		}
		// A record that is not a split point at MaxInt64 leaves nothing
		// to split after it.
		if !tr.TryClaimRecord(math.MaxInt64, false) {
			t.Fatal("record refused")
		}
		if _, r, _ := tr.TrySplit(0.5); r != nil {
			t.Errorf("split after a record at MaxInt64 gave %v", r)
		}
		if tr.TryClaimSplitPoint(math.MaxInt64 - 1) {
			t.Error("split point claimed after a record at MaxInt64")
		}
	})
	t.Run("negative", func(t *testing.T) {
		tr := NewTracker(OffsetRange{-100, -50})
		tr.TryClaimSplitPoint(-100)
		if _, r, _ := tr.TrySplit(0.5); r != (OffsetRange{-75, -50}) {
			t.Errorf("TrySplit(0.5) residual %v, want [-75, -50)", r)
		}
		if r, ok := tr.TrySplitAtPosition(-90); !ok || r != (OffsetRange{-90, -75}) {
			t.Errorf("TrySplitAtPosition(-90) = %v, %v", r, ok)
		}
		if _, ok := tr.TrySplitAtPosition(-100); ok {
			t.Error("split at the claimed position accepted")
		}
	})
}

// The claim errors wrap the package's sentinels.
func TestClaimErrorsWrap(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  func(*Tracker)
		want error
	}{
		{"first not a split point", func(tr *Tracker) { tr.TryClaimRecord(0, false) }, ErrClaimOrder},
		{"before start", func(tr *Tracker) { tr.TryClaimSplitPoint(-1) }, ErrClaimOrder},
		{"not increasing", func(tr *Tracker) { tr.TryClaimSplitPoint(3); tr.TryClaimSplitPoint(3) }, ErrClaimOrder},
		{"record backwards", func(tr *Tracker) { tr.TryClaimSplitPoint(3); tr.TryClaimRecord(2, false) }, ErrClaimOrder},
		{"after stop", func(tr *Tracker) { tr.MarkDone(); tr.TryClaimSplitPoint(3) }, ErrClaimAfterStop},
		{"after refusal", func(tr *Tracker) { tr.TryClaimSplitPoint(10); tr.TryClaimSplitPoint(11) }, ErrClaimAfterStop},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(OffsetRange{0, 10})
			c.ops(tr)
			if err := tr.GetError(); !errors.Is(err, c.want) {
				t.Errorf("GetError() = %v, want it to wrap %v", err, c.want)
			}
		})
	}
}

// SetProgressScale changes the unit of GetProgress, not its fraction.
func TestProgressScale(t *testing.T) {
	tr := NewTracker(OffsetRange{0, 100})
	tr.SetProgressScale(4)
	if d, r := tr.GetProgress(); d != 0 || r != 400 {
		t.Errorf("GetProgress() = %v, %v before a claim; want 0, 400", d, r)
	}
	tr.TryClaimSplitPoint(0)
	tr.TryClaimSplitPoint(25)
	if d, r := tr.GetProgress(); d != 100 || r != 300 {
		t.Errorf("GetProgress() = %v, %v; want 100, 300", d, r)
	}
	if f := tr.FractionConsumed(); f != 0.25 {
		t.Errorf("FractionConsumed() = %v, want 0.25", f)
	}
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		tr.SetProgressScale(bad)
		if d, r := tr.GetProgress(); d != 25 || r != 75 {
			t.Errorf("SetProgressScale(%v): GetProgress() = %v, %v; want offsets 25, 75", bad, d, r)
		}
	}
}

// A split inside the current block leaves all the block's records in the
// primary: the work done never goes back, and a checkpoint there ends with
// a fraction of 1.
func TestProgressSplitInsideBlock(t *testing.T) {
	tr := NewTracker(OffsetRange{0, 100})
	tr.TryClaimSplitPoint(0)
	tr.SetBlock(10, 4)
	tr.TryClaimRecord(0, false)
	tr.TryClaimRecord(0, false) // 3 of 4 records: position 7.5
	if d, r := tr.GetProgress(); d != 7.5 || r != 92.5 {
		t.Fatalf("GetProgress() = %v, %v; want 7.5, 92.5", d, r)
	}
	if r, ok := tr.TrySplitAtPosition(3); !ok || r != (OffsetRange{3, 100}) {
		t.Fatalf("TrySplitAtPosition(3) = %v, %v", r, ok)
	}
	// The block's 10 offsets remain the primary's work.
	if d, r := tr.GetProgress(); d != 7.5 || r != 2.5 {
		t.Errorf("after a split inside the block: GetProgress() = %v, %v; want 7.5, 2.5", d, r)
	}
	tr.TryClaimRecord(0, false)
	if d, r := tr.GetProgress(); d != 10 || r != 0 {
		t.Errorf("block read: GetProgress() = %v, %v; want 10, 0", d, r)
	}
	tr.TryClaimSplitPoint(10) // refused: past the end
	if d, r := tr.GetProgress(); d != 10 || r != 0 || !tr.IsDone() {
		t.Errorf("done: GetProgress() = %v, %v, IsDone %v; want 10, 0, true", d, r, tr.IsDone())
	}

	cp := NewTracker(OffsetRange{0, 100})
	cp.TryClaimSplitPoint(0)
	cp.SetBlock(10, 4)
	cp.TryClaimRecord(0, false) // position 5
	if _, r, _ := cp.TrySplit(0); r != (OffsetRange{1, 100}) {
		t.Fatalf("checkpoint residual %v, want [1, 100)", r)
	}
	if d, r := cp.GetProgress(); d != 10 || r != 0 {
		t.Errorf("after a checkpoint inside the block: GetProgress() = %v, %v; want 10, 0", d, r)
	}
}
