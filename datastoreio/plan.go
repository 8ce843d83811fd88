package datastoreio

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sdfio/sdfio/internal/retry"
)

// Split-count rules of Beam Java's DatastoreV1.Read.withNumQuerySplits.
const (
	// MaxQuerySplits caps the number of splits (Java's NUM_QUERY_SPLITS_MAX).
	MaxQuerySplits = 50000
	// MinEstimatedSplits is the fewest splits chosen from statistics, and the
	// number used when there are none (Java's NUM_QUERY_SPLITS_MIN).
	MinEstimatedSplits = 12
	// BytesPerSplit is the size of one split chosen from statistics
	// (Java's DEFAULT_BUNDLE_SIZE_BYTES, 64 MiB).
	BytesPerSplit = 64 << 20
	// DefaultKeysPerSplit is how many scatter keys are sampled per
	// requested split (Java's KEYS_PER_SPLIT), so that the splits come out
	// about even.
	DefaultKeysPerSplit = 32
	// DefaultSubRangesPerSplit is how many sub-ranges, the grid a runner
	// splits a running read on, a split with a full sample of scatter keys
	// is cut into. With DefaultKeysPerSplit it keeps every 4th sampled key
	// as a boundary: Datastore gives about one entity in 128 a __scatter__
	// property (0.78%), so a sub-range spans about 512 entities, one full
	// page of 500, however small the kind.
	DefaultSubRangesPerSplit = 8
)

// sampleSize is how many scatter keys a read of n splits samples: Java's
// (n-1)*keysPerSplit, and keysPerSplit-1 for a single split, which is still
// cut into sub-ranges (so that a runner can split it while it is read, and
// no sub-range is one long cursor).
func sampleSize(n, keysPerSplit int) int {
	if n <= 1 {
		return keysPerSplit - 1
	}
	return (n - 1) * keysPerSplit
}

// keyStride is how many sampled keys one sub-range spans:
// keysPerSplit/subRangesPerSplit, at least 1.
func keyStride(keysPerSplit, subRangesPerSplit int) int {
	return max(1, keysPerSplit/max(1, subRangesPerSplit))
}

// thinKeys returns every stride-th key of sorted (sorted in order o),
// without duplicates: the keys at indexes stride-1, 2*stride-1, ... of the
// distinct keys.
func thinKeys(o KeyOrder, sorted []*datastore.Key, stride int) []*datastore.Key {
	var out []*datastore.Key
	distinct := 0
	var last *datastore.Key
	for _, k := range sorted {
		if last != nil && o.Compare(last, k) >= 0 {
			continue
		}
		last = k
		distinct++
		if distinct%stride == 0 {
			out = append(out, k)
		}
	}
	return out
}

// maxPage is the most entities one request asks for.
const maxPage = 500

// splitsFromSize is Java's rule: size/64 MiB rounded, within [12, 50000].
func splitsFromSize(bytes int64) int {
	n := math.Round(float64(bytes) / BytesPerSplit)
	return int(min(MaxQuerySplits, max(MinEstimatedSplits, n)))
}

// estimateSize reads the entity bytes of kind from the statistics entities
// (__Stat_Kind__, or __Stat_Ns_Kind__ in a namespace) at the timestamp of
// the latest __Stat_Total__ / __Stat_Ns_Total__. It errs when there are no
// statistics.
func estimateSize(ctx context.Context, c *conn, ns, kind string, readTime time.Time) (int64, error) {
	totalKind, kindKind := "__Stat_Total__", "__Stat_Kind__"
	if ns != "" {
		totalKind, kindKind = "__Stat_Ns_Total__", "__Stat_Ns_Kind__"
	}
	total, err := c.runRaw(ctx, ns, readTime, &pb.Query{
		Kind:  []*pb.KindExpression{{Name: totalKind}},
		Order: []*pb.PropertyOrder{{Property: &pb.PropertyReference{Name: "timestamp"}, Direction: pb.PropertyOrder_DESCENDING}},
		Limit: wrapperspb.Int32(1),
	})
	if err != nil {
		return 0, err
	}
	if len(total.GetBatch().GetEntityResults()) == 0 {
		return 0, fmt.Errorf("datastoreio: no %s entity in namespace %q", totalKind, ns)
	}
	ts := total.Batch.EntityResults[0].Entity.Properties["timestamp"]
	if ts.GetTimestampValue() == nil {
		return 0, fmt.Errorf("datastoreio: %s has no timestamp", totalKind)
	}
	stat, err := c.runRaw(ctx, ns, readTime, &pb.Query{
		Kind: []*pb.KindExpression{{Name: kindKind}},
		Filter: &pb.Filter{FilterType: &pb.Filter_CompositeFilter{CompositeFilter: &pb.CompositeFilter{
			Op: pb.CompositeFilter_AND,
			Filters: []*pb.Filter{
				propertyFilter("kind_name", pb.PropertyFilter_EQUAL, &pb.Value{ValueType: &pb.Value_StringValue{StringValue: kind}}),
				propertyFilter("timestamp", pb.PropertyFilter_EQUAL, ts),
			},
		}}},
		Limit: wrapperspb.Int32(1),
	})
	if err != nil {
		return 0, err
	}
	if len(stat.GetBatch().GetEntityResults()) == 0 {
		return 0, fmt.Errorf("datastoreio: no %s entity for kind %s at %v", kindKind, kind, ts.GetTimestampValue().AsTime())
	}
	b := stat.Batch.EntityResults[0].Entity.Properties["entity_bytes"]
	if _, ok := b.GetValueType().(*pb.Value_IntegerValue); !ok {
		return 0, fmt.Errorf("datastoreio: %s of kind %s has no integer entity_bytes", kindKind, kind)
	}
	return b.GetIntegerValue(), nil
}

