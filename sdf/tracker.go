package sdf

import (
	"fmt"
	"math"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
)

// Claim is the position argument of Tracker.TryClaim for a record that may
// not be a split point. A bare int64 passed to TryClaim is a split point.
// Readers that hold a *Tracker should call TryClaimSplitPoint and
// TryClaimRecord instead: they take no interface value and do not allocate.
type Claim struct {
	Pos        int64
	SplitPoint bool
}

// EndEstimator estimates the end of an unbounded range (a file being
// written, a stream). EstimateEnd is called with the tracker's lock held, from
// the runner's split and progress goroutine: it must return at once, from
// memory, and never block on I/O.
type EndEstimator interface {
	EstimateEnd() int64
}

// Tracker tracks an OffsetRange under the split contract of this package. It
// implements Beam Go's sdf.RTracker and sdf.BoundableRTracker and is safe for
// concurrent use: one goroutine claims while others split and ask for
// progress. It is built on Core, which holds the claim state; what is its
// own is the arithmetic of offset fractions, the block a reader is in, the
// end estimator and the unit of progress. The zero value is not usable; call
// NewTracker.
//
// Every OffsetRange is supported, including negative and extreme positions
// ([math.MinInt64, 10), say): no computation overflows.
type Tracker struct {
	core Core[OffsetRange]

	// Under core's lock:
	blockSize     int64 // offsets spanned by the current block, 0 when unknown
	blockRecords  int64 // records in the current block, 0 when unknown
	blockConsumed int64 // records of the current block claimed so far
	blockRangeEnd int64 // the range's End when the current block was claimed

	est   EndEstimator
	scale float64 // progress units per offset; 0 means 1
}

var (
	_ beamsdf.RTracker          = (*Tracker)(nil)
	_ beamsdf.BoundableRTracker = (*Tracker)(nil)
)

func cutOffsetRange(r OffsetRange, pos int64) (primary, residual OffsetRange) {
	return OffsetRange{Start: r.Start, End: pos}, OffsetRange{Start: pos, End: r.End}
}

// NewTracker returns a tracker of r.
func NewTracker(r OffsetRange) *Tracker {
	t := &Tracker{}
	t.core.Init("sdf.Tracker", r, r.Start, r.End, cutOffsetRange)
	return t
}

// NewUnboundedTracker returns a tracker of r whose end, when Unbounded, is
// estimated by est for splitting and progress. est may be nil.
func NewUnboundedTracker(r OffsetRange, est EndEstimator) *Tracker {
	t := NewTracker(r)
	t.est = est
	return t
}

// SetProgressScale sets the unit of GetProgress: done and remaining work are
// reported in offsets times perOffset, so that a reader whose
// RestrictionSize is in bytes and whose offsets are not (records, say)
// reports progress in bytes too. Values <= 0 or NaN mean 1, the default.
// Fractions (FractionConsumed, TrySplit) do not depend on it.
func (t *Tracker) SetProgressScale(perOffset float64) {
	if !(perOffset > 0) || math.IsInf(perOffset, 0) {
		perOffset = 0
	}
	t.core.Lock()
	t.scale = perOffset
	t.core.Unlock()
}

// String describes the tracker's state, for errors and logs.
func (t *Tracker) String() string { return t.core.String() }

// TryClaim claims pos, which is an int64 (a split point) or a Claim. It
// returns false when the reader must stop: the split point lies at or past
// the end, or the claim broke the contract (then GetError says how).
func (t *Tracker) TryClaim(pos any) bool {
	switch p := pos.(type) {
	case int64:
		return t.TryClaimRecord(p, true)
	case Claim:
		return t.TryClaimRecord(p.Pos, p.SplitPoint)
	default:
		t.core.Fail(fmt.Errorf("sdf: TryClaim got %T, want int64 or sdf.Claim", pos))
		return false
	}
}

