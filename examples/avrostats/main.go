// Command avrostats prints per-field statistics of any set of Avro container
// files, read with sdfio's avroio: for every top-level field, how many values
// and nulls it holds, the range and mean of numeric fields, and the range of
// string lengths, then the read's metrics (records, bytes, splits accepted
// and refused).
//
// The files are read as generic records; each file is cut into initial
// bundles at its sync markers and runners may split the running reads again.
//
//	go run ./examples/avrostats                                  # testdata/avro/*.avro on Prism
//	go run ./examples/avrostats --input='gs://bucket/events/*.avro' --bundle_size=67108864
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	"github.com/sdfio/sdfio/avroio"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs" // --input=gs://...
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local"

	_ "github.com/sdfio/sdfio/offsetsource/filesource/gcsrange" // gs:// read in ranges

	// The runners this program runs on, registered by import: Prism (the
	// default, in this process), the portable runner (universal, flink) and
	// Dataflow.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

var (
	input      = flag.String("input", "testdata/avro/*.avro", "Avro files to read: a path or glob on any Beam filesystem")
	bundleSize = flag.Int64("bundle_size", 32<<10, "desired initial bundle size in bytes (avroio's default is 64 MiB)")
	minBundle  = flag.Int64("min_bundle_size", 16<<10, "minimum initial bundle size in bytes (avroio's default is 128000)")
)

// Stats is what is known of one field.
type Stats struct {
	Values, Nulls int64
	// Numeric values: count, min, max, sum.
	Numbers        int64
	Min, Max, Sum  float64
	Strings        int64 // strings and bytes: count, shortest, longest
	MinLen, MaxLen int64
	Kinds          string // Go kinds seen, sorted, comma-separated
}

func (s *Stats) add(v any) {
	s.Values++
	switch x := v.(type) {
	case nil:
		s.Nulls++
		return
	case int:
		s.number(float64(x))
	case int32:
		s.number(float64(x))
	case int64:
		s.number(float64(x))
	case float32:
		s.number(float64(x))
	case float64:
		s.number(x)
	case string:
		s.length(int64(len(x)))
	case []byte:
		s.length(int64(len(x)))
	case time.Time:
		s.number(float64(x.UnixMilli()))
	}
	s.kind(kindOf(v))
}

func kindOf(v any) string {
	switch v.(type) {
	case time.Time:
		return "time"
	case map[string]any, avroio.Record:
		return "map"
	}
	return reflect.TypeOf(v).Kind().String()
}

func (s *Stats) number(f float64) {
	if s.Numbers == 0 || f < s.Min {
		s.Min = f
	}
	if s.Numbers == 0 || f > s.Max {
		s.Max = f
	}
	s.Numbers++
	s.Sum += f
}

func (s *Stats) length(n int64) {
	if s.Strings == 0 || n < s.MinLen {
		s.MinLen = n
	}
	if s.Strings == 0 || n > s.MaxLen {
		s.MaxLen = n
	}
	s.Strings++
}

func (s *Stats) kind(k string) {
	if k == "" || strings.Contains(","+s.Kinds+",", ","+k+",") {
		return
	}
	ks := append(strings.Split(s.Kinds, ","), k)
	if s.Kinds == "" {
		ks = []string{k}
	}
	sort.Strings(ks)
	s.Kinds = strings.Join(ks, ",")
}

func merge(a, b Stats) Stats {
	out := a
	out.Values += b.Values
	out.Nulls += b.Nulls
	if b.Numbers > 0 {
		if a.Numbers == 0 {
			out.Min, out.Max = b.Min, b.Max
		} else {
			out.Min, out.Max = math.Min(a.Min, b.Min), math.Max(a.Max, b.Max)
		}
		out.Numbers += b.Numbers
		out.Sum += b.Sum
	}
	if b.Strings > 0 {
		if a.Strings == 0 {
			out.MinLen, out.MaxLen = b.MinLen, b.MaxLen
		} else {
			out.MinLen, out.MaxLen = min(a.MinLen, b.MinLen), max(a.MaxLen, b.MaxLen)
		}
		out.Strings += b.Strings
	}
	for _, k := range strings.Split(b.Kinds, ",") {
		out.kind(k)
	}
	return out
}

// fieldStatsFn folds the records of a bundle into one Stats per field and
// emits them when the bundle finishes: a handful of elements per bundle go
// on to the combine, not one per record and field.
type fieldStatsFn struct {
	acc map[string]*Stats
}

func (fn *fieldStatsFn) StartBundle(_ context.Context, _ func(string, Stats)) {
	fn.acc = map[string]*Stats{}
}

