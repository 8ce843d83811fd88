package sdf

import (
	"errors"
	"fmt"
	"sync"
)

// Errors a tracker holds (GetError) when a reader broke the claim rules. They
// are wrapped: test them with errors.Is.
var (
	// ErrClaimAfterStop is a claim after the tracker had stopped: after a
	// refused claim, MarkDone, Fail or an error.
	ErrClaimAfterStop = errors.New("claim after the tracker had stopped")
	// ErrClaimOrder is a claim out of order: a first record that is not a
	// split point, a split point before the start or not after the last
	// claimed record, or a record before the last claimed one.
	ErrClaimOrder = errors.New("claim out of order")
)

// claimError is a contract violation: its message says where and what, and
// it wraps one of the errors above.
type claimError struct {
	msg  string
	kind error
}

func (e *claimError) Error() string { return e.msg }
func (e *claimError) Unwrap() error { return e.kind }

// Cutter cuts a restriction at a position: the primary holds the positions
// before pos, the residual those from pos on. A Core calls it under its lock,
// so it must return at once, from memory.
type Cutter[R any] func(rest R, pos int64) (primary, residual R)

// Core is the state machine that every tracker in sdfio is built on,
// whatever its restriction type R: an offset range (Tracker), a stream and a
// row offset (bigqueryio), a set of watched files. It holds the restriction,
// the positions it spans and what was claimed in it, and implements the
// rules every tracker shares:
//
//   - the state: started (a split point was claimed), stopped (a claim was
//     refused at the end, or MarkDone), failed (an error, kept in Err), done
//     (stopped, or no split point can be claimed any more, and no error);
//   - the claim rules of the package doc (rules 2 and 3): the first record
//     claimed is a split point; split points lie at or after Start, strictly
//     after every record claimed before them, and before End, or the claim
//     is refused and the tracker stops; records that are not split points
//     follow the last claimed record; a claim after the tracker stopped is
//     an error (ErrClaimAfterStop), as is a claim out of order
//     (ErrClaimOrder);
//   - the checkpoint TrySplit(0) (Checkpoint) and splits at a position
//     (SplitAt), cut by the restriction type's Cutter;
//   - splits that need I/O, in two phases (SplitWithIO, in split_io.go);
//   - split statistics, a String for errors and logs.
//
// Positions are int64: offsets, row numbers, indexes into a list. Start is
// the first position of the restriction and never moves; End is the first
// position past it, Unbounded when not known, and only moves down, by
// splits. Every int64 is a valid position: nothing here computes Start-1.
//
// A tracker embeds a Core as a named field (so that its methods are not the
// tracker's), keeps any state of its own under the Core's lock (Lock,
// Unlock), and calls the methods whose names end in Locked with it held. The
// claim path (ClaimLocked) makes no interface or function-value call and does
// not allocate. The zero value is not usable; call Init.
type Core[R any] struct {
	mu   sync.Mutex
	rest R
	cut  Cutter[R]
	kind string // names the tracker in errors and String

	start, end int64

	started     bool
	stopped     bool
	fast        bool // started, not stopped, no split with I/O in flight: ClaimLocked's fast path
	err         error
	first       int64 // first claimed split point
	lastSplit   int64 // last claimed split point
	lastRecord  int64 // last claimed record
	splitPoints int64 // split points claimed

	// epoch counts the changes of the restriction: splits, checkpoints and
	// commits of splits with I/O.
	epoch uint64

	accepted, refused int64

	// io is the split with I/O in flight, nil when none (split_io.go).
	io *ioFlight
	// prep is the split prepared in the background, nil when none.
	prep *prepared[R]
	// bg is the last split whose I/O went on in the background, until
	// WaitSplitIO saw it settle.
	bg *ioFlight
}

