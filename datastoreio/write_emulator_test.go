package datastoreio_test

import (
	"context"
	"fmt"
	"math"
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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/internal/workertest"
)

// Tests of datastoreio.Write, datastoreio.DeleteEntity and datastoreio.DeleteKey against the Cloud Datastore
// emulator, in Prism pipelines: what was written is read back with the
// official client and compared as a multiset, field by field. A gRPC client
// interceptor (wHook) counts and sizes the commits and injects faults.
//
// The emulator takes a few hundred small entities a second on a shared
// 2-core machine, so the data sets are small; the batching rules are
// pinned exactly by the unit tests.

// wEnt is the entity of the write tests.
// Properties other than N are not indexed: the emulator writes index
// entries slowly.
type wEnt struct {
	K     *datastore.Key `datastore:"__key__"`
	N     int64
	Name  string   `datastore:",noindex"`
	Tags  []string `datastore:",noindex"`
	Inner wInner   `datastore:",noindex"`
	Blob  []byte   `datastore:",noindex"`
}

type wInner struct {
	A int64
	B string
}

// wVal is the value of the KV form.
type wVal struct {
	N    int64
	Name string `datastore:",noindex"`
}

func init() {
	register.DoFn2x0[[]byte, func(wEnt)](&wGenFn{})
	register.DoFn2x0[[]byte, func(*wEnt)](&wGenPtrFn{})
	register.DoFn2x0[[]byte, func(*datastore.Key, wVal)](&wGenKVFn{})
	register.DoFn2x0[[]byte, func(*datastore.Key)](&wGenKeyFn{})
	register.Emitter1[wEnt]()
	register.Emitter1[*wEnt]()
	register.Emitter2[*datastore.Key, wVal]()
	register.Emitter1[*datastore.Key]()
	datastoreio.RegisterType(reflect.TypeFor[wEnt]())
	datastoreio.RegisterType(reflect.TypeFor[*wEnt]())
	datastoreio.RegisterType(reflect.TypeFor[wInner]())
	datastoreio.RegisterType(reflect.TypeFor[wVal]())
	datastoreio.RegisterClientOptions("wHook", func() []option.ClientOption {
		return []option.ClientOption{option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(wHook.intercept))}
	})
}

// wKey is the key of entity i of kind in namespace ns: numeric ids spread
// over the whole positive int64 range, names, and children of ids and names.
func wKey(ns, kind string, i int) *datastore.Key {
	var k *datastore.Key
	switch i % 10 {
	case 0, 1, 2, 3, 4, 5:
		k = datastore.IDKey(kind, spreadID(i), nil)
	case 6, 7:
		k = datastore.NameKey(kind, fmt.Sprintf("name-%d", i), nil)
	case 8:
		p := datastore.IDKey("WParent", int64(i%7+1), nil)
		p.Namespace = ns
		k = datastore.IDKey(kind, spreadID(i), p)
	default:
		p := datastore.NameKey(kind, fmt.Sprintf("parent-%d", i%5), nil)
		p.Namespace = ns
		k = datastore.NameKey(kind, fmt.Sprintf("child-%d", i), p)
	}
	k.Namespace = ns
	return k
}

// spreadID maps i to a distinct id in [1, MaxInt64]: a multiplicative
// permutation of 63-bit values.
func spreadID(i int) int64 {
	const odd = 0x9E3779B97F4A7C15
	v := (uint64(i+1) * odd) & math.MaxInt64
	if v == 0 {
		v = 1
	}
	return int64(v)
}

func wMake(ns, kind string, i int, blob int) wEnt {
	e := wEnt{
		K: wKey(ns, kind, i), N: int64(i), Name: fmt.Sprintf("e%d", i),
		Tags:  []string{"t", fmt.Sprint(i % 3)},
		Inner: wInner{A: int64(i) * 2, B: kind},
	}
	if blob > 0 {
		e.Blob = make([]byte, blob)
		for j := range e.Blob {
			e.Blob[j] = byte(i + j)
		}
	}
	return e
}

// wGenFn emits the entities [From, To) of Kind, alternating between the
// namespaces NS[0] and NS[1] (NS[0] only when there is one).
type wGenFn struct {
	NS        []string
	Kind      string
	From, To  int
	BlobBytes int
}

func (fn *wGenFn) ProcessElement(_ []byte, emit func(wEnt)) {
	for i := fn.From; i < fn.To; i++ {
		emit(wMake(fn.NS[i%len(fn.NS)], fn.Kind, i, fn.BlobBytes))
	}
}

