package datastoreio_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/grpc/codes"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// The data sets, of kind Item, loaded once per test binary:
//   - large: 20,000 entities in one namespace of a project of their own,
//     read only by TestReadExact;
//   - medium: 1,000 entities in a namespace of the emulator's project.
//
// Each project also holds decoys, 200 entities of kind Item in another
// namespace, which no read of the data set's namespace may return.
//
// Where the time goes: the emulator answers a query by scanning every
// entity of the kind in the project, in all namespaces, under a lock of the
// project, and then sorting the matches, whatever the query's key range,
// limit or cursor (measured: a query for 100 entities costs the emulator
// about 0.1-0.3 s of CPU when the kind holds 20,000, on a shared 2-core
// machine). So the 20,000 live in
// a project of their own: the other tests' queries do not scan them, and the
// emulator serves the two projects on two threads. When the whole package
// runs (no -run), TestMain starts loading both sets in the background, so
// that the loads overlap the tests that run first; otherwise the first test
// that needs a set loads it. The reads of TestReadExact, a minute of the
// emulator's time, run in the same background work right after the load
// (the test then checks what they read), so that they overlap the other
// tests too, which query the other project.
var large, medium dataSet

type dataSet struct {
	once    sync.Once
	done    chan struct{}
	project string
	ns      string
	items   []item
	took    time.Duration
	emuErr  error // no emulator: the tests report it as dstest.Start does
	err     error
	// reads are the results of the reads done in the background after the
	// load, one per case given to start.
	reads []readResult
}

// readResult is what a readCase read.
type readResult struct {
	ranges []datastoreio.Range
	got    []item
	err    error
	took   time.Duration
}

// largeReads are the reads of TestReadExact.
var largeReads = []readCase{
	{8, 4, 8, 8, 29},
	{200, 1, 8, 200, 200},
	// One split still samples 63 keys, all kept: 64 sub-ranges of about
	// 312 entities, one page each.
	{1, 64, 64, 1, 64},
}

func startLarge() {
	large.start(func(e *dstest.Emulator) string { return e.Project() + "-large" }, "large", mixedOf("Item", 20000, 1), largeReads)
}

func startMedium() {
	medium.start(func(e *dstest.Emulator) string { return e.Project() }, "medium", mixedOf("Item", 1000, 2), nil)
}

// mixedOf makes the entities of a data set of mixedItems in a namespace.
func mixedOf(kind string, n int, seed uint64) func(ns string, decoy bool) []item {
	return func(ns string, decoy bool) []item {
		if decoy {
			return mixedItems(ns, kind, 200, seed+100)
		}
		return mixedItems(ns, kind, n, seed)
	}
}

func loadLarge(t *testing.T) (project string)  { startLarge(); return large.wait(t) }
func loadMedium(t *testing.T) (project string) { startMedium(); return medium.wait(t) }

// start loads the entities gen makes into a new namespace of project(e),
// and the decoys (gen's, in another namespace), in the background, once;
// then it reads them as each of reads says.
func (d *dataSet) start(project func(*dstest.Emulator) string, name string, gen func(ns string, decoy bool) []item, reads []readCase) {
	d.once.Do(func() {
		d.done = make(chan struct{})
		go func() {
			defer close(d.done)
			begin := time.Now()
			e, err := dstest.Shared()
			if err != nil {
				d.emuErr = err
				return
			}
			d.project = project(e)
			d.ns = fmt.Sprintf("%s.%d.%d", name, os.Getpid(), begin.UnixNano()%1e9)
			ctx := context.Background()
			c, err := datastore.NewClient(ctx, d.project, e.ClientOptions()...)
			if err != nil {
				d.err = err
				return
			}
			defer c.Close()
			items := gen(d.ns, false)
			if err := putItems(ctx, c, append(gen(d.ns+".decoy", true), items...)); err != nil {
				d.err = err
				return
			}
			d.items, d.took = items, time.Since(begin)
			for _, rc := range reads {
				d.reads = append(d.reads, rc.read(ctx, d.project, d.ns))
			}
		}()
	})
}

// wait waits for the data set and returns its project.
func (d *dataSet) wait(t *testing.T) (project string) {
	t.Helper()
	<-d.done
	if d.emuErr != nil {
		dstest.Start(t) // fails under CI=true, skips otherwise, saying why
		t.Fatal(d.emuErr)
	}
	if d.err != nil {
		t.Fatalf("loading the data set: %v", d.err)
	}
	return d.project
}