func propertyFilter(name string, op pb.PropertyFilter_Operator, v *pb.Value) *pb.Filter {
	return &pb.Filter{FilterType: &pb.Filter_PropertyFilter{PropertyFilter: &pb.PropertyFilter{
		Property: &pb.PropertyReference{Name: name}, Op: op, Value: v,
	}}}
}

// runRaw runs one RunQuery request through the gRPC client, retrying
// transient errors.
func (c *conn) runRaw(ctx context.Context, ns string, readTime time.Time, q *pb.Query) (*pb.RunQueryResponse, error) {
	req := &pb.RunQueryRequest{
		ProjectId:   c.project,
		DatabaseId:  c.database,
		PartitionId: &pb.PartitionId{ProjectId: c.project, DatabaseId: c.database, NamespaceId: ns},
		ReadOptions: readOptions(readTime),
		QueryType:   &pb.RunQueryRequest_Query{Query: q},
	}
	return c.runRequest(ctx, req)
}

func (c *conn) runRequest(ctx context.Context, req *pb.RunQueryRequest) (*pb.RunQueryResponse, error) {
	// RunQuery is idempotent: every transient code is retried.
	r := readRetries.Start()
	for {
		resp, err := c.raw.RunQuery(c.rawContext(ctx), req)
		if err == nil {
			return resp, nil
		}
		if err := r.Retry(ctx, err, retry.Transient(err, retry.Idempotent), "RunQuery"); err != nil {
			return nil, err
		}
		c.m.retries.Inc(ctx, 1)
	}
}

// parseGQL has the server parse a literal GQL query: a RunQuery of it
// answers with the parsed query, which is returned with the answer's read
// time (zero when the server sent none).
func parseGQL(ctx context.Context, c *conn, ns, gql string, readTime time.Time) (Query, time.Time, error) {
	resp, err := c.runRequest(ctx, &pb.RunQueryRequest{
		ProjectId:   c.project,
		DatabaseId:  c.database,
		PartitionId: &pb.PartitionId{ProjectId: c.project, DatabaseId: c.database, NamespaceId: ns},
		ReadOptions: readOptions(readTime),
		QueryType:   &pb.RunQueryRequest_GqlQuery{GqlQuery: &pb.GqlQuery{QueryString: gql, AllowLiterals: true}},
	})
	if err != nil {
		return Query{}, time.Time{}, fmt.Errorf("datastoreio: GQL %q in project %s namespace %q: %w", gql, c.project, ns, err)
	}
	if resp.Query == nil {
		return Query{}, time.Time{}, fmt.Errorf("datastoreio: the server did not return the parsed form of GQL %q", gql)
	}
	q, err := fromProto(resp.Query)
	if err != nil {
		return Query{}, time.Time{}, fmt.Errorf("datastoreio: GQL %q: %w", gql, err)
	}
	return q, batchTime(resp), nil
}

func batchTime(resp *pb.RunQueryResponse) time.Time {
	if t := resp.GetBatch().GetReadTime(); t != nil {
		return t.AsTime()
	}
	return time.Time{}
}

// serverTime asks the server for its current time: the read time of a
// keys-only query for one entity of kind. Zero when the server sends none.
func serverTime(ctx context.Context, c *conn, ns, kind string) (time.Time, error) {
	resp, err := c.runRaw(ctx, ns, time.Time{}, &pb.Query{
		Kind:       []*pb.KindExpression{{Name: kind}},
		Projection: []*pb.Projection{{Property: &pb.PropertyReference{Name: "__key__"}}},
		Limit:      wrapperspb.Int32(1),
	})
	if err != nil {
		return time.Time{}, err
	}
	return batchTime(resp), nil
}

