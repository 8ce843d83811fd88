package datastoreio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/internal/retry"
)

// Unit tests of the write path without a server: the adaptive batch size,
// the batch cuts (500 mutations, 9 MB, duplicate keys), the ramp-up
// throttle on a fake clock, retries and errors through a fake committer.

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.advance(d)
	return nil
}

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func TestBatchSizerAdapts(t *testing.T) {
	b := newBatchSizer()
	now := t0
	if got := b.next(now); got != StartBatchMutations {
		t.Fatalf("before any commit: %d, want %d", got, StartBatchMutations)
	}
	// Fast commits: 500 mutations in 50 ms, 0.1 ms each, counted as 1 ms:
	// 5000/1 capped at 500.
	b.record(now, 50*time.Millisecond, 500)
	if got := b.next(now); got != MaxBatchMutations {
		t.Fatalf("fast commits: %d, want %d", got, MaxBatchMutations)
	}
	// Slow ones: 100 commits of 100 entities in 10 s each (100 ms per
	// mutation) bring the mean near 100 ms: 5000/~100 = ~50.
	b2 := newBatchSizer()
	for i := 0; i < 100; i++ {
		b2.record(now, 10*time.Second, 100)
	}
	if got := b2.next(now); got != 50 {
		t.Fatalf("100 ms per mutation: %d, want 50", got)
	}
	// Very slow: 2 s per mutation gives 2, raised to the minimum.
	b3 := newBatchSizer()
	b3.record(now, 20*time.Second, 10)
	if got := b3.next(now); got != MinBatchMutations {
		t.Fatalf("2 s per mutation: %d, want %d", got, MinBatchMutations)
	}
	// Mixed: one sample of 10 ms and one of 40 ms per mutation: mean 25 ms,
	// 5000/25 = 200.
	b4 := newBatchSizer()
	b4.record(now, 100*time.Millisecond, 10)
	b4.record(now.Add(15*time.Second), 400*time.Millisecond, 10)
	if got := b4.next(now.Add(20 * time.Second)); got != 200 {
		t.Fatalf("mean of 10 and 40 ms: %d, want 200", got)
	}
	// The samples age out after two minutes; the slower one, later, stays
	// longer: 5000/40 = 125.
	if got := b4.next(now.Add(2*time.Minute + 5*time.Second)); got != 125 {
		t.Fatalf("after the first sample aged out: %d, want 125", got)
	}
	if got := b4.next(now.Add(3 * time.Minute)); got != StartBatchMutations {
		t.Fatalf("after all samples aged out: %d, want %d", got, StartBatchMutations)
	}
}

func TestMovingAverageBuckets(t *testing.T) {
	m := newMovingAverage(2*time.Minute, 10*time.Second)
	base := time.Unix(1000*10, 0) // a bucket boundary
	m.add(base, 10)
	m.add(base.Add(9*time.Second), 20)   // same bucket
	m.add(base.Add(115*time.Second), 60) // the 12th bucket
	if v, ok := m.mean(base.Add(115 * time.Second)); !ok || v != 30 {
		t.Fatalf("mean = %v, %v; want 30", v, ok)
	}
	// At 120 s the first bucket is a whole window old and leaves.
	if v, ok := m.mean(base.Add(120 * time.Second)); !ok || v != 60 {
		t.Fatalf("mean after the first bucket left = %v, %v; want 60", v, ok)
	}
	// A sample far later reuses the slot without mixing old values in.
	m.add(base.Add(240*time.Second), 7)
	if v, ok := m.mean(base.Add(240 * time.Second)); !ok || v != 7 {
		t.Fatalf("mean after wrap-around = %v, %v; want 7", v, ok)
	}
}

func TestRampupBudgetMatchesJava(t *testing.T) {
	// Beam Java's RampupThrottlingFnTest schedule for one worker.
	for _, c := range []struct {
		at   time.Duration
		want int
	}{
		{0, 500}, {time.Second, 500}, {5 * time.Minute, 500}, {10 * time.Minute, 750},
		{15 * time.Minute, 1125}, {30 * time.Minute, 3796}, {60 * time.Minute, 43248},
	} {
		if got := rampupBudget(c.at, 1); got != c.want {
			t.Errorf("budget at %v: %d, want %d", c.at, got, c.want)
		}
	}
	if got := rampupBudget(0, 4); got != 125 {
		t.Errorf("4 workers: %d, want 125", got)
	}
	if got := rampupBudget(0, 1000); got != 1 {
		t.Errorf("1000 workers: %d, want at least 1", got)
	}
	if got := rampupBudget(10*time.Hour, 1); got != int(^uint(0)>>1) {
		t.Errorf("after 10 hours the budget should no longer bound: %d", got)
	}
}

