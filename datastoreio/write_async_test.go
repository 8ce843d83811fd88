package datastoreio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// slowCommitter takes each commit's time in a real sleep and records the
// commits in the order they started, and whether two were ever in flight.
type slowCommitter struct {
	mu       sync.Mutex
	inFlight int
	overlap  bool
	commits  []int64 // N of each commit's first entity
	sizes    []int
	failAt   int // the failAt-th commit (from 1) fails with INVALID_ARGUMENT
	delay    time.Duration
}

func (c *slowCommitter) commit(_ context.Context, muts []*datastore.Mutation) error {
	c.mu.Lock()
	c.inFlight++
	c.overlap = c.overlap || c.inFlight > 1
	c.commits = append(c.commits, int64(len(c.commits)))
	c.sizes = append(c.sizes, len(muts))
	n := len(c.commits)
	c.mu.Unlock()
	time.Sleep(c.delay)
	c.mu.Lock()
	c.inFlight--
	c.mu.Unlock()
	if n == c.failAt {
		return status.Error(codes.PermissionDenied, "no")
	}
	return nil
}

func (c *slowCommitter) allocateIDs(context.Context, []*datastore.Key) ([]*datastore.Key, error) {
	return nil, fmt.Errorf("not used")
}
func (c *slowCommitter) close() error { return nil }

func asyncWriter(t *testing.T, c committer) *writer {
	t.Helper()
	sz, err := processSizer()
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(writerConfig{project: "unit-project"}, c, sz, nil)
	w.async = true
	w.adapt.rand = func() float64 { return 1 }
	return w
}

// TestWriterCommitsInBackground: with async, add returns while a full
// batch commits, one commit at a time, in order; flush waits for all.
func TestWriterCommitsInBackground(t *testing.T) {
	c := &slowCommitter{delay: 50 * time.Millisecond}
	w := asyncWriter(t, c)
	w.sizes.record(w.now(), time.Millisecond, 500) // target 500
	ctx := context.Background()
	start := time.Now()
	for i := 1; i <= 1200; i++ {
		e := &unitEnt{K: datastore.IDKey("U", int64(i), nil), N: int64(i)}
		if err := w.add(ctx, e.K, e, "unitEnt"); err != nil {
			t.Fatal(err)
		}
		if i == 500 {
			if w.inflight == nil {
				t.Fatal("the full batch is not committing in the background")
			}
			if d := time.Since(start); d >= c.delay {
				t.Logf("add of the 500th took %v", d) // informational: a slow machine
			}
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if w.inflight != nil || w.b.len() != 0 {
		t.Fatal("flush left a commit in flight or a batch")
	}
	if c.overlap {
		t.Fatal("two commits were in flight at once")
	}
	if got := fmt.Sprint(c.sizes); got != "[500 500 200]" {
		t.Fatalf("commits %s, want [500 500 200]", got)
	}
}

// TestWriterAsyncErrorStops: a background commit's error is returned by
// the next add, naming that commit's keys, and nothing later is sent.
func TestWriterAsyncErrorStops(t *testing.T) {
	c := &slowCommitter{failAt: 1}
	w := asyncWriter(t, c)
	w.sizes.record(w.now(), time.Millisecond, 500)
	ctx := context.Background()
	var err error
	for i := 1; i <= 2000 && err == nil; i++ {
		e := &unitEnt{K: datastore.IDKey("U", int64(i), nil), N: int64(i)}
		err = w.add(ctx, e.K, e, "unitEnt")
	}
	if err == nil {
		err = w.flush(ctx)
	}
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "commit of 500 upsert mutations") || !strings.Contains(err.Error(), "key U,1,") {
		t.Fatalf("got %v", err)
	}
	if len(c.sizes) != 1 {
		t.Fatalf("%d commits after the failed one, want none", len(c.sizes)-1)
	}
	if w.inflight != nil {
		t.Fatal("a commit is still in flight after the error")
	}
}
