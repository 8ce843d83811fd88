package sdftest

import (
	"context"
	"fmt"
	"testing"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
)

// Outcome is what a split is expected to do.
type Outcome int

const (
	// MustSucceedAndBeConsistent: the split must return a residual, and the
	// reads must be consistent.
	MustSucceedAndBeConsistent Outcome = iota
	// MustFail: the split must be refused (nil residual), and have no effect.
	MustFail
	// ConsistentIfSucceeds: the split may be refused (then it must have had
	// no effect) or succeed (then the reads must be consistent).
	ConsistentIfSucceeds
)

func (o Outcome) String() string {
	switch o {
	case MustSucceedAndBeConsistent:
		return "MustSucceedAndBeConsistent"
	case MustFail:
		return "MustFail"
	case ConsistentIfSucceeds:
		return "ConsistentIfSucceeds"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// SplitResult describes one checked split.
type SplitResult struct {
	// Succeeded reports whether the split returned a residual.
	Succeeded bool
	// Primary and Residual are the restrictions the split returned.
	Primary, Residual any
	// PrimaryRecords is the number of records of the primary: all the
	// records of the restriction when the split was refused.
	PrimaryRecords int
	// ResidualRecords is the number of records of the residual, -1 when
	// the split was refused.
	ResidualRecords int
}

// NonTrivial reports whether the split succeeded with a non-empty residual.
func (r SplitResult) NonTrivial() bool { return r.Succeeded && r.ResidualRecords > 0 }

// CheckSplitAtFraction reads numItemsBeforeSplit records of s.Restriction,
// splits at fraction f while the reader waits between two records, lets the
// reader finish, and checks the outcome against want and the consistency of
// the reads (see the package doc). It returns an error describing the first
// violation.
func CheckSplitAtFraction[T any](ctx context.Context, s Subject[T], numItemsBeforeSplit int, f float64, want Outcome) (SplitResult, error) {
	if err := s.validate(); err != nil {
		return SplitResult{}, err
	}
	all, err := ReadAll(ctx, s)
	if err != nil {
		return SplitResult{}, err
	}
	if numItemsBeforeSplit < 0 || numItemsBeforeSplit > len(all) {
		return SplitResult{}, fmt.Errorf("sdftest: cannot split after %d records: %v holds %d records", numItemsBeforeSplit, s.Restriction, len(all))
	}
	return s.splitAfter(ctx, all, numItemsBeforeSplit, f, want)
}

// AssertSplitAtFraction is CheckSplitAtFraction that fails t on error.
func AssertSplitAtFraction[T any](t testing.TB, s Subject[T], numItemsBeforeSplit int, f float64, want Outcome) SplitResult {
	t.Helper()
	res, err := CheckSplitAtFraction(context.Background(), s, numItemsBeforeSplit, f, want)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// splitAfter is the one-split check, all being the records of the whole
// restriction.
func (s *Subject[T]) splitAfter(ctx context.Context, all []T, n int, f float64, want Outcome) (SplitResult, error) {
	where := fmt.Sprintf("sdftest: split at fraction %v after %d of the %d records of %v", f, n, len(all), s.Restriction)
	rt, err := s.newTracker(s.Restriction)
	if err != nil {
		return SplitResult{}, fmt.Errorf("%s: %w", where, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	paused := make(chan struct{})
	resume := make(chan struct{})
	r := goRead(ctx, s, rt, nil, func(k int) {
		if k == n {
			close(paused)
			<-resume
		}
	})
	var primary, residual any
	checkpointDone, checkpointState := true, ""
	select {
	case <-paused:
		primary, residual, err = s.split(rt, f)
		if err == nil && f == 0 && s.Split == nil && residual != nil {
			checkpointDone, checkpointState = rt.IsDone(), fmt.Sprint(rt)
		}
		close(resume)
		<-r.done
	case <-r.done:
		close(resume)
		if cerr := r.check("the restriction", s.Restriction, rt); cerr != nil {
			return SplitResult{}, fmt.Errorf("%s: %w", where, cerr)
		}
		return SplitResult{}, fmt.Errorf("%s: Read returned after %d records, before reaching record %d (the whole restriction read %d before)", where, r.count(), n, len(all))
	}
	if err != nil {
		return SplitResult{}, fmt.Errorf("%s: %w (tracker %v)", where, err, rt)
	}
	if !checkpointDone {
		// Beam Go's runtime checks IsDone right after the TrySplit(0) of a
		// self-checkpoint (exec.ProcessSizedElementsAndRestrictions.Checkpoint)
		// and fails the bundle if it is false. A refused checkpoint is only
		// wrong if the tracker was not done, which the end of the read shows.
		return SplitResult{}, fmt.Errorf("%s: TrySplit(0) is a checkpoint (primary %v, residual %v), so the tracker must be done right after it, but IsDone was false; Beam fails such a bundle (tracker after the split: %s)", where, primary, residual, checkpointState)
	}
	return s.verify(ctx, where, all, r, rt, primary, residual, want)
}

// verify checks the outcome of a split and the reads around it: r is the
// finished interrupted read on rt.
func (s *Subject[T]) verify(ctx context.Context, where string, all []T, r *reading[T], rt beamsdf.RTracker, primary, residual any, want Outcome) (SplitResult, error) {
	res := SplitResult{Succeeded: residual != nil, Primary: primary, Residual: residual, ResidualRecords: -1}
	switch {
	case want == MustSucceedAndBeConsistent && !res.Succeeded:
		return res, fmt.Errorf("%s: the split was refused (primary %v), want it to succeed (tracker %v)", where, primary, rt)
	case want == MustFail && res.Succeeded:
		return res, fmt.Errorf("%s: the split succeeded with primary %v and residual %v, want it refused", where, primary, residual)
	}
	if err := r.check("the restriction being split", s.Restriction, rt); err != nil {
		return res, fmt.Errorf("%s (primary %v, residual %v): %w", where, primary, residual, err)
	}
	current := r.recs
	if !res.Succeeded {
		res.PrimaryRecords = len(current)
		if err := s.diff("the unsplit read", all, "the read after a refused split", current); err != nil {
			return res, fmt.Errorf("%s: the split was refused, so it must have had no effect, but: %w", where, err)
		}
		return res, nil
	}
	if primary == nil {
		return res, fmt.Errorf("%s: the split returned residual %v and a nil primary", where, residual)
	}
	primaryRecs, err := s.readRestriction(ctx, primary, "the primary")
	if err != nil {
		return res, fmt.Errorf("%s (primary %v, residual %v): %w", where, primary, residual, err)
	}
	residualRecs, err := s.readRestriction(ctx, residual, "the residual")
	if err != nil {
		return res, fmt.Errorf("%s (primary %v, residual %v): %w", where, primary, residual, err)
	}
	res.PrimaryRecords, res.ResidualRecords = len(primaryRecs), len(residualRecs)
	if err := s.diff("the read of the primary", primaryRecs, "the interrupted reader", current); err != nil {
		return res, fmt.Errorf("%s: the interrupted reader did not read what its primary %v holds (residual %v): %w", where, primary, residual, err)
	}
	total := make([]T, 0, len(primaryRecs)+len(residualRecs))
	total = append(append(total, primaryRecs...), residualRecs...)
	if err := s.diff("the unsplit read", all, "primary+residual", total); err != nil {
		return res, fmt.Errorf("%s: primary %v and residual %v do not add up to the restriction: %w", where, primary, residual, err)
	}
	return res, nil
}
