// Package idcheck is the exactly-once check of the Flink suites: a read's
// ids compared, in the pipeline, with the oracle's. It runs on a worker:
// the ids come as a side input (so that it runs once even when the read
// returned nothing), a difference fails the job with the counts and
// examples, and counters say that it ran and what it saw (Counts).
package idcheck

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(*string) bool, error](&checkFn{})
	register.Iter1[string]()
}

// Namespace is the namespace of the check's counters.
const Namespace = "sdfio-idcheck"

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
	d := Compare(ids, f.Want)
	for name, v := range map[string]int{"checked": 1, "got": d.Got, "missing": d.Missing, "duplicated": d.Duplicated, "unexpected": d.Unexpected} {
		beam.NewCounter(Namespace, f.What+"/"+name).Inc(ctx, int64(v))
	}
	return d.Err(f.What)
}

// IDs adds the check of ids (a PCollection of strings) against want, whose
// ids are distinct: the job fails unless ids holds each once and nothing
// else.
func IDs(s beam.Scope, what string, ids beam.PCollection, want []string) {
	s = s.Scope("check " + what)
	beam.ParDo0(s, &checkFn{What: what, Want: want}, beam.Impulse(s), beam.SideInput{Input: ids})
}

// Diff is what Compare found.
type Diff struct {
	Got, Want  int
	Missing    int // ids of want not seen
	Duplicated int // sightings beyond the first of ids of want
	Unexpected int // sightings of ids not in want
	examples   []string
}

// Compare counts each id of got against want, whose ids are distinct.
func Compare(got, want []string) Diff {
	d := Diff{Got: len(got), Want: len(want)}
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

func (d *Diff) example(s string) {
	if len(d.examples) < 8 {
		d.examples = append(d.examples, s)
	}
}

// OK reports whether got held each id of want once and nothing else.
func (d Diff) OK() bool {
	return d.Missing == 0 && d.Duplicated == 0 && d.Unexpected == 0 && d.Got == d.Want
}

// Err is nil when d is OK, else an error that gives the counts and
// examples.
func (d Diff) Err(what string) error {
	if d.OK() {
		return nil
	}
	return fmt.Errorf("%s: got %d, want %d: %d missing, %d duplicated, %d unexpected (%s)",
		what, d.Got, d.Want, d.Missing, d.Duplicated, d.Unexpected, strings.Join(d.examples, "; "))
}

// Counter sums the counter name of namespace ns over every step.
func Counter(res beam.PipelineResult, ns, name string) int64 {
	cs := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == ns && r.Name() == name
	}).Counters()
	var sum int64
	for _, c := range cs {
		sum += c.Result()
	}
	return sum
}

// Counts are the check's counters of what: how often it ran, how many ids
// it saw, and how many were missing, duplicated and unexpected.
func Counts(res beam.PipelineResult, what string) (checked, got, missing, duplicated, unexpected int64) {
	get := func(name string) int64 { return Counter(res, Namespace, what+"/"+name) }
	return get("checked"), get("got"), get("missing"), get("duplicated"), get("unexpected")
}