// Init sets the core to track rest, whose positions are [start, end); kind
// names the tracker in errors and String ("sdf.Tracker"), cut cuts rest at a
// position (it may be nil when the tracker never splits by position). Init
// must be called before any other method, and not concurrently with them.
func (c *Core[R]) Init(kind string, rest R, start, end int64, cut Cutter[R]) {
	c.rest, c.kind, c.cut = rest, kind, cut
	c.start, c.end = start, end
	c.started, c.stopped, c.fast, c.err = false, false, false, nil
	c.first, c.lastSplit, c.lastRecord, c.splitPoints = 0, 0, 0, 0
	c.epoch, c.accepted, c.refused, c.io, c.prep, c.bg = 0, 0, 0, nil, nil, nil
}

// Lock locks the core: every Locked method needs it held, and the owning
// tracker keeps its own state under it.
func (c *Core[R]) Lock() { c.mu.Lock() }

// Unlock unlocks the core.
func (c *Core[R]) Unlock() { c.mu.Unlock() }

// TryClaim claims the record at pos under the lock; see ClaimLocked.
func (c *Core[R]) TryClaim(pos int64, splitPoint bool) bool {
	c.mu.Lock()
	ok := c.ClaimLocked(pos, splitPoint)
	c.mu.Unlock()
	return ok
}

// ClaimLocked claims the record at pos, a split point or not, under the
// claim rules (see Core). It returns false when the reader must stop: the
// split point lies at or past End (the tracker is then stopped, without
// error), or the claim broke the rules (the tracker then holds an error).
// While a split with I/O that holds claims is in flight (SplitIO.HoldClaims),
// it first waits, with the lock released, until that split committed or was
// refused, at most the split's timeout.
func (c *Core[R]) ClaimLocked(pos int64, splitPoint bool) bool {
	if splitPoint {
		return c.ClaimSplitPointLocked(pos)
	}
	return c.ClaimRecordLocked(pos)
}

// ClaimSplitPointLocked is ClaimLocked of a split point.
func (c *Core[R]) ClaimSplitPointLocked(pos int64) bool {
	return c.fastSplitPointLocked(pos) || c.claimSlowLocked(pos, true)
}

// ClaimRecordLocked is ClaimLocked of a record that is not a split point.
func (c *Core[R]) ClaimRecordLocked(pos int64) bool {
	return c.fastRecordLocked(pos) || c.claimSlowLocked(pos, false)
}

// fastSplitPointLocked claims the split point at pos if it is the common
// case, the next split point inside the range, and reports whether it did;
// false means "ask claimSlowLocked", not a refusal. It is small enough to
// inline, so that Tracker's claim is one call-free critical section.
func (c *Core[R]) fastSplitPointLocked(pos int64) bool {
	if c.fast && pos > c.lastRecord && pos < c.end {
		c.lastSplit, c.lastRecord = pos, pos
		c.splitPoints++
		return true
	}
	return false
}

// fastRecordLocked is fastSplitPointLocked of a record of the claimed block.
func (c *Core[R]) fastRecordLocked(pos int64) bool {
	if c.fast && pos >= c.lastRecord {
		c.lastRecord = pos
		return true
	}
	return false
}

// setFast keeps c.fast up to date after started, stopped or io changed.
func (c *Core[R]) setFast() { c.fast = c.started && !c.stopped && c.io == nil }

// claimSlowLocked is ClaimLocked for every other case: the first claim, the
// end, a broken rule, a split in flight.
func (c *Core[R]) claimSlowLocked(pos int64, splitPoint bool) bool {
	if c.io != nil && c.io.hold {
		c.waitHoldLocked()
	}
	if c.stopped {
		if c.err == nil {
			c.err = &claimError{fmt.Sprintf("sdf: claim of position %d after the tracker of %v had stopped", pos, c.rest), ErrClaimAfterStop}
		}
		return false
	}
	if !splitPoint {
		if !c.started {
			return c.failOrder(fmt.Sprintf("sdf: the first record claimed in %v (at %d) is not a split point", c.rest, pos))
		}
		if pos < c.lastRecord {
			return c.failOrder(fmt.Sprintf("sdf: record at %d claimed after the record at %d in %v", pos, c.lastRecord, c.rest))
		}
		c.lastRecord = pos
		return true
	}
	if pos < c.start {
		return c.failOrder(fmt.Sprintf("sdf: split point %d claimed before the start of %v", pos, c.rest))
	}
	if c.started && pos <= c.lastRecord {
		return c.failOrder(fmt.Sprintf("sdf: split point %d claimed after the record at %d (split point %d) in %v: split points must strictly increase", pos, c.lastRecord, c.lastSplit, c.rest))
	}
	if pos >= c.end {
		c.stopped, c.fast = true, false
		return false
	}
	if !c.started {
		c.started = true
		c.first = pos
		c.setFast()
	}
	c.lastSplit, c.lastRecord = pos, pos
	c.splitPoints++
	return true
}

