package datastoreio

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAdaptiveThrottlerProbability pins Java's formula: nothing is held
// back while the service accepts, (requests - 1.25*accepts)/(requests+1)
// once it refuses, and the history ages out after the window.
func TestAdaptiveThrottlerProbability(t *testing.T) {
	a := newAdaptiveThrottler()
	a.rand = func() float64 { return 0 } // hold back whenever p > 0
	now := t0
	for range 100 {
		if a.throttle(now) {
			t.Fatal("held back while every commit was accepted")
		}
		a.accepted(now)
	}
	if p := a.probability(now); p != 0 {
		t.Fatalf("p = %v after 100 accepted commits, want 0", p)
	}
	// 100 refused: 200 requests, 100 accepts.
	for range 100 {
		a.requests.add(now, 1)
	}
	if p, want := a.probability(now), (200-125.0)/201; math.Abs(p-want) > 1e-12 {
		t.Fatalf("p = %v, want %v", p, want)
	}
	if !a.throttle(now) {
		t.Fatal("not held back at p > 0 with rand 0")
	}
	a.rand = func() float64 { return 0.99 }
	if a.throttle(now) {
		t.Fatal("held back at p < 0.99 with rand 0.99")
	}
	// Two minutes on, the window is empty again.
	if p := a.probability(now.Add(AdaptiveThrottleWindow + latencyBucket)); p != 0 {
		t.Fatalf("p = %v once the window passed, want 0", p)
	}
}

// TestAdaptiveThrottlerInFlight: commits sent and not yet answered do not
// count as refused. Before, a writer's second commit, sent while the first
// was in flight, was held back with probability 1/2.
func TestAdaptiveThrottlerInFlight(t *testing.T) {
	a := newAdaptiveThrottler()
	a.rand = func() float64 { return 0 } // hold back whenever p > 0
	now := t0
	for i := range MaxCommitsInFlight {
		if a.throttle(now) {
			t.Fatalf("commit %d held back with %d in flight and none refused", i+1, i)
		}
	}
	a.accepted(now)
	a.accepted(now)
	// Refused commits still count once answered.
	for range 10 {
		if a.throttle(now) {
			break
		}
		a.refused()
	}
	if p := a.probability(now); p <= 0 {
		t.Fatalf("p = %v after refused commits, want > 0", p)
	}
}

// TestWriterThrottlesAdaptively: a service that refuses most commits with
// RESOURCE_EXHAUSTED makes the writer hold commits back (waiting
// AdaptiveThrottleDelay each time, on the fake clock), and every entity is
// still committed once.
func TestWriterThrottlesAdaptively(t *testing.T) {
	refused := 0
	f := &fakeCommitter{fail: func(a int) error {
		if a%4 != 0 { // three of four attempts refused
			refused++
			return status.Error(codes.ResourceExhausted, "quota")
		}
		return nil
	}}
	w := testWriter(t, writerConfig{maxRetries: 50, initialBackoff: time.Millisecond}, f)
	w.sizes.record(w.now(), time.Millisecond, 500)
	w.adapt.rand = rand.New(rand.NewPCG(1, 2)).Float64 // deterministic
	ctx := context.Background()
	var slept time.Duration
	sleep := w.sleep
	w.sleep = func(ctx context.Context, d time.Duration) error {
		if d == adaptiveDelay {
			slept += d
		}
		return sleep(ctx, d)
	}
	const n = 40
	for i := 1; i <= n; i++ {
		e := &unitEnt{K: datastore.IDKey("U", int64(i), nil), N: int64(i)}
		if err := w.add(ctx, e.K, e, "unitEnt"); err != nil {
			t.Fatal(err)
		}
		if err := w.flush(ctx); err != nil { // one commit per entity
			t.Fatal(err)
		}
	}
	if len(f.commits) != n {
		t.Fatalf("%d commits accepted, want %d", len(f.commits), n)
	}
	if slept == 0 {
		t.Fatalf("never held back, with %d of %d attempts refused", refused, f.attempts)
	}
	held := int(slept / adaptiveDelay)
	// Java's rule: with three of four attempts refused, the writer sends
	// far fewer commits than it holds back.
	if held < f.attempts {
		t.Errorf("%d attempts, only %d held back", f.attempts, held)
	}
	t.Logf("%d attempts (%d refused), %d held back (%v on the fake clock)", f.attempts, refused, held, slept)
}

// TestWriterThrottleHonoursContext: a held-back commit ends with the
// context.
func TestWriterThrottleHonoursContext(t *testing.T) {
	f := &fakeCommitter{}
	w := testWriter(t, writerConfig{maxRetries: 5, initialBackoff: time.Millisecond}, f)
	w.adapt.rand = func() float64 { return 0 }
	for range 10 {
		w.adapt.requests.add(w.now(), 1) // refused commits
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	k := datastore.IDKey("K", 1, nil)
	if err := w.add(context.Background(), k, &unitEnt{K: k}, "unitEnt"); err != nil {
		t.Fatal(err)
	}
	if err := w.flush(ctx); err == nil || f.attempts != 0 {
		t.Fatalf("flush with a cancelled context while held back: %v after %d attempts", err, f.attempts)
	}
}