// TryClaimSplitPoint claims the record at pos, which is a split point.
func (t *Tracker) TryClaimSplitPoint(pos int64) bool { return t.TryClaimRecord(pos, true) }

// TryClaimRecord claims the record at pos. A split point at or past the end
// is refused and stops the tracker. A record that is not a split point is
// accepted whenever the block it belongs to was claimed. A split point must
// lie strictly after every record claimed before it, so that the positions up
// to the last claimed record are consumed and splits lie after them.
func (t *Tracker) TryClaimRecord(pos int64, splitPoint bool) bool {
	t.core.Lock()
	ok := t.core.ClaimLocked(pos, splitPoint)
	if ok {
		if splitPoint {
			t.blockSize, t.blockRecords, t.blockConsumed = 0, 0, 1
			_, t.blockRangeEnd = t.core.BoundsLocked()
		} else {
			t.blockConsumed++
		}
	}
	t.core.Unlock()
	return ok
}

// SetBlock tells the tracker the size in offsets and the number of records of
// the block whose split point was claimed last, so that progress advances
// inside the block as its records are claimed. Zero values mean unknown.
func (t *Tracker) SetBlock(size, records int64) {
	t.core.Lock()
	t.blockSize, t.blockRecords = size, records
	t.core.Unlock()
}

// MarkDone records that the reader has no more records in the range (it met
// the end of its input): the rest of the range is claimed, empty. The runner
// then sees the restriction done.
func (t *Tracker) MarkDone() { t.core.MarkDone() }

// Fail stops the tracker with err (the first error is kept).
func (t *Tracker) Fail(err error) { t.core.Fail(err) }

// GetError returns the error that stopped the tracker, or nil. Errors of
// claims that broke the contract wrap ErrClaimOrder or ErrClaimAfterStop.
func (t *Tracker) GetError() error { return t.core.GetError() }

// IsDone reports whether no split point remains to be claimed and no error
// occurred.
func (t *Tracker) IsDone() bool { return t.core.IsDone() }

// IsBounded reports whether the range has a known end.
func (t *Tracker) IsBounded() bool { return t.Range().IsBounded() }

// GetRestriction returns the current range, an OffsetRange.
func (t *Tracker) GetRestriction() any { return t.Range() }

// Range returns the current range.
func (t *Tracker) Range() OffsetRange { return t.core.Restriction() }

// span is b-a for a <= b, exact for every pair of int64.
func span(a, b int64) uint64 { return uint64(b) - uint64(a) }

// fspan is span as a float64, 0 when b < a.
func fspan(a, b int64) float64 {
	if b < a {
		return 0
	}
	return float64(span(a, b))
}

// TrySplit splits off the residual at fraction f of the remaining work, as Beam
// Go's runners ask (rule 4 of the package doc). The tracker keeps the primary.
// It refuses, returning a nil residual and changing nothing, when the split
// position would not lie before the end, when the tracker is done or failed,
// when the end is unbounded and no EndEstimator was given (f > 0), or when
// f is NaN. Fractions below 0 count as 0, above 1 as 1.
// TrySplit(0) is a checkpoint.
func (t *Tracker) TrySplit(f float64) (primary, residual any, err error) {
	t.core.Lock()
	defer t.core.Unlock()
	res, ok := t.trySplitLocked(f)
	if f > 0 {
		t.core.CountLocked(ok)
	}
	if !ok {
		return t.core.RestrictionLocked(), nil, nil
	}
	return t.core.RestrictionLocked(), res, nil
}

func (t *Tracker) trySplitLocked(f float64) (OffsetRange, bool) {
	if math.IsNaN(f) {
		return OffsetRange{}, false
	}
	if f <= 0 {
		return t.core.CheckpointLocked()
	}
	f = min(f, 1)
	if t.core.ErrLocked() != nil || t.core.DoneLocked() {
		return OffsetRange{}, false
	}
	next, ok := t.core.NextLocked()
	if !ok {
		return OffsetRange{}, false
	}
	_, end := t.core.BoundsLocked()
	e := end
	if end == Unbounded {
		if t.est == nil {
			return OffsetRange{}, false
		}
		e = max(t.est.EstimateEnd(), next)
	}
	return t.core.CutLocked(splitPos(f, next, e))
}

