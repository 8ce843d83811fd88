package datastoreio_test

import (
	"context"
	"reflect"
	"strconv"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/internal/logtest"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// TestInfoLogs: planning a read logs its kind, namespace, the query splits
// asked and made and the scatter keys asked and returned, and an accepted
// split logs its halves, at INFO, so that a Dataflow user sees the plan
// and the rebalancing. (Before: neither was logged.)
func TestInfoLogs(t *testing.T) {
	l := logtest.Capture(t)
	e, c := client(t)
	ns := dstest.Namespace(t)
	put(t, c, mixedItems(ns, "Logged", 16, 9))
	ctx := context.Background()
	ranges, err := datastoreio.Plan(ctx, e.Project(), datastoreio.NewQuery("Logged"), datastoreio.WithNamespace(ns),
		datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(8))
	if err != nil {
		t.Fatal(err)
	}
	subRanges := int64(0)
	for _, r := range ranges {
		subRanges += r.SubRanges()
	}
	// (2-1)*8 scatter keys are asked for two splits of 8 keys each.
	l.Has(t, "datastoreio: planned the read of kind Logged in project "+e.Project(), `namespace "`+ns+`"`,
		"2 query splits asked, 2 after the split rules", "8 scatter keys asked, ",
		": 2 initial splits of "+strconv.FormatInt(subRanges, 10)+" sub-ranges")
	s := dstest.Subject(t, ranges[0], reflect.TypeFor[item]())
	s.Equal = func(a, b any) bool { return a.(item).id() == b.(item).id() }
	if ranges[0].SubRanges() < 2 {
		t.Fatalf("range 0 has %d sub-ranges, want at least 2 to split", ranges[0].SubRanges())
	}
	sdftest.AssertSplitAtFraction(t, s, 1, 0.5, sdftest.MustSucceedAndBeConsistent)
	l.Has(t, "datastoreio: split accepted at fraction 0.5 of the rest: primary sub-ranges ")
}

// TestMetricsNamespace: a read and a write given WithMetricsNamespace count
// in their namespaces, and nothing of theirs in Namespace. (Before: every
// read and write counted in Namespace.)
func TestMetricsNamespace(t *testing.T) {
	e, c := client(t)
	ns := dstest.Namespace(t)
	put(t, c, mixedItems(ns, "Metered", 40, 11))
	p, s := beam.NewPipelineWithRoot()
	items := datastoreio.Read(s, e.Project(), datastoreio.NewQuery("Metered"), reflect.TypeFor[item](),
		datastoreio.WithNamespace(ns), datastoreio.WithNumQuerySplits(2), datastoreio.WithMetricsNamespace("reads/metered"))
	datastoreio.Write(s, e.Project(), items, datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithMetricsNamespace("writes/metered"))
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	in := func(space, name string) int64 {
		var sum int64
		for _, r := range res.Metrics().Query(func(r metrics.SingleResult) bool {
			return r.Namespace() == space && r.Name() == name
		}).Counters() {
			sum += r.Result()
		}
		return sum
	}
	if n := in("reads/metered", "entities"); n != 40 {
		t.Errorf("entities in reads/metered = %d, want 40", n)
	}
	if n := in("reads/metered", "pages"); n < 1 {
		t.Errorf("pages in reads/metered = %d, want some", n)
	}
	if n := in("reads/metered", "initial_splits"); n < 1 {
		t.Errorf("initial_splits in reads/metered = %d, want some", n)
	}
	if n := in("writes/metered", "entities_written"); n != 40 {
		t.Errorf("entities_written in writes/metered = %d, want 40", n)
	}
	if n := in("writes/metered", "commits"); n < 1 {
		t.Errorf("commits in writes/metered = %d, want some", n)
	}
	for _, name := range []string{"entities", "pages", "bytes", "queries", "initial_splits", "sub_ranges", "entities_written", "commits", "bytes_written"} {
		if n := in(datastoreio.Namespace, name); n != 0 {
			t.Errorf("%s in %s = %d, want 0: the read and write have their own namespaces", name, datastoreio.Namespace, n)
		}
	}
}

// TestNoScatterKeysWarns: a kind for which the service returns no
// __scatter__ keys is read whole, as one range of one sub-range, and the
// plan says so at WARN, naming the kind, the namespace and the cost; a
// kind with scatter keys logs no such warning. (Before: an INFO line
// only, "0 returned".)
func TestNoScatterKeysWarns(t *testing.T) {
	e, c := client(t)
	ns := dstest.Namespace(t)
	put(t, c, mixedItems(ns, "Unscattered", 40, 13))
	hook.reset()
	defer hook.reset()
	hook.set(func(h *hookState) { h.noScatter = true })
	l := logtest.Capture(t)
	_, got, err := readPlanned(t, e.Project(), datastoreio.NewQuery("Unscattered"), datastoreio.WithNamespace(ns),
		datastoreio.WithNumQuerySplits(4), datastoreio.WithClientOptions("hook"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 40 {
		t.Errorf("read %d entities, want 40", len(got))
	}
	l.HasWarn(t, "datastoreio: kind Unscattered in project "+e.Project(), `namespace "`+ns+`" has no __scatter__ keys (96 asked)`,
		"one range of one sub-range, read whole by one worker: no initial splits, and nothing the runner can split while it reads")
	if w := l.Warnings(); len(w) != 1 {
		t.Errorf("%d warnings, want 1: %q", len(w), w)
	}

	hook.reset()
	l2 := logtest.Capture(t)
	if _, _, err := readPlanned(t, e.Project(), datastoreio.NewQuery("Unscattered"), datastoreio.WithNamespace(ns),
		datastoreio.WithNumQuerySplits(4), datastoreio.WithClientOptions("hook")); err != nil {
		t.Fatal(err)
	}
	if w := l2.Warnings(); len(w) != 0 {
		t.Errorf("a kind with scatter keys warned: %q", w)
	}
}
