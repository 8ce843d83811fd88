// Package sdf holds the restriction and restriction tracker that every reader in
// sdfio uses: an offset range with split points, keeping the contract of Beam
// Java's OffsetRangeTracker / BoundedReader.splitAtFraction while implementing
// Beam Go's sdf.RTracker and sdf.BoundableRTracker.
//
// # The contract
//
// Positions are int64 offsets in [Start, End). A record is a split point when a
// reader asked to read [A, End) would return it first for some A; the other
// records of a block (the 2nd..nth record of an Avro block, say) carry their
// block's offset and are not split points.
//
//  1. A restriction [A, B) yields exactly the records whose split point starts in
//     [A, B). Reading [A, S) and then [S, B) yields the records of [A, B), in order.
//  2. The first record claimed must be a split point. Split-point positions
//     strictly increase, and a split point lies after every record claimed
//     before it; a record that is not a split point is accepted once its block
//     was claimed, even past an end that a split has since moved before it.
//     A violation is a tracker error (GetError), never a silent accept.
//  3. Claiming a split point at or past End fails and marks the tracker done.
//  4. TrySplit(f) takes f as a fraction of the remaining work, as Beam Go's
//     runners expect: with last the last claimed position (Start-1 before any
//     claim) it splits at last + max(ceil(f*(End-last)), 1). Java's whole-range
//     operations SplitAtFraction, TrySplitAtPosition and FractionConsumed are
//     offered beside it.
//  5. TrySplit(0) is a checkpoint: everything not yet claimed becomes the
//     residual and the tracker is done.
//  6. Progress is 0 before the first claim and 1 when done; in between it is
//     measured from the first claimed position, refined inside a block when the
//     reader said how many records the block holds (SetBlock).
//  7. Split points consumed and remaining are reported where known.
//  8. Every method may be called from any goroutine: the runner calls TrySplit
//     and GetProgress while ProcessElement claims. No method waits on I/O
//     (Core.SplitWithIO waits on its own I/O, outside the lock).
//
// An End of math.MaxInt64 is unbounded: TrySplit needs an EndEstimator to split
// such a range (except for the checkpoint TrySplit(0)), and IsBounded reports
// false. Every other range of int64 positions is supported, negative and
// extreme ones included ([math.MinInt64, 10), say): no position arithmetic
// overflows, and fractions of spans wider than 2^53 are as exact as float64
// allows.
//
// # The tracker core
//
// Tracker is built on Core, which every tracker in sdfio shares whatever its
// restriction type: the claim state (started, stopped, failed, done), the
// claim rules 2 and 3, the checkpoint, splits at a position, split
// statistics, String and the errors (ErrClaimOrder, ErrClaimAfterStop). A
// tracker of another restriction (bigqueryio's stream and row offset) holds a
// Core[R] and adds only what is its own.
//
// # Splits that need I/O
//
// Rule 8 says no method waits on I/O. A split that must ask a service
// (BigQuery's SplitReadStream) cannot be decided from memory, so
// Core.SplitWithIO runs it in two phases: it decides the split under the lock
// from a Snapshot, runs the I/O outside the lock with a deadline, and commits
// under the lock only if the reader has not passed the split position and
// nothing else changed the restriction meanwhile; otherwise it refuses with
// nothing changed. GetProgress never waits on that I/O; claims either go on
// (the commit's re-check keeps them safe) or, with IOSplitOptions.HoldClaims,
// wait for the commit, at most the deadline. The caller of such a split
// waits for the I/O up to the deadline, unless IOSplitOptions.Prepare: then
// it waits at most IOSplitOptions.Wait and is refused past it, while the I/O
// goes on in the background and prepares the split, which the next call
// commits at once if the reader has not passed it. Runners answer splits on
// the worker's control loop and Beam's splitAtFraction must not wait on I/O:
// a split asked for by a runner should Prepare.
//
// # Progress units
//
// GetProgress reports offsets unless the reader set another unit with
// SetProgressScale: a reader whose RestrictionSize is in bytes and whose
// offsets are not sets its bytes per offset, so that both agree. Beam Go's
// runtime only uses the fraction done/(done+remaining), which the scale does
// not change.
//
// SplitIntoBundles cuts a range into initial bundles with OffsetBasedSource's
// rule.
package sdf
