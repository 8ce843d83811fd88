package sdftest

import (
	"context"
	"fmt"
	"testing"
)

// MaxExhaustiveRecords is the most records CheckSplitAtFractionExhaustive
// accepts. Its cost grows with the square to the cube of the number of
// records (see the package doc): 1,000 records take some ten minutes without
// -race, hours with it.
const MaxExhaustiveRecords = 1000

// Resolution is the finest fraction step of the exhaustive binary search.
const Resolution = 0.001

// ExhaustiveReport summarizes a passed exhaustive check.
type ExhaustiveReport struct {
	// Records is the number of records of the whole restriction.
	Records int
	// Splits is the number of sequential splits checked.
	Splits int
	// Successful and NonTrivial count the splits at binary-search midpoints
	// that returned a residual, and those whose residual held records.
	Successful, NonTrivial int
	// Concurrent describes the concurrent stage.
	Concurrent ConcurrentReport
}

func (r ExhaustiveReport) String() string {
	return fmt.Sprintf("%d records: %d sequential splits, %d successful and %d non-trivial at midpoints; concurrent: %v",
		r.Records, r.Splits, r.Successful, r.NonTrivial, r.Concurrent)
}

// CheckSplitAtFractionExhaustive runs the one-split check for every number of
// records read before the split and the fractions of a binary search, requires
// the check not to be vacuous, then races splits against the reader (see the
// package doc). It returns an error describing the first violation.
func CheckSplitAtFractionExhaustive[T any](ctx context.Context, s Subject[T]) (ExhaustiveReport, error) {
	var rep ExhaustiveReport
	if err := s.validate(); err != nil {
		return rep, err
	}
	all, err := ReadAll(ctx, s)
	if err != nil {
		return rep, err
	}
	rep.Records = len(all)
	switch {
	case len(all) < 2:
		return rep, fmt.Errorf("sdftest: %v holds %d records; the exhaustive check needs at least 2 to split between", s.Restriction, len(all))
	case len(all) > MaxExhaustiveRecords:
		return rep, fmt.Errorf("sdftest: %v holds %d records, more than the %d the exhaustive check accepts (its cost grows with the square to the cube of the count); check a smaller restriction", s.Restriction, len(all), MaxExhaustiveRecords)
	}

	e := &exhaustive[T]{s: &s, all: all, rep: &rep}
	points := make([]racePoint, 0, len(all)+1)
	for n := 0; n <= len(all); n++ {
		e.lo, e.hi = -1, -1
		left, err := e.split(ctx, n, 0)
		if err != nil {
			return rep, err
		}
		right, err := e.split(ctx, n, 1)
		if err != nil {
			return rep, err
		}
		if err := e.search(ctx, n, 0, left, 1, right); err != nil {
			return rep, err
		}
		if e.lo >= 0 {
			points = append(points, racePoint{n: n, lo: e.lo, hi: e.hi})
		}
	}
	if rep.Successful == 0 {
		return rep, fmt.Errorf("sdftest: the split check of %v (%d records) was vacuous: none of %d splits at fractions in (0, 1) succeeded", s.Restriction, len(all), rep.Splits)
	}
	if rep.NonTrivial == 0 {
		return rep, fmt.Errorf("sdftest: the split check of %v (%d records) was vacuous: %d of %d splits at fractions in (0, 1) succeeded, but every residual was empty", s.Restriction, len(all), rep.Successful, rep.Splits)
	}
	rep.Concurrent, err = s.raceAll(ctx, all, points)
	return rep, err
}

// AssertSplitAtFractionExhaustive is CheckSplitAtFractionExhaustive that
// fails t on error and logs the report.
func AssertSplitAtFractionExhaustive[T any](t testing.TB, s Subject[T]) ExhaustiveReport {
	t.Helper()
	rep, err := CheckSplitAtFractionExhaustive(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sdftest: exhaustive split check of %v: %v", s.Restriction, rep)
	return rep
}

type exhaustive[T any] struct {
	s   *Subject[T]
	all []T
	rep *ExhaustiveReport
	// lo and hi are the smallest and largest midpoint fractions with a
	// non-trivial split at the current index, -1 when none.
	lo, hi float64
}

func (e *exhaustive[T]) split(ctx context.Context, n int, f float64) (SplitResult, error) {
	e.rep.Splits++
	return e.s.splitAfter(ctx, e.all, n, f, ConsistentIfSucceeds)
}

// search checks the midpoint of [lf, rf] and recurses into each half whose
// ends give primaries of different sizes, until the half is narrower than
// Resolution. Only midpoints count towards the statistics: 0 is a checkpoint
// under Beam Go's TrySplit and 1 never splits.
func (e *exhaustive[T]) search(ctx context.Context, n int, lf float64, l SplitResult, rf float64, r SplitResult) error {
	if rf-lf < Resolution {
		return nil
	}
	mf := (lf + rf) / 2
	m, err := e.split(ctx, n, mf)
	if err != nil {
		return err
	}
	if m.Succeeded {
		e.rep.Successful++
	}
	if m.NonTrivial() {
		e.rep.NonTrivial++
		if e.lo < 0 || mf < e.lo {
			e.lo = mf
		}
		if mf > e.hi {
			e.hi = mf
		}
	}
	if l.PrimaryRecords != m.PrimaryRecords {
		if err := e.search(ctx, n, lf, l, mf, m); err != nil {
			return err
		}
	}
	if r.PrimaryRecords != m.PrimaryRecords {
		if err := e.search(ctx, n, mf, m, rf, r); err != nil {
			return err
		}
	}
	return nil
}