// TestReadExact reads 20,000 entities (numeric ids over the whole positive
// int64 range, names, children of parents) with 1, 8 and 200 requested
// splits, planning and reading each range as the pipeline does: the
// multiset of entities read must be the one written (and no decoy of the
// other namespace). TestReadExactSecondNamespace does the same on 1,000 of
// the other project. The reads ran in the background (see the data sets).
//
// What bounds the cost is the emulator (see the data sets): every query
// scans the kind, so a read costs about its number of queries; a sub-range
// of at most 500 entities is one query. The unsplit 20,000 (40 pages over
// 20,000 each) took about 3 minutes; the single split below is cut into 64
// sub-ranges of about 312 entities, one page each; the 8 splits into 29
// sub-ranges of about 690, two pages each; the 200 splits are 200 queries.
func TestReadExact(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 20,000 entities take minutes on a loaded emulator")
	}
	t.Parallel() // after the others: what it checks was read in the background meanwhile
	project := loadLarge(t)
	t.Logf("%d entities loaded into project %s in %v", len(large.items), project, large.took)
	for i, c := range largeReads {
		c.check(t, large.ns, large.items, large.reads[i])
	}
}

// TestReadExactSecondNamespace is TestReadExact on the 1,000 entities of
// the emulator's project, unsplit, with 8 splits and with the default
// sub-range rule.
func TestReadExactSecondNamespace(t *testing.T) {
	t.Parallel()
	project := loadMedium(t)
	readExact(t, project, medium.ns, medium.items, []readCase{
		// KeysPerSplit(1) and one split: nothing to sample, one query.
		{1, 1, 1, 1, 1},
		// All 28 sampled keys are boundaries (4 keys <= 8 sub-ranges).
		{8, 4, 8, 8, 29},
		// The default rule: every 4th of 31 keys, 8 sub-ranges.
		{1, datastoreio.DefaultKeysPerSplit, datastoreio.DefaultSubRangesPerSplit, 1, 8},
	})
}

// readCase is a read of a data set: splits asked, KeysPerSplit,
// SubRangesPerSplit, and the ranges and sub-ranges it must plan.
type readCase struct {
	splits, keys, grid   int
	wantRanges, wantSubs int
}

func readExact(t *testing.T, project, ns string, want []item, cases []readCase) {
	t.Helper()
	for _, c := range cases {
		c.check(t, ns, want, c.read(context.Background(), project, ns))
	}
}

// read plans and reads c's read of the kind Item of namespace ns.
func (c readCase) read(ctx context.Context, project, ns string) readResult {
	start := time.Now()
	ranges, got, err := readRanges(ctx, project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(ns),
		datastoreio.WithNumQuerySplits(c.splits), datastoreio.WithKeysPerSplit(c.keys), datastoreio.WithSubRangesPerSplit(c.grid))
	return readResult{ranges, got, err, time.Since(start)}
}

// check fails t unless res, read as c says, planned the ranges c wants and
// read exactly want.
func (c readCase) check(t *testing.T, ns string, want []item, res readResult) {
	t.Helper()
	if res.err != nil {
		t.Fatal(res.err)
	}
	var subRanges int64
	for _, r := range res.ranges {
		subRanges += r.SubRanges()
	}
	t.Logf("namespace %s, %d splits asked, %d keys per split, %d sub-ranges per split: %d ranges, %d sub-ranges, %d entities in %v",
		ns, c.splits, c.keys, c.grid, len(res.ranges), subRanges, len(res.got), res.took)
	if len(res.ranges) != c.wantRanges || subRanges != int64(c.wantSubs) {
		t.Errorf("%d splits, %d keys per split, %d sub-ranges per split asked: %d ranges, %d sub-ranges; want %d, %d",
			c.splits, c.keys, c.grid, len(res.ranges), subRanges, c.wantRanges, c.wantSubs)
	}
	sameMultiset(t, ns, ids(res.got), ids(want))
	for _, it := range res.got[:10] {
		if it.Name == "" || len(it.Tags) != 2 || it.Inner.B != "Item" || it.Inner.A != it.N*2 {
			t.Fatalf("entity loaded wrongly: %+v", it)
		}
	}
}

