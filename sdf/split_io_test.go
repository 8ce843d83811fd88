package sdf_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// The tests below build a toy stream reader on sdf.Core the way bigqueryio
// reads a BigQuery Storage stream: a restriction is a stream and a row range,
// and a split is an RPC to a service (fakeService.split, SplitReadStream's
// semantics) that returns two new streams: the primary holds the rows of the
// original before j, the remainder those from j on, and the original stays
// readable in full.

// fakeService holds streams of rows. Its split can be slowed, made to fail,
// to refuse, or to wait for a signal, to exercise every path of SplitWithIO.
type fakeService struct {
	mu      sync.Mutex
	streams map[string][]int
	n       int

	// Fault injection for split, read under mu.
	delay     time.Duration // sleep before answering
	ignoreCtx bool          // sleep through the deadline
	fail      error         // answer with this error
	refuse    bool          // answer that the stream cannot be split
	gate      chan struct{} // when not nil, wait for it (or ctx) first
	entered   chan struct{} // when not nil, receives when a split starts
	splits    atomic.Int64
	active    atomic.Int64 // splits running now
	maxActive atomic.Int64 // the most that ran at once
}

func newFakeService(rows int) *fakeService {
	s := &fakeService{streams: map[string][]int{}}
	r := make([]int, rows)
	for i := range r {
		r[i] = 1000 + i
	}
	s.streams["s0"] = r
	return s
}

func (s *fakeService) rows(stream string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[stream]
}

// split splits stream at fraction frac of its rows: j = floor(frac*n). An
// empty half means the stream cannot be split.
func (s *fakeService) split(ctx context.Context, stream string, frac float64) (primary, remainder string, j int64, err error) {
	s.splits.Add(1)
	if n := s.active.Add(1); n > s.maxActive.Load() {
		s.maxActive.Store(n)
	}
	defer s.active.Add(-1)
	s.mu.Lock()
	delay, ignore, fail, refuse, gate, entered := s.delay, s.ignoreCtx, s.fail, s.refuse, s.gate, s.entered
	s.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			if !ignore {
				return "", "", 0, ctx.Err()
			}
			<-gate
		}
	}
	if delay > 0 {
		if ignore {
			time.Sleep(delay)
		} else {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return "", "", 0, ctx.Err()
			}
		}
	}
	if fail != nil {
		return "", "", 0, fail
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rows := s.streams[stream]
	j = int64(frac * float64(len(rows)))
	if refuse || j <= 0 || j >= int64(len(rows)) {
		return "", "", 0, nil
	}
	s.n++
	primary, remainder = fmt.Sprintf("s%d.p", s.n), fmt.Sprintf("s%d.r", s.n)
	s.streams[primary], s.streams[remainder] = rows[:j], rows[j:]
	return primary, remainder, j, nil
}

// streamRest is the toy restriction: rows [Start, End) of Stream, End
// sdf.Unbounded for "to the end of the stream".
type streamRest struct {
	Stream     string
	Start, End int64
}

func (r streamRest) String() string {
	if r.End == sdf.Unbounded {
		return fmt.Sprintf("%s[%d:]", r.Stream, r.Start)
	}
	return fmt.Sprintf("%s[%d:%d]", r.Stream, r.Start, r.End)
}

func cutStream(r streamRest, pos int64) (streamRest, streamRest) {
	return streamRest{r.Stream, r.Start, pos}, streamRest{r.Stream, pos, r.End}
}

// splitMode says how the toy tracker learns where its split lies.
type splitMode int

const (
	// exact: the service tells j; the primary ends at j; claims go on
	// during the RPC and the commit refuses if the reader passed j.
	exact splitMode = iota
	// verify: the tracker does not learn j, as with BigQuery; the RPC
	// checks that the primary holds the reader's next row, and claims are
	// held meanwhile so that the reader does not move past it.
	verify
	// verifyNoHold: verify without holding claims: a reader that claims
	// during the RPC makes the commit refuse.
	verifyNoHold
)

// streamTracker is the toy tracker, a thin user of sdf.Core as bigqueryio's
// is.
type streamTracker struct {
	core sdf.Core[streamRest]
	svc  *fakeService
	mode splitMode
	// Under core's lock:
	timeout time.Duration
	last    sdf.IOSplitResult[streamRest]
}