// splitPos is Beam Go's split position last + max(ceil(f*(e-last)), 1) for
// 0 < f <= 1, with last = next-1 the position splits lie after and next <=
// e, computed without overflow: a step of the whole span or more gives e.
func splitPos(f float64, next, e int64) int64 {
	n := span(next, e) // e - last - 1
	total := math.Ldexp(1, 64)
	if n != math.MaxUint64 {
		total = float64(n + 1) // rounded to nearest, as Beam's float64(e-last)
	}
	s := math.Max(math.Ceil(f*total), 1)
	if s >= total {
		return e
	}
	off := uint64(s) - 1
	if off >= n {
		return e
	}
	return int64(uint64(next) + off)
}

// SplitAtFraction is Java's BoundedReader.splitAtFraction: it narrows the range
// to fraction f of itself, measured from the first claimed position (from
// Start before any claim), at start + floor(f*(End-start)), and returns the
// residual. It refuses (false, nothing changed) where TrySplitAtPosition does
// and when the end is unbounded.
func (t *Tracker) SplitAtFraction(f float64) (OffsetRange, bool) {
	t.core.Lock()
	defer t.core.Unlock()
	res, ok := t.splitAtFractionLocked(f)
	t.core.CountLocked(ok)
	return res, ok
}

func (t *Tracker) splitAtFractionLocked(f float64) (OffsetRange, bool) {
	start, end := t.core.BoundsLocked()
	// f*(End-s) for f outside [0, 1) lies before s or at or past End,
	// where no split can be.
	if end == Unbounded || !(f >= 0 && f < 1) {
		return OffsetRange{}, false
	}
	s := start
	if c := t.core.ClaimedLocked(); c.Started {
		s = c.First
	}
	if end <= s {
		return OffsetRange{}, false
	}
	n := span(s, end)
	d := math.Floor(f * float64(n))
	if d >= float64(n) || uint64(d) >= n {
		return OffsetRange{}, false // at or past End
	}
	return t.core.SplitAtLocked(int64(uint64(s) + uint64(d)))
}

// TrySplitAtPosition is Java's RangeTracker.trySplitAtPosition: the range
// becomes [Start, pos) and [pos, End) is returned. It refuses (false, nothing
// changed) when the tracker is done or failed, when pos is not strictly after
// the last claimed record, or when pos lies outside (Start, End).
func (t *Tracker) TrySplitAtPosition(pos int64) (OffsetRange, bool) {
	t.core.Lock()
	defer t.core.Unlock()
	res, ok := t.core.SplitAtLocked(pos)
	t.core.CountLocked(ok)
	return res, ok
}

// relPositionLocked is how far the reader got past from (at most the last
// claimed split point), refined inside the current block, capped at end.
func (t *Tracker) relPositionLocked(from, end int64) float64 {
	pos := fspan(from, t.core.ClaimedLocked().LastSplit)
	if t.blockSize > 0 && t.blockRecords > 0 {
		c := min(t.blockConsumed, t.blockRecords)
		pos += float64(t.blockSize) * float64(c) / float64(t.blockRecords)
	}
	return math.Min(pos, fspan(from, end))
}

// endLocked is the end used for progress: the estimate for an unbounded range
// (0, false when there is none). When a split moved the end into the
// current block (SetBlock) after the block was claimed, the block's records
// all stay in the primary: the end is then the block's end, so that the work
// done never goes back.
func (t *Tracker) endLocked() (int64, bool) {
	_, rangeEnd := t.core.BoundsLocked()
	c := t.core.ClaimedLocked()
	end := rangeEnd
	if end == Unbounded {
		if t.est == nil {
			return 0, false
		}
		end = t.est.EstimateEnd()
		if c.Started && end <= c.LastSplit {
			end = c.LastSplit + 1 // LastSplit < End, so this does not overflow
		}
	}
	if c.Started && rangeEnd != t.blockRangeEnd && t.blockSize > 0 && t.blockRecords > 0 {
		blockEnd := t.blockRangeEnd
		if uint64(t.blockSize) < span(c.LastSplit, blockEnd) {
			blockEnd = c.LastSplit + t.blockSize
		}
		end = max(end, blockEnd)
	}
	return end, true
}

