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
	"math/rand/v2"
	"os"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/internal/demo"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs" // --input=gs://...
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local"
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
	demo.PrintSorted(s, beam.ParDo(s, formatStation, stats))
	// demo.Run is beamx.RunWithMetrics (the --runner flag, Prism by default),
	// then the time taken and each counter of the IO with what it counts.
	demo.Run(ctx, p, *input, offsetsource.Namespace)
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
