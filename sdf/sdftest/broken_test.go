package sdftest_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// The trackers below break the split contract on purpose; the harness must
// report each of them.

// dupTracker hands out a residual that starts at the last claimed split
// point, so the record there is read by both the primary and the residual.
type dupTracker struct {
	*sdf.Tracker
	mu      sync.Mutex
	last    int64
	claimed bool
}

func (d *dupTracker) TryClaim(pos any) bool {
	ok := d.Tracker.TryClaim(pos)
	if p, split := pos.(int64); ok && split {
		d.mu.Lock()
		d.last, d.claimed = p, true
		d.mu.Unlock()
	}
	return ok
}

func (d *dupTracker) TrySplit(f float64) (any, any, error) {
	p, r, err := d.Tracker.TrySplit(f)
	if r == nil || err != nil {
		return p, r, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.claimed {
		rr := r.(sdf.OffsetRange)
		rr.Start = d.last
		r = rr
	}
	return p, r, nil
}

// refusingTracker refuses every split.
type refusingTracker struct{ *sdf.Tracker }

func (t refusingTracker) TrySplit(float64) (any, any, error) { return t.Range(), nil, nil }

// losingTracker's residual starts one past the split position: a record at
// the split position belongs to neither half.
type losingTracker struct{ *sdf.Tracker }

func (t losingTracker) TrySplit(f float64) (any, any, error) {
	p, r, err := t.Tracker.TrySplit(f)
	if r != nil {
		rr := r.(sdf.OffsetRange)
		rr.Start++
		r = rr
	}
	return p, r, err
}

// stalePrimaryTracker narrows its range but returns the range from before the
// split as the primary.
type stalePrimaryTracker struct{ *sdf.Tracker }

func (t stalePrimaryTracker) TrySplit(f float64) (any, any, error) {
	before := t.Range()
	_, r, err := t.Tracker.TrySplit(f)
	return before, r, err
}

// notDoneTracker never reports done once a split succeeded.
type notDoneTracker struct {
	*sdf.Tracker
	mu    sync.Mutex
	split bool
}

func (t *notDoneTracker) TrySplit(f float64) (any, any, error) {
	p, r, err := t.Tracker.TrySplit(f)
	t.mu.Lock()
	t.split = t.split || r != nil
	t.mu.Unlock()
	return p, r, err
}

func (t *notDoneTracker) IsDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.split && t.Tracker.IsDone()
}

// racyTracker locks every field access, so the race detector is content,
// but TrySplit reads the last claimed position and moves the end in two
// separate critical sections: a claim between them lands in both halves. Only
// a split that races a claim can show it. To make the window wide enough to
// hit in a few trials, TrySplit waits between the two for the reader's next
// claim, up to 2 ms (longer than the harness lets a reader linger; while the
// harness holds the reader, in the sequential checks, it waits in vain).
type racyTracker struct {
	mu      sync.Mutex
	rng     sdf.OffsetRange
	last    int64
	stopped bool
	claims  int64
}

func newRacyTracker(r sdf.OffsetRange) *racyTracker {
	return &racyTracker{rng: r, last: r.Start - 1}
}

func (t *racyTracker) TryClaim(pos any) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.claims++
	p := pos.(int64)
	if t.stopped {
		return false
	}
	if p >= t.rng.End {
		t.stopped = true
		return false
	}
	t.last = p
	return true
}

func (t *racyTracker) TrySplit(f float64) (any, any, error) {
	t.mu.Lock()
	last, end, stopped, claims := t.last, t.rng.End, t.stopped, t.claims
	t.mu.Unlock()
	if stopped {
		return sdf.OffsetRange{Start: t.rng.Start, End: end}, nil, nil
	}
	for deadline := time.Now().Add(2 * time.Millisecond); time.Now().Before(deadline); runtime.Gosched() {
		t.mu.Lock()
		moved := t.claims != claims
		t.mu.Unlock()
		if moved {
			break
		}
	}
	pos := last + int64(math.Max(1, math.Ceil(f*float64(end-last))))
	if pos >= end {
		return sdf.OffsetRange{Start: t.rng.Start, End: end}, nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rng.End = pos
	return t.rng, sdf.OffsetRange{Start: pos, End: end}, nil
}

func (t *racyTracker) MarkDone() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

func (t *racyTracker) GetError() error { return nil }

func (t *racyTracker) GetProgress() (float64, float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.stopped:
		return float64(max(t.rng.End-t.rng.Start, 1)), 0
	case t.rng.End <= t.rng.Start:
		return 0, 0
	case t.last+1 >= t.rng.End:
		return float64(t.rng.End - t.rng.Start), 0
	}
	return float64(t.last + 1 - t.rng.Start), float64(t.rng.End - t.last - 1)
}
func (t *racyTracker) IsDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopped || t.last+1 >= t.rng.End
}
func (t *racyTracker) GetRestriction() any {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng
}

