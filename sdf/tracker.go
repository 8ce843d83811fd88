package sdf

import (
	"fmt"
	"math"
	"sync"

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
// progress. The zero value is not usable; call NewTracker.
type Tracker struct {
	mu  sync.Mutex
	rng OffsetRange

	started    bool  // a split point was claimed
	stopped    bool  // a claim was refused, MarkDone was called, or an error occurred
	first      int64 // position of the first claimed split point
	lastSplit  int64 // position of the last claimed split point
	lastRecord int64 // position of the last claimed record
	err        error

	splitPoints int64 // split points claimed

	blockSize     int64 // offsets spanned by the current block, 0 when unknown
	blockRecords  int64 // records in the current block, 0 when unknown
	blockConsumed int64 // records of the current block claimed so far

	est EndEstimator

	splitsAccepted int64
	splitsRefused  int64
}

var (
	_ beamsdf.RTracker          = (*Tracker)(nil)
	_ beamsdf.BoundableRTracker = (*Tracker)(nil)
)

// NewTracker returns a tracker of r.
func NewTracker(r OffsetRange) *Tracker {
	return &Tracker{rng: r, lastSplit: r.Start - 1, lastRecord: r.Start - 1}
}

// NewUnboundedTracker returns a tracker of r whose end, when Unbounded, is
// estimated by est for splitting and progress. est may be nil.
func NewUnboundedTracker(r OffsetRange, est EndEstimator) *Tracker {
	t := NewTracker(r)
	t.est = est
	return t
}

// String describes the tracker's state, for errors and logs.
func (t *Tracker) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return fmt.Sprintf("sdf.Tracker{%v last split point %d, last record %d, started %v, stopped %v, err %v}",
		t.rng, t.lastSplit, t.lastRecord, t.started, t.stopped, t.err)
}

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
		t.mu.Lock()
		t.failLocked(fmt.Errorf("sdf: TryClaim got %T, want int64 or sdf.Claim", pos))
		t.mu.Unlock()
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
	t.mu.Lock()
	ok := t.claimLocked(pos, splitPoint)
	t.mu.Unlock()
	return ok
}

func (t *Tracker) claimLocked(pos int64, splitPoint bool) bool {
	if t.stopped {
		if t.err == nil {
			t.err = fmt.Errorf("sdf: claim of position %d after the tracker of %v had stopped", pos, t.rng)
		}
		return false
	}
	if !splitPoint {
		if !t.started {
			return t.failLocked(fmt.Errorf("sdf: the first record claimed in %v (at %d) is not a split point", t.rng, pos))
		}
		if pos < t.lastRecord {
			return t.failLocked(fmt.Errorf("sdf: record at %d claimed after the record at %d in %v", pos, t.lastRecord, t.rng))
		}
		t.lastRecord = pos
		t.blockConsumed++
		return true
	}
	if pos < t.rng.Start {
		return t.failLocked(fmt.Errorf("sdf: split point %d claimed before the start of %v", pos, t.rng))
	}
	if t.started && pos <= t.lastRecord {
		return t.failLocked(fmt.Errorf("sdf: split point %d claimed after the record at %d (split point %d) in %v: split points must strictly increase", pos, t.lastRecord, t.lastSplit, t.rng))
	}
	if pos >= t.rng.End {
		t.stopped = true
		return false
	}
	if !t.started {
		t.started = true
		t.first = pos
	}
	t.lastSplit, t.lastRecord = pos, pos
	t.splitPoints++
	t.blockSize, t.blockRecords, t.blockConsumed = 0, 0, 1
	return true
}

func (t *Tracker) failLocked(err error) bool {
	if t.err == nil {
		t.err = err
	}
	t.stopped = true
	return false
}

// SetBlock tells the tracker the size in offsets and the number of records of
// the block whose split point was claimed last, so that progress advances
// inside the block as its records are claimed. Zero values mean unknown.
func (t *Tracker) SetBlock(size, records int64) {
	t.mu.Lock()
	t.blockSize, t.blockRecords = size, records
	t.mu.Unlock()
}

// MarkDone records that the reader has no more records in the range (it met
// the end of its input): the rest of the range is claimed, empty. The runner
// then sees the restriction done.
func (t *Tracker) MarkDone() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