func TestRampupThrottlesOnFakeClock(t *testing.T) {
	clk := &fakeClock{t: t0.Add(300 * time.Millisecond)}
	r := newRampup(2, clk.now, clk.sleep)
	ctx := context.Background()
	// 250 operations fit the first window without waiting.
	for i := 0; i < 250; i++ {
		if w, err := r.acquire(ctx); err != nil || w != 0 {
			t.Fatalf("op %d waited %v, %v", i, w, err)
		}
	}
	// The 251st waits for the next second: 700 ms.
	w, err := r.acquire(ctx)
	if err != nil || w != 700*time.Millisecond {
		t.Fatalf("op 251 waited %v, %v; want 700ms", w, err)
	}
	if got := clk.now(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("clock at %v after the wait", got)
	}
	// Count what one worker of two starts in each second of a long run:
	// never more than its share of the budget at that time.
	// Stretches of a long run, the clock jumping between them (the budget
	// depends only on the time since the first operation).
	perSecond := map[int64]int{}
	for _, stretch := range [][2]time.Duration{{time.Second, 3 * time.Minute}, {10 * time.Minute, 11*time.Minute + 10*time.Second}, {15 * time.Minute, 16 * time.Minute}} {
		clk.mu.Lock()
		clk.t = t0.Add(stretch[0])
		clk.mu.Unlock()
		for end := t0.Add(stretch[1]); clk.now().Before(end); clk.advance(500 * time.Microsecond) {
			if _, err := r.acquire(ctx); err != nil {
				t.Fatal(err)
			}
			perSecond[clk.now().Unix()]++
		}
	}
	first := t0.Add(300 * time.Millisecond)
	for sec, n := range perSecond {
		elapsed := time.Unix(sec, 0).Sub(first)
		if limit := rampupBudget(elapsed+time.Second, 2); n > limit {
			t.Fatalf("second %d (%v in): %d operations, budget %d", sec, elapsed, n, limit)
		}
	}
	// And the budget is used: 250 a second at first, 375 after 10 minutes,
	// 562 after 15.
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{2 * time.Minute, 250}, {11 * time.Minute, 375 * 11 / 10}, {15*time.Minute + 30*time.Second, 562}} {
		sec := t0.Add(c.at).Unix()
		if n := perSecond[sec]; n < c.want*9/10 {
			t.Errorf("at %v: %d operations in the second, want about %d", c.at, n, c.want)
		}
	}
}

func TestRampupSharedByStep(t *testing.T) {
	a, b := rampupFor("step-a-test", 1), rampupFor("step-a-test", 1)
	if a != b {
		t.Fatal("two instances of one step must share the process's ramp-up state")
	}
	if rampupFor("step-b-test", 1) == a {
		t.Fatal("two steps must not share ramp-up state")
	}
}

func TestRampupHonoursContext(t *testing.T) {
	clk := &fakeClock{t: t0}
	r := newRampup(500, clk.now, retry.Sleep) // budget 1 a second
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := r.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := r.acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire after cancel: %v, want context.Canceled", err)
	}
}

// fakeCommitter records the commits it is sent and fails the ones its
// fail function says.
type fakeCommitter struct {
	commits  [][]*datastore.Mutation
	attempts int
	fail     func(attempt int) error
	allocs   int
	nextID   int64
}

func (f *fakeCommitter) commit(_ context.Context, muts []*datastore.Mutation) error {
	f.attempts++
	if f.fail != nil {
		if err := f.fail(f.attempts); err != nil {
			return err
		}
	}
	f.commits = append(f.commits, append([]*datastore.Mutation(nil), muts...))
	return nil
}

func (f *fakeCommitter) allocateIDs(_ context.Context, keys []*datastore.Key) ([]*datastore.Key, error) {
	f.allocs++
	out := make([]*datastore.Key, len(keys))
	for i, k := range keys {
		f.nextID++
		c := *k
		c.ID = 1000 + f.nextID
		out[i] = &c
	}
	return out, nil
}

func (f *fakeCommitter) close() error { return nil }

type unitEnt struct {
	K    *datastore.Key `datastore:"__key__"`
	N    int64
	Blob []byte `datastore:",noindex"`
}

func testWriter(t *testing.T, cfg writerConfig, c committer) *writer {
	t.Helper()
	sz, err := processSizer()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.project == "" {
		cfg.project = "unit-project"
	}
	w := newWriter(cfg, c, sz, nil)
	w.adapt.rand = func() float64 { return 1 } // never held back, unless a test says
	clk := &fakeClock{t: t0}
	w.now, w.sleep = clk.now, clk.sleep
	return w
}

