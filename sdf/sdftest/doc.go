// Package sdftest checks that a splittable DoFn's restriction, tracker and
// read function keep the dynamic-splitting contract: the Go counterpart of
// Beam Java's SourceTestUtils (assertSplitAtFractionBehavior and
// assertSplitAtFractionExhaustive).
//
// # The subject
//
// A Subject ties together what an SDF's ProcessElement does: a whole
// restriction, a way to make a tracker of any restriction (CreateTracker), and
// a Read function that claims positions through the tracker and emits the
// records it claimed, in order, stopping when a claim is refused. Read must
// leave the tracker done (IsDone true, GetError nil) when it returns nil, as
// Beam's runtime demands: a reader that meets the end of its input before the
// end of its range marks the rest claimed (MarkDone on an sdf.Tracker, or a
// claim of the range's end). Split defaults to the tracker's TrySplit, whose
// fraction is of the remaining work (Beam Go's contract); pass
// (*sdf.Tracker).SplitAtFraction in a closure to check Java's whole-range
// fractions instead.
//
// # What is checked
//
// One split (CheckSplitAtFraction, AssertSplitAtFraction): read
// numItemsBeforeSplit records, split at f while the reader waits between two
// records, let the same reader read the rest, then
//
//   - every read (the whole restriction, the interrupted reader, a fresh read of
//     the primary, a fresh read of the residual) must return nil and leave its
//     tracker with GetError() == nil and IsDone() == true;
//   - if the split succeeded (a non-nil residual), the records of the primary
//     followed by those of the residual must equal the records of the whole
//     restriction, in order, and the interrupted reader's records (before and
//     after the split) must equal what a fresh read of the primary yields;
//   - if the split was refused, it must have had no effect: the interrupted
//     reader yields the whole restriction;
//   - when Split is nil, a split at fraction 0 is Beam Go's checkpoint: when
//     it succeeds, the tracker must report IsDone right after it, as Beam's
//     runtime checks;
//   - the outcome must be the one asked for: MustSucceedAndBeConsistent,
//     MustFail, or ConsistentIfSucceeds.
//
// The reader is paced by blocking inside emit after the n-th record: Read runs
// on its own goroutine, and the split happens while it waits, between two
// records, exactly where Java's reader is after reading n items. For n = 0
// the split happens before Read starts.
//
// The exhaustive check (CheckSplitAtFractionExhaustive,
// AssertSplitAtFractionExhaustive) reads the whole restriction (it needs at
// least 2 records), then for every n from 0 to the number of records does the
// one-split check at fractions 0 and 1 and at the midpoints of a binary search
// that recurses wherever two fractions give primaries of different sizes,
// down to a resolution of 0.001. At least one split at a midpoint must succeed
// and at least one must leave a non-empty residual, otherwise the check fails as
// vacuous (a tracker that refuses everything passes nothing). It then runs the
// concurrent stage: for every n that had a non-trivial split, a reader
// goroutine and a splitter goroutine race (see CheckSplitAtFractionConcurrent):
// the reader reads n records and opens a barrier, the splitter waits at it and
// splits while the reader goes on. Each index gets trials until one fraction
// gave both a non-trivial split and a refused (or trivial) one, at most 100
// per index and 1,000 in all (the budget left is shared fairly among the
// indices left); each trial checks the same consistency as above. Run it
// under -race: the race detector sees what the tracker's locking misses.
//
// Two things differ from Java. Beam Go's TrySplit measures f against the work
// remaining, so a split at the smallest non-trivial fraction rarely fails,
// whichever of reader and splitter wins; the trials therefore alternate
// between the smallest and the largest non-trivial fraction of the binary
// search (the largest leaves only the last split point to the residual and
// is refused when the reader got further first). And an in-memory reader
// claims its next record long before a woken goroutine can split, so the
// splitter spins at the barrier and the reader lingers for a moment after
// opening it: the delay adapts, growing after races the reader won and
// shrinking after races the splitter won, so that both happen.
//
// # Progress
//
// Every read the checks do (the whole restriction, the interrupted reader,
// fresh reads of primaries and residuals, the races) also checks the
// tracker's progress, rules 6 and 7 of the split contract: GetProgress is
// called before Read starts, after every record while Read waits inside
// emit, and once Read returned, each time on another goroutine and bounded
// by Subject.ProgressTimeout, so that a GetProgress that waits for the reader
// or for I/O is reported, not a deadlock. It requires
//
//   - done 0 before the first claim, and, when Subject.Size (the SDF's
//     RestrictionSize) is given, done+remaining equal to the restriction's
//     size there: progress in the same unit as the size;
//   - done and the fraction done/(done+remaining) never to decrease as
//     records are claimed (splits only move the fraction up);
//   - remaining 0 and done above 0 (a fraction of 1) once Read returned and
//     the tracker is done;
//   - finite values, never negative; where the tracker counts split points
//     (SplitPointsConsumed, SplitPointsRemaining, as sdf.Tracker does), a
//     consumed count that starts at 0 and never decreases, and a remaining
//     count of -1 (unknown) or more.
//
// Subject.SkipProgress turns these checks off for a tracker that reports no
// progress; Beam's own offsetrange.Tracker, for one, reports remaining work
// of -1 once it is done.
//
// # Cost
//
// The exhaustive check does, for each of the n+1 indices, up to about
// min(10·(records left), 1,026) splits, and each split reads about twice the
// restriction: O(n³) records for n up to about a hundred, O(n²) beyond.
// Measured on two cores with an in-memory subject whose every record is a
// split point: 50 records 0.35 s, 100 records 1.9 s, 200 records 9 s; under
// -race about thirty times as long (100 records, 1 minute). Subjects of 10 to
// 50 records exercise every boundary that matters (blocks, gaps, the end) and
// keep a -race run to seconds. CheckSplitAtFractionExhaustive refuses more
// than MaxExhaustiveRecords. The concurrent stage adds at most 1,000 trials.
//
// # Use
//
//	func TestSplits(t *testing.T) {
//		s := sdftest.Subject[string]{
//			Restriction: sdf.OffsetRange{Start: 0, End: int64(len(lines))},
//			NewTracker: func(r any) beamsdf.RTracker {
//				return sdf.NewTracker(r.(sdf.OffsetRange))
//			},
//			Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
//				tr := rt.(*sdf.Tracker)
//				for pos := tr.Range().Start; pos < int64(len(lines)); pos++ {
//					if !tr.TryClaimSplitPoint(pos) {
//						return nil
//					}
//					emit(lines[pos])
//				}
//				tr.MarkDone() // input ended before the range did
//				return nil
//			},
//		}
//		sdftest.AssertSplitAtFraction(t, s, 3, 0.5, sdftest.MustSucceedAndBeConsistent)
//		sdftest.AssertSplitAtFractionExhaustive(t, s)
//	}
//
// The Check functions return an error describing the first violation (index,
// fraction, restrictions, expected and actual records); the Assert functions
// call t.Fatal with it.
package sdftest