type wGenPtrFn struct{ wGenFn }

func (fn *wGenPtrFn) ProcessElement(_ []byte, emit func(*wEnt)) {
	fn.wGenFn.ProcessElement(nil, func(e wEnt) { emit(&e) })
}

type wGenKVFn struct {
	NS       string
	Kind     string
	From, To int
}

func (fn *wGenKVFn) ProcessElement(_ []byte, emit func(*datastore.Key, wVal)) {
	for i := fn.From; i < fn.To; i++ {
		emit(wKey(fn.NS, fn.Kind, i), wVal{N: int64(i), Name: fmt.Sprintf("kv%d", i)})
	}
}

type wGenKeyFn struct {
	NS       string
	Kind     string
	From, To int
}

func (fn *wGenKeyFn) ProcessElement(_ []byte, emit func(*datastore.Key)) {
	for i := fn.From; i < fn.To; i++ {
		emit(wKey(fn.NS, fn.Kind, i))
	}
}

// wHook is the tests' gRPC client interceptor; the tests do not run in
// parallel, and each sets it up with reset.
var wHook wHookState

type wHookState struct {
	mu        sync.Mutex
	commits   int   // Commit calls seen
	sizes     []int // proto size of each Commit request
	counts    []int // mutations of each Commit request
	failEvery int   // every failEvery-th Commit fails before reaching the server
	lostEvery int   // every lostEvery-th Commit reaches the server, its answer is lost
	failCode  codes.Code
	failKind  string // when set, Commits holding this kind fail with failCode
	injected  int
	chunk     int // forward Commits larger than this in pieces (the emulator takes at most 4 MiB)
}

func (h *wHookState) reset(f func(h *wHookState)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commits, h.sizes, h.counts, h.injected = 0, nil, nil, 0
	h.failEvery, h.lostEvery, h.failCode, h.failKind = 0, 0, codes.Unavailable, ""
	h.chunk = 3_500_000
	if f != nil {
		f(h)
	}
}

func (h *wHookState) snapshot() (commits int, sizes, counts []int, injected int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.commits, slices.Clone(h.sizes), slices.Clone(h.counts), h.injected
}

func (h *wHookState) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	creq, ok := req.(*pb.CommitRequest)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	h.mu.Lock()
	h.commits++
	n := h.commits
	h.sizes = append(h.sizes, proto.Size(creq))
	h.counts = append(h.counts, len(creq.Mutations))
	fail := h.failEvery > 0 && n%h.failEvery == 0
	lost := !fail && h.lostEvery > 0 && n%h.lostEvery == 0
	if h.failKind != "" {
		for _, m := range creq.Mutations {
			if k := mutationKey(m); k != nil && k.Path[len(k.Path)-1].Kind == h.failKind {
				fail = true
			}
		}
	}
	if fail || lost {
		h.injected++
	}
	code, chunk := h.failCode, h.chunk
	h.mu.Unlock()
	if fail {
		return status.Errorf(code, "injected %v on commit %d", code, n)
	}
	err := forwardCommit(ctx, method, creq, reply.(*pb.CommitResponse), cc, invoker, chunk, opts)
	if lost && err == nil {
		return status.Errorf(codes.Unavailable, "injected: the answer of commit %d was lost", n)
	}
	return err
}

func mutationKey(m *pb.Mutation) *pb.Key {
	switch op := m.Operation.(type) {
	case *pb.Mutation_Upsert:
		return op.Upsert.Key
	case *pb.Mutation_Insert:
		return op.Insert.Key
	case *pb.Mutation_Update:
		return op.Update.Key
	case *pb.Mutation_Delete:
		return op.Delete
	}
	return nil
}

