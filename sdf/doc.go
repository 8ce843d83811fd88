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
//     and GetProgress while ProcessElement claims. No method waits on I/O.
//
// An End of math.MaxInt64 is unbounded: TrySplit needs an EndEstimator to split
// such a range (except for the checkpoint TrySplit(0)), and IsBounded reports
// false.
//
// SplitIntoBundles cuts a range into initial bundles with OffsetBasedSource's
// rule.
package sdf