// TestSnapshotFixedAtPlan: with WithSnapshot every range carries the one
// read time fixed when the read was planned, and every query of the read
// sends it.
func TestSnapshotFixedAtPlan(t *testing.T) {
	project := loadMedium(t)
	hook.reset()
	before := time.Now().Add(-time.Second)
	ranges, got, err := readPlanned(t, project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(medium.ns),
		datastoreio.WithNumQuerySplits(4), datastoreio.WithKeysPerSplit(1), datastoreio.WithClientOptions("hook"), datastoreio.WithSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	sameMultiset(t, "snapshot read", ids(got), ids(medium.items))
	at := ranges[0].ReadTime()
	if at.Before(before) || at.After(time.Now()) {
		t.Fatalf("read time %v is not the time of planning", at)
	}
	for _, r := range ranges {
		if !r.ReadTime().Equal(at) {
			t.Errorf("range %d reads at %v, range 0 at %v", r.Index, r.ReadTime(), at)
		}
	}
	hook.mu.Lock()
	noTime, readTimes := hook.noTime, hook.readTimes
	hook.mu.Unlock()
	// The planner's first query (the clock probe) is the only one without.
	if noTime != 1 {
		t.Errorf("%d queries had no read time, want 1 (the planner's probe)", noTime)
	}
	for _, rt := range readTimes {
		if !rt.Equal(at) {
			t.Fatalf("a query read at %v, want %v", rt, at)
		}
	}

	// An explicit ReadTime is used as given; LatestData sends none.
	hook.reset()
	when := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	ranges, _, err = readPlanned(t, project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(medium.ns),
		datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(1), datastoreio.WithReadTime(when), datastoreio.WithClientOptions("hook"))
	if err != nil {
		t.Fatal(err)
	}
	if !ranges[1].ReadTime().Equal(when) {
		t.Errorf("ReadTime(%v): range reads at %v", when, ranges[1].ReadTime())
	}
	ranges, _, err = readPlanned(t, project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(medium.ns),
		datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(1), datastoreio.WithLatestData())
	if err != nil {
		t.Fatal(err)
	}
	if !ranges[0].ReadTime().IsZero() {
		t.Errorf("LatestData: range reads at %v", ranges[0].ReadTime())
	}
}

// TestTransientErrorsRetried: every fourth query fails before reaching the
// server and every third loses its answer after it (two sub-ranges of
// about 500 entities, read in several pages); the read still
// returns every entity once, resuming from the last cursor. UNKNOWN (a
// connection reset mid-call), which the package's own rule did not retry
// while bigqueryio's did, is retried by internal/retry's rule: RunQuery is
// idempotent.
func TestTransientErrorsRetried(t *testing.T) {
	project := loadMedium(t)
	defer datastoreio.FastRetries()()
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted, codes.Internal, codes.Unknown} {
		hook.reset()
		hook.set(func(h *hookState) { h.failEvery, h.failCode, h.cutEvery = 4, code, 3 })
		_, got, err := readPlanned(t, project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(medium.ns),
			datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(1), datastoreio.WithClientOptions("hook"))
		if err != nil {
			t.Fatalf("%v: %v", code, err)
		}
		sameMultiset(t, code.String(), ids(got), ids(medium.items))
		hook.mu.Lock()
		injected := hook.injected
		hook.mu.Unlock()
		if injected < 3 {
			t.Errorf("%v: only %d faults injected", code, injected)
		}
		t.Logf("%v: %d faults injected, exact output", code, injected)
	}
}

// TestPermanentErrorFailsAtOnce: a permanent error fails the read at its
// first occurrence, naming project, namespace, kind and range.
func TestPermanentErrorFailsAtOnce(t *testing.T) {
	project := loadMedium(t)
	for _, code := range []codes.Code{codes.InvalidArgument, codes.FailedPrecondition, codes.PermissionDenied, codes.Unauthenticated} {
		hook.reset()
		ctx := context.Background()
		ranges, err := datastoreio.Plan(ctx, project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(medium.ns),
			datastoreio.WithNumQuerySplits(3), datastoreio.WithKeysPerSplit(1), datastoreio.WithClientOptions("hook"))
		if err != nil {
			t.Fatal(err)
		}
		r := ranges[1]
		rr, err := datastoreio.NewRangeReader(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		hook.set(func(h *hookState) { h.calls, h.failEvery, h.failCode = 0, 1, code })
		rt := sdf.NewTracker(r.Restriction())
		err = rr.Read(ctx, r, rt, reflect.TypeFor[item](), func(any) {})
		rr.Close()
		if err == nil {
			t.Fatalf("%v: read succeeded", code)
		}
		for _, want := range []string{"project " + project, `namespace "` + medium.ns + `"`, "kind Item", "sub-range 0 [", "split 2/3", code.String()} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: error %q does not name %q", code, err, want)
			}
		}
		hook.mu.Lock()
		calls := hook.calls
		hook.mu.Unlock()
		if calls != 1 {
			t.Errorf("%v: %d calls, want 1 (no retry)", code, calls)
		}
		if rt.GetError() == nil {
			t.Errorf("%v: the tracker holds no error", code)
		}
	}
}