// Fail stops the tracker with err (the first error is kept).
func (t *Tracker) Fail(err error) {
	t.mu.Lock()
	t.failLocked(err)
	t.mu.Unlock()
}

// GetError returns the error that stopped the tracker, or nil.
func (t *Tracker) GetError() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// IsDone reports whether no split point remains to be claimed and no error
// occurred.
func (t *Tracker) IsDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err == nil && t.doneLocked()
}

func (t *Tracker) doneLocked() bool {
	if t.stopped || t.rng.IsEmpty() {
		return true
	}
	// No split point can be claimed: it would have to lie after the last
	// claimed record (which is at least the last split point).
	return t.started && t.lastRecord >= t.rng.End-1
}

// IsBounded reports whether the range has a known end.
func (t *Tracker) IsBounded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng.IsBounded()
}

// GetRestriction returns the current range, an OffsetRange.
func (t *Tracker) GetRestriction() any { return t.Range() }

// Range returns the current range.
func (t *Tracker) Range() OffsetRange {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng
}

// lastLocked is the position splits must lie after.
func (t *Tracker) lastLocked() int64 {
	if !t.started {
		return t.rng.Start - 1
	}
	return t.lastRecord
}

// TrySplit splits off the residual at fraction f of the remaining work, as Beam
// Go's runners ask (rule 4 of the package doc). The tracker keeps the primary.
// It refuses, returning a nil residual and changing nothing, when the split
// position would not lie before the end, when the tracker is done or failed,
// when the end is unbounded and no EndEstimator was given (f > 0), or when
// f is NaN. Fractions below 0 count as 0, above 1 as 1.
// TrySplit(0) is a checkpoint.
func (t *Tracker) TrySplit(f float64) (primary, residual any, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	res, ok := t.trySplitLocked(f)
	if f > 0 {
		t.countLocked(ok)
	}
	if !ok {
		return t.rng, nil, nil
	}
	return t.rng, res, nil
}

func (t *Tracker) trySplitLocked(f float64) (OffsetRange, bool) {
	if t.err != nil || t.doneLocked() {
		return OffsetRange{}, false
	}
	if math.IsNaN(f) {
		return OffsetRange{}, false
	}
	if f < 0 {
		f = 0
	} else if f > 1 {
		f = 1
	}
	last := t.lastLocked()
	end := t.rng.End
	var pos int64
	switch {
	case f == 0:
		pos = last + 1
	case t.rng.IsBounded():
		pos = last + stepOf(f, end-last)
	case t.est == nil:
		return OffsetRange{}, false
	default:
		e := t.est.EstimateEnd()
		if e <= last {
			e = last + 1
		}
		pos = last + stepOf(f, e-last)
	}
	if pos >= end {
		return OffsetRange{}, false
	}
	res := OffsetRange{Start: pos, End: end}
	t.rng.End = pos
	return res, true
}

func stepOf(f float64, span int64) int64 {
	s := math.Ceil(f * float64(span))
	if s < 1 {
		return 1
	}
	if s >= float64(span) {
		return span
	}
	return int64(s)
}

func (t *Tracker) countLocked(ok bool) {
	if ok {
		t.splitsAccepted++
	} else {
		t.splitsRefused++
	}
}

// SplitAtFraction is Java's BoundedReader.splitAtFraction: it narrows the range
// to fraction f of itself, measured from the first claimed position (from
// Start before any claim), at start + floor(f*(End-start)), and returns the
// residual. It refuses (false, nothing changed) where TrySplitAtPosition does
// and when the end is unbounded.
func (t *Tracker) SplitAtFraction(f float64) (OffsetRange, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.rng.IsBounded() || math.IsNaN(f) {
		t.countLocked(false)
		return OffsetRange{}, false
	}
	s := t.rng.Start
	if t.started {
		s = t.first
	}
	pos := s + int64(math.Floor(f*float64(t.rng.End-s)))
	res, ok := t.splitAtLocked(pos)
	t.countLocked(ok)
	return res, ok
}

