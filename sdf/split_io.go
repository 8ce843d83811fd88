package sdf

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// DefaultSplitTimeout bounds the I/O of a split (SplitIO.Timeout) when none
// is given. Runners call TrySplit from the goroutine that also reports
// progress and answers the runner; a split that cannot be had in this time is
// better refused and tried again later.
const DefaultSplitTimeout = 5 * time.Second

// Snapshot is a tracker's state at one moment, taken under its lock: what a
// split that needs I/O is decided from (SplitPlan).
type Snapshot[R any] struct {
	// Restriction is the tracker's restriction.
	Restriction R
	// Start and End are its positions, End Unbounded when not known.
	Start, End int64
	// Claimed says what the reader claimed so far.
	Claimed Claimed
	// Next is the first position a split may lie at: Start before any
	// claim, one past the last claimed record after.
	Next int64
	// Epoch counts the changes of the restriction so far; the commit
	// refuses a split when it moved.
	Epoch uint64
}

// IOSplit is what the I/O of a split produced, for the commit.
type IOSplit[R any] struct {
	// Primary replaces the tracker's restriction when the split commits;
	// Residual is what it returns to the runner.
	Primary, Residual R
	// Pos is the split position: the commit is refused when the reader has
	// claimed any record at or after Pos by then. Every position before Pos
	// that the reader has not claimed yet must be readable from Primary.
	// When the split is exact at j (the primary holds [Start, j), the
	// residual everything from j), Pos is j. When all that is known is that
	// the primary holds the positions from the snapshot's Next to h
	// (BigQuery's primary stream, checked by reading rows from it), Pos is
	// h: the reader's next record, at or after Next, must then be h or
	// before it.
	Pos int64
	// End is where the primary's positions end from the commit on: a split
	// point claimed at or past End is refused. It is Pos for an exact
	// split, Unbounded when only the primary's own input knows where it
	// ends (a stream read to its end). It must not lie past the tracker's
	// End.
	End int64
}

// SplitIO is the I/O phase of a split, as a SplitPlan returned it: it runs
// outside the tracker's lock, on its own goroutine, with ctx carrying the
// deadline (SplitIO.Timeout). It returns the split to commit, or ok false
// when the other side refused to split (nothing to commit), or an error when
// the I/O failed. It must not touch the tracker. If it outlives the deadline
// its result is dropped, so it must leave nothing behind that a dropped
// split would need undone: BigQuery's SplitReadStream leaves the original
// stream readable in full, as this requires.
type SplitIO[R any] func(ctx context.Context) (split IOSplit[R], ok bool, err error)

// SplitPlan decides a split from a snapshot: it runs under the tracker's
// lock, so it must return at once, from memory (convert a fraction, check
// that the restriction is still splittable), and returns the I/O to do, or
// nil to refuse the split.
type SplitPlan[R any] func(s Snapshot[R]) SplitIO[R]

// IOSplitOptions configure SplitWithIO.
type IOSplitOptions struct {
	// Timeout bounds the I/O phase; DefaultSplitTimeout when 0.
	Timeout time.Duration
	// HoldClaims makes the reader's claims wait while the I/O runs, at most
	// Timeout (GetProgress and other splits never wait). Without it the
	// reader goes on, and the commit refuses the split if the reader
	// passed Pos in the meantime; that is the right choice when Pos lies
	// well ahead of the reader (a fraction of the remaining work). Hold
	// claims when the I/O checks the reader's next position itself, as
	// BigQuery's split does (reading that row from the primary), because a
	// reader that moves on would pass it almost every time.
	HoldClaims bool
	// Prepare makes the split answer without waiting on I/O, as runners
	// require (Beam's splitAtFraction: "it should not perform or wait on
	// any blocking operations such as I/O"): SplitWithIO waits at most Wait
	// for the I/O and, when it is not done by then, refuses at once
	// (RefusedPending) while the I/O goes on in the background, up to
	// Timeout. A split the I/O then produces is kept as the prepared split,
	// and the next SplitWithIO with Prepare commits it at once, under the
	// lock, if it still holds (the same checks as phase 3: nothing changed
	// and the reader has not claimed Pos); a prepared split that no longer
	// holds is dropped (IOSplitResult.Dropped says why) and a new one
	// planned. Without Prepare the caller waits for the I/O up to Timeout.
	Prepare bool
	// Wait is how long a split with Prepare waits for its I/O before it
	// refuses and lets the I/O prepare the split in the background; 0
	// never waits. It is capped at Timeout.
	Wait time.Duration
	// Settled, when set, is called once a background I/O (Prepare) ends,
	// without the lock held, with what became of it: NotRefused when its
	// split was kept as the prepared split, otherwise why not and the
	// error, if any. It is for logs and metrics; it must not split.
	Settled func(why Refusal, err error)
}