// wantReported runs the exhaustive check and the one split at f after n
// records, and requires each to report an error containing want.
func wantReported(t *testing.T, s sdftest.Subject[string], n int, f float64, want string) {
	t.Helper()
	ctx := context.Background()
	rep, err := sdftest.CheckSplitAtFractionExhaustive(ctx, s)
	if err == nil {
		t.Fatalf("exhaustive check passed (%v), want an error containing %q", rep, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("exhaustive check: error %q does not contain %q", err, want)
	}
	t.Logf("exhaustive check reported: %v", err)
	if n < 0 {
		return
	}
	_, err = sdftest.CheckSplitAtFraction(ctx, s, n, f, sdftest.ConsistentIfSucceeds)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("split at %v after %d records: error %v, want one containing %q", f, n, err, want)
	}
}

func TestReportsResidualOverlappingClaimed(t *testing.T) {
	t.Parallel()
	d := gappy(0, 20)
	s := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return &dupTracker{Tracker: t} })
	wantReported(t, s, 5, 0.5, "do not add up")
}

func TestReportsRefusingEverySplit(t *testing.T) {
	t.Parallel()
	d := gappy(0, 20)
	s := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return refusingTracker{t} })
	wantReported(t, s, -1, 0, "vacuous")
	if _, err := sdftest.CheckSplitAtFraction(context.Background(), s, 5, 0.5, sdftest.MustSucceedAndBeConsistent); err == nil {
		t.Error("MustSucceedAndBeConsistent with a tracker that refuses every split: no error")
	}
}

func TestReportsLostBoundaryRecord(t *testing.T) {
	t.Parallel()
	// Offsets 0 1 3 6 7 9 12 13 15 18 19 21 24 ..., end 39. After 5 records
	// (last 7) a split at 0.53 lands on 7 + ceil(0.53*32) = 24.
	d := gappy(0, 20)
	s := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return losingTracker{t} })
	wantReported(t, s, 5, 0.53, "do not add up")
	_, err := sdftest.CheckSplitAtFraction(context.Background(), s, 5, 0.53, sdftest.ConsistentIfSucceeds)
	if err == nil || !strings.Contains(err.Error(), "primary [0, 24) and residual [25, 39)") || !strings.Contains(err.Error(), "the unsplit read[12] = 24.0, primary+residual[12] = 25.0") {
		t.Errorf("the lost record is not named: %v", err)
	}
}

func TestReportsStalePrimary(t *testing.T) {
	t.Parallel()
	d := blocky(0, 10)
	s := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return stalePrimaryTracker{t} })
	wantReported(t, s, 3, 0.5, "did not read what its primary")
}

func TestReportsNotDone(t *testing.T) {
	t.Parallel()
	d := gappy(0, 10)
	s := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return &notDoneTracker{Tracker: t} })
	wantReported(t, s, 2, 0.5, "IsDone")
	_, err := sdftest.CheckSplitAtFraction(context.Background(), s, 2, 0.5, sdftest.ConsistentIfSucceeds)
	if err == nil || !strings.Contains(err.Error(), "the tracker is not done") {
		t.Errorf("split at 0.5 after 2 records: err = %v", err)
	}
}

// A reader that forgets to mark the tracker done when its input ends before
// its range does leaves the tracker not done; Beam would fail the bundle.
func TestReportsReaderNotMarkingDone(t *testing.T) {
	d := gappy(0, 10)
	s := d.subject(0, d.end+5, nil)
	s.Read = func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
		start := rt.GetRestriction().(sdf.OffsetRange).Start
		for _, b := range d.blocks {
			if b.pos >= start {
				if !rt.TryClaim(b.pos) {
					return nil
				}
				emit(fmt.Sprintf("%d.0", b.pos))
			}
		}
		return nil // no MarkDone
	}
	if _, err := sdftest.ReadAll(context.Background(), s); err == nil || !strings.Contains(err.Error(), "not done") {
		t.Errorf("ReadAll: err = %v, want not done", err)
	}
}