// TestStatisticsChooseSplits: with NumQuerySplits <= 0 the number of splits
// comes from the statistics entities (answered here by the interceptor, as
// the emulator has none): 20 x 64 MiB gives 20 splits; without statistics,
// 12.
func TestStatisticsChooseSplits(t *testing.T) {
	project := loadMedium(t)
	ctx := context.Background()
	for _, c := range []struct {
		ns    string
		bytes int64
		want  int
	}{
		{medium.ns, 20 * datastoreio.BytesPerSplit, 20},
		{medium.ns, 3 * datastoreio.BytesPerSplit, 12},
		{"", 30 * datastoreio.BytesPerSplit, 30}, // the default namespace: __Stat_Kind__
		{medium.ns, 0, 12},                       // no statistics
	} {
		hook.reset()
		hook.set(func(h *hookState) { h.statBytes = c.bytes })
		ranges, err := datastoreio.Plan(ctx, project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(c.ns),
			datastoreio.WithKeysPerSplit(1), datastoreio.WithClientOptions("hook"))
		if err != nil {
			t.Fatal(err)
		}
		if c.ns == "" {
			// The default namespace holds no Item: the scatter query
			// returns no key, so one range is read, whatever was asked.
			if len(ranges) != 1 {
				t.Errorf("empty kind: %d ranges, want 1", len(ranges))
			}
			continue
		}
		if len(ranges) != c.want {
			t.Errorf("namespace %q, %d entity bytes: %d ranges, want %d", c.ns, c.bytes, len(ranges), c.want)
		}
	}
}

// TestUnsplitQueries: a limit, a sort order or an inequality filter reads
// unsplit, in the query's order, with the limit honoured across pages.
func TestUnsplitQueries(t *testing.T) {
	t.Parallel()
	project := loadMedium(t)
	for _, c := range []struct {
		q    datastoreio.Query
		want func([]item) []item
	}{
		{datastoreio.NewQuery("Item").OrderBy("-N").WithLimit(703), func(all []item) []item {
			var out []item
			for n := len(all) - 1; n >= len(all)-703; n-- {
				out = append(out, all[n])
			}
			return out
		}},
		{datastoreio.NewQuery("Item").Filter("N", ">=", 100).Filter("N", "<", 700), func(all []item) []item { return all[100:700] }},
		{datastoreio.GQL("SELECT * FROM Item WHERE N < 600 ORDER BY N"), func(all []item) []item { return all[:600] }},
	} {
		ranges, got, err := readPlanned(t, project, c.q, datastoreio.WithNamespace(medium.ns), datastoreio.WithNumQuerySplits(8))
		if err != nil {
			t.Fatal(err)
		}
		if len(ranges) != 1 || ranges[0].SubRanges() != 1 {
			t.Errorf("%+v: %d ranges, want 1 unsplit", c.q, len(ranges))
		}
		want := c.want(medium.items)
		if len(got) != len(want) {
			t.Fatalf("%+v: %d entities, want %d", c.q, len(got), len(want))
		}
		for i := range want {
			if got[i].id() != want[i].id() {
				if len(c.q.Order) > 0 || c.q.GQL != "" {
					t.Fatalf("%+v: entity %d is %s, want %s (in order)", c.q, i, got[i].id(), want[i].id())
				}
				sameMultiset(t, "inequality", ids(got), ids(want))
				break
			}
		}
	}
}

