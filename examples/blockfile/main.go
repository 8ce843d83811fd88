// Command blockfile reads a block-structured file of weather readings with
// offsetsource and prints, per station, the minimum, mean and maximum
// temperature, then the read's split metrics.
//
// The file holds blocks of several records; only the first record of a block
// is a split point (see blocks.go), so the read splits between blocks: the
// initial bundles are cut at --bundle_size bytes, and the runner may split a
// running bundle again (Prism does when a bundle makes no progress for a
// while: try --block_delay=150ms).
//
//	go run ./examples/blockfile                          # Prism, in-process
//	go run ./examples/blockfile --block_delay=150ms      # slow blocks: watch Prism split
//	go run ./examples/blockfile --write=/tmp/r.blk --readings=100000
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs" // --input=gs://...
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local"

	// The runners this program runs on, registered by import: Prism (the
	// default, in this process), the portable runner (universal, flink) and
	// Dataflow.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

var (
	input      = flag.String("input", "testdata/readings.blk", "block file to read (any Beam filesystem path)")
	bundleSize = flag.Int64("bundle_size", 16<<10, "desired initial bundle size in bytes")
	blockDelay = flag.Duration("block_delay", 0, "sleep before each block, so that the runner splits running bundles")
	write      = flag.String("write", "", "write a new block file of --readings readings to this path and exit")
	readings   = flag.Int("readings", 10000, "readings to write with --write")
	perBlock   = flag.Int("per_block", 250, "readings per block with --write")
)

// Agg is the running statistics of one station.
type Agg struct {
	Min, Max, Sum, Count int64
}

func toKV(r Reading) (string, Agg) {
	return r.Station, Agg{Min: r.Tenths, Max: r.Tenths, Sum: r.Tenths, Count: 1}
}

func mergeAgg(a, b Agg) Agg {
	return Agg{Min: min(a.Min, b.Min), Max: max(a.Max, b.Max), Sum: a.Sum + b.Sum, Count: a.Count + b.Count}
}

func formatStation(station string, a Agg) string {
	return fmt.Sprintf("%-12s min %6s  mean %6.1f  max %6s  (%d readings)", station,
		formatTenths(a.Min), float64(a.Sum)/float64(a.Count)/10, formatTenths(a.Max), a.Count)
}

func init() {
	register.Combiner3[[]string, string, []string](&sortFn{}) // printSorted
	register.Function1x0(printLines)
	offsetsource.Register[Reading, BlockFile]()
	register.Function1x2(toKV)
	register.Function2x1(mergeAgg)
	register.Function2x1(formatStation)
	beam.RegisterType(reflect.TypeFor[Agg]())
}

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()
	if *write != "" {
		if err := writeFile(*write, *readings, *perBlock); err != nil {
			log.Exitf(ctx, "writing %s: %v", *write, err)
		}
		fmt.Printf("wrote %d readings to %s\n", *readings, *write)
		return
	}

	p, s := beam.NewPipelineWithRoot()
	src := BlockFile{Path: *input, End: sdf.Unbounded, BlockDelay: *blockDelay}
	recs := offsetsource.Read(s, src, offsetsource.WithDesiredBundleSize(*bundleSize))
	stats := beam.CombinePerKey(s, mergeAgg, beam.ParDo(s, toKV, recs))
	printSorted(s, beam.ParDo(s, formatStation, stats))
	run(ctx, p, *input, offsetsource.Namespace)
}

var stations = []string{"Aberdeen", "Bergen", "Cork", "Dresden", "Elvas", "Faro", "Gdansk", "Hamburg", "Innsbruck", "Jena", "Kiruna", "Lyon"}

func writeFile(path string, n, perBlock int) error {
	rnd := rand.New(rand.NewPCG(1, 2))
	rs := make([]Reading, n)
	for i := range rs {
		st := rnd.IntN(len(stations))
		rs[i] = Reading{Station: stations[st], Tenths: int64(rnd.IntN(400)) - 150 + int64(st*10)}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeBlocks(f, rs, perBlock); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// counterHelp says in a line what each counter of the IO counts.
var counterHelp = map[string]string{
	"records":         "records read and emitted",
	"bytes_read":      "bytes of the files consumed by the reads",
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
