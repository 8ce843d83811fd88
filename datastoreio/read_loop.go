package datastoreio

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/internal/retry"
	"github.com/sdfio/sdfio/sdf"
)

// readFn is the splittable DoFn that reads Ranges. Its restriction is an
// offset range of sub-range indices.
type readFn struct {
	Type beam.EncodedType

	mu    sync.Mutex
	conns map[connKey]*conn
}

type connKey struct {
	project, database, options string
	readTime                   int64
	metrics                    string
}

func keyOf(r Range) connKey {
	return connKey{r.Project, r.Database, r.ClientOptions, r.ReadTimeMicros, r.MetricsNamespace}
}

func (fn *readFn) CreateInitialRestriction(r Range) sdf.OffsetRange { return r.Restriction() }

// SplitRestriction keeps the restriction whole: the read's first step has
// already cut the query into initial splits, one Range each.
func (fn *readFn) SplitRestriction(_ Range, rest sdf.OffsetRange) []sdf.OffsetRange {
	if rest.IsEmpty() {
		return nil
	}
	return []sdf.OffsetRange{rest}
}

// RestrictionSize is the number of sub-ranges.
func (fn *readFn) RestrictionSize(_ Range, rest sdf.OffsetRange) float64 {
	return float64(rest.Size())
}

func (fn *readFn) CreateTracker(rest sdf.OffsetRange) *KeyRangeTracker {
	return NewKeyRangeTracker(rest)
}

func (fn *readFn) Teardown() {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	for _, c := range fn.conns {
		c.close()
	}
	fn.conns = nil
}

func (fn *readFn) conn(ctx context.Context, r Range) (*conn, error) {
	k := keyOf(r)
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if c := fn.conns[k]; c != nil {
		return c, nil
	}
	extra, err := registeredOptions(r.ClientOptions)
	if err != nil {
		return nil, err
	}
	c, err := dial(context.WithoutCancel(ctx), r.Project, r.Database, r.MetricsNamespace, extra)
	if err != nil {
		return nil, err
	}
	if !r.ReadTime().IsZero() {
		c.client = c.client.WithReadOptions(datastore.ReadTime(r.ReadTime()))
	}
	if fn.conns == nil {
		fn.conns = map[connKey]*conn{}
	}
	fn.conns[k] = c
	return c, nil
}

func (fn *readFn) ProcessElement(ctx context.Context, krt *KeyRangeTracker, r Range, emit func(beam.X)) error {
	rt := krt.Tracker
	c, err := fn.conn(ctx, r)
	if err != nil {
		rt.Fail(err)
		return err
	}
	err = readRange(ctx, c, r, rt, fn.Type.T, func(v any) { emit(v) })
	accepted, refused := rt.SplitStats()
	c.m.splitsAccepted.Inc(ctx, accepted)
	c.m.splitsRefused.Inc(ctx, refused)
	return err
}

// RangeReader reads Ranges outside a pipeline, the way the reading SDF's
// ProcessElement does, on one connection: for tests that drive the SDF
// directly (dstest.Subject makes an sdftest.Subject of it) and for tools.
type RangeReader struct {
	key connKey
	c   *conn
}

// NewRangeReader connects for r: its project, database, client options and
// snapshot. The caller must Close it.
func NewRangeReader(ctx context.Context, r Range) (*RangeReader, error) {
	fn := &readFn{}
	c, err := fn.conn(ctx, r)
	if err != nil {
		return nil, err
	}
	return &RangeReader{key: keyOf(r), c: c}, nil
}

// Close closes the connection.
func (rr *RangeReader) Close() { rr.c.close() }

// Read reads the sub-ranges of r that rt's restriction holds, claiming each
// sub-range's first entity as a split point at its index and the others as
// records of it, and emits the entities as values of t (see Read). r must
// have the project, database, client options and snapshot the reader was
// made for. It leaves rt done when it returns nil.
func (rr *RangeReader) Read(ctx context.Context, r Range, rt *sdf.Tracker, t reflect.Type, emit func(any)) error {
	if keyOf(r) != rr.key {
		return fmt.Errorf("datastoreio: RangeReader of %+v cannot read a range of %+v", rr.key, keyOf(r))
	}
	return readRange(ctx, rr.c, r, rt, t, emit)
}