func batchSizes(commits [][]*datastore.Mutation) []int {
	var out []int
	for _, c := range commits {
		out = append(out, len(c))
	}
	return out
}

func TestWriterCapsAt500(t *testing.T) {
	f := &fakeCommitter{}
	w := testWriter(t, writerConfig{}, f)
	// Make the sizer think commits are fast, so the target is 500.
	w.sizes.record(w.now(), time.Millisecond, 500)
	ctx := context.Background()
	for i := 1; i <= 1234; i++ {
		e := &unitEnt{K: datastore.IDKey("U", int64(i), nil), N: int64(i)}
		if err := w.add(ctx, e.K, e, "unitEnt"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(batchSizes(f.commits)), "[500 500 234]"; got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
}

func TestWriterStartsAt200(t *testing.T) {
	f := &fakeCommitter{}
	w := testWriter(t, writerConfig{}, f)
	ctx := context.Background()
	for i := 1; i <= 450; i++ {
		k := datastore.NameKey("U", fmt.Sprintf("n%d", i), nil)
		if err := w.add(ctx, k, &unitEnt{K: k}, "unitEnt"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The first batch is 200; the fake commits take no time on the fake
	// clock, so the target then becomes 500.
	if got, want := fmt.Sprint(batchSizes(f.commits)), "[200 250]"; got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
}

func TestWriterCutsAt9MB(t *testing.T) {
	f := &fakeCommitter{}
	w := testWriter(t, writerConfig{}, f)
	w.sizes.record(w.now(), time.Millisecond, 500)
	ctx := context.Background()
	blob := make([]byte, 700_000)
	var sizes []int64
	for i := 1; i <= 30; i++ {
		e := &unitEnt{K: datastore.IDKey("Big", int64(i), nil), Blob: blob}
		if err := w.add(ctx, e.K, e, "unitEnt"); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, w.b.items[len(w.b.items)-1].size)
	}
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if sizes[0] <= 700_000 || sizes[0] > 700_100 {
		t.Fatalf("a 700,000-byte blob entity measured %d bytes", sizes[0])
	}
	// 12 mutations of ~700 KB make 8.4 MB; the 13th would pass 9 MB.
	if got, want := fmt.Sprint(batchSizes(f.commits)), "[12 12 6]"; got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
	// A mutation alone over the limit still goes, alone.
	f2 := &fakeCommitter{}
	w2 := testWriter(t, writerConfig{}, f2)
	huge := &unitEnt{K: datastore.IDKey("Big", 1, nil), Blob: make([]byte, MaxBatchBytes)}
	small := &unitEnt{K: datastore.IDKey("Big", 2, nil)}
	for _, e := range []*unitEnt{small, huge, small} {
		if err := w2.add(ctx, e.K, e, "unitEnt"); err != nil {
			t.Fatal(err)
		}
	}
	_ = w2.flush(ctx)
	if got, want := fmt.Sprint(batchSizes(f2.commits)), "[1 1 1]"; got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
}

func TestWriterCutsBeforeDuplicateKey(t *testing.T) {
	f := &fakeCommitter{}
	w := testWriter(t, writerConfig{}, f)
	w.sizes.record(w.now(), time.Millisecond, 500)
	ctx := context.Background()
	parent := datastore.NameKey("P", "p", nil)
	keys := []*datastore.Key{
		datastore.IDKey("K", 1, nil),
		datastore.NameKey("K", "1", nil),     // a name, not the id 1
		datastore.IDKey("K", 1, parent),      // another parent
		withNS(datastore.IDKey("K", 1, nil)), // another namespace
		datastore.IDKey("K", 2, nil),
		datastore.IDKey("K", 1, nil), // duplicate of the first: cut before
		datastore.IDKey("K", 3, nil),
		datastore.IDKey("K", 3, nil), // duplicate again: cut before
	}
	for i, k := range keys {
		if err := w.add(ctx, k, &unitEnt{K: k, N: int64(i)}, "unitEnt"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(batchSizes(f.commits)), "[5 2 1]"; got != want {
		t.Fatalf("batches %s, want %s", got, want)
	}
	// Deletes follow the same rule.
	fd := &fakeCommitter{}
	wd := testWriter(t, writerConfig{delete: true}, fd)
	for _, k := range []*datastore.Key{keys[0], keys[4], keys[0]} {
		if err := wd.add(ctx, k, nil, "*datastore.Key"); err != nil {
			t.Fatal(err)
		}
	}
	_ = wd.flush(ctx)
	if got, want := fmt.Sprint(batchSizes(fd.commits)), "[2 1]"; got != want {
		t.Fatalf("delete batches %s, want %s", got, want)
	}
}

func withNS(k *datastore.Key) *datastore.Key {
	k.Namespace = "other"
	return k
}

func TestKeyStringUnambiguous(t *testing.T) {
	keys := []*datastore.Key{
		datastore.IDKey("K", 1, nil),
		datastore.NameKey("K", "1", nil),
		datastore.NameKey("K", "a,ns", nil),
		{Kind: "K", Name: "a", Namespace: "ns"},
		datastore.NameKey("K/x", "y", nil),
		datastore.NameKey("x", "y", datastore.NameKey("K", "", nil)),
		datastore.NameKey("K", "x/y", nil),
		datastore.IDKey("B", 2, datastore.IDKey("A", 1, nil)),
		datastore.IDKey("A", 1, datastore.IDKey("B", 2, nil)),
	}
	seen := map[string]int{}
	for i, k := range keys {
		s := dedupKey(k)
		if j, dup := seen[s]; dup {
			t.Fatalf("keys %d and %d share the string %q", j, i, s)
		}
		seen[s] = i
	}
	if dedupKey(datastore.IncompleteKey("K", nil)) != "" {
		t.Fatal("an incomplete key must have no identity")
	}
}

// TestWriterRetriesTransientErrors: a commit (upserts: idempotent) failing
// with any code internal/retry's rule calls transient for an idempotent
// call is retried, UNKNOWN included (the package's own rule did not retry
// it), and the entity is committed once.
func TestWriterRetriesTransientErrors(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted, codes.Internal, codes.Unknown} {
		f := &fakeCommitter{fail: func(a int) error {
			if a <= 3 {
				return status.Error(code, "try again")
			}
			return nil
		}}
		w := testWriter(t, writerConfig{maxRetries: 5, initialBackoff: time.Second}, f)
		k := datastore.IDKey("K", 7, nil)
		ctx := context.Background()
		if err := w.add(ctx, k, &unitEnt{K: k}, "unitEnt"); err != nil {
			t.Fatal(err)
		}
		start := w.now()
		if err := w.flush(ctx); err != nil {
			t.Fatalf("%v: %v", code, err)
		}
		if f.attempts != 4 || len(f.commits) != 1 || len(f.commits[0]) != 1 {
			t.Fatalf("%v: %d attempts, %d commits; want 4 and 1 of 1 entity", code, f.attempts, len(f.commits))
		}
		// Three of the backoff's waits, drawn up to 1 s, 1.5 s and 2.25 s.
		if waited := w.now().Sub(start); waited <= 0 || waited > 4750*time.Millisecond {
			t.Fatalf("%v: waited %v in backoff", code, waited)
		}
	}
	// Too many failures: the last error, wrapped, after maxRetries+1 attempts.
	f := &fakeCommitter{fail: func(int) error { return status.Error(codes.Unavailable, "down") }}
	w := testWriter(t, writerConfig{maxRetries: 2, initialBackoff: time.Millisecond}, f)
	k := datastore.IDKey("K", 7, nil)
	_ = w.add(context.Background(), k, &unitEnt{K: k}, "unitEnt")
	err := w.flush(context.Background())
	if status.Code(err) != codes.Unavailable || f.attempts != 3 || !strings.Contains(err.Error(), "): 3 attempts: rpc error: code = Unavailable desc = down") {
		t.Fatalf("got %v after %d attempts", err, f.attempts)
	}
}

func TestWriterFailsAtOnceOnPermanentErrors(t *testing.T) {
	for _, code := range []codes.Code{codes.InvalidArgument, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound} {
		f := &fakeCommitter{fail: func(int) error { return status.Error(code, "no") }}
		w := testWriter(t, writerConfig{project: "proj-x", database: "db-y", maxRetries: 5, initialBackoff: time.Second}, f)
		k := &datastore.Key{Kind: "Task", Name: "t-1", Namespace: "ns-z", Parent: &datastore.Key{Kind: "List", ID: 9, Namespace: "ns-z"}}
		ctx := context.Background()
		if err := w.add(ctx, k, &unitEnt{K: k}, "unitEnt"); err != nil {
			t.Fatal(err)
		}
		err := w.flush(ctx)
		if f.attempts != 1 {
			t.Fatalf("%v: %d attempts, want 1", code, f.attempts)
		}
		if status.Code(err) != code {
			t.Fatalf("%v: the cause is lost: %v", code, err)
		}
		for _, want := range []string{`"proj-x"`, "db-y", "namespace ns-z", "kind Task", `List,9/Task,"t-1"`} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%v: error %q does not name %s", code, err, want)
			}
		}
	}
}

func TestWriterRejectsBadKeys(t *testing.T) {
	ctx := context.Background()
	w := testWriter(t, writerConfig{project: "p1"}, &fakeCommitter{})
	for _, c := range []struct {
		key  *datastore.Key
		want string
	}{
		{nil, "without a key"},
		{&datastore.Key{Kind: "Task", Namespace: "ns1"}, "incomplete key"},
		{&datastore.Key{Kind: "Task", ID: 1, Name: "x"}, "both a name and an id"},
		{&datastore.Key{Name: "x"}, "no kind"},
		{datastore.IDKey("Task", 1, datastore.IncompleteKey("List", nil)), "ancestor is incomplete"},
		{&datastore.Key{Kind: "Task", ID: 1, Namespace: "a", Parent: &datastore.Key{Kind: "L", ID: 1, Namespace: "b"}}, "another namespace"},
	} {
		err := w.add(ctx, c.key, &unitEnt{K: c.key}, "datastoreio.unitEnt")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "datastoreio.unitEnt") {
			t.Errorf("key %v: error %v, want one naming the type and saying %q", c.key, err, c.want)
		}
	}
	err := w.add(ctx, &datastore.Key{Kind: "Task", Namespace: "ns1"}, &unitEnt{}, "datastoreio.unitEnt")
	if !strings.Contains(err.Error(), "namespace ns1, kind Task") || !strings.Contains(err.Error(), "AllocateIDs") {
		t.Errorf("incomplete key error %q should name namespace and kind and the option", err)
	}
	wd := testWriter(t, writerConfig{delete: true}, &fakeCommitter{})
	if err := wd.add(ctx, datastore.IncompleteKey("Task", nil), nil, "*datastore.Key"); err == nil || !strings.Contains(err.Error(), "complete key") {
		t.Errorf("delete of an incomplete key: %v", err)
	}
}

type badEnt struct {
	K *datastore.Key `datastore:"__key__"`
	C chan int
}

func TestWriterRejectsUnsavableEntity(t *testing.T) {
	w := testWriter(t, writerConfig{project: "p1"}, &fakeCommitter{})
	k := datastore.NameKey("Bad", "b1", nil)
	err := w.add(context.Background(), k, &badEnt{K: k}, "datastoreio.badEnt")
	if err == nil || !strings.Contains(err.Error(), `Bad,"b1"`) || !strings.Contains(err.Error(), "datastoreio.badEnt") {
		t.Fatalf("unsavable entity: %v", err)
	}
}

func TestWriterAllocatesIDs(t *testing.T) {
	f := &fakeCommitter{}
	w := testWriter(t, writerConfig{allocate: true}, f)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		k := datastore.IncompleteKey("Auto", nil)
		if i == 2 {
			k = datastore.NameKey("Auto", "named", nil)
		}
		if err := w.add(ctx, k, &unitEnt{K: k, N: int64(i)}, "unitEnt"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if f.allocs != 1 || len(f.commits) != 1 || len(f.commits[0]) != 5 {
		t.Fatalf("%d allocations, batches %v", f.allocs, batchSizes(f.commits))
	}
}

// TestBackoffGrows: a commit's waits are internal/retry's, drawn up to a
// cap that starts at the initial backoff and grows 1.5 times a retry, up
// to maxBackoff; no wait from a zero initial backoff; maxRetries retries.
func TestBackoffGrows(t *testing.T) {
	var waits []time.Duration
	rec := func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	for i := 0; i < 50; i++ {
		waits = nil
		r := commitBackoff(3, time.Second, rec).Start()
		for r.Wait(context.Background()) == nil {
		}
		if len(waits) != 3 {
			t.Fatalf("%d waits, want 3", len(waits))
		}
		for retry, limit := range []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond} {
			if d := waits[retry]; d <= 0 || d > limit {
				t.Fatalf("retry %d: %v outside (0, %v]", retry, d, limit)
			}
		}
	}
	waits = nil
	r := commitBackoff(100, time.Second, rec).Start()
	for r.Wait(context.Background()) == nil {
	}
	longest := slices.Max(waits)
	if longest > maxBackoff || longest < maxBackoff/4 {
		t.Fatalf("longest of 100 waits %v: want at most, and near, the cap %v", longest, maxBackoff)
	}
	waits = nil
	r = commitBackoff(2, 0, rec).Start()
	for r.Wait(context.Background()) == nil {
	}
	if len(waits) != 0 || r.Attempts() != 3 {
		t.Fatalf("zero initial backoff waits %v, %d attempts", waits, r.Attempts())
	}
}
