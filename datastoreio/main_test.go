package datastoreio_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/internal/testtmp"
	"github.com/sdfio/sdfio/sdf"
)

// One emulator for the test binary; worker processes of workertest never
// start one. When the whole package runs (no -run), the data sets start
// loading in the background before the first test (see the data sets in
// read_test.go).
func TestMain(m *testing.M) {
	run := func() int {
		flag.Parse()
		if worker := flag.Lookup("worker"); (worker == nil || worker.Value.String() != "true") && flag.Lookup("test.run").Value.String() == "" {
			startMedium()
			startUnicode()
			if !testing.Short() {
				startLarge()
			}
		}
		return ptest.MainRetWithDefault(m, "prism")
	}
	os.Exit(testtmp.Main(func() int { return dstest.RunSharedFunc(run) }))
}

// item is the entity of the tests: a key field, scalars, a slice and a
// nested struct, loaded as the client's Get loads them.
type item struct {
	K     *datastore.Key `datastore:"__key__"`
	N     int64
	Name  string   `datastore:"name,noindex"`
	Tags  []string `datastore:",noindex"`
	Inner inner
}

// inner is nested; only B is indexed (the emulator writes faster with few
// indexes).
type inner struct {
	A int64 `datastore:",noindex"`
	B string
}

func init() {
	datastoreio.RegisterType(reflect.TypeFor[item]())
	datastoreio.RegisterType(reflect.TypeFor[inner]())
	datastoreio.RegisterClientOptions("hook", func() []option.ClientOption {
		return []option.ClientOption{option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(hook.intercept))}
	})
	datastoreio.RegisterClientOptions("memo", func() []option.ClientOption {
		return []option.ClientOption{option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(memo.intercept))}
	})
}

// id identifies an entity in comparisons: its key path and N.
func (it item) id() string { return fmt.Sprintf("%s|%s=%d", it.K.Namespace, it.K.String(), it.N) }

// hook is a gRPC client interceptor the tests steer (they do not run in
// parallel; tests that use neither hook nor wHook run in parallel after
// them): it injects errors, cuts responses, slows queries, answers
// statistics queries and records read times.
var hook hookState

type hookState struct {
	mu        sync.Mutex
	calls     int
	failEvery int        // every failEvery-th RunQuery fails with failCode before reaching the server
	failFirst int        // the first failFirst RunQueries fail so too
	failCode  codes.Code // default Unavailable
	failMsg   string     // the failures' message, when set
	cutEvery  int        // every cutEvery-th RunQuery reaches the server, whose answer is then lost
	delay     time.Duration
	delayKind string
	statBytes int64 // > 0: answer __Stat_* queries with this many entity bytes
	readTimes []time.Time
	noTime    int // RunQuery requests without a read time
	injected  int
	// The service's refusal of an expired snapshot, which the emulator
	// does not do: with keep > 0, a RunQuery whose read time is older
	// than keep at the fake service's time (time.Now()+ahead) fails with
	// FAILED_PRECONDITION, as Cloud Datastore refuses it, counted in
	// refused.
	keep, ahead time.Duration
	refused     int
	noScatter   bool // answer __scatter__ queries with no keys, as for a kind without them
}

func (h *hookState) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls, h.failEvery, h.failFirst, h.failCode, h.failMsg, h.cutEvery, h.delay, h.delayKind = 0, 0, 0, codes.OK, "", 0, 0, ""
	h.statBytes, h.readTimes, h.noTime, h.injected = 0, nil, 0, 0
	h.keep, h.ahead, h.refused, h.noScatter = 0, 0, 0, false
}