// forwardCommit sends a non-transactional commit to the emulator, in pieces
// of at most chunk bytes when it is larger: the emulator refuses requests
// over 4 MiB, where Cloud Datastore takes 10 MiB. Non-transactional
// commits are not atomic, so the pieces mean the same.
func forwardCommit(ctx context.Context, method string, req *pb.CommitRequest, resp *pb.CommitResponse, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, chunk int, opts []grpc.CallOption) error {
	if proto.Size(req) <= chunk || req.Mode != pb.CommitRequest_NON_TRANSACTIONAL {
		return invoker(ctx, method, req, resp, cc, opts...)
	}
	for i := 0; i < len(req.Mutations); {
		part := proto.Clone(req).(*pb.CommitRequest)
		part.Mutations = nil
		size := 0
		for i < len(req.Mutations) && (len(part.Mutations) == 0 || size+proto.Size(req.Mutations[i]) <= chunk) {
			size += proto.Size(req.Mutations[i])
			part.Mutations = append(part.Mutations, req.Mutations[i])
			i++
		}
		var pr pb.CommitResponse
		if err := invoker(ctx, method, part, &pr, cc, opts...); err != nil {
			return err
		}
		resp.MutationResults = append(resp.MutationResults, pr.MutationResults...)
		resp.IndexUpdates += pr.IndexUpdates
		resp.CommitTime = pr.CommitTime
	}
	return nil
}

// wEmulator returns the emulator's project and a client of it.
func wEmulator(t *testing.T) (string, *datastore.Client) {
	t.Helper()
	e := dstest.Start(t)
	c, err := e.NewClient(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return e.Project(), c
}

// wReadAll reads every entity of kind in ns.
func wReadAll(t *testing.T, c *datastore.Client, ns, kind string) []wEnt {
	t.Helper()
	var got []wEnt
	if _, err := c.GetAll(context.Background(), datastore.NewQuery(kind).Namespace(ns), &got); err != nil {
		t.Fatalf("reading back %s/%s: %v", ns, kind, err)
	}
	return got
}

// wID identifies an entity and all its fields, for multiset comparisons.
func wID(e wEnt) string {
	sum := 0
	for _, b := range e.Blob {
		sum = sum*31 + int(b)
	}
	return fmt.Sprintf("%s|%s|%d|%s|%v|%v|%d/%d", e.K.Namespace, e.K.String(), e.N, e.Name, e.Tags, e.Inner, len(e.Blob), sum)
}

// wSameMultiset fails t unless got and want hold the same entities, each
// as often, naming missing and extra ones.
func wSameMultiset(t *testing.T, what string, got, want []wEnt) {
	t.Helper()
	ids := func(es []wEnt) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = wID(e)
		}
		return out
	}
	sameMultiset(t, what, ids(got), ids(want))
}

func wWant(ns []string, kind string, from, to, blob int) []wEnt {
	var out []wEnt
	for i := from; i < to; i++ {
		out = append(out, wMake(ns[i%len(ns)], kind, i, blob))
	}
	return out
}