func newStreamTracker(svc *fakeService, r streamRest, mode splitMode) *streamTracker {
	t := &streamTracker{svc: svc, mode: mode, timeout: 2 * time.Second}
	t.core.Init("streamTracker", r, r.Start, r.End, cutStream)
	return t
}

func (t *streamTracker) TryClaim(pos any) bool { return t.core.TryClaim(pos.(int64), true) }
func (t *streamTracker) GetError() error       { return t.core.GetError() }
func (t *streamTracker) IsDone() bool          { return t.core.IsDone() }
func (t *streamTracker) GetRestriction() any   { return t.core.Restriction() }
func (t *streamTracker) String() string        { return t.core.String() }
func (t *streamTracker) IsBounded() bool       { return true }
func (t *streamTracker) markDone()             { t.core.MarkDone() }
func (t *streamTracker) result() sdf.IOSplitResult[streamRest] {
	t.core.Lock()
	defer t.core.Unlock()
	return t.last
}

// GetProgress is in rows, from the restriction's start.
func (t *streamTracker) GetProgress() (done, remaining float64) {
	t.core.Lock()
	defer t.core.Unlock()
	start, end := t.core.BoundsLocked()
	end = min(end, int64(len(t.svc.rows(t.core.RestrictionLocked().Stream))))
	if t.core.StoppedLocked() {
		return float64(max(end-start, 1)), 0
	}
	next, _ := t.core.NextLocked()
	return float64(next - start), float64(max(end-next, 0))
}

// claim claims row off and says which stream serves it now and whether the
// restriction changed since epoch.
func (t *streamTracker) claim(off int64, epoch uint64) (ok bool, stream string, now uint64) {
	t.core.Lock()
	defer t.core.Unlock()
	ok = t.core.ClaimLocked(off, true)
	return ok, t.core.RestrictionLocked().Stream, t.core.EpochLocked()
}

func (t *streamTracker) TrySplit(f float64) (primary, residual any, err error) {
	if f <= 0 {
		t.core.Lock()
		defer t.core.Unlock()
		res, ok := t.core.CheckpointLocked()
		if !ok {
			return t.core.RestrictionLocked(), nil, nil
		}
		return t.core.RestrictionLocked(), res, nil
	}
	t.core.Lock()
	opts := sdf.IOSplitOptions{Timeout: t.timeout, HoldClaims: t.mode == verify}
	t.core.Unlock()
	res := t.core.SplitWithIO(context.Background(), opts, func(s sdf.Snapshot[streamRest]) sdf.SplitIO[streamRest] {
		n := int64(len(t.svc.rows(s.Restriction.Stream)))
		if (s.End != sdf.Unbounded && s.End < n) || s.Next >= n {
			return nil // a checkpoint's residual is not split again here
		}
		// Beam's f is of the remainder, the service's of the whole stream.
		frac := (float64(s.Next) + f*float64(n-s.Next)) / float64(n)
		return func(ctx context.Context) (sdf.IOSplit[streamRest], bool, error) {
			p, r, j, err := t.svc.split(ctx, s.Restriction.Stream, frac)
			if err != nil || p == "" {
				return sdf.IOSplit[streamRest]{}, false, err
			}
			split := sdf.IOSplit[streamRest]{
				Primary:  streamRest{p, s.Restriction.Start, sdf.Unbounded},
				Residual: streamRest{r, 0, sdf.Unbounded},
			}
			if t.mode == exact {
				split.Pos, split.End = j, j
				return split, true, nil
			}
			// Read the reader's next row from the primary, as Java does.
			if s.Next >= int64(len(t.svc.rows(p))) {
				return sdf.IOSplit[streamRest]{}, false, nil // FAILED_PRECONDITION
			}
			split.Pos, split.End = s.Next, sdf.Unbounded
			return split, true, nil
		}
	})
	t.core.Lock()
	t.last = res
	t.core.Unlock()
	if !res.Accepted {
		return res.Primary, nil, nil
	}
	return res.Primary, res.Residual, nil
}

