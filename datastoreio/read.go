package datastoreio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/sdf"
)

// Namespace is the namespace of the package's Beam metrics.
const Namespace = "sdfio/datastoreio"

var (
	entitiesCounter       = beam.NewCounter(Namespace, "entities")
	bytesCounter          = beam.NewCounter(Namespace, "bytes")
	queriesCounter        = beam.NewCounter(Namespace, "queries")
	pagesCounter          = beam.NewCounter(Namespace, "pages")
	retriesCounter        = beam.NewCounter(Namespace, "retries")
	splitsAcceptedCounter = beam.NewCounter(Namespace, "splits_accepted")
	splitsRefusedCounter  = beam.NewCounter(Namespace, "splits_refused")
	rangesCounter         = beam.NewCounter(Namespace, "initial_splits")
	subRangesCounter      = beam.NewCounter(Namespace, "sub_ranges")
)

// Read reads the entities of q in project and returns them as a PCollection
// of t: a struct type (or a type whose pointer is a
// datastore.PropertyLoadSaver, such as datastore.PropertyList), loaded as
// the client's Get loads them; *datastore.Entity, the key and properties of
// each entity; or *datastore.Key, which reads q keys-only and emits the
// keys. A field of type *datastore.Key tagged `datastore:"__key__"`
// receives the entity's key. The package registers Beam coders for
// *datastore.Key, *datastore.Entity and datastore.PropertyList (see the
// package doc, "Generic entities"). See the package doc for how the read
// splits and which snapshot it reads. Read panics at pipeline construction
// when the project is empty, the query is invalid (Query.Validate), its
// ancestor is in another namespace than the read's, a keys-only query is
// read into anything but *datastore.Key, or t cannot hold entities.
func Read(s beam.Scope, project string, q Query, t reflect.Type, opts ...Option) beam.PCollection {
	s = s.Scope("datastoreio.Read")
	plan, err := planOf(project, q, opts)
	if err == nil {
		err = checkType(t)
	}
	if err == nil {
		err = checkKeysOnly(q, t)
	}
	if err != nil {
		panic(fmt.Errorf("datastoreio.Read: %w", err))
	}
	ranges := beam.ParDo(s, plan, beam.Impulse(s))
	ranges = beam.Reshuffle(s, ranges)
	return beam.ParDo(s, &readFn{Type: beam.EncodedType{T: t}}, ranges, beam.TypeDefinition{Var: typex.XType, T: t})
}

func checkRead(project string, q Query, o options) error {
	if project == "" {
		return errors.New("no project")
	}
	if err := q.Validate(); err != nil {
		return err
	}
	if o.keysPerSplit < 1 {
		return fmt.Errorf("KeysPerSplit(%d) must be at least 1", o.keysPerSplit)
	}
	if o.subRanges < 1 {
		return fmt.Errorf("SubRangesPerSplit(%d) must be at least 1", o.subRanges)
	}
	if o.latest && !o.readTime.IsZero() {
		return errors.New("ReadTime and LatestData exclude each other")
	}
	return q.checkNamespace(o.namespace)
}

// Range is one initial split of a read, as the read's first step computes it
// when the pipeline runs: the key range [Lo, Hi) of the query, cut into
// sub-ranges at the keys Bounds. It is the element of the reading SDF, whose
// restriction is an sdf.OffsetRange over sub-range indices [0, SubRanges()).
// Keys are in encoded form (Key.Encode); "" is an open bound.
type Range struct {
	Project   string
	Database  string `json:",omitempty"`
	Namespace string `json:",omitempty"`
	// Query is the query, GQL already parsed.
	Query Query
	// ReadTimeMicros is the snapshot read, in Unix microseconds; 0 reads the
	// latest data.
	ReadTimeMicros int64 `json:",omitempty"`
	Lo, Hi         string
	Bounds         []string `json:",omitempty"`
	// KeyOrder is the order (KeyOrder.String) Bounds are sorted in and
	// every entity read is checked against its sub-range in: the server's
	// own, found when the read was planned ("" is UTF-8).
	KeyOrder string `json:",omitempty"`
	// Index and Of number the range among the read's initial splits, for
	// messages.
	Index, Of int
	// ClientOptions names registered client options (WithClientOptions).
	ClientOptions string `json:",omitempty"`
}

func init() {
	rt := reflect.TypeFor[Range]()
	beam.RegisterType(rt)
	beam.RegisterCoder(rt, encodeRange, decodeRange)
	register.DoFn3x1[context.Context, []byte, func(Range), error](&planFn{})
	register.Emitter1[Range]()
	register.DoFn4x1[context.Context, *sdf.Tracker, Range, func(beam.X), error](&readFn{})
	register.Emitter1[beam.X]()
}

