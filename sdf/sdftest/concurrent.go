package sdftest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// Trial budget of the exhaustive check's concurrent stage, as in Beam Java.
const (
	MaxConcurrentTrialsPerIndex = 100
	MaxConcurrentTrials         = 1000
)

// ConcurrentReport summarizes races between a reader and a splitter.
type ConcurrentReport struct {
	// Indices is the number of record indices raced at.
	Indices int
	// Trials is the number of races run.
	Trials int
	// NonTrivial counts the races whose split returned a residual holding
	// records; Other those whose split was refused or left an empty
	// residual.
	NonTrivial, Other int
	// BothSeen counts the indices where both kinds of outcome were seen at
	// the same fraction.
	BothSeen int
}

func (r ConcurrentReport) String() string {
	return fmt.Sprintf("%d trials at %d indices: %d non-trivial splits, %d refused or trivial, both seen at %d indices",
		r.Trials, r.Indices, r.NonTrivial, r.Other, r.BothSeen)
}

// CheckSplitAtFractionConcurrent races a split at fraction f against the
// reader, trials times: a reader goroutine reads numItemsBeforeSplit records
// and opens a barrier without stopping; a splitter goroutine waits at the
// barrier and splits, so the split lands before or after the reader's next
// claims. The reader lingers after the barrier for a delay that adapts to
// the outcomes, so that both come up (see the package doc). Each trial checks
// the reads as CheckSplitAtFraction does with ConsistentIfSucceeds. Run it
// under -race.
func CheckSplitAtFractionConcurrent[T any](ctx context.Context, s Subject[T], numItemsBeforeSplit int, f float64, trials int) (ConcurrentReport, error) {
	rep := ConcurrentReport{Indices: 1}
	if err := s.validate(); err != nil {
		return rep, err
	}
	all, err := ReadAll(ctx, s)
	if err != nil {
		return rep, err
	}
	if numItemsBeforeSplit < 0 || numItemsBeforeSplit > len(all) {
		return rep, fmt.Errorf("sdftest: cannot split after %d records: %v holds %d records", numItemsBeforeSplit, s.Restriction, len(all))
	}
	var nonTrivial, other bool
	var p pacer
	for range trials {
		res, err := s.race(ctx, all, numItemsBeforeSplit, f, p.next())
		if err != nil {
			return rep, err
		}
		p.observe(res)
		rep.count(res, &nonTrivial, &other)
	}
	if nonTrivial && other {
		rep.BothSeen = 1
	}
	return rep, nil
}

// AssertSplitAtFractionConcurrent is CheckSplitAtFractionConcurrent that
// fails t on error and logs the report.
func AssertSplitAtFractionConcurrent[T any](t testing.TB, s Subject[T], numItemsBeforeSplit int, f float64, trials int) ConcurrentReport {
	t.Helper()
	rep, err := CheckSplitAtFractionConcurrent(context.Background(), s, numItemsBeforeSplit, f, trials)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sdftest: concurrent split check of %v at %v after %d records: %v", s.Restriction, f, numItemsBeforeSplit, rep)
	return rep
}

func (r *ConcurrentReport) count(res SplitResult, nonTrivial, other *bool) {
	r.Trials++
	if res.NonTrivial() {
		r.NonTrivial++
		*nonTrivial = true
	} else {
		r.Other++
		*other = true
	}
}

// racePoint is where the exhaustive check races: after n records, at the
// smallest (lo) and largest (hi) fraction that gave a non-trivial split.
type racePoint struct {
	n      int
	lo, hi float64
}