// readStream is the toy reader: it reads rows from the stream of its
// restriction, claims each, switches to the primary stream when a split
// committed, and marks the tracker done at the stream's end.
func readStream(svc *fakeService, onClaim func(off int64)) func(ctx context.Context, rt beamsdf.RTracker, emit func(int)) error {
	return func(ctx context.Context, rt beamsdf.RTracker, emit func(int)) error {
		t := rt.(*streamTracker)
		t.core.Lock()
		rest, epoch := t.core.RestrictionLocked(), t.core.EpochLocked()
		t.core.Unlock()
		stream := rest.Stream
		rows := svc.rows(stream)
		for off := rest.Start; ; off++ {
			if off >= int64(len(rows)) {
				t.markDone()
				return nil
			}
			ok, cur, now := t.claim(off, epoch)
			if !ok {
				return nil
			}
			if onClaim != nil {
				onClaim(off)
			}
			if now != epoch {
				epoch = now
				if cur != stream {
					stream, rows = cur, svc.rows(cur)
					if off >= int64(len(rows)) {
						return fmt.Errorf("row %d claimed after a split, but the primary %s holds %d rows", off, cur, len(rows))
					}
				}
			}
			emit(rows[off])
		}
	}
}

func streamSubject(svc *fakeService, mode splitMode) sdftest.Subject[int] {
	return sdftest.Subject[int]{
		Restriction: streamRest{"s0", 0, sdf.Unbounded},
		NewTracker:  func(r any) beamsdf.RTracker { return newStreamTracker(svc, r.(streamRest), mode) },
		Read:        readStream(svc, nil),
	}
}

// The toy keeps the split contract under the harness: exhaustive and
// concurrent, with exact and verified splits.
func TestSplitWithIOHarness(t *testing.T) {
	for _, mode := range []splitMode{exact, verify} {
		t.Run(fmt.Sprint([]string{"exact", "verify"}[mode]), func(t *testing.T) {
			svc := newFakeService(20)
			rep := sdftest.AssertSplitAtFractionExhaustive(t, streamSubject(svc, mode))
			if rep.NonTrivial == 0 || rep.Concurrent.NonTrivial == 0 {
				t.Errorf("no non-trivial split: %v", rep)
			}
		})
	}
}