func wCounter(t *testing.T, res beam.PipelineResult, name string) int64 {
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

func wRun(t *testing.T, p *beam.Pipeline) beam.PipelineResult {
	t.Helper()
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	return res
}

// TestWriteReadBack writes entities of every key shape in two namespaces,
// as structs, pointers and KVs, then reads them back exactly.
func TestWriteReadBack(t *testing.T) {
	project, c := wEmulator(t)
	ns := []string{dstest.Namespace(t) + "-a", dstest.Namespace(t) + "-b"}
	wHook.reset(nil)
	p, s := beam.NewPipelineWithRoot()
	imp := beam.Impulse(s)
	datastoreio.Write(s, project, beam.ParDo(s, &wGenFn{NS: ns, Kind: "WItem", From: 0, To: 400}, imp),
		datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithClientOptions("wHook"))
	datastoreio.Write(s, project, beam.ParDo(s, &wGenPtrFn{wGenFn{NS: ns, Kind: "WPtr", From: 0, To: 50}}, imp),
		datastoreio.WithRampupThrottlingDisabled())
	datastoreio.Write(s, project, beam.ParDo(s, &wGenKVFn{NS: ns[0], Kind: "WKV", From: 0, To: 50}, imp),
		datastoreio.WithRampupThrottlingDisabled())
	res := wRun(t, p)

	var got []wEnt
	for _, n := range ns {
		got = append(got, wReadAll(t, c, n, "WItem")...)
	}
	wSameMultiset(t, "structs", got, wWant(ns, "WItem", 0, 400, 0))
	got = nil
	for _, n := range ns {
		got = append(got, wReadAll(t, c, n, "WPtr")...)
	}
	wSameMultiset(t, "pointers", got, wWant(ns, "WPtr", 0, 50, 0))

	var kv []wVal
	keys, err := c.GetAll(context.Background(), datastore.NewQuery("WKV").Namespace(ns[0]), &kv)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, k := range keys {
		var n int
		if _, err := fmt.Sscanf(kv[i].Name, "kv%d", &n); err != nil || !k.Equal(wKey(ns[0], "WKV", n)) || kv[i].N != int64(n) || seen[kv[i].Name] {
			t.Fatalf("KV entity %v = %+v is not one that was written", k, kv[i])
		}
		seen[kv[i].Name] = true
	}
	if len(keys) != 50 {
		t.Fatalf("KV form: read %d entities, want 50", len(keys))
	}

	if got, want := wCounter(t, res, "entities_written"), int64(500); got != want {
		t.Errorf("entities_written = %d, want %d", got, want)
	}
	commits, _, counts, _ := wHook.snapshot()
	if got := wCounter(t, res, "commits"); got < int64(commits) || commits < 2 {
		t.Errorf("commits metric %d, %d commits of the hooked write", got, commits)
	}
	// The first batch is StartBatchMutations; the emulator is fast enough
	// that later ones grow to the limit; none passes it.
	if counts[0] != datastoreio.StartBatchMutations {
		t.Errorf("first commit of %d mutations, want %d", counts[0], datastoreio.StartBatchMutations)
	}
	for _, n := range counts {
		if n > datastoreio.MaxBatchMutations {
			t.Errorf("a commit of %d mutations", n)
		}
	}
	if wCounter(t, res, "bytes_written") < 500*50 {
		t.Errorf("bytes_written = %d, too small for 500 entities", wCounter(t, res, "bytes_written"))
	}
}

// TestDeleteEntityAndKey deletes part of a kind by entity and part by key.
func TestDeleteEntityAndKey(t *testing.T) {
	project, c := wEmulator(t)
	ns := []string{dstest.Namespace(t)}
	all := wWant(ns, "WDel", 0, 300, 0)
	ctx := context.Background()
	for i := 0; i < len(all); i += 150 {
		var keys []*datastore.Key
		for _, e := range all[i : i+150] {
			keys = append(keys, e.K)
		}
		if _, err := c.PutMulti(ctx, keys, all[i:i+150]); err != nil {
			t.Fatal(err)
		}
	}
	p, s := beam.NewPipelineWithRoot()
	imp := beam.Impulse(s)
	datastoreio.DeleteEntity(s, project, beam.ParDo(s, &wGenFn{NS: ns, Kind: "WDel", From: 0, To: 120}, imp), datastoreio.WithRampupThrottlingDisabled())
	datastoreio.DeleteKey(s, project, beam.ParDo(s, &wGenKeyFn{NS: ns[0], Kind: "WDel", From: 120, To: 210}, imp), datastoreio.WithRampupThrottlingDisabled())
	// Keys with no entity are no error.
	datastoreio.DeleteKey(s, project, beam.ParDo(s, &wGenKeyFn{NS: ns[0], Kind: "WDel", From: 1000, To: 1010}, imp), datastoreio.WithRampupThrottlingDisabled())
	res := wRun(t, p)
	wSameMultiset(t, "after deletes", wReadAll(t, c, ns[0], "WDel"), all[210:])
	if got := wCounter(t, res, "entities_deleted"); got != 220 {
		t.Errorf("entities_deleted = %d, want 220", got)
	}
}

// TestWriteCutsAt9MB writes 26 entities of 700 kB, 18 MB: the commits are
// cut before 9 MB, 12 + 12 + 2, and everything is read back.
func TestWriteCutsAt9MB(t *testing.T) {
	project, c := wEmulator(t)
	ns := []string{dstest.Namespace(t)}
	wHook.reset(nil)
	p, s := beam.NewPipelineWithRoot()
	datastoreio.Write(s, project, beam.ParDo(s, &wGenFn{NS: ns, Kind: "WBig", From: 0, To: 26, BlobBytes: 700_000}, beam.Impulse(s)),
		datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithClientOptions("wHook"))
	res := wRun(t, p)
	commits, sizes, counts, _ := wHook.snapshot()
	if got := fmt.Sprint(counts); got != "[12 12 2]" || commits != 3 {
		t.Fatalf("%d commits of %s mutations, want [12 12 2]", commits, got)
	}
	for i, sz := range sizes {
		if sz >= datastoreio.MaxBatchBytes+1000 || (i < 2 && sz < 8_400_000) {
			t.Errorf("commit %d is %d bytes", i, sz)
		}
	}
	if got := wCounter(t, res, "commits"); got != 3 {
		t.Errorf("commits metric = %d, want 3", got)
	}
	// Read back one by one: the client takes answers of at most 4 MiB.
	want := wWant(ns, "WBig", 0, 26, 700_000)
	var got []wEnt
	for _, w := range want {
		var e wEnt
		if err := c.Get(context.Background(), w.K, &e); err != nil {
			t.Fatalf("reading back %v: %v", w.K, err)
		}
		got = append(got, e)
	}
	wSameMultiset(t, "big entities", got, want)
	if n, err := c.Count(context.Background(), datastore.NewQuery("WBig").Namespace(ns[0]).KeysOnly()); err != nil || n != 26 {
		t.Fatalf("%d entities of kind WBig (%v), want 26", n, err)
	}
}

// TestWriteSurvivesFaults fails every second commit before it reaches the
// emulator and loses the answer of every third that did: retries give
// exactly what was written.
func TestWriteSurvivesFaults(t *testing.T) {
	// Every failed attempt also counts against the adaptive throttler,
	// which would hold commits back 5 s at random (this test took from 8
	// to 66 s); TestWriteThrottlesOnResourceExhausted tests the throttling.
	defer datastoreio.FastThrottle()()
	project, c := wEmulator(t)
	ns := []string{dstest.Namespace(t)}
	wHook.reset(func(h *wHookState) { h.failEvery, h.lostEvery = 2, 3 })
	p, s := beam.NewPipelineWithRoot()
	imp := beam.Impulse(s)
	datastoreio.Write(s, project, beam.ParDo(s, &wGenFn{NS: ns, Kind: "WFault", From: 0, To: 300}, imp),
		datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithClientOptions("wHook"), datastoreio.WithCommitRetries(8, 10*time.Millisecond))
	res := wRun(t, p)
	wSameMultiset(t, "with faults", wReadAll(t, c, ns[0], "WFault"), wWant(ns, "WFault", 0, 300, 0))
	_, _, _, injected := wHook.snapshot()
	if injected < 2 {
		t.Fatalf("only %d faults injected", injected)
	}
	if got := wCounter(t, res, "commit_retries"); got != int64(injected) {
		t.Errorf("commit_retries = %d, want the %d injected faults", got, injected)
	}

	// Deletes too.
	wHook.reset(func(h *wHookState) { h.failEvery, h.failCode = 2, codes.Aborted })
	p, s = beam.NewPipelineWithRoot()
	datastoreio.DeleteKey(s, project, beam.ParDo(s, &wGenKeyFn{NS: ns[0], Kind: "WFault", From: 0, To: 150}, beam.Impulse(s)),
		datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithClientOptions("wHook"), datastoreio.WithCommitRetries(8, 10*time.Millisecond))
	wRun(t, p)
	wSameMultiset(t, "deletes with faults", wReadAll(t, c, ns[0], "WFault"), wWant(ns, "WFault", 150, 300, 0))
}

// TestWriteThrottlesOnResourceExhausted: a service refusing every second
// commit with RESOURCE_EXHAUSTED makes the writers hold commits back
// (adaptive throttling, its wait shortened and its draws alternating so
// that the test is deterministic), and the data written is exact.
func TestWriteThrottlesOnResourceExhausted(t *testing.T) {
	defer datastoreio.FastThrottle()()
	defer datastoreio.AlternateThrottle()()
	project, c := wEmulator(t)
	ns := []string{dstest.Namespace(t)}
	wHook.reset(func(h *wHookState) { h.failEvery, h.failCode = 2, codes.ResourceExhausted })
	p, s := beam.NewPipelineWithRoot()
	datastoreio.Write(s, project, beam.ParDo(s, &wGenFn{NS: ns, Kind: "WQuota", From: 0, To: 300}, beam.Impulse(s)),
		datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithClientOptions("wHook"), datastoreio.WithCommitRetries(8, 10*time.Millisecond))
	res := wRun(t, p)
	wSameMultiset(t, "with RESOURCE_EXHAUSTED", wReadAll(t, c, ns[0], "WQuota"), wWant(ns, "WQuota", 0, 300, 0))
	_, _, _, injected := wHook.snapshot()
	held, msecs := wCounter(t, res, "throttled_commits"), wCounter(t, res, "adaptive_throttled_msecs")
	t.Logf("%d commits refused, %d held back (%d ms)", injected, held, msecs)
	if injected < 1 || held < 1 || msecs < 5*held {
		t.Errorf("%d refused, %d held back for %d ms: want some held back, 5 ms each", injected, held, msecs)
	}
	if got := wCounter(t, res, "commit_retries"); got != int64(injected) {
		t.Errorf("commit_retries = %d, want the %d refused commits", got, injected)
	}
}

// TestWritePermanentErrorNamesKey: a commit refused with INVALID_ARGUMENT
// fails the pipeline at once, naming project, namespace, kind and key.
func TestWritePermanentErrorNamesKey(t *testing.T) {
	project, _ := wEmulator(t)
	ns := dstest.Namespace(t)
	wHook.reset(func(h *wHookState) { h.failKind, h.failCode = "WRefused", codes.InvalidArgument })
	p, s := beam.NewPipelineWithRoot()
	datastoreio.Write(s, project, beam.ParDo(s, &wGenFn{NS: []string{ns}, Kind: "WRefused", From: 0, To: 1}, beam.Impulse(s)),
		datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithClientOptions("wHook"), datastoreio.WithCommitRetries(5, time.Hour))
	// In this process, not workertest.RunFailing: the fault is injected by
	// wHook, a package variable a worker process would not share. One
	// entity, one bundle: no other bundle is in flight when the job fails.
	_, err := ptest.RunWithMetrics(p)
	if err == nil {
		t.Fatal("the pipeline succeeded")
	}
	for _, want := range []string{project, "namespace " + ns, "kind WRefused", fmt.Sprintf("WRefused,%d", spreadID(0)), "InvalidArgument", "(attempt 1): "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if commits, _, _, _ := wHook.snapshot(); commits != 1 {
		t.Errorf("%d commits, want 1 (no retry)", commits)
	}
}

type wIncompleteFn struct {
	NS string
	N  int
}

func (fn *wIncompleteFn) ProcessElement(_ []byte, emit func(wEnt)) {
	for i := 0; i < fn.N; i++ {
		k := datastore.IncompleteKey("WAuto", nil)
		k.Namespace = fn.NS
		emit(wEnt{K: k, N: int64(i), Name: fmt.Sprintf("auto%d", i)})
	}
}

func init() { register.DoFn2x0[[]byte, func(wEnt)](&wIncompleteFn{}) }

// TestWriteIncompleteKeys: refused by default, naming namespace and kind;
// allocated with AllocateIDs.
func TestWriteIncompleteKeys(t *testing.T) {
	project, c := wEmulator(t)
	ns := dstest.Namespace(t)
	p, s := beam.NewPipelineWithRoot()
	datastoreio.Write(s, project, beam.ParDo(s, &wIncompleteFn{NS: ns, N: 3}, beam.Impulse(s)), datastoreio.WithRampupThrottlingDisabled())
	err := workertest.RunFailing(t, p)
	if err == nil || !strings.Contains(err.Error(), "incomplete key") || !strings.Contains(err.Error(), "namespace "+ns+", kind WAuto") {
		t.Fatalf("incomplete keys: %v", err)
	}
	if got := wReadAll(t, c, ns, "WAuto"); len(got) != 0 {
		t.Fatalf("%d entities written despite the error", len(got))
	}

	p, s = beam.NewPipelineWithRoot()
	datastoreio.Write(s, project, beam.ParDo(s, &wIncompleteFn{NS: ns, N: 40}, beam.Impulse(s)), datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithAllocateIDs())
	wRun(t, p)
	got := wReadAll(t, c, ns, "WAuto")
	ns2 := map[int64]bool{}
	for _, e := range got {
		if e.K.Incomplete() || ns2[e.N] {
			t.Fatalf("entity %v: incomplete or duplicate", e)
		}
		ns2[e.N] = true
	}
	if len(got) != 40 {
		t.Fatalf("read %d allocated entities, want 40", len(got))
	}
}

// TestWriteRampupByDefault: with the default throttling and a budget of 50
// a second (HintNumWorkers(10)), 150 entities need three one-second
// windows: between one and two seconds of waiting, counted.
func TestWriteRampupByDefault(t *testing.T) {
	project, c := wEmulator(t)
	ns := []string{dstest.Namespace(t)}
	p, s := beam.NewPipelineWithRoot()
	datastoreio.Write(s, project, beam.ParDo(s, &wGenFn{NS: ns, Kind: "WRamp", From: 0, To: 150}, beam.Impulse(s)), datastoreio.WithHintNumWorkers(10))
	res := wRun(t, p)
	wSameMultiset(t, "throttled", wReadAll(t, c, ns[0], "WRamp"), wWant(ns, "WRamp", 0, 150, 0))
	if ms := wCounter(t, res, "throttled_msecs"); ms < 1000 || ms > 2100 {
		t.Errorf("throttled_msecs = %d, want 1000-2000 for 150 entities at 50/s", ms)
	}
}

type wNoKey struct{ A int64 }

type wWrongKey struct {
	K string `datastore:"__key__"`
}

func init() {
	datastoreio.RegisterType(reflect.TypeFor[wNoKey]())
	datastoreio.RegisterType(reflect.TypeFor[wWrongKey]())
}

// TestWriteConstructionErrors: shapes datastoreio.Write cannot write, and
// options of the other side, are refused when the pipeline is built.
func TestWriteConstructionErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(s beam.Scope)
		want  string
	}{
		{"no key field", func(s beam.Scope) { datastoreio.Write(s, "p", beam.Create(s, wNoKey{1})) }, "no `datastore:\"__key__\"`"},
		{"wrong key type", func(s beam.Scope) { datastoreio.Write(s, "p", beam.Create(s, wWrongKey{"x"})) }, "not a *datastore.Key"},
		{"keys to Write", func(s beam.Scope) { datastoreio.Write(s, "p", beam.Create(s, datastore.IDKey("K", 1, nil))) }, "use DeleteKey"},
		{"entities to DeleteKey", func(s beam.Scope) { datastoreio.DeleteKey(s, "p", beam.Create(s, wMake("", "K", 1, 0))) }, "DeleteKey takes"},
		{"no project", func(s beam.Scope) { datastoreio.Write(s, "", beam.Create(s, wMake("", "K", 1, 0))) }, "datastoreio.Write: needs a project"},
		{"allocate on delete", func(s beam.Scope) {
			datastoreio.DeleteEntity(s, "p", beam.Create(s, wMake("", "K", 1, 0)), datastoreio.WithAllocateIDs())
		}, "datastoreio.DeleteEntity: WithAllocateIDs() applies to Write only"},
		{"negative retries", func(s beam.Scope) {
			datastoreio.Write(s, "p", beam.Create(s, wMake("", "K", 1, 0)), datastoreio.WithCommitRetries(-1, time.Second))
		}, "datastoreio.Write: WithCommitRetries(-1, 1s): a negative retry count"},
		{"negative backoff", func(s beam.Scope) {
			datastoreio.DeleteEntity(s, "p", beam.Create(s, wMake("", "K", 1, 0)), datastoreio.WithCommitRetries(1, -time.Second))
		}, "datastoreio.DeleteEntity: WithCommitRetries(1, -1s): a negative backoff"},
		{"negative workers", func(s beam.Scope) {
			datastoreio.DeleteKey(s, "p", beam.Create(s, datastore.IDKey("K", 1, nil)), datastoreio.WithHintNumWorkers(-2))
		}, "datastoreio.DeleteKey: WithHintNumWorkers(-2): a negative worker count"},
		{"database twice", func(s beam.Scope) {
			datastoreio.Write(s, "p", beam.Create(s, wMake("", "K", 1, 0)), datastoreio.WithDatabase("a"), datastoreio.WithDatabase("b"))
		}, `datastoreio.Write: WithDatabase("a") and WithDatabase("b") are both given: give WithDatabase once`},
		{"empty metrics namespace", func(s beam.Scope) {
			datastoreio.Write(s, "p", beam.Create(s, wMake("", "K", 1, 0)), datastoreio.WithMetricsNamespace(""))
		}, `datastoreio.Write: WithMetricsNamespace(""): an empty metrics namespace`},
		{"nil option", func(s beam.Scope) {
			datastoreio.Write(s, "p", beam.Create(s, wMake("", "K", 1, 0)), datastoreio.Option(nil))
		}, "datastoreio.Write: a nil WriteOption"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Fatalf("panic %v, want one saying %q", r, c.want)
				}
			}()
			_, s := beam.NewPipelineWithRoot()
			c.build(s)
		})
	}
}

// An Option is both a ReadOption and a WriteOption; the options of one
// side are not options of the other (a WriteOption given to Read does not
// compile: see TestOptionTypes).
var (
	_ datastoreio.ReadOption  = datastoreio.WithDatabase("db")
	_ datastoreio.WriteOption = datastoreio.WithClientOptions("x")
	_ datastoreio.WriteOption = datastoreio.WithMetricsNamespace("ns")
)
