package bqflink_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/internal/flinktest"
)

// The exactly-once check of a read runs in the pipeline, on a worker:
// checkFn takes the read's ids as a side input (so that it runs once even
// when the read returned nothing) and compares them with the oracle it
// carries. A difference fails the job with the counts and examples, and the
// counters it sets let the test check that the check ran and what it saw.

func init() {
	register.DoFn3x1[context.Context, []byte, func(*string) bool, error](&checkFn{})
	register.Iter1[string]()
}

// metricsNS is the namespace of checkFn's counters.
const metricsNS = "bqflink"

// checkFn fails unless its side input holds each id of Want exactly once
// and nothing else.
type checkFn struct {
	What string   // the read checked: the counters' prefix and the error's subject
	Want []string // the oracle
}

func (f *checkFn) ProcessElement(ctx context.Context, _ []byte, got func(*string) bool) error {
	var ids []string
	var id string
	for got(&id) {
		ids = append(ids, id)
	}
	d := compare(ids, f.Want)
	for name, v := range map[string]int{"checked": 1, "got": d.Got, "missing": d.Missing, "duplicated": d.Duplicated, "unexpected": d.Unexpected} {
		beam.NewCounter(metricsNS, f.What+"/"+name).Inc(ctx, int64(v))
	}
	return d.err(f.What)
}

// checkIDs adds the check of ids (a PCollection of strings) against want.
func checkIDs(s beam.Scope, what string, ids beam.PCollection, want []string) {
	s = s.Scope("check " + what)
	beam.ParDo0(s, &checkFn{What: what, Want: want}, beam.Impulse(s), beam.SideInput{Input: ids})
}

// diff is what compare found.
type diff struct {
	Got, Want  int
	Missing    int // ids of want not seen
	Duplicated int // sightings beyond the first of ids of want
	Unexpected int // sightings of ids not in want
	examples   []string
}

// compare counts each id of got against want, whose ids are distinct.
func compare(got, want []string) diff {
	d := diff{Got: len(got), Want: len(want)}
	seen := make(map[string]int, len(want))
	for _, w := range want {
		seen[w] = 0
	}
	for _, g := range got {
		n, ok := seen[g]
		switch {
		case !ok:
			d.Unexpected++
			d.example("unexpected " + g)
		case n >= 1:
			d.Duplicated++
			d.example("duplicated " + g)
		}
		if ok {
			seen[g] = n + 1
		}
	}
	missing := []string{}
	for w, n := range seen {
		if n == 0 {
			missing = append(missing, w)
		}
	}
	slices.Sort(missing)
	d.Missing = len(missing)
	for _, m := range missing {
		d.example("missing " + m)
	}
	return d
}

func (d *diff) example(s string) {
	if len(d.examples) < 8 {
		d.examples = append(d.examples, s)
	}
}

func (d diff) ok() bool {
	return d.Missing == 0 && d.Duplicated == 0 && d.Unexpected == 0 && d.Got == d.Want
}

func (d diff) err(what string) error {
	if d.ok() {
		return nil
	}
	return fmt.Errorf("%s: got %d, want %d: %d missing, %d duplicated, %d unexpected (%s)",
		what, d.Got, d.Want, d.Missing, d.Duplicated, d.Unexpected, strings.Join(d.examples, "; "))
}

// counter sums the counter name of namespace ns over every step.
func counter(res beam.PipelineResult, ns, name string) int64 {
	cs := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == ns && r.Name() == name
	}).Counters()
	var sum int64
	for _, c := range cs {
		sum += c.Result()
	}
	return sum
}

// checkCounters fails t unless checkFn's counters of what say that it ran
// once and saw want ids, each once: the check's error already failed the
// job otherwise; this catches a check that never ran.
func checkCounters(t *testing.T, res beam.PipelineResult, what string, want int) {
	t.Helper()
	get := func(name string) int64 { return counter(res, metricsNS, what+"/"+name) }
	if c, g, m, d, u := get("checked"), get("got"), get("missing"), get("duplicated"), get("unexpected"); c != 1 || g != int64(want) || m != 0 || d != 0 || u != 0 {
		t.Errorf("%s: check ran %d times, saw %d (want %d): %d missing, %d duplicated, %d unexpected", what, c, g, want, m, d, u)
	} else {
		t.Logf("%s: %d read, each exactly once (0 missing, 0 duplicated, 0 unexpected)", what, g)
	}
}

// TestCompare: the check fails on a missing, a duplicated or an
// unexpected id and on a wrong count, and passes on an exact multiset in
// any order.
func TestCompare(t *testing.T) {
	want := []string{"a", "b", "c"}
	for _, c := range []struct {
		got                  []string
		ok                   bool
		missing, dup, unexpd int
	}{
		{[]string{"c", "a", "b"}, true, 0, 0, 0},
		{[]string{"a", "b"}, false, 1, 0, 0},
		{[]string{"a", "b", "c", "b"}, false, 0, 1, 0},
		{[]string{"a", "b", "b"}, false, 1, 1, 0},
		{[]string{"a", "b", "c", "d"}, false, 0, 0, 1},
		{nil, false, 3, 0, 0},
	} {
		d := compare(c.got, want)
		if d.ok() != c.ok || d.Missing != c.missing || d.Duplicated != c.dup || d.Unexpected != c.unexpd || (d.err("x") == nil) != c.ok {
			t.Errorf("compare(%q) = %+v, err %v", c.got, d, d.err("x"))
		}
	}
}

// TestCheckFailsOnFlink: a read that returns a duplicate and misses an
// entry fails its Flink job, with the counts, through checkFn.
func TestCheckFailsOnFlink(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	checkIDs(s, "negative", beam.Create(s, "a", "b", "b"), []string{"a", "b", "c"})
	_, err := flinktest.Run(t, p, runOpts()...)
	const want = "negative: got 3, want 3: 1 missing, 1 duplicated, 0 unexpected"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the job's error is %v, want one saying %q", err, want)
	}
}