func encodeRange(r Range) ([]byte, error) { return json.Marshal(r) }

func decodeRange(b []byte) (Range, error) {
	var r Range
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("datastoreio: decoding a Range: %w", err)
	}
	return r, nil
}

// SubRanges is the number of sub-ranges: the positions of the restriction.
func (r Range) SubRanges() int64 { return int64(len(r.Bounds)) + 1 }

// Restriction is the whole restriction of r.
func (r Range) Restriction() sdf.OffsetRange { return sdf.OffsetRange{Start: 0, End: r.SubRanges()} }

// ReadTime is the snapshot r reads (zero: the latest data).
func (r Range) ReadTime() time.Time {
	if r.ReadTimeMicros == 0 {
		return time.Time{}
	}
	return time.UnixMicro(r.ReadTimeMicros).UTC()
}

// subRange returns the key bounds of sub-range i.
func (r Range) subRange(i int64) (lo, hi *datastore.Key, err error) {
	los, his := r.Lo, r.Hi
	if i > 0 {
		los = r.Bounds[i-1]
	}
	if i < int64(len(r.Bounds)) {
		his = r.Bounds[i]
	}
	if lo, err = decodeKey(los); err != nil {
		return nil, nil, err
	}
	if hi, err = decodeKey(his); err != nil {
		return nil, nil, err
	}
	return lo, hi, nil
}

func (r Range) where(i int64) string {
	lo, hi, _ := r.subRange(i)
	return fmt.Sprintf("project %s database %q namespace %q %s, sub-range %d [%s, %s) of split %d/%d",
		r.Project, r.Database, r.Namespace, r.Query.describe(), i, keyString(lo, "-inf"), keyString(hi, "+inf"), r.Index+1, r.Of)
}

func planOf(project string, q Query, opts []Option) (*planFn, error) {
	o, err := collect("datastoreio.Read", readSide, opts)
	if err != nil {
		return nil, err
	}
	if err := checkRead(project, q, o); err != nil {
		return nil, err
	}
	fn := &planFn{
		Project: project, Database: o.database, Namespace: o.namespace,
		Query: q, NumSplits: o.numSplits, KeysPerSplit: o.keysPerSplit, SubRangesPerSplit: o.subRanges,
		Latest: o.latest, ClientOptions: o.clientOptions,
	}
	if !o.readTime.IsZero() {
		fn.ReadTimeMicros = o.readTime.UnixMicro()
	}
	return fn, nil
}

// Plan computes the initial splits of a read of q as the pipeline's first
// step does, at once: it parses GQL, fixes the snapshot time, chooses the
// number of splits, samples scatter keys and groups them. With the
// restriction of each Range, a RangeReader lets a test drive the reading SDF
// directly (dstest.Subject builds an sdftest.Subject from it).
func Plan(ctx context.Context, project string, q Query, opts ...Option) ([]Range, error) {
	fn, err := planOf(project, q, opts)
	if err != nil {
		return nil, err
	}
	var out []Range
	err = fn.ProcessElement(ctx, nil, func(r Range) { out = append(out, r) })
	return out, err
}

// planFn computes a read's initial splits when the pipeline runs.
type planFn struct {
	Project, Database, Namespace string
	Query                        Query
	NumSplits, KeysPerSplit      int
	SubRangesPerSplit            int
	ReadTimeMicros               int64
	Latest                       bool
	ClientOptions                string
}