// TestReportsRaceOnlyBug: the racy tracker passes every sequential split,
// since the reader waits while it splits; only the concurrent stage catches
// it (its errors say "racing the reader", and the exhaustive check races
// only after the whole sequential stage passed).
func TestReportsRaceOnlyBug(t *testing.T) {
	t.Parallel()
	d := gappy(0, 8)
	s := d.subject(0, d.end, nil)
	s.NewTracker = func(r any) beamsdf.RTracker { return newRacyTracker(r.(sdf.OffsetRange)) }
	wantReported(t, s, -1, 0, "racing the reader")
}

// Errors and panics of Read, and splits that fail, are reported with the
// goroutines of the harness gone afterwards.
func TestReportsFailingReadsWithoutLeaks(t *testing.T) {
	ctx := context.Background()
	before := runtime.NumGoroutine()
	d := gappy(0, 10)
	errBoom := errors.New("boom")

	failAfter := func(k int, panics bool) sdftest.Subject[string] {
		s := d.subject(0, d.end, nil)
		var calls atomic.Int32
		s.Read = func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
			start := rt.GetRestriction().(sdf.OffsetRange).Start
			first := calls.Add(1) == 1 // the whole read the checks start with
			emitted := 0
			for _, b := range d.blocks {
				if b.pos < start {
					continue
				}
				if emitted == k && !first {
					if panics {
						panic("kaboom")
					}
					return errBoom
				}
				if !rt.TryClaim(b.pos) {
					return nil
				}
				emit(fmt.Sprintf("%d.0", b.pos))
				emitted++
			}
			markDone(rt)
			return nil
		}
		return s
	}
	for _, c := range []struct {
		name   string
		panics bool
		want   string
	}{
		{"error", false, "boom"},
		{"panic", true, "kaboom"},
	} {
		_, err := sdftest.CheckSplitAtFraction(ctx, failAfter(6, c.panics), 4, 0.9, sdftest.ConsistentIfSucceeds)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: split check err = %v, want %q", c.name, err, c.want)
		}
		_, err = sdftest.CheckSplitAtFractionConcurrent(ctx, failAfter(6, c.panics), 4, 0.9, 5)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: concurrent check err = %v, want %q", c.name, err, c.want)
		}
	}

	// A reader that stops early never reaches the split.
	short := d.subject(0, d.end, nil)
	var shortCalls atomic.Int32
	short.Read = func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
		if shortCalls.Add(1) == 1 {
			return d.read(ctx, rt, emit)
		}
		rt.TryClaim(int64(0))
		emit("0.0")
		markDone(rt)
		return nil
	}
	if _, err := sdftest.CheckSplitAtFraction(ctx, short, 3, 0.5, sdftest.ConsistentIfSucceeds); err == nil || !strings.Contains(err.Error(), "before reaching record 3") {
		t.Errorf("short reader: err = %v", err)
	}

	// A split that returns an error or panics.
	for name, split := range map[string]func(beamsdf.RTracker, float64) (any, any, error){
		"error": func(beamsdf.RTracker, float64) (any, any, error) { return nil, nil, errBoom },
		"panic": func(beamsdf.RTracker, float64) (any, any, error) { panic("kaboom") },
	} {
		s := d.subject(0, d.end, nil)
		s.Split = split
		if _, err := sdftest.CheckSplitAtFraction(ctx, s, 3, 0.5, sdftest.ConsistentIfSucceeds); err == nil {
			t.Errorf("split %s: no error", name)
		}
		if _, err := sdftest.CheckSplitAtFractionConcurrent(ctx, s, 3, 0.5, 3); err == nil {
			t.Errorf("concurrent split %s: no error", name)
		}
	}

	// The broken trackers, once more, for the goroutine count.
	dup := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return &dupTracker{Tracker: t} })
	if _, err := sdftest.CheckSplitAtFractionExhaustive(ctx, dup); err == nil {
		t.Error("duplicating tracker: no error")
	}

	var after int
	for range 100 {
		if after = runtime.NumGoroutine(); after <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Errorf("%d goroutines before, %d after:\n%s", before, after, buf[:runtime.Stack(buf, true)])
}