func (h *hookState) set(f func(h *hookState)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

func (h *hookState) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	rq, ok := req.(*pb.RunQueryRequest)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	kind := ""
	if ks := rq.GetQuery().GetKind(); len(ks) > 0 {
		kind = ks[0].Name
	}
	h.mu.Lock()
	h.calls++
	n := h.calls
	if t := rq.GetReadOptions().GetReadTime(); t != nil {
		h.readTimes = append(h.readTimes, t.AsTime())
	} else {
		h.noTime++
	}
	fail := h.failEvery > 0 && n%h.failEvery == 0 || n <= h.failFirst
	msg := h.failMsg
	cut := !fail && h.cutEvery > 0 && n%h.cutEvery == 0
	code := h.failCode
	if code == codes.OK {
		code = codes.Unavailable
	}
	delay := time.Duration(0)
	if h.delayKind == kind {
		delay = h.delay
	}
	statBytes := h.statBytes
	if fail || cut {
		h.injected++
	}
	var expired *timestamppb.Timestamp
	if t := rq.GetReadOptions().GetReadTime(); t != nil && h.keep > 0 && t.AsTime().Before(time.Now().Add(h.ahead-h.keep)) {
		expired = t
		h.refused++
	}
	noScatter := h.noScatter && len(rq.GetQuery().GetOrder()) > 0 && rq.GetQuery().GetOrder()[0].GetProperty().GetName() == "__scatter__"
	h.mu.Unlock()
	if expired != nil {
		return status.Errorf(codes.FailedPrecondition, "the requested snapshot version %s is too old", expired.AsTime().Format(time.RFC3339Nano))
	}
	if noScatter {
		reply.(*pb.RunQueryResponse).Batch = &pb.QueryResultBatch{MoreResults: pb.QueryResultBatch_NO_MORE_RESULTS, EntityResultType: pb.EntityResult_KEY_ONLY}
		return nil
	}
	if strings.HasPrefix(kind, "__Stat_") && statBytes > 0 {
		return answerStat(rq, reply.(*pb.RunQueryResponse), kind, statBytes)
	}
	if fail {
		if msg != "" {
			return status.Error(code, msg)
		}
		return status.Errorf(code, "injected %v on call %d", code, n)
	}
	time.Sleep(delay)
	err := invoker(ctx, method, req, reply, cc, opts...)
	if cut && err == nil {
		proto.Reset(reply.(proto.Message))
		return status.Errorf(codes.Unavailable, "injected: connection reset while the answer of call %d was read", n)
	}
	return err
}

// memo answers a RunQuery it has seen before with the server's first
// answer, so that sdftest's thousands of reads of one range cost the
// emulator each distinct query once. Requests of one range are
// deterministic (same read time, same cursors), so the answers are the
// server's own.
var memo memoState

type memoState struct {
	mu      sync.Mutex
	answers map[string][]byte
	hits    int
}

func (m *memoState) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	rq, ok := req.(*pb.RunQueryRequest)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	k, err := proto.MarshalOptions{Deterministic: true}.Marshal(rq)
	if err != nil {
		return err
	}
	m.mu.Lock()
	b, hit := m.answers[string(k)]
	if hit {
		m.hits++
	}
	m.mu.Unlock()
	if hit {
		return proto.Unmarshal(b, reply.(proto.Message))
	}
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return err
	}
	b, err = proto.Marshal(reply.(proto.Message))
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.answers == nil {
		m.answers = map[string][]byte{}
	}
	m.answers[string(k)] = b
	m.mu.Unlock()
	return nil
}

var statTime = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// answerStat answers the statistics queries as Cloud Datastore does: the
// latest __Stat_Total__ (an older one exists too) and __Stat_Kind__ of the
// kind at that timestamp.
func answerStat(rq *pb.RunQueryRequest, resp *pb.RunQueryResponse, kind string, bytes int64) error {
	ent := func(props map[string]*pb.Value) *pb.EntityResult {
		return &pb.EntityResult{Entity: &pb.Entity{
			Key:        &pb.Key{Path: []*pb.Key_PathElement{{Kind: kind, IdType: &pb.Key_PathElement_Id{Id: 1}}}},
			Properties: props,
		}}
	}
	ts := &pb.Value{ValueType: &pb.Value_TimestampValue{TimestampValue: timestamppb.New(statTime)}}
	resp.Batch = &pb.QueryResultBatch{MoreResults: pb.QueryResultBatch_NO_MORE_RESULTS, EntityResultType: pb.EntityResult_FULL}
	switch kind {
	case "__Stat_Total__", "__Stat_Ns_Total__":
		resp.Batch.EntityResults = []*pb.EntityResult{ent(map[string]*pb.Value{"timestamp": ts})}
	case "__Stat_Kind__", "__Stat_Ns_Kind__":
		// Only the right kind at the latest timestamp has the size.
		var kindName string
		var at time.Time
		for _, f := range rq.GetQuery().GetFilter().GetCompositeFilter().GetFilters() {
			pf := f.GetPropertyFilter()
			switch pf.GetProperty().GetName() {
			case "kind_name":
				kindName = pf.GetValue().GetStringValue()
			case "timestamp":
				at = pf.GetValue().GetTimestampValue().AsTime()
			}
		}
		if kindName != "" && at.Equal(statTime) {
			resp.Batch.EntityResults = []*pb.EntityResult{ent(map[string]*pb.Value{
				"kind_name":    {ValueType: &pb.Value_StringValue{StringValue: kindName}},
				"timestamp":    ts,
				"entity_bytes": {ValueType: &pb.Value_IntegerValue{IntegerValue: bytes}},
			})}
		}
	}
	return nil
}

// client returns a client of the shared emulator.
func client(t testing.TB) (*dstest.Emulator, *datastore.Client) {
	t.Helper()
	e := dstest.Start(t)
	c, err := e.NewClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return e, c
}

// put writes items with PutMulti of 500, four requests at a time.
func put(t testing.TB, c *datastore.Client, items []item) {
	t.Helper()
	if err := putItems(context.Background(), c, items); err != nil {
		t.Fatal(err)
	}
}

