package datastoreio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/internal/retry"
)

// committer sends commits and id allocations: the official client, or a
// fake in unit tests.
type committer interface {
	commit(ctx context.Context, muts []*datastore.Mutation) error
	allocateIDs(ctx context.Context, keys []*datastore.Key) ([]*datastore.Key, error)
	close() error
}

// clientCommitter commits through the official client: Mutate sends one
// non-transactional CommitRequest of the given mutations.
type clientCommitter struct{ c *datastore.Client }

func (c *clientCommitter) commit(ctx context.Context, muts []*datastore.Mutation) error {
	_, err := c.c.Mutate(ctx, muts...)
	return err
}

func (c *clientCommitter) allocateIDs(ctx context.Context, keys []*datastore.Key) ([]*datastore.Key, error) {
	return c.c.AllocateIDs(ctx, keys)
}

func (c *clientCommitter) close() error { return c.c.Close() }

type writerConfig struct {
	project, database string
	delete            bool
	allocate          bool
	maxRetries        int
	initialBackoff    time.Duration
	metrics           string // Beam metrics namespace; "" is Namespace
}

// pending is one mutation waiting in the batch.
type pending struct {
	key  *datastore.Key
	src  any // the entity; nil for a delete
	size int64
}

// incompleteKeySlack is added to the size of a mutation whose key gets an
// allocated id: the id's varint and tag.
const incompleteKeySlack = 12

// writer batches mutations and commits them: the state of one DoFn
// instance, reused across its bundles. It is not safe for concurrent use
// (a DoFn instance runs one bundle at a time).
//
// With async set (as the DoFn sets it), a full batch is committed in the
// background while the next one is built (the entities converted and
// sized), and up to MaxCommitsInFlight commits are in flight at once, where
// a plain loop of PutMulti does one after the other. Commits in flight
// together never share a key: a batch that holds a key of a commit in
// flight waits for that commit (and those before it) to end, so two
// mutations of a key are applied in the order of the elements. The error of
// a background commit is returned by the next add or flush, the earliest
// commit's first; once an error is known no further commit starts, and the
// bundle does not end while a commit is in flight.
type writer struct {
	cfg   writerConfig
	c     committer
	sizer *sizer
	ramp  *rampup // nil: no ramp-up throttling
	adapt *adaptiveThrottler
	sizes *batchSizer
	b     *batch[pending]
	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	async    bool
	mu       sync.Mutex // guards sizes, adapt and counts, which background commits use
	counts   map[*beam.Counter]int64
	inflight []*inflight // the commits in flight, oldest first
	spare    []*batch[pending]

	throttledRest time.Duration // ramp-up wait not yet counted in throttled_msecs (under a millisecond)
}

// MaxCommitsInFlight is the most commits one writer (one DoFn instance)
// has in flight at once. Beam Java's writer waits for each commit before
// building the next; with two, the service has the next commit while a
// commit's answer travels back and while a batch is prepared. On the
// Datastore emulator, which serves commits nearly one at a time, two in
// flight took the per-commit wait from 42 ms (one at a time) to 35 ms per
// commit of 500 and more did not help; ramp-up throttling and adaptive
// throttling still bound the rate.
const MaxCommitsInFlight = 2

// tally counts n on the Beam counter c for the next publish. Commits count
// through it: Beam Go's metrics must be updated from the goroutine running
// the bundle (its context's counter set is not safe for concurrent use), so
// a background commit cannot call Inc itself.
func (w *writer) tally(c *beam.Counter, n int64) {
	w.mu.Lock()
	if w.counts == nil {
		w.counts = make(map[*beam.Counter]int64)
	}
	w.counts[c] += n
	w.mu.Unlock()
}

// publish adds what was tallied to the bundle's metrics; it runs in the
// bundle's goroutine.
func (w *writer) publish(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c, n := range w.counts {
		w.counter(c).Inc(ctx, n)
	}
	clear(w.counts)
}

// counter is c in the write's metrics namespace.
func (w *writer) counter(c *beam.Counter) beam.Counter {
	if w.cfg.metrics == "" || w.cfg.metrics == Namespace {
		return *c
	}
	return beam.NewCounter(w.cfg.metrics, writeCounterNames[c])
}

