package datastoreio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/datastore"
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
// sized), so that a commit's wait and the next batch's preparation overlap,
// where a plain loop of PutMulti does one after the other. At most one
// commit is in flight, and a batch's commit starts only once the previous
// one has succeeded, so commits stay in the order of the elements (two
// mutations of a key are applied in order) and a failure stops the writer
// before anything later is sent. The error of a background commit is
// returned by the next add or flush.
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
	sizesMu  sync.Mutex      // guards sizes, which a background commit records into
	inflight *batch[pending] // the batch of the commit in flight, nil when none
	done     chan error      // receives the in-flight commit's result
	spare    *batch[pending] // an empty batch to reuse
}

func newWriter(cfg writerConfig, c committer, sz *sizer, ramp *rampup) *writer {
	return &writer{cfg: cfg, c: c, sizer: sz, ramp: ramp, adapt: newAdaptiveThrottler(), sizes: newBatchSizer(),
		b: newBatch[pending](), now: time.Now, sleep: sleep}
}

func (w *writer) close() error {
	_ = w.wait() // a bundle that failed may have left a commit in flight
	return w.c.close()
}

// wait waits for the commit in flight, if any, and returns its error.
func (w *writer) wait() error {
	if w.inflight == nil {
		return nil
	}
	err := <-w.done
	w.inflight.reset()
	w.spare, w.inflight = w.inflight, nil
	return err
}

// send commits the batch, in the background when w.async, after the
// commit in flight has succeeded; the batch is empty afterwards when it
// returns nil.
func (w *writer) send(ctx context.Context) error {
	if !w.async {
		return w.flush(ctx)
	}
	if err := w.wait(); err != nil {
		return err
	}
	if w.b.len() == 0 {
		return nil
	}
	b := w.b
	w.b = w.spare
	if w.b == nil {
		w.b = newBatch[pending]()
	}
	w.spare = nil
	w.inflight = b
	if w.done == nil {
		w.done = make(chan error, 1)
	}
	go func() { w.done <- w.commit(ctx, b) }()
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
	if err != nil && w.inflight != nil {
		// The bundle fails: no commit stays in flight past it, and an error
		// of the commit in flight, earlier than this one, comes first.
		if werr := w.wait(); werr != nil {
			return werr
		}
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
		throttledMsecs.Inc(ctx, waited.Milliseconds())
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
	w.sizesMu.Lock()
	target := w.sizes.next(w.now())
	w.sizesMu.Unlock()
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
		hint := "give every entity a complete key (an id or a name), or use AllocateIDs"
		if w.cfg.delete {
			hint = "a delete needs a complete key"
		}
		return fmt.Errorf("datastoreio: %s of %s (%s) to project %q: incomplete key: %s", w.op(), describeKey(k), what, w.cfg.project, hint)
	}
	return nil
}

// flush waits for the commit in flight, then commits the batch; the batch
// is empty afterwards when it returns nil.
func (w *writer) flush(ctx context.Context) error {
	if err := w.wait(); err != nil {
		return err
	}
	if err := w.commit(ctx, w.b); err != nil {
		return err
	}
	w.b.reset()
	return nil
}

// commit commits the mutations of b, retrying transient errors. It runs in
// the background under send: it touches only b, the committer, the
// adaptive throttler (used by one commit at a time) and, under sizesMu,
// the batch sizes.
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
	for attempt := 0; ; attempt++ {
		start := w.now()
		for w.adapt.throttle(start) {
			// The service refused too much of late: hold back (Java's
			// "Delaying request due to previous failures").
			throttledCommits.Inc(ctx, 1)
			adaptiveThrottledMsecs.Inc(ctx, adaptiveDelay.Milliseconds())
			if err := w.sleep(ctx, adaptiveDelay); err != nil {
				return w.commitError(b, err, attempt)
			}
			start = w.now()
		}
		err := w.c.commit(ctx, muts)
		if err == nil {
			w.adapt.accepted(start)
			end := w.now()
			w.sizesMu.Lock()
			w.sizes.record(end, end.Sub(start), n)
			w.sizesMu.Unlock()
			commitsCounter.Inc(ctx, 1)
			bytesWritten.Inc(ctx, b.bytes)
			if w.cfg.delete {
				entitiesDeleted.Inc(ctx, int64(n))
			} else {
				entitiesWritten.Inc(ctx, int64(n))
			}
			return nil
		}
		if ctx.Err() == nil && n > 1 && refusedAlone(err) {
			if i, committed, ierr, ok := w.locateRefused(ctx, muts); ok {
				return w.refusedError(b, i, committed, ierr, attempt+1)
			}
		}
		if ctx.Err() != nil || !isTransient(err) || attempt >= w.cfg.maxRetries {
			return w.commitError(b, err, attempt+1)
		}
		commitRetries.Inc(ctx, 1)
		if err := w.sleep(ctx, commitBackoff(w.cfg.initialBackoff, attempt)); err != nil {
			return w.commitError(b, err, attempt+1)
		}
	}
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
	for attempt := 0; ; attempt++ {
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
		if ctx.Err() != nil || !isTransient(err) || attempt >= w.cfg.maxRetries {
			return fmt.Errorf("datastoreio: allocating ids for %d incomplete keys (first: %s) in project %q, database %q, after %d attempts: %w",
				len(keys), describeKey(keys[0]), w.cfg.project, w.cfg.database, attempt+1, err)
		}
		commitRetries.Inc(ctx, 1)
		if err := w.sleep(ctx, commitBackoff(w.cfg.initialBackoff, attempt)); err != nil {
			return err
		}
	}
}

// commitError describes a failed commit of batch b: project, database,
// and the namespaces, kinds and keys of its mutations.
func (w *writer) commitError(b *batch[pending], err error, attempts int) error {
	items := b.items
	db := w.dbName()
	var which string
	if len(items) == 1 {
		which = describeKey(items[0].key)
	} else {
		which = fmt.Sprintf("%s, ..., %s; kinds %s",
			describeKey(items[0].key), pathString(items[len(items)-1].key), batchKinds(items))
	}
	return fmt.Errorf("datastoreio: commit of %d %s mutations to project %q, database %s (%s) failed after %d attempt(s): %w",
		len(items), w.op(), w.cfg.project, db, which, attempts, err)
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