// Refusal says why SplitWithIO refused a split.
type Refusal uint8

const (
	// NotRefused: the split was accepted.
	NotRefused Refusal = iota
	// RefusedDone: the tracker was done, failed or stopped, before the I/O
	// or by the time of the commit (a checkpoint or MarkDone during the
	// I/O).
	RefusedDone
	// RefusedBusy: another split with I/O was in flight on the tracker.
	// Splits with I/O run one at a time; the runner asks again later.
	RefusedBusy
	// RefusedByPlan: the SplitPlan returned nil.
	RefusedByPlan
	// RefusedByIO: the I/O returned ok false (the other side refused).
	RefusedByIO
	// RefusedIOError: the I/O failed (IOSplitResult.Err says how).
	RefusedIOError
	// RefusedTimeout: the I/O did not finish before its deadline.
	RefusedTimeout
	// RefusedPassed: the reader claimed a record at or after Pos while the
	// I/O ran, so the primary could no longer serve its next record.
	RefusedPassed
	// RefusedChanged: the restriction changed while the I/O ran (another
	// split or a checkpoint), or the split was not valid for it (End past
	// the tracker's End).
	RefusedChanged
	// RefusedPending: the I/O was not done within IOSplitOptions.Wait; it
	// goes on in the background and prepares the split for a later call.
	RefusedPending
)

var refusalNames = [...]string{"accepted", "done", "busy", "refused by plan", "refused by I/O", "I/O error", "timeout", "reader passed the split", "restriction changed", "prepared in the background"}

func (r Refusal) String() string {
	if int(r) < len(refusalNames) {
		return refusalNames[r]
	}
	return fmt.Sprintf("Refusal(%d)", int(r))
}

// IOSplitResult is the outcome of SplitWithIO.
type IOSplitResult[R any] struct {
	// Accepted reports whether the split committed.
	Accepted bool
	// Primary is the tracker's restriction after the call: the committed
	// primary, or the restriction unchanged.
	Primary R
	// Residual is the committed residual; the zero R when refused.
	Residual R
	// Refusal says why the split was refused, NotRefused when accepted.
	Refusal Refusal
	// Err is the error of a failed or late I/O, or of a split that did not
	// fit the tracker, for logs and metrics. It is never the tracker's
	// error: a failed split leaves the reader going on as before.
	Err error
	// Prepared reports that the split committed was one prepared by an
	// earlier call (IOSplitOptions.Prepare).
	Prepared bool
	// Dropped says why a prepared split was dropped by this call (the
	// reader had passed it, the restriction changed, the tracker was
	// done), NotRefused when none was.
	Dropped Refusal
}

// decide is the first phase of SplitWithIO: it takes the lock, refuses
// or takes a snapshot and calls plan, and marks the split in flight. The lock
// is released even if plan panics.
func (c *Core[R]) decide(opts IOSplitOptions, plan SplitPlan[R]) (snap Snapshot[R], do SplitIO[R], flight *ioFlight, res IOSplitResult[R]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res.Primary = c.rest
	switch {
	case c.err != nil || c.DoneLocked():
		res.Refusal = RefusedDone
	case c.io != nil:
		res.Refusal = RefusedBusy
	}
	if res.Refusal != NotRefused {
		c.refused++
		return snap, nil, nil, res
	}
	if opts.Prepare && c.prep != nil {
		p := c.prep
		c.prep = nil
		if res.Dropped = c.checkLocked(p.epoch, p.split); res.Dropped == NotRefused {
			c.commitLocked(p.split)
			res.Accepted, res.Prepared, res.Primary, res.Residual = true, true, c.rest, p.split.Residual
			return snap, nil, nil, res
		}
	}
	next, _ := c.NextLocked()
	snap = Snapshot[R]{Restriction: c.rest, Start: c.start, End: c.end, Claimed: c.ClaimedLocked(), Next: next, Epoch: c.epoch}
	if do = plan(snap); do == nil {
		c.refused++
		res.Refusal = RefusedByPlan
		return snap, nil, nil, res
	}
	flight = &ioFlight{hold: opts.HoldClaims, done: make(chan struct{})}
	c.io, c.fast = flight, false
	return snap, do, flight, res
}

// prepared is a split whose I/O ended after its call had answered
// (IOSplitOptions.Prepare), kept for the next call to commit.
type prepared[R any] struct {
	split IOSplit[R]
	epoch uint64 // the epoch of the snapshot it was planned from
}