// FractionConsumed is Java's RangeTracker.getFractionConsumed: 0 before the
// first claim, 1 once done, otherwise the share of [first claimed, End) below
// the last claimed position, refined inside the block (SetBlock). It is 0 for
// an unbounded range without an estimator.
func (t *Tracker) FractionConsumed() float64 {
	t.core.Lock()
	defer t.core.Unlock()
	return t.fractionLocked()
}

func (t *Tracker) fractionLocked() float64 {
	c := t.core.ClaimedLocked()
	start, bend := t.core.BoundsLocked()
	if t.core.ErrLocked() == nil && (t.core.StoppedLocked() || (!c.Started && bend <= start)) {
		return 1
	}
	if !c.Started {
		return 0
	}
	end, ok := t.endLocked()
	if !ok {
		return 0
	}
	if end <= c.First {
		return 1
	}
	f := t.relPositionLocked(c.First, end) / fspan(c.First, end)
	return math.Min(1, math.Max(0, f))
}

// GetProgress reports work done and remaining, measured from the first
// claimed position (rule 6), in offsets times the progress scale
// (SetProgressScale). For an unbounded range without an estimator the
// remaining work is reported as 1.
func (t *Tracker) GetProgress() (done, remaining float64) {
	t.core.Lock()
	defer t.core.Unlock()
	scale := t.scale
	if scale == 0 {
		scale = 1
	}
	c := t.core.ClaimedLocked()
	end, ok := t.endLocked()
	s, _ := t.core.BoundsLocked()
	if c.Started {
		s = c.First
	}
	switch {
	case t.core.StoppedLocked() || (c.Started && t.core.DoneLocked()):
		// Done: by a refused claim, MarkDone, or with the last position
		// claimed (a checkpoint, say).
		if ok && end > s {
			return scale * fspan(s, end), 0
		}
		return 1, 0
	case !ok:
		if c.Started {
			return scale * t.relPositionLocked(s, Unbounded), 1
		}
		return 0, 1
	case !c.Started:
		return 0, scale * fspan(s, end)
	}
	pos := t.relPositionLocked(s, end)
	return scale * pos, scale * math.Max(0, fspan(s, end)-pos)
}

// SplitPointsConsumed is the number of split points whose records were read
// entirely: those claimed, less the current one unless the tracker is done.
func (t *Tracker) SplitPointsConsumed() int64 {
	t.core.Lock()
	defer t.core.Unlock()
	n := t.core.ClaimedLocked().SplitPoints
	if t.core.StoppedLocked() || n == 0 {
		return n
	}
	return n - 1
}

// SplitPointsRemaining is the number of split points left to read, counting
// the current one: 0 when done, 1 when the current block is the last one the
// range can hold, and -1 when unknown.
func (t *Tracker) SplitPointsRemaining() int64 {
	t.core.Lock()
	defer t.core.Unlock()
	start, end := t.core.BoundsLocked()
	switch c := t.core.ClaimedLocked(); {
	case t.core.StoppedLocked() || end <= start:
		return 0
	case c.Started && !before(c.LastRecord, end):
		return 1
	}
	return -1
}

// SplitStats returns how many splits (TrySplit with f > 0, SplitAtFraction,
// TrySplitAtPosition) the tracker accepted and refused. Checkpoints are not
// counted. Readers add these to their Beam metrics when they finish.
func (t *Tracker) SplitStats() (accepted, refused int64) { return t.core.SplitStats() }