// TestGQLSplit: an equality GQL query is parsed by the server and split
// like a structured one.
func TestGQLSplit(t *testing.T) {
	t.Parallel()
	project := loadMedium(t)
	ranges, got, err := readPlanned(t, project, datastoreio.GQL("SELECT * FROM Item WHERE Inner.B = 'Item'"),
		datastoreio.WithNamespace(medium.ns), datastoreio.WithNumQuerySplits(5), datastoreio.WithKeysPerSplit(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 5 {
		t.Errorf("%d ranges, want 5", len(ranges))
	}
	if f := ranges[0].Query.Filters; len(f) != 1 || f[0].Property != "Inner.B" || ranges[0].Query.Kind != "Item" {
		t.Errorf("parsed query: %+v", ranges[0].Query)
	}
	sameMultiset(t, "GQL", ids(got), ids(medium.items))

	_, err = datastoreio.Plan(context.Background(), project, datastoreio.GQL("SELEKT nothing"), datastoreio.WithNamespace(medium.ns))
	if err == nil || !strings.Contains(err.Error(), "SELEKT") {
		t.Errorf("bad GQL: %v", err)
	}
}

// TestAncestorQuery reads the children of one parent, split.
func TestAncestorQuery(t *testing.T) {
	t.Parallel()
	project := loadMedium(t)
	var parent *datastore.Key
	counts := map[string]int{}
	for _, it := range medium.items {
		if it.K.Parent != nil {
			counts[it.K.Parent.String()]++
			if parent == nil || counts[it.K.Parent.String()] > counts[parent.String()] {
				parent = it.K.Parent
			}
		}
	}
	var want []item
	for _, it := range medium.items {
		if it.K.Parent != nil && it.K.Parent.Equal(parent) {
			want = append(want, it)
		}
	}
	_, got, err := readPlanned(t, project, datastoreio.NewQuery("Item").Ancestor(parent), datastoreio.WithNamespace(medium.ns),
		datastoreio.WithNumQuerySplits(4), datastoreio.WithKeysPerSplit(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 3 {
		t.Fatalf("the largest family has %d children", len(want))
	}
	sameMultiset(t, "ancestor", ids(got), ids(want))
}

// TestSplitContract runs sdftest's exhaustive and concurrent checks on one
// range of all the sub-ranges (at least 5) holding 16 entities, read from the emulator (each
// distinct query once: see memo).
func TestSplitContract(t *testing.T) {
	t.Parallel()
	e, c := client(t)
	ns := dstest.Namespace(t)
	put(t, c, mixedItems(ns, "Small", 16, 7))
	ctx := context.Background()
	ranges, err := datastoreio.Plan(ctx, e.Project(), datastoreio.NewQuery("Small"), datastoreio.WithNamespace(ns),
		datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(8), datastoreio.WithClientOptions("memo"))
	if err != nil {
		t.Fatal(err)
	}
	// One range over all sub-ranges, so that the checks see every boundary.
	r := ranges[0]
	for _, o := range ranges[1:] {
		r.Bounds = append(append(r.Bounds, o.Lo), o.Bounds...)
		r.Hi = o.Hi
	}
	n := r.SubRanges()
	if n < 5 {
		t.Fatalf("%d sub-ranges, want at least 5", n)
	}
	s := dstest.Subject(t, r, reflect.TypeFor[item]())
	s.Equal = func(a, b any) bool { return a.(item).id() == b.(item).id() }
	all := sdftest.AssertReadAll(t, s)
	if len(all) != 16 {
		t.Fatalf("read %d entities, want 16", len(all))
	}
	start := time.Now()
	rep, err := sdftest.CheckSplitAtFractionExhaustive(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exhaustive: %d records, %d non-trivial splits, %d concurrent trials in %v", rep.Records, rep.NonTrivial, rep.Concurrent.Trials, time.Since(start))
	// A split between sub-ranges is exact: after the first entity (of the
	// first non-empty sub-range p) was read, the residual starts at
	// p + ceil(0.5*(n-p)).
	p := int64(0)
	for ; p < n; p++ {
		one := s
		one.Restriction = sdf.OffsetRange{Start: p, End: p + 1}
		if recs := sdftest.AssertReadAll(t, one); len(recs) > 0 {
			break
		}
	}
	res, err := sdftest.CheckSplitAtFraction(ctx, s, 1, 0.5, sdftest.MustSucceedAndBeConsistent)
	if err != nil {
		t.Fatal(err)
	}
	want := sdf.OffsetRange{Start: p + (n-p+1)/2, End: n}
	if res.Residual.(sdf.OffsetRange) != want {
		t.Errorf("split at 0.5 after one record: residual %v, want %v", res.Residual, want)
	}
}

// TestLoadErrorNamesRange: an entity that does not fit the struct fails
// the read, naming where.
func TestLoadErrorNamesRange(t *testing.T) {
	t.Parallel()
	e, c := client(t)
	ns := dstest.Namespace(t)
	k := datastore.IDKey("Odd", 1, nil)
	k.Namespace = ns
	if _, err := c.Put(context.Background(), k, &struct{ N string }{"not an int"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := readPlanned(t, e.Project(), datastoreio.NewQuery("Odd"), datastoreio.WithNamespace(ns))
	var mismatch *datastore.ErrFieldMismatch
	if !errors.As(err, &mismatch) || !strings.Contains(err.Error(), "kind Odd") {
		t.Fatalf("err = %v, want a field mismatch naming the kind", err)
	}
}