func putItems(ctx context.Context, c *datastore.Client, items []item) error {
	var wg sync.WaitGroup
	errs := make(chan error, (len(items)+499)/500)
	sem := make(chan struct{}, 4)
	for i := 0; i < len(items); i += 500 {
		end := min(i+500, len(items))
		keys := make([]*datastore.Key, 0, end-i)
		for _, it := range items[i:end] {
			keys = append(keys, it.K)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(batch []item) {
			defer func() { <-sem; wg.Done() }()
			if _, err := c.PutMulti(ctx, keys, batch); err != nil {
				errs <- err
			}
		}(items[i:end])
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("PutMulti: %w", err)
	}
	return nil
}

// mixedItems makes n entities of kind in ns: about 70% numeric ids over the
// whole positive int64 range, 20% names, 10% children of parents (of kind
// Parent and of the kind itself, with ids and names).
func mixedItems(ns, kind string, n int, seed uint64) []item {
	r := rand.New(rand.NewPCG(seed, seed+1))
	seen := map[string]bool{}
	var out []item
	for len(out) < n {
		var k *datastore.Key
		switch x := r.IntN(10); {
		case x < 7:
			k = datastore.IDKey(kind, 1+r.Int64N(math.MaxInt64), nil)
		case x < 9:
			k = datastore.NameKey(kind, fmt.Sprintf("n%x", r.Uint64()), nil)
		default:
			var parent *datastore.Key
			if r.IntN(2) == 0 {
				parent = datastore.IDKey("Parent", 1+r.Int64N(20), nil)
			} else {
				parent = datastore.NameKey(kind, fmt.Sprintf("p%d", r.IntN(20)), nil)
			}
			parent.Namespace = ns
			if r.IntN(2) == 0 {
				k = datastore.IDKey(kind, 1+r.Int64N(math.MaxInt64), parent)
			} else {
				k = datastore.NameKey(kind, fmt.Sprintf("c%x", r.Uint64()), parent)
			}
		}
		k.Namespace = ns
		if seen[k.String()] {
			continue
		}
		seen[k.String()] = true
		i := len(out)
		out = append(out, item{K: k, N: int64(i), Name: fmt.Sprintf("e%d", i), Tags: []string{"t", fmt.Sprint(i % 3)}, Inner: inner{A: int64(i) * 2, B: kind}})
	}
	return out
}

func ids(items []item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.id()
	}
	slices.Sort(out)
	return out
}

// sameMultiset fails t unless got and want hold the same ids the same
// number of times, naming duplicates and missing ones.
func sameMultiset(t testing.TB, what string, got, want []string) {
	t.Helper()
	count := map[string]int{}
	for _, s := range want {
		count[s]++
	}
	for _, s := range got {
		count[s]--
	}
	var missing, extra []string
	for s, c := range count {
		if c > 0 {
			missing = append(missing, s)
		} else if c < 0 {
			extra = append(extra, s)
		}
	}
	if len(missing)+len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		t.Fatalf("%s: read %d entities, want %d: %d missing (%v), %d duplicated or unexpected (%v)",
			what, len(got), len(want), len(missing), head(missing), len(extra), head(extra))
	}
}

func head(s []string) []string {
	if len(s) > 5 {
		return s[:5]
	}
	return s
}

// readPlanned plans q and reads every range with a RangeReader, as the
// pipeline's two steps do.
func readPlanned(t testing.TB, project string, q datastoreio.Query, opts ...datastoreio.ReadOption) ([]datastoreio.Range, []item, error) {
	t.Helper()
	return readRanges(context.Background(), project, q, opts...)
}

func readRanges(ctx context.Context, project string, q datastoreio.Query, opts ...datastoreio.ReadOption) ([]datastoreio.Range, []item, error) {
	ranges, err := datastoreio.Plan(ctx, project, q, opts...)
	if err != nil {
		return nil, nil, err
	}
	var out []item
	for _, r := range ranges {
		rr, err := datastoreio.NewRangeReader(ctx, r)
		if err != nil {
			return ranges, out, err
		}
		rt := sdf.NewTracker(r.Restriction())
		err = rr.Read(ctx, r, rt, reflect.TypeFor[item](), func(v any) { out = append(out, v.(item)) })
		rr.Close()
		if err != nil {
			return ranges, out, err
		}
		if !rt.IsDone() {
			return ranges, out, fmt.Errorf("tracker of range %d not done: %v", r.Index, rt)
		}
	}
	return ranges, out, nil
}

func counter(t testing.TB, res beam.PipelineResult, name string) int64 {
	t.Helper()
	cs := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == datastoreio.Namespace && r.Name() == name
	}).Counters()
	var sum int64
	for _, c := range cs {
		sum += c.Result()
	}
	return sum
}