// Splits with a slow service race the reader: claims go on during the RPC
// (exact) or wait for it (verify), and no row is lost or read twice.
func TestSplitWithIOConcurrentSlow(t *testing.T) {
	for _, mode := range []splitMode{exact, verify, verifyNoHold} {
		t.Run(fmt.Sprint([]string{"exact", "verify", "verifyNoHold"}[mode]), func(t *testing.T) {
			svc := newFakeService(30)
			svc.delay = 200 * time.Microsecond
			s := streamSubject(svc, mode)
			for _, n := range []int{0, 5, 29} {
				for _, f := range []float64{0.01, 0.5, 0.9} {
					if _, err := sdftest.CheckSplitAtFractionConcurrent(context.Background(), s, n, f, 10); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// splitAsync starts tr.TrySplit(f) on a goroutine.
func splitAsync(tr *streamTracker, f float64) <-chan sdf.IOSplitResult[streamRest] {
	done := make(chan sdf.IOSplitResult[streamRest], 1)
	go func() {
		tr.TrySplit(f)
		done <- tr.result()
	}()
	return done
}

func claimRows(t *testing.T, tr *streamTracker, from, to int64) {
	t.Helper()
	for off := from; off < to; off++ {
		if !tr.TryClaim(off) {
			t.Fatalf("claim of row %d refused (tracker %v)", off, tr)
		}
	}
}

func TestSplitWithIOAccepted(t *testing.T) {
	svc := newFakeService(100)
	tr := newStreamTracker(svc, streamRest{"s0", 0, sdf.Unbounded}, exact)
	claimRows(t, tr, 0, 10)
	// 10 + 0.5*90 = 55 rows of 100.
	p, r, err := tr.TrySplit(0.5)
	if err != nil || r == nil {
		t.Fatalf("TrySplit(0.5) = %v, %v, %v; want a residual (result %+v)", p, r, err, tr.result())
	}
	want := streamRest{"s1.p", 0, sdf.Unbounded}
	if p != want || r != (streamRest{"s1.r", 0, sdf.Unbounded}) || tr.GetRestriction() != want {
		t.Errorf("split gave %v + %v, restriction %v; want %v + s1.r[0:]", p, r, tr.GetRestriction(), want)
	}
	if got := len(svc.rows("s1.p")); got != 55 {
		t.Errorf("primary holds %d rows, want 55", got)
	}
	if acc, ref := tr.core.SplitStats(); acc != 1 || ref != 0 {
		t.Errorf("SplitStats() = %d, %d; want 1, 0", acc, ref)
	}
	claimRows(t, tr, 10, 55)
	if tr.TryClaim(int64(55)) {
		t.Error("row 55 claimed past the committed end 55")
	}
	if !tr.IsDone() || tr.GetError() != nil {
		t.Errorf("IsDone %v GetError %v after the end", tr.IsDone(), tr.GetError())
	}
}

// refusal runs one split on a tracker that claimed 10 of 100 rows and checks
// it was refused for the reason given with nothing changed.
func wantRefused(t *testing.T, tr *streamTracker, f float64, why sdf.Refusal) sdf.IOSplitResult[streamRest] {
	t.Helper()
	before := tr.GetRestriction()
	_, accBefore := tr.core.SplitStats()
	p, r, err := tr.TrySplit(f)
	res := tr.result()
	if err != nil || r != nil || res.Accepted {
		t.Fatalf("TrySplit(%v) = %v, %v, %v; want refused (%v)", f, p, r, err, why)
	}
	if res.Refusal != why {
		t.Errorf("refused for %v (err %v), want %v", res.Refusal, res.Err, why)
	}
	if p != before || tr.GetRestriction() != before {
		t.Errorf("refused split: primary %v, restriction %v; want unchanged %v", p, tr.GetRestriction(), before)
	}
	if _, ref := tr.core.SplitStats(); ref != accBefore+1 {
		t.Errorf("refusals counted %d, want %d", ref, accBefore+1)
	}
	if tr.GetError() != nil {
		t.Errorf("a refused split left the tracker with error %v", tr.GetError())
	}
	return res
}

func TestSplitWithIORefusals(t *testing.T) {
	setup := func(t *testing.T, mode splitMode) (*fakeService, *streamTracker) {
		svc := newFakeService(100)
		tr := newStreamTracker(svc, streamRest{"s0", 0, sdf.Unbounded}, mode)
		claimRows(t, tr, 0, 10)
		return svc, tr
	}
	t.Run("plan refuses", func(t *testing.T) {
		svc := newFakeService(100)
		tr := newStreamTracker(svc, streamRest{"s0", 0, 50}, exact) // the plan splits whole streams only
		claimRows(t, tr, 0, 10)
		wantRefused(t, tr, 0.5, sdf.RefusedByPlan)
		if svc.splits.Load() != 0 {
			t.Error("the I/O ran although the plan refused")
		}
	})
	t.Run("service refuses", func(t *testing.T) {
		svc, tr := setup(t, exact)
		svc.refuse = true
		wantRefused(t, tr, 0.5, sdf.RefusedByIO)
	})
	t.Run("service fails", func(t *testing.T) {
		svc, tr := setup(t, exact)
		cause := errors.New("UNAVAILABLE")
		svc.fail = cause
		res := wantRefused(t, tr, 0.5, sdf.RefusedIOError)
		if !errors.Is(res.Err, cause) {
			t.Errorf("Err = %v, want it to wrap %v", res.Err, cause)
		}
		claimRows(t, tr, 10, 20) // the reader goes on
	})
	t.Run("I/O panics", func(t *testing.T) {
		_, tr := setup(t, exact)
		res := tr.core.SplitWithIO(context.Background(), sdf.IOSplitOptions{}, func(sdf.Snapshot[streamRest]) sdf.SplitIO[streamRest] {
			return func(context.Context) (sdf.IOSplit[streamRest], bool, error) { panic("boom") }
		})
		if res.Accepted || res.Refusal != sdf.RefusedIOError || !strings.Contains(fmt.Sprint(res.Err), "boom") {
			t.Errorf("panicking I/O: %+v", res)
		}
		claimRows(t, tr, 10, 11)
	})
	t.Run("plan panics", func(t *testing.T) {
		_, tr := setup(t, exact)
		func() {
			defer func() { _ = recover() }()
			tr.core.SplitWithIO(context.Background(), sdf.IOSplitOptions{}, func(sdf.Snapshot[streamRest]) sdf.SplitIO[streamRest] { panic("boom") })
		}()
		claimRows(t, tr, 10, 11) // the lock was released
	})
	t.Run("timeout, I/O honours ctx", func(t *testing.T) {
		svc, tr := setup(t, exact)
		svc.delay = time.Minute
		tr.core.Lock()
		tr.timeout = 50 * time.Millisecond
		tr.core.Unlock()
		t0 := time.Now()
		res := wantRefused(t, tr, 0.5, sdf.RefusedTimeout)
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("the split took %v with a 50ms deadline", d)
		}
		if !errors.Is(res.Err, context.DeadlineExceeded) {
			t.Errorf("Err = %v, want DeadlineExceeded", res.Err)
		}
	})
	t.Run("timeout, I/O ignores ctx", func(t *testing.T) {
		svc, tr := setup(t, exact)
		svc.gate, svc.ignoreCtx = make(chan struct{}), true
		tr.core.Lock()
		tr.timeout = 50 * time.Millisecond
		tr.core.Unlock()
		t0 := time.Now()
		wantRefused(t, tr, 0.5, sdf.RefusedTimeout)
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("the split took %v with a 50ms deadline", d)
		}
		close(svc.gate) // the late answer is dropped
		claimRows(t, tr, 10, 20)
		if tr.GetRestriction() != (streamRest{"s0", 0, sdf.Unbounded}) {
			t.Errorf("a late answer changed the restriction to %v", tr.GetRestriction())
		}
	})
	t.Run("tracker done", func(t *testing.T) {
		svc, tr := setup(t, exact)
		tr.markDone()
		wantRefused(t, tr, 0.5, sdf.RefusedDone)
		if svc.splits.Load() != 0 {
			t.Error("the I/O ran on a done tracker")
		}
	})
	t.Run("end past the tracker's", func(t *testing.T) {
		_, tr := setup(t, exact)
		tr.core.Lock()
		tr.core.CutLocked(50)
		tr.core.Unlock()
		res := tr.core.SplitWithIO(context.Background(), sdf.IOSplitOptions{}, func(s sdf.Snapshot[streamRest]) sdf.SplitIO[streamRest] {
			return func(context.Context) (sdf.IOSplit[streamRest], bool, error) {
				return sdf.IOSplit[streamRest]{Primary: streamRest{"x", 0, 60}, Pos: 60, End: 60}, true, nil
			}
		})
		if res.Accepted || res.Refusal != sdf.RefusedChanged || res.Err == nil {
			t.Errorf("a primary past the end was committed: %+v", res)
		}
	})
}

// The reader claims past the split position while the RPC runs: the commit
// refuses and nothing changes.
func TestSplitWithIOReaderPassesSplit(t *testing.T) {
	for _, mode := range []splitMode{exact, verifyNoHold} {
		t.Run([]string{"exact", "", "verifyNoHold"}[mode], func(t *testing.T) {
			svc := newFakeService(100)
			svc.gate, svc.entered = make(chan struct{}), make(chan struct{}, 1)
			tr := newStreamTracker(svc, streamRest{"s0", 0, sdf.Unbounded}, mode)
			claimRows(t, tr, 0, 10)
			// 10 + 0.1*90 = 19: the split lies at row 19.
			done := splitAsync(tr, 0.1)
			<-svc.entered
			claimRows(t, tr, 10, 30) // past 19 while the RPC waits
			close(svc.gate)
			res := <-done
			if res.Accepted || res.Refusal != sdf.RefusedPassed {
				t.Fatalf("split after the reader passed it: %+v", res)
			}
			if tr.GetRestriction() != (streamRest{"s0", 0, sdf.Unbounded}) {
				t.Errorf("restriction %v after a refused split", tr.GetRestriction())
			}
			claimRows(t, tr, 30, 100) // the original goes on in full
		})
	}
}

// While a split's I/O runs, GetProgress, String and (without HoldClaims)
// claims do not wait for it; a second split is refused at once; a
// checkpoint goes ahead and the I/O's commit is then refused.
func TestSplitWithIONeverBlocks(t *testing.T) {
	svc := newFakeService(100)
	svc.gate, svc.entered = make(chan struct{}), make(chan struct{}, 1)
	tr := newStreamTracker(svc, streamRest{"s0", 0, sdf.Unbounded}, exact)
	claimRows(t, tr, 0, 10)
	done := splitAsync(tr, 0.5)
	<-svc.entered

	within(t, "GetProgress", func() {
		if d, r := tr.GetProgress(); d != 10 || r != 90 {
			t.Errorf("GetProgress() = %v, %v during the I/O; want 10, 90", d, r)
		}
	})
	within(t, "String", func() {
		if s := tr.String(); !strings.Contains(s, "in flight") {
			t.Errorf("String() = %q, want it to mention the split in flight", s)
		}
	})
	within(t, "claims", func() { claimRows(t, tr, 10, 12) })
	within(t, "a second split", func() {
		res := tr.core.SplitWithIO(context.Background(), sdf.IOSplitOptions{}, func(sdf.Snapshot[streamRest]) sdf.SplitIO[streamRest] {
			t.Error("the plan of a second split ran while one was in flight")
			return nil
		})
		if res.Refusal != sdf.RefusedBusy {
			t.Errorf("second split: %+v, want RefusedBusy", res)
		}
	})
	var residual any
	within(t, "a checkpoint", func() { _, residual, _ = tr.TrySplit(0) })
	if residual != (streamRest{"s0", 12, sdf.Unbounded}) || !tr.IsDone() {
		t.Fatalf("checkpoint during the I/O gave residual %v, IsDone %v", residual, tr.IsDone())
	}
	close(svc.gate)
	if res := <-done; res.Accepted || res.Refusal != sdf.RefusedDone {
		t.Errorf("the I/O's commit after a checkpoint: %+v, want RefusedDone", res)
	}
	if tr.GetRestriction() != (streamRest{"s0", 0, 12}) {
		t.Errorf("restriction %v, want the checkpoint's primary s0[0:12]", tr.GetRestriction())
	}
}

// A split by position while the I/O runs changes the restriction: the
// commit is refused.
func TestSplitWithIORestrictionChanged(t *testing.T) {
	svc := newFakeService(100)
	svc.gate, svc.entered = make(chan struct{}), make(chan struct{}, 1)
	tr := newStreamTracker(svc, streamRest{"s0", 0, sdf.Unbounded}, exact)
	claimRows(t, tr, 0, 10)
	done := splitAsync(tr, 0.5)
	<-svc.entered
	tr.core.Lock()
	res, ok := tr.core.SplitAtLocked(80)
	tr.core.Unlock()
	if !ok || res != (streamRest{"s0", 80, sdf.Unbounded}) {
		t.Fatalf("SplitAtLocked(80) = %v, %v", res, ok)
	}
	close(svc.gate)
	if r := <-done; r.Accepted || r.Refusal != sdf.RefusedChanged {
		t.Errorf("commit after the restriction changed: %+v, want RefusedChanged", r)
	}
	if tr.GetRestriction() != (streamRest{"s0", 0, 80}) {
		t.Errorf("restriction %v, want s0[0:80]", tr.GetRestriction())
	}
}

// HoldClaims: a claim during the I/O waits for the commit and then follows
// the primary; when the I/O hangs, it waits no longer than the deadline.
func TestSplitWithIOHoldClaims(t *testing.T) {
	t.Run("until the commit", func(t *testing.T) {
		svc := newFakeService(100)
		svc.gate, svc.entered = make(chan struct{}), make(chan struct{}, 1)
		tr := newStreamTracker(svc, streamRest{"s0", 0, sdf.Unbounded}, verify)
		claimRows(t, tr, 0, 10)
		done := splitAsync(tr, 0.5)
		<-svc.entered
		claimed := make(chan string, 1)
		go func() {
			ok, stream, _ := tr.claim(10, 0)
			claimed <- fmt.Sprint(ok, " ", stream)
		}()
		select {
		case c := <-claimed:
			t.Fatalf("a claim went through during a split that holds claims: %s", c)
		case <-time.After(20 * time.Millisecond):
		}
		within(t, "GetProgress", func() { tr.GetProgress() })
		close(svc.gate)
		if res := <-done; !res.Accepted {
			t.Fatalf("split refused: %+v", res)
		}
		if c := <-claimed; c != "true s1.p" {
			t.Errorf("held claim gave %q, want it accepted on the primary s1.p", c)
		}
	})
	t.Run("at most the deadline", func(t *testing.T) {
		svc := newFakeService(100)
		svc.gate, svc.entered, svc.ignoreCtx = make(chan struct{}), make(chan struct{}, 1), true
		defer close(svc.gate)
		tr := newStreamTracker(svc, streamRest{"s0", 0, sdf.Unbounded}, verify)
		tr.core.Lock()
		tr.timeout = 100 * time.Millisecond
		tr.core.Unlock()
		claimRows(t, tr, 0, 10)
		t0 := time.Now()
		done := splitAsync(tr, 0.5)
		<-svc.entered
		if !tr.TryClaim(int64(10)) {
			t.Fatal("held claim refused")
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("the claim waited %v with a 100ms deadline", d)
		}
		if res := <-done; res.Refusal != sdf.RefusedTimeout {
			t.Errorf("hung split: %+v, want RefusedTimeout", res)
		}
	})
}

// Many splitters at once on a reading tracker: at most one I/O runs at a
// time, every split either commits or changes nothing, and the reader reads
// each row once.
func TestSplitWithIOConcurrentSplitters(t *testing.T) {
	for _, mode := range []splitMode{exact, verify} {
		t.Run([]string{"exact", "verify"}[mode], func(t *testing.T) {
			const rows = 400
			svc := newFakeService(rows)
			svc.delay = 100 * time.Microsecond
			tr := newStreamTracker(svc, streamRest{"s0", 0, sdf.Unbounded}, mode)
			var got []int
			readDone := make(chan error, 1)
			go func() {
				slow := func(int64) { time.Sleep(20 * time.Microsecond) }
				readDone <- readStream(svc, slow)(context.Background(), tr, func(v int) { got = append(got, v) })
			}()
			var wg sync.WaitGroup
			var mu sync.Mutex
			var residuals []streamRest
			stop := make(chan struct{})
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-readDone:
							readDone <- nil
							return
						case <-stop:
							return
						default:
						}
						_, r, _ := tr.TrySplit(0.5 + 0.45*float64((i+g)%10)/10)
						if r != nil {
							mu.Lock()
							residuals = append(residuals, r.(streamRest))
							mu.Unlock()
						}
						tr.GetProgress()
						time.Sleep(200 * time.Microsecond)
					}
				}()
			}
			err := <-readDone
			readDone <- err
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			// The residuals are disjoint streams: read each and put
			// everything together.
			all := append([]int(nil), got...)
			for _, r := range residuals {
				rows := svc.rows(r.Stream)
				all = append(all, rows[r.Start:min(r.End, int64(len(rows)))]...)
			}
			seen := map[int]int{}
			for _, v := range all {
				seen[v]++
			}
			for i := range rows {
				if seen[1000+i] != 1 {
					t.Fatalf("row %d read %d times (primary %d rows, %d residuals)", i, seen[1000+i], len(got), len(residuals))
				}
			}
			acc, ref := tr.core.SplitStats()
			t.Logf("%d rows read by the primary, %d splits accepted, %d refused", len(got), acc, ref)
			if acc == 0 {
				t.Error("no split was accepted")
			}
			if n := svc.maxActive.Load(); n != 1 {
				t.Errorf("%d splits' I/O ran at once, want 1", n)
			}
		})
	}
}