// TrySplitAtPosition is Java's RangeTracker.trySplitAtPosition: the range
// becomes [Start, pos) and [pos, End) is returned. It refuses (false, nothing
// changed) when the tracker is done or failed, when pos is not strictly after
// the last claimed record, or when pos lies outside (Start, End).
func (t *Tracker) TrySplitAtPosition(pos int64) (OffsetRange, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	res, ok := t.splitAtLocked(pos)
	t.countLocked(ok)
	return res, ok
}

func (t *Tracker) splitAtLocked(pos int64) (OffsetRange, bool) {
	if t.err != nil || t.doneLocked() {
		return OffsetRange{}, false
	}
	if pos <= t.lastLocked() || pos <= t.rng.Start || pos >= t.rng.End {
		return OffsetRange{}, false
	}
	res := OffsetRange{Start: pos, End: t.rng.End}
	t.rng.End = pos
	return res, true
}

// positionLocked is the position reached, refined inside the current block.
func (t *Tracker) positionLocked(end int64) float64 {
	pos := float64(t.lastSplit)
	if t.blockSize > 0 && t.blockRecords > 0 {
		c := t.blockConsumed
		if c > t.blockRecords {
			c = t.blockRecords
		}
		pos += float64(t.blockSize) * float64(c) / float64(t.blockRecords)
	}
	if pos > float64(end) {
		pos = float64(end)
	}
	return pos
}

// endLocked is the end used for progress: the estimate for an unbounded range
// (0, false when there is none).
func (t *Tracker) endLocked() (int64, bool) {
	if t.rng.IsBounded() {
		return t.rng.End, true
	}
	if t.est == nil {
		return 0, false
	}
	e := t.est.EstimateEnd()
	if t.started && e <= t.lastSplit {
		e = t.lastSplit + 1
	}
	return e, true
}

// FractionConsumed is Java's RangeTracker.getFractionConsumed: 0 before the
// first claim, 1 once done, otherwise the share of [first claimed, End) below
// the last claimed position, refined inside the block (SetBlock). It is 0 for
// an unbounded range without an estimator.
func (t *Tracker) FractionConsumed() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fractionLocked()
}

func (t *Tracker) fractionLocked() float64 {
	if t.err == nil && (t.stopped || (!t.started && t.rng.IsEmpty())) {
		return 1
	}
	if !t.started {
		return 0
	}
	end, ok := t.endLocked()
	if !ok {
		return 0
	}
	if end <= t.first {
		return 1
	}
	f := (t.positionLocked(end) - float64(t.first)) / float64(end-t.first)
	return math.Min(1, math.Max(0, f))
}

// GetProgress reports work done and remaining in offsets, measured from the
// first claimed position (rule 6). For an unbounded range without an
// estimator the remaining work is reported as 1.
func (t *Tracker) GetProgress() (done, remaining float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	end, ok := t.endLocked()
	s := t.rng.Start
	if t.started {
		s = t.first
	}
	switch {
	case t.stopped:
		if ok && end > s {
			return float64(end - s), 0
		}
		return 1, 0
	case !ok:
		if t.started {
			return t.positionLocked(math.MaxInt64) - float64(s), 1
		}
		return 0, 1
	case !t.started:
		return 0, float64(max(end-s, 0))
	}
	pos := t.positionLocked(end)
	return pos - float64(s), math.Max(0, float64(end)-pos)
}

// SplitPointsConsumed is the number of split points whose records were read
// entirely: those claimed, less the current one unless the tracker is done.
func (t *Tracker) SplitPointsConsumed() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.splitPoints == 0 {
		return t.splitPoints
	}
	return t.splitPoints - 1
}

// SplitPointsRemaining is the number of split points left to read, counting
// the current one: 0 when done, 1 when the current block is the last one the
// range can hold, and -1 when unknown.
func (t *Tracker) SplitPointsRemaining() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.stopped || t.rng.IsEmpty():
		return 0
	case t.started && t.lastRecord >= t.rng.End-1:
		return 1
	}
	return -1
}

// SplitStats returns how many splits (TrySplit with f > 0, SplitAtFraction,
// TrySplitAtPosition) the tracker accepted and refused. Checkpoints are not
// counted. Readers add these to their Beam metrics when they finish.
func (t *Tracker) SplitStats() (accepted, refused int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.splitsAccepted, t.splitsRefused
}
