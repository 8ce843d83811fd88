package sdftest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
)

// Subject is what the checks exercise: a restriction, its tracker and the read
// function of a splittable DoFn, over records of type T.
type Subject[T any] struct {
	// Restriction is the whole restriction the checks read and split.
	Restriction any
	// NewTracker returns a new tracker of rest (CreateTracker). Required.
	NewTracker func(rest any) beamsdf.RTracker
	// Read claims positions through rt and emits the claimed records in
	// order, stopping when a claim is refused (ProcessElement). When it
	// returns nil, rt must be done and hold no error. It may be called from
	// any goroutine and must call emit from one goroutine at a time.
	// Required.
	Read func(ctx context.Context, rt beamsdf.RTracker, emit func(T)) error
	// Split splits rt at fraction f. Optional; rt.TrySplit(f) when nil.
	Split func(rt beamsdf.RTracker, f float64) (primary, residual any, err error)
	// Equal reports whether two records are the same. Optional;
	// reflect.DeepEqual when nil.
	Equal func(a, b T) bool
	// Size is the SDF's RestrictionSize of a restriction. Optional; when
	// set, the progress checks require every new tracker (of the whole
	// restriction, of primaries and residuals) to report done 0 and
	// remaining Size(rest) before its first claim, as Beam Java defines a
	// restriction's default size: progress and size in the same unit.
	Size func(rest any) float64
	// ProgressTimeout bounds each GetProgress call of the progress checks;
	// DefaultProgressTimeout when 0.
	ProgressTimeout time.Duration
	// SkipProgress turns the progress checks off, for a tracker that does
	// not report progress (Beam's own offsetrange.Tracker reports remaining
	// work of -1 once done). Every other check still runs.
	SkipProgress bool
}

// ReadAll reads s.Restriction with a new tracker and returns its records. It
// fails when Read returns an error, panics, or leaves the tracker with an
// error or not done.
func ReadAll[T any](ctx context.Context, s Subject[T]) ([]T, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	recs, err := s.readRestriction(ctx, s.Restriction, "the whole restriction")
	if err != nil {
		return nil, fmt.Errorf("sdftest: %w", err)
	}
	return recs, nil
}

// AssertReadAll is ReadAll that fails t on error.
func AssertReadAll[T any](t testing.TB, s Subject[T]) []T {
	t.Helper()
	recs, err := ReadAll(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func (s *Subject[T]) validate() error {
	switch {
	case s.NewTracker == nil:
		return errors.New("sdftest: Subject.NewTracker is nil")
	case s.Read == nil:
		return errors.New("sdftest: Subject.Read is nil")
	}
	return nil
}

func (s *Subject[T]) equal(a, b T) bool {
	if s.Equal != nil {
		return s.Equal(a, b)
	}
	return reflect.DeepEqual(a, b)
}

// newTracker calls s.NewTracker, turning a panic or a nil tracker into an
// error.
func (s *Subject[T]) newTracker(rest any) (rt beamsdf.RTracker, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("NewTracker(%v) panicked: %v\n%s", rest, p, debug.Stack())
		}
	}()
	rt = s.NewTracker(rest)
	if rt == nil {
		return nil, fmt.Errorf("NewTracker(%v) returned nil", rest)
	}
	return rt, nil
}

// split calls s.Split or rt.TrySplit, turning a panic into an error.
func (s *Subject[T]) split(rt beamsdf.RTracker, f float64) (primary, residual any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("split at %v panicked: %v\n%s", f, p, debug.Stack())
		}
	}()
	if s.Split != nil {
		primary, residual, err = s.Split(rt, f)
	} else {
		primary, residual, err = rt.TrySplit(f)
	}
	if err != nil {
		err = fmt.Errorf("split at %v returned an error: %w", f, err)
	}
	return primary, residual, err
}

// callRead calls s.Read, turning a panic into an error.
func (s *Subject[T]) callRead(ctx context.Context, rt beamsdf.RTracker, emit func(T)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Read panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return s.Read(ctx, rt, emit)
}

// readRestriction reads rest with a fresh tracker, on the calling goroutine,
// and checks the read finished cleanly. what names the read in errors.
func (s *Subject[T]) readRestriction(ctx context.Context, rest any, what string) ([]T, error) {
	rt, err := s.newTracker(rest)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	r := &reading[T]{done: make(chan struct{}), progress: s.newProgressCheck(rt, rest)}
	r.run(ctx, s, rt, nil, nil)
	return r.recs, r.check(what, rest, rt)
}