// within fails t when f does not return within a second.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatalf("%s blocked while a split's I/O was in flight", what)
	}
}

// TestSplitWithIOPrepared: with Prepare the split answers at once, never
// waiting on its I/O (Beam's splitAtFraction contract); the I/O prepares the
// split in the background and the next call commits it under the lock while
// the reader has not passed it, or drops it and plans anew. (Before: every
// split waited for its I/O, up to the timeout.)
func TestSplitWithIOPrepared(t *testing.T) {
	ctx := context.Background()
	// gated plans a split at 55 whose I/O waits for gate.
	gated := func(gate chan struct{}, plans *int) sdf.SplitPlan[streamRest] {
		return func(s sdf.Snapshot[streamRest]) sdf.SplitIO[streamRest] {
			*plans++
			return func(ctx context.Context) (sdf.IOSplit[streamRest], bool, error) {
				select {
				case <-gate:
				case <-ctx.Done():
					return sdf.IOSplit[streamRest]{}, false, ctx.Err()
				}
				return sdf.IOSplit[streamRest]{
					Primary:  streamRest{"p", s.Restriction.Start, 55},
					Residual: streamRest{"r", 0, sdf.Unbounded},
					Pos:      55, End: 55,
				}, true, nil
			}
		}
	}
	var settled []sdf.Refusal
	var mu sync.Mutex
	opts := sdf.IOSplitOptions{Prepare: true, Timeout: time.Minute, Settled: func(r sdf.Refusal, _ error) {
		mu.Lock()
		settled = append(settled, r)
		mu.Unlock()
	}}
	s0 := streamRest{"s0", 0, sdf.Unbounded}

	t.Run("committed by the next call", func(t *testing.T) {
		tr := newStreamTracker(newFakeService(100), s0, exact)
		claimRows(t, tr, 0, 10)
		gate, plans := make(chan struct{}), 0
		start := time.Now()
		res := tr.core.SplitWithIO(ctx, opts, gated(gate, &plans))
		if d := time.Since(start); res.Accepted || res.Refusal != sdf.RefusedPending || d > time.Second {
			t.Fatalf("first call: %+v after %v; want refused at once as pending", res, d)
		}
		if res := tr.core.SplitWithIO(ctx, opts, gated(gate, &plans)); res.Refusal != sdf.RefusedBusy {
			t.Errorf("call during the I/O: %+v, want busy", res)
		}
		claimRows(t, tr, 10, 20) // the reader never waits
		close(gate)
		if err := tr.core.WaitSplitIO(ctx); err != nil || !tr.core.HasPreparedSplit() {
			t.Fatalf("after the I/O: %v, prepared %v", err, tr.core.HasPreparedSplit())
		}
		res = tr.core.SplitWithIO(ctx, opts, gated(gate, &plans))
		if !res.Accepted || !res.Prepared || res.Residual != (streamRest{"r", 0, sdf.Unbounded}) || tr.GetRestriction() != (streamRest{"p", 0, 55}) || plans != 1 {
			t.Fatalf("second call: %+v, restriction %v, %d plans; want the prepared split committed", res, tr.GetRestriction(), plans)
		}
		claimRows(t, tr, 20, 55)
		if tr.TryClaim(int64(55)) || !tr.IsDone() {
			t.Errorf("row 55 claimed past the committed end, or not done: %v", tr)
		}
		if acc, ref := tr.core.SplitStats(); acc != 1 || ref != 2 {
			t.Errorf("SplitStats %d, %d; want 1 accepted, 2 refused", acc, ref)
		}
	})

	t.Run("dropped when the reader passed it", func(t *testing.T) {
		tr := newStreamTracker(newFakeService(100), s0, exact)
		claimRows(t, tr, 0, 10)
		gate, plans := make(chan struct{}), 0
		if res := tr.core.SplitWithIO(ctx, opts, gated(gate, &plans)); res.Refusal != sdf.RefusedPending {
			t.Fatalf("%+v, want pending", res)
		}
		close(gate)
		if err := tr.core.WaitSplitIO(ctx); err != nil || !tr.core.HasPreparedSplit() {
			t.Fatalf("after the I/O: %v, prepared %v", err, tr.core.HasPreparedSplit())
		}
		claimRows(t, tr, 10, 56) // past the split at 55
		gate2 := make(chan struct{})
		res := tr.core.SplitWithIO(ctx, opts, gated(gate2, &plans))
		if res.Accepted || res.Dropped != sdf.RefusedPassed || res.Refusal != sdf.RefusedPending || plans != 2 {
			t.Errorf("after the reader passed: %+v, %d plans; want the prepared split dropped and a new one planned", res, plans)
		}
		if tr.GetRestriction() != s0 {
			t.Errorf("restriction %v, want %v unchanged", tr.GetRestriction(), s0)
		}
		close(gate2)
		if err := tr.core.WaitSplitIO(ctx); err != nil {
			t.Fatal(err)
		}
		// The new split lies at 55 too, which the reader passed: the
		// background commit check drops it at once.
		if tr.core.HasPreparedSplit() {
			t.Error("a split the reader had passed was kept as prepared")
		}
		claimRows(t, tr, 56, 100)
	})

	t.Run("timeout and errors are settled in the background", func(t *testing.T) {
		tr := newStreamTracker(newFakeService(100), s0, exact)
		claimRows(t, tr, 0, 10)
		mu.Lock()
		settled = nil
		mu.Unlock()
		o := opts
		o.Timeout = 20 * time.Millisecond
		plans := 0
		res := tr.core.SplitWithIO(ctx, o, gated(make(chan struct{}), &plans))
		if res.Refusal != sdf.RefusedPending {
			t.Fatalf("%+v, want pending", res)
		}
		if err := tr.core.WaitSplitIO(ctx); err != nil || tr.core.HasPreparedSplit() {
			t.Fatalf("after the deadline: %v, prepared %v", err, tr.core.HasPreparedSplit())
		}
		mu.Lock()
		got := slices.Clone(settled)
		mu.Unlock()
		if len(got) != 1 || got[0] != sdf.RefusedTimeout {
			t.Errorf("settled %v, want [timeout]", got)
		}
		claimRows(t, tr, 10, 100)
	})
}
