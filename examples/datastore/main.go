// Command datastore reads a Cloud Datastore kind with sdfio's datastoreio:
// the query is split on __scatter__ keys, every range reads the latest data,
// and the runner may split running ranges between sub-ranges. It prints how
// many entities it read, how many distinct keys, and the read's metrics
// (entities, queries, pages, initial splits, sub-ranges, splits accepted and
// refused, retries).
//
// Without --project it starts Google's Cloud Datastore emulator (Java and
// the Cloud SDK's emulator component must be installed), writes --entities
// entities of --kind with the client's PutMulti, and reads them back. With
// --project (and no DATASTORE_EMULATOR_HOST) it reads a real database with
// the default credentials and writes nothing.
//
//	go run ./examples/datastore                                  # emulator, 3000 entities, 8 splits
//	go run ./examples/datastore --project=my-project --kind=Task --namespace=prod --splits=0
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/gcpopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"

	// The runners this program runs on, registered by import: Prism (the
	// default, in this process), the portable runner (universal, flink) and
	// Dataflow.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

var (
	database  = flag.String("database", "", "database to read (empty: the default database)")
	kind      = flag.String("kind", "DemoTask", "kind to read")
	namespace = flag.String("namespace", "", "namespace to read")
	entities  = flag.Int("entities", 3000, "entities to write to the emulator first")
	splits    = flag.Int("splits", 8, "initial splits (NumQuerySplits; <= 0: from the statistics)")
	keys      = flag.Int("keys_per_split", datastoreio.DefaultKeysPerSplit, "scatter keys sampled per split (sub-ranges a running split can be cut at)")
)

// Task is the demo entity; with a real kind only the key matters.
type Task struct {
	K        *datastore.Key `datastore:"__key__"`
	Priority int64          `datastore:",omitempty"`
}

// counts is the combined result: entities and distinct keys.
type counts struct {
	Entities int64
	Keys     map[string]bool
}

type countFn struct{}

func (countFn) CreateAccumulator() counts { return counts{Keys: map[string]bool{}} }
func (countFn) AddInput(c counts, t Task) counts {
	c.Entities++
	c.Keys[t.K.String()] = true
	return c
}
func (countFn) MergeAccumulators(a, b counts) counts {
	a.Entities += b.Entities
	for k := range b.Keys {
		a.Keys[k] = true
	}
	return a
}
func (countFn) ExtractOutput(c counts) string {
	return fmt.Sprintf("read %d entities, %d distinct keys", c.Entities, len(c.Keys))
}

func printLine(s string) { fmt.Println(s) }

func init() {
	datastoreio.RegisterType(reflect.TypeFor[Task]())
	beam.RegisterType(reflect.TypeFor[counts]())
	register.Combiner3[counts, Task, string](&countFn{})
	register.Function1x0(printLine)
}

// writeDemo writes n tasks with numeric ids spread over the whole positive
// int64 range, some named, some children of a parent.
func writeDemo(ctx context.Context, e *dstest.Emulator, n int) error {
	c, err := e.NewClientWithDatabase(ctx, *database)
	if err != nil {
		return err
	}
	defer c.Close()
	r := rand.New(rand.NewPCG(1, 2))
	ks := make([]*datastore.Key, 0, n)
	ts := make([]Task, 0, n)
	for i := 0; i < n; i++ {
		var k *datastore.Key
		switch i % 10 {
		case 0:
			k = datastore.NameKey(*kind, fmt.Sprintf("task-%d", i), nil)
		case 1:
			k = datastore.IDKey(*kind, int64(i), datastore.NameKey("Project", fmt.Sprintf("p%d", i%7), nil))
		default:
			k = datastore.IDKey(*kind, 1+r.Int64N(math.MaxInt64), nil)
		}
		for p := k; p != nil; p = p.Parent {
			p.Namespace = *namespace
		}
		ks = append(ks, k)
		ts = append(ts, Task{K: k, Priority: int64(i % 5)})
	}
	for i := 0; i < n; i += 500 {
		end := min(i+500, n)
		if _, err := c.PutMulti(ctx, ks[i:end], ts[i:end]); err != nil {
			return fmt.Errorf("writing demo entities: %w", err)
		}
	}
	return nil
}

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()
	// --project is Beam's own flag (gcpopts): empty means the emulator.
	proj := *gcpopts.Project
	if proj == "" {
		e, err := dstest.New(ctx)
		if err != nil {
			log.Exitf(ctx, "no --project and no emulator: %v", err)
		}
		defer e.Stop()
		os.Setenv("DATASTORE_EMULATOR_HOST", e.Host())
		proj = e.Project()
		start := time.Now()
		if err := writeDemo(ctx, e, *entities); err != nil {
			e.Stop()
			log.Exitf(ctx, "%v", err)
		}
		fmt.Printf("emulator at %s: wrote %d entities of %s in %v\n", e.Host(), *entities, *kind, time.Since(start).Round(time.Millisecond))
	}

	p, s := beam.NewPipelineWithRoot()
	tasks := datastoreio.Read(s, proj, datastoreio.NewQuery(*kind), reflect.TypeFor[Task](),
		datastoreio.WithDatabase(*database), datastoreio.WithNamespace(*namespace),
		datastoreio.WithNumQuerySplits(*splits), datastoreio.WithKeysPerSplit(*keys))
	beam.ParDo0(s, printLine, beam.Combine(s, &countFn{}, tasks))
	run(ctx, p, *kind, datastoreio.Namespace)
}

// counterHelp says in a line what each counter of the IO counts.
var counterHelp = map[string]string{
	"entities":        "entities read and emitted",
	"bytes":           "bytes of payload the reads received",
	"queries":         "queries run against the service (one per key range read)",
	"pages":           "result pages the queries returned",
	"retries":         "requests retried after a transient error",
	"initial_splits":  "key ranges planned from the kind's __scatter__ keys before reading",
	"sub_ranges":      "sub-ranges the key ranges were cut into for the runner to split at",
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