// inflight is a commit running in the background.
type inflight struct {
	b    *batch[pending]
	done chan struct{} // closed when the commit ended, with err set
	err  error
}

func newWriter(cfg writerConfig, c committer, sz *sizer, ramp *rampup) *writer {
	return &writer{cfg: cfg, c: c, sizer: sz, ramp: ramp, adapt: newAdaptiveThrottler(), sizes: newBatchSizer(),
		b: newBatch[pending](), now: time.Now, sleep: retry.Sleep}
}

func (w *writer) close() error {
	_ = w.wait() // a bundle that failed may have left a commit in flight
	return w.c.close()
}

// wait waits for every commit in flight and returns the earliest one's
// error.
func (w *writer) wait() error {
	var first error
	for len(w.inflight) > 0 {
		if err := w.waitOldest(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// waitOldest waits for the oldest commit in flight and returns its error.
func (w *writer) waitOldest() error {
	f := w.inflight[0]
	<-f.done
	copy(w.inflight, w.inflight[1:])
	w.inflight[len(w.inflight)-1] = nil
	w.inflight = w.inflight[:len(w.inflight)-1]
	f.b.reset()
	w.spare = append(w.spare, f.b)
	return f.err
}

// settle makes room for the batch's commit: it collects the commits that
// ended, and waits for commits in flight, oldest first, while there is no
// room for another or one shares a key with the batch. When a commit
// failed it waits for all of them and returns the earliest error.
func (w *writer) settle() error {
	for len(w.inflight) > 0 {
		f := w.inflight[0]
		select {
		case <-f.done:
		default:
			if len(w.inflight) < MaxCommitsInFlight && !w.sharesKey() {
				return nil
			}
		}
		if err := w.waitOldest(); err != nil {
			_ = w.wait() // the earliest error is the one returned
			return err
		}
	}
	return nil
}

// sharesKey reports whether the batch holds a key of a commit in flight.
func (w *writer) sharesKey() bool {
	for _, f := range w.inflight {
		small, large := w.b.keys, f.b.keys
		if len(small) > len(large) {
			small, large = large, small
		}
		for k := range small {
			if _, ok := large[k]; ok {
				return true
			}
		}
	}
	return false
}

// send commits the batch, in the background when w.async, once there is
// room in flight and no commit in flight shares a key with it; the batch
// is empty afterwards when it returns nil.
func (w *writer) send(ctx context.Context) error {
	if !w.async {
		return w.flush(ctx)
	}
	if w.b.len() == 0 {
		return nil
	}
	err := w.settle()
	w.publish(ctx)
	if err != nil {
		return err
	}
	b := w.b
	if n := len(w.spare); n > 0 {
		w.b, w.spare = w.spare[n-1], w.spare[:n-1]
	} else {
		w.b = newBatch[pending]()
	}
	f := &inflight{b: b, done: make(chan struct{})}
	w.inflight = append(w.inflight, f)
	go func() {
		f.err = w.commit(ctx, b)
		close(f.done)
	}()
	return nil
}

func (w *writer) op() string {
	if w.cfg.delete {
		return "delete"
	}
	return "upsert"
}

func (w *writer) mutation(p pending) *datastore.Mutation {
	if w.cfg.delete {
		return datastore.NewDelete(p.key)
	}
	return datastore.NewUpsert(p.key, p.src)
}

// add checks the element's key, sizes its mutation, waits for the ramp-up
// budget, and adds it to the batch, committing the batch first when the
// mutation cannot join it and afterwards when it reached the target size.
// what names the element's type for errors.
func (w *writer) add(ctx context.Context, k *datastore.Key, src any, what string) error {
	err := w.addOne(ctx, k, src, what)
	if err != nil && len(w.inflight) > 0 {
		// The bundle fails: no commit stays in flight past it, and an error
		// of the commit in flight, earlier than this one, comes first.
		if werr := w.wait(); werr != nil {
			err = werr
		}
	}
	if err != nil {
		w.publish(ctx)
	}
	return err
}

func (w *writer) addOne(ctx context.Context, k *datastore.Key, src any, what string) error {
	if err := w.checkKey(k, what); err != nil {
		return err
	}
	p := pending{key: k, src: src}
	size, err := w.sizer.size(ctx, w.mutation(p))
	if err != nil {
		return fmt.Errorf("datastoreio: %s of %s (%s) to project %q: %w", w.op(), describeKey(k), what, w.cfg.project, err)
	}
	if k.Incomplete() {
		size += incompleteKeySlack
	}
	p.size = size
	if w.ramp != nil {
		waited, err := w.ramp.acquire(ctx)
		// Count whole milliseconds and carry the rest: waits of a few ms
		// each, truncated one by one, undercounted a write's wait by up to
		// a millisecond an element.
		w.throttledRest += waited
		if ms := w.throttledRest.Milliseconds(); ms > 0 {
			w.counter(&throttledMsecs).Inc(ctx, ms)
			w.throttledRest -= time.Duration(ms) * time.Millisecond
		}
		if err != nil {
			return err
		}
	}
	ks := dedupKey(k)
	if w.b.mustFlushBefore(ks, size) {
		if err := w.send(ctx); err != nil {
			return err
		}
	}
	w.b.add(p, ks, size)
	w.mu.Lock()
	target, known := w.sizes.nextKnown(w.now())
	w.mu.Unlock()
	if !known && len(w.inflight) > 0 {
		// The first commit, of StartBatchMutations, is still finding the
		// latency out: the batch grows to the service's limit meanwhile,
		// rather than sending more probes of the start size.
		target = MaxBatchMutations
	}
	if w.b.len() >= target {
		return w.send(ctx)
	}
	return nil
}

// checkKey rejects keys the service would refuse, naming the element.
func (w *writer) checkKey(k *datastore.Key, what string) error {
	if k == nil {
		return fmt.Errorf("datastoreio: %s of an element of %s without a key (its __key__ field is nil)", w.op(), what)
	}
	for p := k; p != nil; p = p.Parent {
		bad := ""
		switch {
		case p.Kind == "":
			bad = "a path element has no kind"
		case p.Name != "" && p.ID != 0:
			bad = "a path element has both a name and an id"
		case p != k && p.Incomplete():
			bad = "an ancestor is incomplete"
		case p.Parent != nil && p.Parent.Namespace != p.Namespace:
			bad = "an ancestor is in another namespace"
		}
		if bad != "" {
			return fmt.Errorf("datastoreio: %s of %s (%s) to project %q: invalid key: %s", w.op(), describeKey(k), what, w.cfg.project, bad)
		}
	}
	if k.Incomplete() && (w.cfg.delete || !w.cfg.allocate) {
		hint := "give every entity a complete key (an id or a name), or use WithAllocateIDs"
		if w.cfg.delete {
			hint = "a delete needs a complete key"
		}
		return fmt.Errorf("datastoreio: %s of %s (%s) to project %q: incomplete key: %s", w.op(), describeKey(k), what, w.cfg.project, hint)
	}
	return nil
}

// flush commits the batch and waits for every commit in flight; the batch
// is empty afterwards when it returns nil.
func (w *writer) flush(ctx context.Context) error {
	defer w.publish(ctx)
	if w.async {
		if err := w.send(ctx); err != nil {
			return err
		}
		return w.wait()
	}
	if err := w.commit(ctx, w.b); err != nil {
		return err
	}
	w.b.reset()
	return nil
}

// commit commits the mutations of b, retrying transient errors. It runs in
// the background under send, beside other commits: it touches only b, the
// committer (safe for concurrent use) and, under w.mu, the adaptive
// throttler and the batch sizes.
func (w *writer) commit(ctx context.Context, b *batch[pending]) error {
	n := b.len()
	if n == 0 {
		return nil
	}
	items := b.items
	if w.cfg.allocate {
		if err := w.allocate(ctx, items); err != nil {
			return err
		}
	}
	muts := make([]*datastore.Mutation, n)
	for i, p := range items {
		muts[i] = w.mutation(p)
	}
	// A non-transactional commit of upserts or deletes (keys complete) is
	// idempotent: every transient code is retried, ABORTED included.
	r := commitBackoff(w.cfg.maxRetries, w.cfg.initialBackoff, w.sleep).Start()
	for {
		attempt := r.Retries()
		start := w.now()
		for w.throttle(start) {
			// The service refused too much of late: hold back (Java's
			// "Delaying request due to previous failures").
			w.tally(&throttledCommits, 1)
			w.tally(&adaptiveThrottledMsecs, adaptiveDelay.Milliseconds())
			if err := w.sleep(ctx, adaptiveDelay); err != nil {
				return fmt.Errorf("%s: after %d attempts: %w", w.commitWhat(b), attempt, err) // held back
			}
			start = w.now()
		}
		err := w.c.commit(ctx, muts)
		if err != nil {
			w.mu.Lock()
			w.adapt.refused()
			w.mu.Unlock()
		}
		if err == nil {
			end := w.now()
			w.mu.Lock()
			w.adapt.accepted(start)
			w.sizes.record(end, end.Sub(start), n)
			w.mu.Unlock()
			w.tally(&commitsCounter, 1)
			w.tally(&bytesWritten, b.bytes)
			if w.cfg.delete {
				w.tally(&entitiesDeleted, int64(n))
			} else {
				w.tally(&entitiesWritten, int64(n))
			}
			return nil
		}
		if ctx.Err() == nil && n > 1 && refusedAlone(err) {
			if i, committed, ierr, ok := w.locateRefused(ctx, muts); ok {
				return w.refusedError(b, i, committed, ierr, attempt+1)
			}
		}
		if err := r.Retry(ctx, err, ctx.Err() == nil && retry.Transient(err, retry.Idempotent), w.commitWhat(b)); err != nil {
			return err
		}
		w.tally(&commitRetries, 1)
	}
}

// throttle asks the adaptive throttler whether to hold a commit back.
func (w *writer) throttle(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.adapt.throttle(now)
}

// dbName names the database in errors.
func (w *writer) dbName() string {
	if w.cfg.database == "" {
		return "(default)"
	}
	return w.cfg.database
}

// allocate gives the incomplete keys of items ids, with one AllocateIds
// call (retried like a commit; an allocation that is retried only wastes
// ids).
func (w *writer) allocate(ctx context.Context, items []pending) error {
	var idx []int
	var keys []*datastore.Key
	for i, p := range items {
		if p.key.Incomplete() {
			idx = append(idx, i)
			keys = append(keys, p.key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	// Not idempotent strictly (each call allocates new ids), but ids of a
	// lost answer are only wasted: retried as idempotent.
	r := commitBackoff(w.cfg.maxRetries, w.cfg.initialBackoff, w.sleep).Start()
	for {
		got, err := w.c.allocateIDs(ctx, keys)
		if err == nil && len(got) == len(keys) {
			for j, i := range idx {
				items[i].key = got[j]
			}
			return nil
		}
		if err == nil {
			err = fmt.Errorf("the service allocated %d ids for %d keys", len(got), len(keys))
		}
		if err := r.Retry(ctx, err, ctx.Err() == nil && retry.Transient(err, retry.Idempotent),
			fmt.Sprintf("datastoreio: AllocateIds for %d incomplete keys (first: %s) in project %q, database %q",
				len(keys), describeKey(keys[0]), w.cfg.project, w.cfg.database)); err != nil {
			return err
		}
		w.tally(&commitRetries, 1)
	}
}

// commitWhat names a commit of batch b in its error: project, database,
// and the namespaces, kinds and keys of its mutations.
func (w *writer) commitWhat(b *batch[pending]) string {
	items := b.items
	db := w.dbName()
	var which string
	if len(items) == 1 {
		which = describeKey(items[0].key)
	} else {
		which = fmt.Sprintf("%s, ..., %s; kinds %s",
			describeKey(items[0].key), pathString(items[len(items)-1].key), batchKinds(items))
	}
	return fmt.Sprintf("datastoreio: commit of %d %s mutations to project %q, database %s (%s)",
		len(items), w.op(), w.cfg.project, db, which)
}

// batchKinds lists the distinct namespace/kind pairs of items.
func batchKinds(items []pending) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range items {
		ns := p.key.Namespace
		if ns == "" {
			ns = "(default)"
		}
		s := ns + "/" + p.key.Kind
		if seen[s] {
			continue
		}
		if len(out) == 5 {
			out = append(out, "...")
			break
		}
		seen[s] = true
		out = append(out, s)
	}
	return strings.Join(out, " ")
}