func (fn *fieldStatsFn) ProcessElement(rec avroio.Record, _ func(string, Stats)) {
	for name, v := range rec {
		st := fn.acc[name]
		if st == nil {
			st = &Stats{}
			fn.acc[name] = st
		}
		st.add(v)
	}
}

func (fn *fieldStatsFn) FinishBundle(_ context.Context, emit func(string, Stats)) {
	for name, st := range fn.acc {
		emit(name, *st)
	}
	fn.acc = nil
}

func format(field string, s Stats) string {
	line := fmt.Sprintf("%-12s %7d values %6d nulls  [%s]", field, s.Values, s.Nulls, s.Kinds)
	switch {
	case s.Numbers > 0 && s.Kinds == "time":
		ts := func(ms float64) string { return time.UnixMilli(int64(ms)).UTC().Format(time.RFC3339) }
		line += fmt.Sprintf("  from %s to %s", ts(s.Min), ts(s.Max))
	case s.Numbers > 0:
		line += fmt.Sprintf("  min %.6g  mean %.6g  max %.6g", s.Min, s.Sum/float64(s.Numbers), s.Max)
	}
	if s.Strings > 0 {
		line += fmt.Sprintf("  length %d..%d", s.MinLen, s.MaxLen)
	}
	return line
}

func init() {
	register.Combiner3[[]string, string, []string](&sortFn{}) // printSorted
	register.Function1x0(printLines)
	register.DoFn2x0[avroio.Record, func(string, Stats)](&fieldStatsFn{})
	register.Emitter2[string, Stats]()
	register.Function2x1(merge)
	register.Function2x1(format)
	beam.RegisterType(reflect.TypeFor[Stats]())
}

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()

	p, s := beam.NewPipelineWithRoot()
	recs := avroio.ReadGeneric(s, *input, avroio.WithDesiredBundleSize(*bundleSize), avroio.WithMinBundleSize(*minBundle))
	perField := beam.CombinePerKey(s, merge, beam.ParDo(s, &fieldStatsFn{}, recs))
	printSorted(s, beam.ParDo(s, format, perField))
	run(ctx, p, *input, avroio.Namespace)
}

// counterHelp says in a line what each counter of the IO counts.
var counterHelp = map[string]string{
	"records":         "records read and emitted",
	"bytes_read":      "bytes of the files consumed by the reads",
	"files_matched":   "files the pattern matched",
	"ranges_read":     "ranges of files opened: initial bundles and the pieces runner splits made",
	"splits_accepted": "runner split requests accepted while reading: work handed to another bundle (dynamic rebalancing)",
	"splits_refused":  "runner split requests refused (the split point was already read, or too little was left)",
}

// run runs p on the runner the --runner flag names (Prism, in this
// process, when it is empty), as beamx.RunWithMetrics does, and exits
// naming what it read if the pipeline fails. It then prints how long the
// run took and each counter of namespace with what it counts.
func run(ctx context.Context, p *beam.Pipeline, what, namespace string) {
	start := time.Now()
	res, err := execute(ctx, p)
	if err != nil {
		log.Exitf(ctx, "pipeline reading %s failed: %v", what, err)
	}
	fmt.Printf("\nread %s in %v\n", what, time.Since(start).Round(time.Millisecond))
	if res == nil { // a runner that reports no metrics
		return
	}
	totals := map[string]int64{}
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == namespace {
			totals[c.Name()] += c.Result()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(totals)) {
		fmt.Printf("  %-18s %8d  %s\n", name, totals[name], counterHelp[name])
	}
}

// execute runs p on the runner of --runner, Prism by default, as
// beamx.RunWithMetrics does; beamx also links runners and Beam's reflection
// shims that this program does not use (every function it runs is
// registered).
func execute(ctx context.Context, p *beam.Pipeline) (beam.PipelineResult, error) {
	r := *runners.Runner
	if r == "" {
		r = "prism"
	}
	return beam.Run(ctx, r, p)
}

// printSorted prints the strings of lines, sorted, one a line, once the
// pipeline has them all (gathered into one slice: for small results).
func printSorted(s beam.Scope, lines beam.PCollection) {
	beam.ParDo0(s, printLines, beam.Combine(s, &sortFn{}, lines))
}

// sortFn gathers strings into one sorted slice.
type sortFn struct{}

func (sortFn) CreateAccumulator() []string              { return nil }
func (sortFn) AddInput(acc []string, s string) []string { return append(acc, s) }
func (sortFn) MergeAccumulators(a, b []string) []string { return append(a, b...) }
func (sortFn) ExtractOutput(acc []string) []string      { sort.Strings(acc); return acc }

func printLines(lines []string) { fmt.Println(strings.Join(lines, "\n")) }