// scatterKeys returns up to n keys of kind sampled by the __scatter__
// property: a keys-only query ordered by __scatter__, as Java's splitter
// runs it, paged with cursors. The keys come back in scatter order.
func scatterKeys(ctx context.Context, c *conn, ns, kind string, n int, readTime time.Time) ([]*datastore.Key, error) {
	var keys []*datastore.Key
	var cursor []byte
	for len(keys) < n {
		resp, err := c.runRaw(ctx, ns, readTime, &pb.Query{
			Kind:        []*pb.KindExpression{{Name: kind}},
			Projection:  []*pb.Projection{{Property: &pb.PropertyReference{Name: "__key__"}}},
			Order:       []*pb.PropertyOrder{{Property: &pb.PropertyReference{Name: "__scatter__"}, Direction: pb.PropertyOrder_ASCENDING}},
			Limit:       wrapperspb.Int32(int32(min(n-len(keys), math.MaxInt32))),
			StartCursor: cursor,
		})
		if err != nil {
			return nil, fmt.Errorf("datastoreio: __scatter__ query of kind %s in project %s namespace %q: %w", kind, c.project, ns, err)
		}
		for _, r := range resp.Batch.EntityResults {
			k, err := protoToKey(r.Entity.Key)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		}
		if resp.Batch.MoreResults != pb.QueryResultBatch_NOT_FINISHED || len(resp.Batch.EntityResults) == 0 {
			break
		}
		cursor = resp.Batch.EndCursor
	}
	return keys, nil
}

// groupBoundaries turns scatter keys sorted in order o into bundles: the keys cut the
// key space into len(keys)+1 sub-ranges, which are grouped, in order, into at
// most n bundles of about equal numbers of sub-ranges. Duplicates are
// dropped. Each bundle is returned as its outer bounds (nil: open) and the
// keys inside it.
func groupBoundaries(o KeyOrder, sorted []*datastore.Key, n int) []bundleBounds {
	keys := sorted[:0:0]
	for _, k := range sorted {
		if len(keys) == 0 || o.Compare(keys[len(keys)-1], k) < 0 {
			keys = append(keys, k)
		}
	}
	subRanges := len(keys) + 1
	n = max(1, min(n, subRanges))
	out := make([]bundleBounds, 0, n)
	// Sub-range s spans [keys[s-1], keys[s]), with keys[-1] and keys[len]
	// open.
	bound := func(s int) *datastore.Key {
		if s <= 0 || s > len(keys) {
			return nil
		}
		return keys[s-1]
	}
	for j := 0; j < n; j++ {
		first, last := j*subRanges/n, (j+1)*subRanges/n // sub-ranges [first, last)
		b := bundleBounds{lo: bound(first), hi: bound(last)}
		for s := first + 1; s < last; s++ {
			b.inner = append(b.inner, bound(s))
		}
		out = append(out, b)
	}
	return out
}

type bundleBounds struct {
	lo, hi *datastore.Key
	inner  []*datastore.Key
}