func (c *Core[R]) failOrder(msg string) bool {
	return c.FailLocked(&claimError{msg, ErrClaimOrder})
}

// FailLocked stops the tracker with err; the first error is kept. It
// returns false, for claims to return.
func (c *Core[R]) FailLocked(err error) bool {
	if c.err == nil {
		c.err = err
	}
	c.stopped, c.fast = true, false
	return false
}

// Fail is FailLocked under the lock.
func (c *Core[R]) Fail(err error) {
	c.mu.Lock()
	c.FailLocked(err)
	c.mu.Unlock()
}

// StopLocked records that the reader has no more records (MarkDone): the
// rest of the restriction is claimed, empty, and the tracker is done.
func (c *Core[R]) StopLocked() { c.stopped, c.fast = true, false }

// MarkDone is StopLocked under the lock.
func (c *Core[R]) MarkDone() {
	c.mu.Lock()
	c.StopLocked()
	c.mu.Unlock()
}

// ErrLocked is the error that stopped the tracker, or nil.
func (c *Core[R]) ErrLocked() error { return c.err }

// GetError is ErrLocked under the lock.
func (c *Core[R]) GetError() error { return locked(c, (*Core[R]).ErrLocked) }

// DoneLocked reports whether no split point remains to be claimed: the
// tracker stopped, the restriction is empty, or a split point would have to
// lie after the last claimed record and at or past End. It does not look at
// the error; IsDoneLocked does.
func (c *Core[R]) DoneLocked() bool {
	if c.stopped || c.end <= c.start {
		return true
	}
	return c.started && !before(c.lastRecord, c.end)
}

// IsDoneLocked is Beam's IsDone: done and no error.
func (c *Core[R]) IsDoneLocked() bool { return c.err == nil && c.DoneLocked() }

// IsDone is IsDoneLocked under the lock.
func (c *Core[R]) IsDone() bool { return locked(c, (*Core[R]).IsDoneLocked) }

// before reports whether a+1 < b, without overflow: a position lies strictly
// between a and b.
func before(a, b int64) bool { return a < b && uint64(b)-uint64(a) > 1 }

// RestrictionLocked is the current restriction.
func (c *Core[R]) RestrictionLocked() R { return c.rest }

// Restriction is RestrictionLocked under the lock.
func (c *Core[R]) Restriction() R { return locked(c, (*Core[R]).RestrictionLocked) }

// BoundsLocked is the current [Start, End) of positions.
func (c *Core[R]) BoundsLocked() (start, end int64) { return c.start, c.end }

// SetRestrictionLocked replaces the restriction by rest, whose positions end
// at end, for a split the owner decided itself (a checkpoint of a restriction
// no Cutter describes, say). end must not lie after the current End, nor at
// or before the last claimed record unless the tracker is to be done; the
// epoch advances.
func (c *Core[R]) SetRestrictionLocked(rest R, end int64) {
	c.rest, c.end = rest, end
	c.epoch++
}

// Claimed describes what was claimed: whether a split point was, the first
// and last claimed split points, the last claimed record, and the number of
// split points claimed. The positions are 0 before any claim.
type Claimed struct {
	Started                      bool
	First, LastSplit, LastRecord int64
	SplitPoints                  int64
}

// ClaimedLocked describes what was claimed so far.
func (c *Core[R]) ClaimedLocked() Claimed {
	return Claimed{c.started, c.first, c.lastSplit, c.lastRecord, c.splitPoints}
}

