package sdftest

import (
	"fmt"
	"math"
	"time"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
)

// DefaultProgressTimeout bounds each GetProgress call of the progress checks
// when Subject.ProgressTimeout is 0. GetProgress must answer from memory; a
// call that takes this long is taken to be blocked.
const DefaultProgressTimeout = 5 * time.Second

// progressTolerance is the relative slack of the progress comparisons, for
// float rounding.
const progressTolerance = 1e-9

// splitPointCounter is what sdf.Tracker reports of rule 7.
type splitPointCounter interface {
	SplitPointsConsumed() int64
	SplitPointsRemaining() int64
}

// progressSample is one GetProgress answer, with the split points when the
// tracker counts them.
type progressSample struct {
	done, remaining      float64
	consumed, remaining7 int64
}

// prober calls GetProgress on its own goroutine, so that a GetProgress that
// blocks (on a lock the reader holds while it waits, say) is reported, not a
// deadlock.
type prober struct {
	rt      beamsdf.RTracker
	req     chan struct{}
	resp    chan progressSample
	timer   *time.Timer
	timeout time.Duration
	stuck   bool
}

func newProber(rt beamsdf.RTracker, timeout time.Duration) *prober {
	p := &prober{rt: rt, req: make(chan struct{}), resp: make(chan progressSample, 1), timeout: timeout}
	go func() {
		for range p.req {
			var s progressSample
			s.done, s.remaining = p.rt.GetProgress()
			if c, ok := p.rt.(splitPointCounter); ok {
				s.consumed, s.remaining7 = c.SplitPointsConsumed(), c.SplitPointsRemaining()
			} else {
				s.consumed, s.remaining7 = -1, -1
			}
			p.resp <- s
		}
	}()
	return p
}

// sample asks for progress; ok is false when GetProgress did not answer
// within the timeout (the prober is then stuck and asks no more).
func (p *prober) sample() (s progressSample, ok bool) {
	if p.stuck {
		return s, false
	}
	p.req <- struct{}{}
	if p.timer == nil {
		p.timer = time.NewTimer(p.timeout)
	} else {
		p.timer.Reset(p.timeout)
	}
	select {
	case s = <-p.resp:
		p.timer.Stop()
		return s, true
	case <-p.timer.C:
		p.stuck = true
		return s, false
	}
}

// close ends the prober's goroutine once its last GetProgress returned.
func (p *prober) close() { close(p.req) }

// progressCheck checks the progress a tracker reports during one read, rules
// 6 and 7 of the split contract (see the package doc):
//   - before the first claim, done is 0, and when Subject.Size is set, done +
//     remaining is the size of the restriction (the same unit);
//   - as records are claimed, done and the fraction done/(done+remaining)
//     never decrease, and (with Size, when no split races the reader) done
//   - remaining never exceeds the size of the current restriction;
//   - once Read returned and the tracker is done, remaining is 0 and done
//     is not: the fraction is 1;
//   - every value is finite and not negative, and GetProgress answers within
//     the timeout while Read waits inside emit;
//   - split points consumed (where the tracker counts them, as sdf.Tracker
//     does) never decrease and are 0 before the first claim; split points
//     remaining are -1 (unknown) or more.
type progressCheck[T any] struct {
	s    *Subject[T]
	rest any
	rt   beamsdf.RTracker
	p    *prober
	last progressSample
	frac float64
	err  error // the first violation
}

func (s *Subject[T]) newProgressCheck(rt beamsdf.RTracker, rest any) *progressCheck[T] {
	if s.SkipProgress {
		return nil
	}
	timeout := s.ProgressTimeout
	if timeout <= 0 {
		timeout = DefaultProgressTimeout
	}
	return &progressCheck[T]{s: s, rest: rest, rt: rt, p: newProber(rt, timeout)}
}

func (c *progressCheck[T]) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("progress (rules 6-7): "+format, args...)
	}
}

// take samples progress, checks what every sample must satisfy, and reports
// whether the sample can be used.
func (c *progressCheck[T]) take(when string) (progressSample, bool) {
	s, ok := c.p.sample()
	if !ok {
		c.fail("GetProgress did not return within %v %s: it must answer from memory, never wait for the reader or for I/O (tracker %v)", c.p.timeout, when, c.rt)
		return s, false
	}
	switch {
	case math.IsNaN(s.done) || math.IsNaN(s.remaining) || math.IsInf(s.done, 0) || math.IsInf(s.remaining, 0):
		c.fail("GetProgress() = %v, %v %s: not finite", s.done, s.remaining, when)
		return s, false
	case s.done < 0 || s.remaining < 0:
		c.fail("GetProgress() = %v, %v %s: negative work", s.done, s.remaining, when)
		return s, false
	case s.remaining7 < -1:
		c.fail("SplitPointsRemaining() = %d %s, want -1 (unknown) or more", s.remaining7, when)
		return s, false
	}
	return s, true
}

func fraction(s progressSample) float64 {
	if t := s.done + s.remaining; t > 0 {
		return s.done / t
	}
	return 0
}

func less(a, b float64) bool { return a < b-progressTolerance*math.Max(1, math.Abs(b)) }

// before checks a new tracker, before Read is called.
func (c *progressCheck[T]) before() {
	if c == nil {
		return
	}
	s, ok := c.take("before the first claim")
	if !ok {
		return
	}
	if s.done != 0 {
		c.fail("GetProgress() = %v, %v before the first claim, want done 0", s.done, s.remaining)
	}
	if s.consumed > 0 {
		c.fail("SplitPointsConsumed() = %d before the first claim, want 0", s.consumed)
	}
	if c.s.Size != nil {
		want := c.s.Size(c.rest)
		if got := s.done + s.remaining; math.Abs(got-want) > progressTolerance*math.Max(1, math.Abs(want)) {
			c.fail("a new tracker of %v reports done+remaining = %v, but the restriction's size (Subject.Size, the SDF's RestrictionSize) is %v: progress and size must be in the same unit", c.rest, got, want)
		}
	}
	c.last, c.frac = s, fraction(s)
}

// record checks the tracker after the k-th record was emitted, while Read
// waits inside emit.
func (c *progressCheck[T]) record(k int) {
	if c == nil || c.err != nil {
		return
	}
	when := fmt.Sprintf("while Read waits in emit after %d records", k)
	s, ok := c.take(when)
	if !ok {
		return
	}
	if less(s.done, c.last.done) {
		c.fail("done went down from %v to %v %s (tracker %v)", c.last.done, s.done, when, c.rt)
	}
	if f := fraction(s); less(f, c.frac) {
		c.fail("the fraction done went down from %v to %v (GetProgress() = %v, %v) %s (tracker %v)", c.frac, f, s.done, s.remaining, when, c.rt)
	} else {
		c.frac = f
	}
	if c.last.consumed >= 0 && s.consumed < c.last.consumed {
		c.fail("SplitPointsConsumed() went down from %d to %d %s", c.last.consumed, s.consumed, when)
	}
	c.last = s
}

// after checks the tracker once Read returned nil and the tracker is done.
func (c *progressCheck[T]) after() {
	if c == nil || c.err != nil {
		return
	}
	s, ok := c.take("after Read returned")
	if !ok {
		return
	}
	if s.remaining != 0 || s.done <= 0 {
		c.fail("GetProgress() = %v, %v once the tracker is done, want remaining 0 and done > 0 (a fraction of 1) (tracker %v)", s.done, s.remaining, c.rt)
	}
}

func (c *progressCheck[T]) close() {
	if c != nil {
		c.p.close()
	}
}