// raceAll is the concurrent stage of the exhaustive check. The trial budget
// left is shared fairly among the indices still to race, at most
// MaxConcurrentTrialsPerIndex each. Trials alternate between the smallest and
// the largest non-trivial fraction, each with its own pacer; an index is done
// once one of its fractions gave both a non-trivial split and a refused or
// trivial one.
func (s *Subject[T]) raceAll(ctx context.Context, all []T, points []racePoint) (ConcurrentReport, error) {
	rep := ConcurrentReport{Indices: len(points)}
	type fraction struct {
		f                 float64
		pace              pacer
		nonTrivial, other bool
	}
	for k, p := range points {
		left := MaxConcurrentTrials - rep.Trials
		if left <= 0 {
			break
		}
		budget := min(MaxConcurrentTrialsPerIndex, max(1, left/(len(points)-k)))
		fs := []*fraction{{f: p.lo}}
		if p.hi != p.lo {
			fs = append(fs, &fraction{f: p.hi})
		}
		for trial := range budget {
			x := fs[trial%len(fs)]
			res, err := s.race(ctx, all, p.n, x.f, x.pace.next())
			if err != nil {
				return rep, err
			}
			x.pace.observe(res)
			rep.count(res, &x.nonTrivial, &x.other)
			if x.nonTrivial && x.other {
				rep.BothSeen++
				break
			}
		}
	}
	return rep, nil
}

// pacer sets how long the reader lingers after opening the barrier, before
// its next claim. A split takes about as long as a claim, so without it the
// reader almost always wins; pacer doubles the delay after a race the reader
// won (refused or trivial split) and halves it after one the splitter won, so
// that both happen. The delay is jittered by ±50%.
type pacer struct{ delay time.Duration }

const maxLinger = time.Millisecond

func (p *pacer) next() time.Duration {
	if p.delay <= 0 {
		return 0
	}
	return p.delay/2 + rand.N(p.delay)
}

func (p *pacer) observe(res SplitResult) {
	if res.NonTrivial() {
		p.delay /= 2
	} else {
		p.delay = min(2*p.delay+500*time.Nanosecond, maxLinger)
	}
}

// linger waits for d without blocking the goroutine in the scheduler, so
// that it resumes the moment d is over; it yields so that the splitter runs
// even with GOMAXPROCS=1.
func linger(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
		runtime.Gosched()
	}
}

// race runs one trial: the reader reads n records and opens the barrier,
// lingers for delay and reads on; the splitter, started at the same time,
// blocks until the reader emitted n-1 records, spins until the barrier opens
// and splits at f at once.
func (s *Subject[T]) race(ctx context.Context, all []T, n int, f float64, delay time.Duration) (SplitResult, error) {
	where := fmt.Sprintf("sdftest: split at fraction %v racing the reader after %d of the %d records of %v", f, n, len(all), s.Restriction)
	rt, err := s.newTracker(s.Restriction)
	if err != nil {
		return SplitResult{}, fmt.Errorf("%s: %w", where, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	start := make(chan struct{}) // releases both goroutines
	near := make(chan struct{})  // the reader emitted n-1 records
	var reached atomic.Bool      // the reader emitted n records
	r := goRead(ctx, s, rt, start, func(k int) {
		if k == n-1 {
			close(near)
		}
		if k == n {
			reached.Store(true)
			linger(delay)
		}
	})

	var (
		primary, residual any
		splitErr          error
		split             bool
	)
	splitDone := make(chan struct{})
	go func() {
		defer close(splitDone)
		<-start
		if n > 0 {
			select {
			case <-near:
			case <-r.done:
			}
		}
		for !reached.Load() {
			select {
			case <-r.done:
				if !reached.Load() {
					return
				}
			default:
				runtime.Gosched()
			}
		}
		split = true
		primary, residual, splitErr = s.split(rt, f)
	}()
	close(start)
	<-r.done
	<-splitDone

	if !split {
		if cerr := r.check("the restriction", s.Restriction, rt); cerr != nil {
			return SplitResult{}, fmt.Errorf("%s: %w", where, cerr)
		}
		return SplitResult{}, fmt.Errorf("%s: Read returned after %d records, before reaching record %d (the whole restriction read %d before)", where, r.count(), n, len(all))
	}
	if splitErr != nil {
		return SplitResult{}, fmt.Errorf("%s: %w (tracker %v)", where, splitErr, rt)
	}
	return s.verify(ctx, where, all, r, rt, primary, residual, ConsistentIfSucceeds)
}