// checkLocked is phase 3's test: why a split planned at epoch can no longer
// commit, NotRefused when it can.
func (c *Core[R]) checkLocked(epoch uint64, s IOSplit[R]) Refusal {
	switch {
	case c.err != nil || c.DoneLocked():
		return RefusedDone
	case c.epoch != epoch || s.End > c.end:
		return RefusedChanged
	case c.started && c.lastRecord >= s.Pos:
		return RefusedPassed
	}
	return NotRefused
}

// commitLocked commits a split that passed checkLocked.
func (c *Core[R]) commitLocked(s IOSplit[R]) {
	c.rest, c.end = s.Primary, s.End
	c.epoch++
	c.accepted++
}

// ioFlight is a split with I/O in flight.
type ioFlight struct {
	hold bool          // claims wait for it
	done chan struct{} // closed when the split committed or was refused
	// settled is closed when a background I/O (Prepare) has ended and
	// IOSplitOptions.Settled returned.
	settled chan struct{}
}

// waitHoldLocked waits, with the lock released, until the split with I/O in
// flight holding claims is over. The split is over by its deadline at the
// latest, because SplitWithIO stops waiting for the I/O then.
func (c *Core[R]) waitHoldLocked() {
	for c.io != nil && c.io.hold {
		done := c.io.done
		c.mu.Unlock()
		<-done
		c.mu.Lock()
	}
}

// SplitWithIO runs a split that needs I/O in two phases, rule 9 of the split
// contract:
//
//  1. Under the lock it takes a snapshot and calls plan, which decides the
//     split from it and returns the I/O to do (or nil to refuse). It refuses
//     at once when the tracker is done or failed, or when another split with
//     I/O is in flight (RefusedBusy): they run one at a time.
//  2. Outside the lock it runs the I/O on its own goroutine, with a context
//     that has the deadline opts.Timeout, and waits for it at most that
//     long. Meanwhile GetProgress, other splits and checkpoints go on; claims
//     go on too, unless opts.HoldClaims, when they wait for the commit (at
//     most the deadline).
//  3. Under the lock again it commits only if nothing invalidated the split:
//     the tracker is neither done nor failed, the restriction did not change
//     (no other split or checkpoint), the reader claimed no record at or
//     after the split's Pos, and its End does not lie past the tracker's.
//     Otherwise it refuses with nothing changed. Committing replaces the
//     restriction by the primary, moves End, and counts the split.
//
// With opts.Prepare the caller never waits for the I/O longer than
// opts.Wait: past it, SplitWithIO refuses (RefusedPending) and phase 3 runs
// when the I/O ends, in the background, keeping the split as the prepared
// one instead of committing it; the next call with Prepare commits a
// prepared split that still holds at once, in phase 1, without planning
// (IOSplitResult.Prepared), and drops one that no longer does.
//
// Every refusal leaves the tracker as it was, and is counted in SplitStats,
// as TrySplit's are. The I/O's own failure is returned in
// the result, never held by the tracker: the reader goes on with the
// restriction it had. ctx (the caller's) bounds the wait too.
func (c *Core[R]) SplitWithIO(ctx context.Context, opts IOSplitOptions, plan SplitPlan[R]) IOSplitResult[R] {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultSplitTimeout
	}

	// Phase 1: decide under the lock (or commit a prepared split).
	snap, do, flight, refused := c.decide(opts, plan)
	if refused.Accepted || refused.Refusal != NotRefused {
		return refused
	}

	// Phase 2: the I/O, outside the lock, bounded by the deadline.
	ioCtx, cancel := context.WithTimeout(ctx, timeout)
	if opts.Prepare {
		// The I/O must outlive this call: it ends by its own deadline.
		ioCtx, cancel = context.WithTimeout(context.WithoutCancel(ctx), timeout)
	}
	out := make(chan ioOutcome[R], 1) // buffered: a late I/O never blocks
	go func() {
		var o ioOutcome[R]
		defer func() {
			if p := recover(); p != nil {
				o = ioOutcome[R]{err: fmt.Errorf("sdf: the split's I/O panicked: %v\n%s", p, debug.Stack())}
			}
			out <- o
		}()
		o.split, o.ok, o.err = do(ioCtx)
	}()
	if opts.Prepare {
		if w := min(opts.Wait, timeout); w > 0 {
			tm := time.NewTimer(w)
			select {
			case o := <-out:
				tm.Stop()
				return c.settle(snap, flight, o, cancel, ioCtx, timeout, nil, refused.Dropped)
			case <-tm.C:
			}
		} else {
			select {
			case o := <-out:
				return c.settle(snap, flight, o, cancel, ioCtx, timeout, nil, refused.Dropped)
			default:
			}
		}
		c.mu.Lock()
		c.refused++
		flight.settled = make(chan struct{})
		c.bg = flight
		c.mu.Unlock()
		go c.background(snap, flight, out, cancel, ioCtx, timeout, opts.Settled)
		return IOSplitResult[R]{Primary: snap.Restriction, Refusal: RefusedPending, Dropped: refused.Dropped}
	}
	return c.settle(snap, flight, awaitIO(ioCtx, out), cancel, ioCtx, timeout, nil, NotRefused)
}