// oldDoneTracker computes IsDone as tracker.go did before it was fixed
// during this harness's writing: done when stopped, empty, or when the last
// split point plus one reaches the end. After records that are not split
// points but lie past the last split point, a checkpoint (End = last record
// + 1) left it not done, and Beam Go's runtime, which checks IsDone right
// after a self-checkpoint, would fail the bundle.
type oldDoneTracker struct {
	*sdf.Tracker
	mu        sync.Mutex
	started   bool
	stopped   bool
	lastSplit int64
}

func (t *oldDoneTracker) TryClaimRecord(pos int64, splitPoint bool) bool {
	ok := t.Tracker.TryClaimRecord(pos, splitPoint)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ok {
		t.stopped = true
	} else if splitPoint {
		t.started, t.lastSplit = true, pos
	}
	return ok
}

func (t *oldDoneTracker) MarkDone() {
	t.Tracker.MarkDone()
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

func (t *oldDoneTracker) IsDone() bool {
	r := t.Range()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopped || r.IsEmpty() || (t.started && t.lastSplit+1 >= r.End)
}

// ownOffsets is an input whose records carry their own increasing offsets
// (0, 2, 4, ...) and only every third record is a split point, as in a text
// format whose records can only be found from a sync mark.
func ownOffsets(wrap func(*sdf.Tracker) claimer, split func(beamsdf.RTracker, float64) (any, any, error)) sdftest.Subject[int64] {
	type rec struct {
		pos   int64
		split bool
	}
	var recs []rec
	for i := range 30 {
		recs = append(recs, rec{int64(2 * i), i%3 == 0})
	}
	return sdftest.Subject[int64]{
		Restriction: sdf.OffsetRange{Start: 0, End: 60},
		NewTracker: func(r any) beamsdf.RTracker {
			t := sdf.NewTracker(r.(sdf.OffsetRange))
			if wrap != nil {
				return wrap(t)
			}
			return t
		},
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(int64)) error {
			tr := rt.(claimer)
			start := rt.GetRestriction().(sdf.OffsetRange).Start
			i := 0
			for i < len(recs) && !(recs[i].split && recs[i].pos >= start) {
				i++
			}
			for ; i < len(recs); i++ {
				if !tr.TryClaimRecord(recs[i].pos, recs[i].split) {
					return rt.GetError()
				}
				emit(recs[i].pos)
			}
			tr.MarkDone()
			return nil
		},
		Split: split,
	}
}

// claimer is the part of a tracker ownOffsets' reader uses.
type claimer interface {
	beamsdf.RTracker
	TryClaimRecord(pos int64, splitPoint bool) bool
	MarkDone()
}

// TestOwnOffsets: records that are not split points at offsets of their own
// pass everything, checkpoints included.
func TestOwnOffsets(t *testing.T) {
	t.Parallel()
	checkReport(t, sdftest.AssertSplitAtFractionExhaustive(t, ownOffsets(nil, nil)), 30)
	// A checkpoint after the split point at 0 and the record at 2.
	res := sdftest.AssertSplitAtFraction(t, ownOffsets(nil, nil), 2, 0, sdftest.MustSucceedAndBeConsistent)
	if res.Primary != (sdf.OffsetRange{Start: 0, End: 3}) || res.Residual != (sdf.OffsetRange{Start: 3, End: 60}) {
		t.Errorf("checkpoint after 2 records: primary %v residual %v, want [0, 3) [3, 60)", res.Primary, res.Residual)
	}
}

// TestReportsCheckpointNotDone: the harness reports a tracker that is not
// done right after a checkpoint, the bug tracker.go had.
func TestReportsCheckpointNotDone(t *testing.T) {
	t.Parallel()
	wrap := func(t *sdf.Tracker) claimer { return &oldDoneTracker{Tracker: t} }
	wantReported(t, intToString(ownOffsets(wrap, nil)), 2, 0, "TrySplit(0) is a checkpoint")
	// A checkpoint right after a split point is fine.
	sdftest.AssertSplitAtFraction(t, ownOffsets(wrap, nil), 1, 0, sdftest.MustSucceedAndBeConsistent)
	// With a Split of its own, the harness does not take fraction 0 for a
	// checkpoint, and the rest of the contract holds.
	trySplit := func(rt beamsdf.RTracker, f float64) (any, any, error) { return rt.TrySplit(f) }
	sdftest.AssertSplitAtFractionExhaustive(t, ownOffsets(wrap, trySplit))
}