func readRange(ctx context.Context, c *conn, r Range, rt *sdf.Tracker, t reflect.Type, emit func(any)) error {
	if err := checkKeysOnly(r.Query, t); err != nil {
		err = fmt.Errorf("datastoreio: project %s namespace %q: %w", r.Project, r.Namespace, err)
		rt.Fail(err)
		return err
	}
	order, err := keyOrderOf(r.KeyOrder)
	if err != nil {
		rt.Fail(err)
		return err
	}
	for i := rt.Range().Start; i < rt.Range().End; i++ {
		more, err := readSubRange(ctx, c, r, order, i, rt, loader{t}, emit)
		if err != nil {
			rt.Fail(err)
			return err
		}
		if !more {
			return nil // a claim was refused: the rest belongs to a residual
		}
	}
	rt.MarkDone()
	return nil
}

// readSubRange reads sub-range i in pages of at most maxPage entities,
// resuming after the last entity emitted when a transient error interrupts
// it. It returns false when the tracker refused a claim. An entity whose
// key is outside the sub-range in the read's key order fails the read
// before it is claimed or emitted (see the package doc, "Key order").
func readSubRange(ctx context.Context, c *conn, r Range, order KeyOrder, i int64, rt *sdf.Tracker, ld loader, emit func(any)) (bool, error) {
	lo, hi, err := r.subRange(i)
	if err != nil {
		return false, err
	}
	lo, hi = withNamespace(lo, r.Namespace), withNamespace(hi, r.Namespace)
	base, err := r.Query.clientQuery(r.Namespace, lo, hi, ld.t == keyType)
	if err != nil {
		return false, fmt.Errorf("datastoreio: %s: %w", r.where(i), err)
	}
	c.m.queries.Inc(ctx, 1)
	snap := r.snapshot()
	var (
		cursor   datastore.Cursor
		started  bool // an entity was emitted: cursor is after it
		emitted  int64
		retries  = readRetries.Start() // anew after progress
		limit    = int64(r.Query.Limit)
		pageSize = int64(maxPage)
	)
	for {
		page := pageSize
		if limit > 0 {
			page = min(page, limit-emitted)
			if page <= 0 {
				return true, nil
			}
		}
		q := base.Limit(int(page))
		if started {
			q = q.Start(cursor).Offset(0)
		}
		if err := snap.check(now(snap.at)); err != nil {
			return false, fmt.Errorf("datastoreio: %s: after %d entities: %w", r.where(i), emitted, err)
		}
		it := c.client.Run(ctx, q)
		var got int64
		var runErr error
		for {
			k, v, err := ld.next(it)
			if errors.Is(err, iterator.Done) {
				break
			}
			if err != nil {
				var mismatch *datastore.ErrFieldMismatch
				if errors.As(err, &mismatch) {
					return false, fmt.Errorf("datastoreio: %s: loading entity %s into %v: %w", r.where(i), keyString(k, "?"), ld.t, err)
				}
				runErr = err
				break
			}
			if (lo != nil && order.Compare(k, lo) < 0) || (hi != nil && order.Compare(k, hi) >= 0) {
				return false, fmt.Errorf("datastoreio: %s: the server returned key %s, outside the sub-range [%s, %s) in %v key order: "+
					"the server does not order keys as the read was planned, and reading on could read entities twice",
					r.where(i), keyString(k, "?"), keyString(lo, "-inf"), keyString(hi, "+inf"), order)
			}
			if emitted == 0 {
				if !rt.TryClaimSplitPoint(i) {
					return false, nil
				}
			} else if !rt.TryClaimRecord(i, false) {
				return false, rt.GetError()
			}
			emit(v)
			c.m.entities.Inc(ctx, 1)
			emitted++
			got++
			if cursor, err = it.Cursor(); err != nil {
				return false, fmt.Errorf("datastoreio: %s: cursor after %d entities: %w", r.where(i), emitted, err)
			}
			started = true
			retries.Reset()
		}
		if runErr != nil {
			if ctx.Err() != nil {
				return false, fmt.Errorf("datastoreio: %s: %w", r.where(i), ctx.Err())
			}
			if retry.MessageTooLarge(runErr) && pageSize > 1 {
				// A page over gRPC's size limit: the same page would be
				// refused again, a smaller one may not be.
				pageSize = max(1, pageSize/2)
				continue
			}
			// RunQuery from a cursor is idempotent.
			if err := retries.Retry(ctx, runErr, retry.Transient(runErr, retry.Idempotent),
				fmt.Sprintf("datastoreio: %s: RunQuery after %d entities (%s)%s", r.where(i), emitted, status.Code(runErr), snap.refusal(runErr, now(snap.at)))); err != nil {
				return false, err
			}
			c.m.retries.Inc(ctx, 1)
			continue
		}
		if got < page {
			return true, nil
		}
	}
}