// awaitIO waits for the I/O's outcome until its deadline; late says it did
// not come in time.
func awaitIO[R any](ioCtx context.Context, out <-chan ioOutcome[R]) ioOutcome[R] {
	select {
	case o := <-out:
		return o
	case <-ioCtx.Done():
		// Prefer a result that came at the same time.
		select {
		case o := <-out:
			return o
		default:
			return ioOutcome[R]{late: ioCtx.Err()}
		}
	}
}

// ioOutcome is what the I/O of a split returned; late is the deadline's
// error when it did not return in time.
type ioOutcome[R any] struct {
	split IOSplit[R]
	ok    bool
	err   error
	late  error
}

// background waits for a prepared split's I/O, up to its deadline, and
// keeps its split as the prepared one if it still holds.
func (c *Core[R]) background(snap Snapshot[R], flight *ioFlight, out <-chan ioOutcome[R], cancel context.CancelFunc, ioCtx context.Context, timeout time.Duration, settled func(Refusal, error)) {
	o := awaitIO(ioCtx, out)
	keep := func(s IOSplit[R]) { c.prep = &prepared[R]{split: s, epoch: snap.Epoch} }
	res := c.settle(snap, flight, o, cancel, ioCtx, timeout, keep, NotRefused)
	if settled != nil {
		settled(res.Refusal, res.Err)
	}
	close(flight.settled)
}

// settle is phase 3: under the lock, it ends the flight and commits the
// split if it still holds (or, with keep, keeps it as the prepared split
// instead of committing it).
func (c *Core[R]) settle(snap Snapshot[R], flight *ioFlight, o ioOutcome[R], cancel context.CancelFunc, ioCtx context.Context, timeout time.Duration, keep func(IOSplit[R]), dropped Refusal) IOSplitResult[R] {
	expired := ioCtx.Err() != nil
	cancel()
	// Phase 3: commit under the lock, only if the split still holds.
	c.mu.Lock()
	defer c.mu.Unlock()
	c.io = nil
	c.setFast()
	close(flight.done)
	res := IOSplitResult[R]{Primary: c.rest, Dropped: dropped}
	switch {
	case o.late != nil:
		res.Refusal, res.Err = RefusedTimeout, fmt.Errorf("sdf: the split's I/O did not finish within %v: %w", timeout, o.late)
	case o.err != nil:
		res.Refusal, res.Err = RefusedIOError, fmt.Errorf("sdf: the split's I/O failed: %w", o.err)
		if expired && errors.Is(o.err, context.DeadlineExceeded) {
			res.Refusal = RefusedTimeout
		}
	case !o.ok:
		res.Refusal = RefusedByIO
	default:
		res.Refusal = c.checkLocked(snap.Epoch, o.split)
		if res.Refusal == RefusedChanged && c.epoch == snap.Epoch {
			res.Err = fmt.Errorf("sdf: the split's primary ends at %d, past the end %d of %v", o.split.End, c.end, c.rest)
		}
	}
	if keep != nil {
		// A background I/O: its call was answered (and counted) already.
		if res.Refusal == NotRefused {
			keep(o.split)
		}
		return res
	}
	if res.Refusal != NotRefused {
		c.refused++
		return res
	}
	c.commitLocked(o.split)
	res.Accepted, res.Primary, res.Residual = true, c.rest, o.split.Residual
	return res
}

// HasPreparedSplit reports whether a split prepared in the background
// (IOSplitOptions.Prepare) waits for the next call to commit it.
func (c *Core[R]) HasPreparedSplit() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prep != nil
}

// WaitSplitIO waits until no split's I/O is in flight on the tracker and
// the last one in the background has settled (IOSplitOptions.Settled
// returned), or ctx is done.
func (c *Core[R]) WaitSplitIO(ctx context.Context) error {
	for {
		c.mu.Lock()
		f, bg := c.io, c.bg
		c.mu.Unlock()
		var wait chan struct{}
		switch {
		case f != nil:
			wait = f.done
		case bg != nil:
			wait = bg.settled
		default:
			return nil
		}
		select {
		case <-wait:
			if f == nil {
				c.mu.Lock()
				if c.bg == bg {
					c.bg = nil
				}
				c.mu.Unlock()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
