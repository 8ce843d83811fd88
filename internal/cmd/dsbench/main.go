// Command dsbench compares sdfio's datastoreio.Read with Beam Go's own
// datastoreio on the same data in a Cloud Datastore emulator: entities per
// second and how many entities each returned twice or not at all.
//
// It starts the emulator (or uses DATASTORE_EMULATOR_HOST), writes
// --entities entities of one kind in the default namespace (Beam Go's reader
// has no namespaces) with numeric ids spread over the whole positive int64
// range, then runs each reader --count times on Prism, in-process, with 8
// splits (sdfio) and 8 shards (Beam Go). The output is benchmark format for
// internal/cmd/benchreport: BenchmarkDatastoreRead/sdfio and
// BenchmarkDatastoreRead/beam_datastoreio, each with entities/s, duplicates
// and missing; BenchmarkDatastoreRead/sdfio_4keys is sdfio with 4 instead
// of 32 sub-ranges per split (fewer queries, coarser dynamic splits).
//
//	go run ./internal/cmd/dsbench -entities=20000 -count=3
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	beamds "github.com/apache/beam/sdks/v2/go/pkg/beam/io/datastoreio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
)

var (
	entities = flag.Int("entities", 20000, "entities to write and read")
	count    = flag.Int("bench_count", 3, "runs of each reader")
	splits   = flag.Int("splits", 8, "splits (sdfio) and shards (Beam Go)")
)

const kind = "BenchEntity"

// Entity is what both readers load.
type Entity struct {
	K *datastore.Key `datastore:"__key__"`
	N int64
	S string `datastore:",noindex"`
}

func init() {
	datastoreio.RegisterType(reflect.TypeFor[Entity]())
	beam.RegisterType(reflect.TypeFor[tally]())
	register.Function1x1(idOf)
	register.Combiner3[tally, int64, tally](&tallyFn{})
	register.DoFn2x0[context.Context, tally](&reportFn{})
}

// idOf is the entity's N, which is its index in the written data.
func idOf(e Entity) int64 { return e.N }

// tally counts how often each index was read.
type tally struct{ Seen []int32 }

type tallyFn struct{ Entities int }

func (f *tallyFn) CreateAccumulator() tally { return tally{Seen: make([]int32, f.Entities)} }
func (f *tallyFn) AddInput(t tally, n int64) tally {
	if n >= 0 && int(n) < len(t.Seen) {
		t.Seen[n]++
	}
	return t
}
func (f *tallyFn) MergeAccumulators(a, b tally) tally {
	for i := range a.Seen {
		a.Seen[i] += b.Seen[i]
	}
	return a
}
func (f *tallyFn) ExtractOutput(t tally) tally { return t }

var (
	dupCounter     = beam.NewCounter("dsbench", "duplicates")
	missingCounter = beam.NewCounter("dsbench", "missing")
	readCounter    = beam.NewCounter("dsbench", "read")
)

type reportFn struct{}

func (reportFn) ProcessElement(ctx context.Context, t tally) {
	for _, c := range t.Seen {
		readCounter.Inc(ctx, int64(c))
		switch {
		case c == 0:
			missingCounter.Inc(ctx, 1)
		case c > 1:
			dupCounter.Inc(ctx, int64(c-1))
		}
	}
}

func write(ctx context.Context, e *dstest.Emulator, n int) error {
	c, err := e.NewClient(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(5, 6))
	seen := map[int64]bool{}
	for i := 0; i < n; i += 500 {
		end := min(i+500, n)
		var keys []*datastore.Key
		var vals []Entity
		for j := i; j < end; j++ {
			id := 1 + r.Int64N(math.MaxInt64)
			for seen[id] {
				id = 1 + r.Int64N(math.MaxInt64)
			}
			seen[id] = true
			keys = append(keys, datastore.IDKey(kind, id, nil))
			vals = append(vals, Entity{N: int64(j), S: fmt.Sprintf("entity %d", j)})
		}
		if _, err := c.PutMulti(ctx, keys, vals); err != nil {
			return err
		}
	}
	return nil
}

func counterOf(res beam.PipelineResult, ns, name string) int64 {
	var sum int64
	for _, c := range res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == ns && r.Name() == name
	}).Counters() {
		sum += c.Result()
	}
	return sum
}

func run(ctx context.Context, name, project string, read func(s beam.Scope) beam.PCollection) error {
	p, s := beam.NewPipelineWithRoot()
	ids := beam.ParDo(s, idOf, read(s))
	beam.ParDo0(s, &reportFn{}, beam.Combine(s, &tallyFn{Entities: *entities}, ids))
	start := time.Now()
	res, err := beamx.RunWithMetrics(ctx, p)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	el := time.Since(start)
	rate := float64(*entities) / el.Seconds()
	fmt.Printf("BenchmarkDatastoreRead/%s \t1\t%d ns/op\t%.0f entities/s\t%d read\t%d duplicates\t%d missing\n",
		name, el.Nanoseconds(), rate, counterOf(res, "dsbench", "read"), counterOf(res, "dsbench", "duplicates"), counterOf(res, "dsbench", "missing"))
	return nil
}

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()
	e, err := dstest.New(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 0
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintln(os.Stderr, "dsbench:", p)
			code = 2
		}
		e.Stop()
		os.Exit(code)
	}()
	os.Setenv("DATASTORE_EMULATOR_HOST", e.Host())
	start := time.Now()
	if err := write(ctx, e, *entities); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
		return
	}
	typeKey, ok := runtime.TypeKey(reflect.TypeFor[Entity]())
	if !ok {
		panic("Entity has no type key")
	}
	fmt.Println("pkg: github.com/sdfio/sdfio/internal/cmd/dsbench")
	fmt.Printf("note: %d entities of one kind, numeric ids over the whole positive int64 range, written to the Cloud Datastore emulator in %v; Prism in-process; %d splits (sdfio) vs %d shards (Beam Go datastoreio v%s)\n",
		*entities, time.Since(start).Round(time.Second), *splits, *splits, core.SdkVersion)
	for i := 0; i < *count; i++ {
		if err := run(ctx, "sdfio", e.Project(), func(s beam.Scope) beam.PCollection {
			return datastoreio.Read(s, e.Project(), datastoreio.NewQuery(kind), reflect.TypeFor[Entity](), datastoreio.WithNumQuerySplits(*splits))
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			return
		}
		if err := run(ctx, "sdfio_4keys", e.Project(), func(s beam.Scope) beam.PCollection {
			return datastoreio.Read(s, e.Project(), datastoreio.NewQuery(kind), reflect.TypeFor[Entity](), datastoreio.WithNumQuerySplits(*splits), datastoreio.WithKeysPerSplit(4))
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			return
		}
		if err := run(ctx, "beam_datastoreio", e.Project(), func(s beam.Scope) beam.PCollection {
			return beamds.Read(s, e.Project(), kind, *splits, reflect.TypeFor[Entity](), typeKey)
		}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
			return
		}
	}
	fmt.Println("goal: BenchmarkDatastoreRead/sdfio duplicates <= 0 # every entity read once")
	fmt.Println("goal: BenchmarkDatastoreRead/sdfio missing <= 0 # nothing lost")
	fmt.Println("goal: BenchmarkDatastoreRead/sdfio entities/s / BenchmarkDatastoreRead/beam_datastoreio # throughput against Beam Go's datastoreio with as many shards")
}