func timestampProto(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// checkRead refuses a read that cannot run.
func checkRead(project string, q Query, c readConfig) error {
	if project == "" {
		return errors.New("no project")
	}
	if err := q.Validate(); err != nil {
		return err
	}
	return q.checkNamespace(c.namespace)
}

// planOf is the planning DoFn of a read of q in project with opts, checked;
// transform names the transform in errors.
func planOf(transform, project string, q Query, opts []ReadOption) (*planFn, error) {
	c, err := newReadConfig(transform, opts)
	if err != nil {
		return nil, err
	}
	if err := checkRead(project, q, c); err != nil {
		return nil, fmt.Errorf("%s: %w", transform, err)
	}
	fn := &planFn{
		Project: project, Database: c.database, Namespace: c.namespace,
		Query: q, NumSplits: c.numSplits, KeysPerSplit: c.keysPerSplit, SubRangesPerSplit: c.subRanges,
		Snapshot: c.snapshot, SnapshotOption: c.snapshotOption(), ClientOptions: c.clientOptions, MetricsNamespace: c.metrics,
	}
	if fn.SnapshotOption != "" {
		fn.Retention = c.retention
	}
	if !c.readTime.IsZero() {
		fn.ReadTimeMicros = c.readTime.UnixMicro()
	}
	return fn, nil
}

// Plan computes the initial splits of a read of q as the pipeline's first
// step does, at once: it parses GQL, fixes the snapshot time, chooses the
// number of splits, samples scatter keys and groups them. With the
// restriction of each Range, a RangeReader lets a test drive the reading SDF
// directly (dstest.Subject builds an sdftest.Subject from it). It takes
// Read's options and refuses what Read refuses, naming datastoreio.Plan.
func Plan(ctx context.Context, project string, q Query, opts ...ReadOption) ([]Range, error) {
	fn, err := planOf("datastoreio.Plan", project, q, opts)
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
	Snapshot                     bool          // WithSnapshot: fix the read time when the read starts
	Retention                    time.Duration // of a snapshot read (0 for the latest data)
	SnapshotOption               string        // the option call that made it a snapshot read
	ClientOptions                string
	MetricsNamespace             string
}

func (fn *planFn) ProcessElement(ctx context.Context, _ []byte, emit func(Range)) error {
	extra, err := registeredOptions(fn.ClientOptions)
	if err != nil {
		return err
	}
	c, err := dial(ctx, fn.Project, fn.Database, fn.MetricsNamespace, extra)
	if err != nil {
		return err
	}
	defer c.close()
	ns := fn.Namespace
	var readTime time.Time
	if fn.ReadTimeMicros != 0 {
		readTime = time.UnixMicro(fn.ReadTimeMicros).UTC()
		// A time given that is already too old fails before any work.
		if err := (snapshot{readTime, fn.Retention, fn.SnapshotOption}).check(now(readTime)); err != nil {
			return fmt.Errorf("datastoreio: the read of %s in project %s namespace %q: %w", fn.Query.describe(), fn.Project, ns, err)
		}
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
	if fn.Snapshot {
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
		if fn.Retention > DefaultVersionRetention {
			// Point-in-time recovery keeps versions older than an hour at
			// whole minutes only.
			readTime = serverNow.Truncate(time.Minute)
		}
	}
	base := Range{Project: fn.Project, Database: fn.Database, Namespace: ns, Query: q, ClientOptions: fn.ClientOptions, MetricsNamespace: fn.MetricsNamespace}
	if !readTime.IsZero() {
		base.ReadTimeMicros = readTime.UnixMicro()
		base.Retention, base.SnapshotOption = fn.Retention, fn.SnapshotOption
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
	var want, got, kept int // scatter keys asked, returned, kept as bounds
	if want = sampleSize(n, fn.KeysPerSplit); splittable && want > 0 {
		keys, err := scatterKeys(ctx, c, ns, q.Kind, want, readTime)
		if err != nil {
			return err
		}
		got = len(keys)
		if got == 0 {
			log.Warnf(ctx, "datastoreio: kind %s in project %s database %q namespace %q has no __scatter__ keys (%d asked): "+
				"the read is one range of one sub-range, read whole by one worker: no initial splits, and nothing the runner can split while it reads. "+
				"Datastore gives about one entity in 128 a __scatter__ property, so a kind of a few hundred entities may have none; a larger kind without them reads no faster on more workers",
				q.Kind, fn.Project, fn.Database, ns, want)
		}
		order, err := serverKeyOrder(ctx, c, ns, q.Kind, keys, readTime)
		if err != nil {
			return err
		}
		order.Sort(keys)
		bounds := thinKeys(order, keys, keyStride(fn.KeysPerSplit, fn.SubRangesPerSplit))
		kept = len(bounds)
		bundles = groupBoundaries(order, bounds, n)
		base.KeyOrder = order.String()
	} else {
		want = 0
	}
	c.m.initialSplits.Inc(ctx, int64(len(bundles)))
	ranges := make([]Range, len(bundles))
	var subRanges int64
	for i, b := range bundles {
		r := base
		r.Lo, r.Hi = encodeKey(b.lo), encodeKey(b.hi)
		for _, k := range b.inner {
			r.Bounds = append(r.Bounds, encodeKey(k))
		}
		r.Index, r.Of = i, len(bundles)
		ranges[i] = r
		subRanges += r.SubRanges()
	}
	// The plan, for the worker's log: what was asked and what the server
	// gave.
	log.Infof(ctx, "datastoreio: planned the read of %s in project %s database %q namespace %q: %s, %d after the split rules; "+
		"%d scatter keys asked, %d returned, %d kept as sub-range bounds: %d initial splits of %d sub-ranges, %s",
		q.describe(), fn.Project, fn.Database, ns, asked(fn.NumSplits), n, want, got, kept, len(ranges), subRanges, base.snapshot().describe())
	for _, r := range ranges {
		c.m.subRanges.Inc(ctx, r.SubRanges())
		emit(r)
	}
	return nil
}

// asked says how the number of query splits was asked for.
func asked(n int) string {
	if n <= 0 {
		return "query splits from the statistics"
	}
	return fmt.Sprintf("%d query splits asked", n)
}