// StoppedLocked reports whether the tracker stopped (a refused claim,
// MarkDone, or an error).
func (c *Core[R]) StoppedLocked() bool { return c.stopped }

// NextLocked is the first position a split may lie at: Start before any
// claim, one past the last claimed record after. ok is false when no
// position is left (the last claimed record is math.MaxInt64).
func (c *Core[R]) NextLocked() (next int64, ok bool) {
	if !c.started {
		return c.start, true
	}
	if c.lastRecord == Unbounded {
		return 0, false
	}
	return c.lastRecord + 1, true
}

// EpochLocked counts the changes of the restriction so far (splits,
// checkpoints, commits): a reader that remembers it sees when its
// restriction was replaced.
func (c *Core[R]) EpochLocked() uint64 { return c.epoch }

// CutLocked splits at pos: the restriction becomes the Cutter's primary,
// with End pos, and the residual is returned. pos must lie at or after
// NextLocked (a primary may be empty) and before End; otherwise, or when
// the tracker is done or failed, it refuses (false, nothing changed). It does
// not count the split; call CountLocked.
func (c *Core[R]) CutLocked(pos int64) (residual R, ok bool) {
	var zero R
	if c.err != nil || c.DoneLocked() {
		return zero, false
	}
	if next, ok := c.NextLocked(); !ok || pos < next || pos >= c.end {
		return zero, false
	}
	return c.cutLocked(pos), true
}

// SplitAtLocked splits at pos, as Java's RangeTracker.trySplitAtPosition:
// CutLocked, refused also when pos is not strictly after Start (the primary
// would be empty).
func (c *Core[R]) SplitAtLocked(pos int64) (residual R, ok bool) {
	if pos <= c.start {
		var zero R
		return zero, false
	}
	return c.CutLocked(pos)
}

// CheckpointLocked is the checkpoint TrySplit(0): everything not claimed yet
// becomes the residual, from NextLocked on, and the tracker is done. It
// refuses (false, nothing changed) when the tracker is done or failed. It
// does not count the split.
func (c *Core[R]) CheckpointLocked() (residual R, ok bool) {
	next, ok := c.NextLocked()
	if !ok {
		var zero R
		return zero, false
	}
	return c.CutLocked(next)
}

func (c *Core[R]) cutLocked(pos int64) R {
	p, r := c.cut(c.rest, pos)
	c.rest, c.end = p, pos
	c.epoch++
	return r
}

// CountLocked counts a split as accepted or refused, for SplitStats.
func (c *Core[R]) CountLocked(accepted bool) {
	if accepted {
		c.accepted++
	} else {
		c.refused++
	}
}

// SplitStats returns how many splits were counted as accepted and refused.
func (c *Core[R]) SplitStats() (accepted, refused int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted, c.refused
}

// StringLocked describes the tracker's state, for errors and logs.
func (c *Core[R]) StringLocked() string {
	claimed := "nothing claimed"
	if c.started {
		claimed = fmt.Sprintf("split points %d..%d (%d), last record %d", c.first, c.lastSplit, c.splitPoints, c.lastRecord)
	}
	state := "running"
	switch {
	case c.err != nil:
		state = fmt.Sprintf("failed: %v", c.err)
	case c.stopped:
		state = "stopped"
	case c.DoneLocked():
		state = "done"
	}
	io := ""
	if c.io != nil {
		io = ", split with I/O in flight"
	}
	return fmt.Sprintf("%s{%v, %s, %s, splits %d accepted %d refused%s}", c.kind, c.rest, claimed, state, c.accepted, c.refused, io)
}

// String is StringLocked under the lock.
func (c *Core[R]) String() string { return locked(c, (*Core[R]).StringLocked) }

// locked returns get(c) under the lock: the accessors that are their
// Locked counterpart under the lock (TryClaim, on every record, locks
// without it).
func locked[R, T any](c *Core[R], get func(*Core[R]) T) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return get(c)
}