func (fn *planFn) ProcessElement(ctx context.Context, _ []byte, emit func(Range)) error {
	extra, err := registeredOptions(fn.ClientOptions)
	if err != nil {
		return err
	}
	c, err := dial(ctx, fn.Project, fn.Database, extra)
	if err != nil {
		return err
	}
	defer c.close()
	ns := fn.Namespace
	var readTime time.Time
	if fn.ReadTimeMicros != 0 {
		readTime = time.UnixMicro(fn.ReadTimeMicros).UTC()
	}
	q := fn.Query
	var serverNow time.Time
	if q.GQL != "" {
		if q, serverNow, err = parseGQL(ctx, c, ns, q.GQL, readTime); err != nil {
			return err
		}
		if err := q.checkNamespace(ns); err != nil {
			return fmt.Errorf("datastoreio: GQL %q: %w", fn.Query.GQL, err)
		}
	}
	if readTime.IsZero() && !fn.Latest {
		// One snapshot for every range and retry: the server's time now.
		if serverNow.IsZero() {
			if serverNow, err = serverTime(ctx, c, ns, q.Kind); err != nil {
				return fmt.Errorf("datastoreio: project %s namespace %q kind %s: %w", fn.Project, ns, q.Kind, err)
			}
		}
		if serverNow.IsZero() {
			serverNow = time.Now()
		}
		readTime = serverNow.Truncate(time.Microsecond)
	}
	base := Range{Project: fn.Project, Database: fn.Database, Namespace: ns, Query: q, ClientOptions: fn.ClientOptions}
	if !readTime.IsZero() {
		base.ReadTimeMicros = readTime.UnixMicro()
	}
	n := fn.NumSplits
	splittable, why := q.splittable()
	if !splittable {
		log.Infof(ctx, "datastoreio: reading %s unsplit: %s", q.describe(), why)
		n = 1
	} else if n <= 0 {
		size, err := estimateSize(ctx, c, ns, q.Kind, readTime)
		if err != nil {
			log.Infof(ctx, "datastoreio: no size estimate for kind %s (%v): %d splits", q.Kind, err, MinEstimatedSplits)
			n = MinEstimatedSplits
		} else {
			n = splitsFromSize(size)
		}
	}
	n = min(n, MaxQuerySplits)
	bundles := []bundleBounds{{}}
	if want := sampleSize(n, fn.KeysPerSplit); splittable && want > 0 {
		keys, err := scatterKeys(ctx, c, ns, q.Kind, want, readTime)
		if err != nil {
			return err
		}
		order, err := serverKeyOrder(ctx, c, ns, q.Kind, keys, readTime)
		if err != nil {
			return err
		}
		order.Sort(keys)
		bundles = groupBoundaries(order, thinKeys(order, keys, keyStride(fn.KeysPerSplit, fn.SubRangesPerSplit)), n)
		base.KeyOrder = order.String()
	}
	rangesCounter.Inc(ctx, int64(len(bundles)))
	for i, b := range bundles {
		r := base
		r.Lo, r.Hi = encodeKey(b.lo), encodeKey(b.hi)
		for _, k := range b.inner {
			r.Bounds = append(r.Bounds, encodeKey(k))
		}
		r.Index, r.Of = i, len(bundles)
		subRangesCounter.Inc(ctx, r.SubRanges())
		emit(r)
	}
	return nil
}

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
}

func keyOf(r Range) connKey {
	return connKey{r.Project, r.Database, r.ClientOptions, r.ReadTimeMicros}
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

func (fn *readFn) CreateTracker(rest sdf.OffsetRange) *sdf.Tracker { return sdf.NewTracker(rest) }

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
	c, err := dial(context.WithoutCancel(ctx), r.Project, r.Database, extra)
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

func (fn *readFn) ProcessElement(ctx context.Context, rt *sdf.Tracker, r Range, emit func(beam.X)) error {
	c, err := fn.conn(ctx, r)
	if err != nil {
		rt.Fail(err)
		return err
	}
	err = readRange(ctx, c, r, rt, fn.Type.T, func(v any) { emit(v) })
	accepted, refused := rt.SplitStats()
	splitsAcceptedCounter.Inc(ctx, accepted)
	splitsRefusedCounter.Inc(ctx, refused)
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
	queriesCounter.Inc(ctx, 1)
	var (
		cursor   datastore.Cursor
		started  bool // an entity was emitted: cursor is after it
		emitted  int64
		attempt  int
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
			entitiesCounter.Inc(ctx, 1)
			emitted++
			got++
			if cursor, err = it.Cursor(); err != nil {
				return false, fmt.Errorf("datastoreio: %s: cursor after %d entities: %w", r.where(i), emitted, err)
			}
			started = true
			attempt = 0
		}
		if runErr != nil {
			if ctx.Err() != nil {
				return false, fmt.Errorf("datastoreio: %s: %w", r.where(i), ctx.Err())
			}
			if messageTooLarge(runErr) && pageSize > 1 {
				// A page over gRPC's size limit: the same page would be
				// refused again, a smaller one may not be.
				pageSize = max(1, pageSize/2)
				continue
			}
			attempt++
			if !isTransient(runErr) || attempt >= defaultRetry.Attempts {
				how := "failed"
				if isTransient(runErr) {
					how = fmt.Sprintf("failed %d times in a row", attempt)
				}
				return false, fmt.Errorf("datastoreio: %s: query %s after %d entities (%s): %w", r.where(i), how, emitted, status.Code(runErr), runErr)
			}
			retriesCounter.Inc(ctx, 1)
			if err := sleep(ctx, defaultRetry.backoff(attempt)); err != nil {
				return false, fmt.Errorf("datastoreio: %s: %w", r.where(i), err)
			}
			continue
		}
		if got < page {
			return true, nil
		}
	}
}