// intToString adapts a Subject[int64] for wantReported.
func intToString(s sdftest.Subject[int64]) sdftest.Subject[string] {
	return sdftest.Subject[string]{
		Restriction: s.Restriction,
		NewTracker:  s.NewTracker,
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
			return s.Read(ctx, rt, func(v int64) { emit(fmt.Sprint(v)) })
		},
		Split: s.Split,
	}
}

// The trackers below break the progress rules (6-7); the progress checks
// must report each of them.

// holdingTracker's GetProgress takes a lock that its reader holds while it
// hands a record on (inside emit): GetProgress blocks while Read waits.
type holdingTracker struct {
	*sdf.Tracker
	mu sync.Mutex
}

func (t *holdingTracker) GetProgress() (float64, float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.Tracker.GetProgress()
}

// skewedTracker reports what progress returns instead of its tracker's.
type skewedTracker struct {
	*sdf.Tracker
	progress func(tr *sdf.Tracker, done, remaining float64) (float64, float64)
}

func (t skewedTracker) GetProgress() (float64, float64) {
	d, r := t.Tracker.GetProgress()
	return t.progress(t.Tracker, d, r)
}

func skewed(d blockData, f func(tr *sdf.Tracker, done, remaining float64) (float64, float64)) sdftest.Subject[string] {
	return d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return skewedTracker{t, f} })
}

func TestReportsProgressBlockingWhileReadWaits(t *testing.T) {
	t.Parallel()
	d := gappy(0, 10)
	s := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return &holdingTracker{Tracker: t} })
	s.Read = func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
		h := rt.(*holdingTracker)
		return d.read(ctx, rt, func(v string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			emit(v)
		})
	}
	s.ProgressTimeout = 50 * time.Millisecond
	wantReported(t, s, -1, 0, "GetProgress did not return within 50ms while Read waits in emit after 1 records")
}

func TestReportsProgressNotZeroAtStart(t *testing.T) {
	t.Parallel()
	s := skewed(gappy(0, 10), func(_ *sdf.Tracker, d, r float64) (float64, float64) { return d + 1, r })
	wantReported(t, s, 3, 0.5, "before the first claim, want done 0")
}

func TestReportsProgressGoingBack(t *testing.T) {
	t.Parallel()
	// Done drops by half once the fifth split point was claimed.
	s := skewed(gappy(0, 10), func(tr *sdf.Tracker, d, r float64) (float64, float64) {
		if tr.SplitPointsConsumed() >= 4 {
			return d / 2, r
		}
		return d, r
	})
	wantReported(t, s, 3, 0.5, "went down")
}

func TestReportsProgressNotOneAtEnd(t *testing.T) {
	t.Parallel()
	s := skewed(gappy(0, 10), func(_ *sdf.Tracker, d, r float64) (float64, float64) { return d, r + 1 })
	wantReported(t, s, 3, 0.5, "once the tracker is done, want remaining 0")
}

func TestReportsProgressNotFinite(t *testing.T) {
	t.Parallel()
	nan := skewed(gappy(0, 10), func(_ *sdf.Tracker, d, r float64) (float64, float64) { return d / (r - r), r })
	wantReported(t, nan, 3, 0.5, "not finite")
	neg := skewed(gappy(0, 10), func(_ *sdf.Tracker, d, r float64) (float64, float64) { return d, r - 10 })
	wantReported(t, neg, 3, 0.5, "negative work")
}

// A tracker reporting offsets for a restriction whose size is in bytes (4
// per offset) is reported; SetProgressScale makes them agree.
func TestReportsProgressInAnotherUnit(t *testing.T) {
	t.Parallel()
	d := blocky(0, 10)
	size := func(r any) float64 { return 4 * float64(r.(sdf.OffsetRange).Size()) }
	s := d.subject(0, d.end, nil)
	s.Size = size
	wantReported(t, s, 3, 0.5, "progress and size must be in the same unit")

	s.NewTracker = func(r any) beamsdf.RTracker {
		tr := sdf.NewTracker(r.(sdf.OffsetRange))
		tr.SetProgressScale(4)
		return tr
	}
	checkReport(t, sdftest.AssertSplitAtFractionExhaustive(t, s), len(d.records()))
}