// reading is one run of Subject.Read on a tracker.
type reading[T any] struct {
	mu       sync.Mutex
	recs     []T
	returned bool  // Read returned
	late     int   // records emitted after Read returned
	err      error // what Read returned (or its panic)
	done     chan struct{}
	// progress checks the tracker's progress as the read goes; nil when
	// the checks are off.
	progress *progressCheck[T]
}

// goRead runs s.Read on rt on a new goroutine; see run.
func goRead[T any](ctx context.Context, s *Subject[T], rt beamsdf.RTracker, gate <-chan struct{}, hook func(k int)) *reading[T] {
	r := &reading[T]{done: make(chan struct{}), progress: s.newProgressCheck(rt, s.Restriction)}
	go r.run(ctx, s, rt, gate, hook)
	return r
}

// run waits for gate (if not nil), then reads. hook (if not nil) runs on the
// reading goroutine with k = 0 before Read is called, and with the number of
// records emitted so far after each record, inside emit. The progress checks
// run just before hook does, and once more when Read returned. done is
// closed when Read returned.
func (r *reading[T]) run(ctx context.Context, s *Subject[T], rt beamsdf.RTracker, gate <-chan struct{}, hook func(k int)) {
	defer close(r.done)
	defer r.progress.close()
	if gate != nil {
		<-gate
	}
	r.progress.before()
	if hook != nil {
		hook(0)
	}
	err := s.callRead(ctx, rt, func(v T) {
		r.mu.Lock()
		if r.returned {
			r.late++
			r.mu.Unlock()
			return
		}
		r.recs = append(r.recs, v)
		k := len(r.recs)
		r.mu.Unlock()
		r.progress.record(k)
		if hook != nil {
			hook(k)
		}
	})
	if err == nil && rt.GetError() == nil && rt.IsDone() {
		r.progress.after()
	}
	r.mu.Lock()
	r.returned, r.err = true, err
	r.mu.Unlock()
}

// count is the number of records emitted so far.
func (r *reading[T]) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

// check reports a read that did not finish as Beam's runtime demands: Read
// returned an error, emitted after returning, or left the tracker with an
// error or not done. Call it after done was closed.
func (r *reading[T]) check(what string, rest any, rt beamsdf.RTracker) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return fmt.Errorf("reading %s %v: Read returned an error after %d records: %w (tracker %v)", what, rest, len(r.recs), r.err, rt)
	}
	if r.late > 0 {
		return fmt.Errorf("reading %s %v: emit was called %d times after Read returned", what, rest, r.late)
	}
	if err := rt.GetError(); err != nil {
		return fmt.Errorf("reading %s %v: Read returned nil after %d records but the tracker holds an error: %w (tracker %v)", what, rest, len(r.recs), err, rt)
	}
	if !rt.IsDone() {
		return fmt.Errorf("reading %s %v: Read returned nil after %d records but the tracker is not done (IsDone false, restriction now %v; Beam's runtime fails such a bundle) (tracker %v)", what, rest, len(r.recs), rt.GetRestriction(), rt)
	}
	if r.progress != nil && r.progress.err != nil {
		return fmt.Errorf("reading %s %v: %w", what, rest, r.progress.err)
	}
	return nil
}

// diff compares two record lists in order and describes the first
// difference, naming the lists by their labels.
func (s *Subject[T]) diff(wantLabel string, want []T, gotLabel string, got []T) error {
	i := 0
	for ; i < len(want) && i < len(got); i++ {
		if !s.equal(want[i], got[i]) {
			return fmt.Errorf("%s (%d records) and %s (%d records) agree on the first %d records, then differ: %s[%d] = %s, %s[%d] = %s",
				wantLabel, len(want), gotLabel, len(got), i, wantLabel, i, show(want[i]), gotLabel, i, show(got[i]))
		}
	}
	switch {
	case i < len(want):
		return fmt.Errorf("%s has %d more records after all %d of %s; missing from %s: %s",
			wantLabel, len(want)-i, len(got), gotLabel, gotLabel, showList(want[i:]))
	case i < len(got):
		return fmt.Errorf("%s has %d more records after all %d of %s; extra in %s: %s",
			gotLabel, len(got)-i, len(want), wantLabel, gotLabel, showList(got[i:]))
	}
	return nil
}

const maxShown = 5

func show(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func showList[T any](l []T) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range l {
		if i == maxShown {
			fmt.Fprintf(&b, " ... (%d more)", len(l)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(show(v))
	}
	b.WriteByte(']')
	return b.String()
}
