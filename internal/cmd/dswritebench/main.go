// Command dswritebench measures datastoreio.Write against a plain loop of
// the official client's PutMulti of 500, on Google's Cloud Datastore
// emulator, in the same run, for `make bench`.
//
// It starts an emulator (dstest; or uses DATASTORE_EMULATOR_HOST), then
// for each of -count rounds writes -n entities twice, each time into a
// namespace of its own:
//
//   - BenchmarkDatastoreWrite/sdfio: a Prism pipeline, Impulse -> a DoFn
//     making the entities -> datastoreio.Write with ramp-up throttling off
//     (the rule's 500 writes a second would measure the rule, not the
//     writer); the time is the pipeline's run, Prism's start included;
//   - BenchmarkDatastoreWrite/putmulti_500: the same entities written by one
//     goroutine with client.PutMulti of 500, one call after another.
//
// With -fresh (the default) each measurement has an emulator of its own,
// started and warmed up by an untimed write of each path: one emulator's
// store grows over a run and it slows with it, so later measurements paid
// for earlier ones and long writes could not be measured. Without it one
// emulator serves the run, warmed up once. The two alternate which goes
// first. Each round checks the count written
// with a keys-only count, and prints the Write's metrics (commits,
// retries, throttling) to stderr; -cpuprofile profiles the whole run. Output is Go
// benchmark lines (ns/op and entities/s), "note:" lines and a "goal:" line
// that internal/cmd/benchreport turns into docs/BENCHMARKS.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"reflect"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
)

var (
	n          = flag.Int("n", 5000, "entities written by each measurement")
	count      = flag.Int("count", 3, "rounds")
	cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of the whole run (the writes and the loops; the emulator is another process) to this file")
	fresh      = flag.Bool("fresh", true, "give each measurement an emulator of its own, started and warmed up untimed: the emulator slows as its store grows, so with one emulator for the whole run the later measurements pay for the earlier ones' entities")
)

// entity is the benchmark's entity: a key, two indexed and three unindexed
// properties (about 200 bytes).
type entity struct {
	K     *datastore.Key `datastore:"__key__"`
	N     int64
	Group string
	Text  string   `datastore:",noindex"`
	Score float64  `datastore:",noindex"`
	Tags  []string `datastore:",noindex"`
}

func makeEntity(ns string, i int) entity {
	k := datastore.IDKey("Bench", int64(i)+1, nil)
	k.Namespace = ns
	return entity{K: k, N: int64(i), Group: fmt.Sprintf("g%d", i%16),
		Text:  fmt.Sprintf("entity %d of the write benchmark, some text to store", i),
		Score: float64(i) / 3, Tags: []string{"a", "b", fmt.Sprint(i % 7)}}
}

// genFn emits the N entities of namespace NS.
type genFn struct {
	NS string
	N  int
}

func (fn *genFn) ProcessElement(_ []byte, emit func(entity)) {
	for i := 0; i < fn.N; i++ {
		emit(makeEntity(fn.NS, i))
	}
}

// timeline records when each Commit of a measurement started and ended, by
// a gRPC interceptor on both paths' clients (the pipeline's worker runs in
// this process), to tell where a measurement's time goes: before the first
// commit (Prism, the worker, the DoFn's set-up), in commits, and after the
// last.
var timeline struct {
	mu    sync.Mutex
	start time.Time
	spans [][2]time.Duration
}

func resetTimeline(start time.Time) {
	timeline.mu.Lock()
	timeline.start, timeline.spans = start, nil
	timeline.mu.Unlock()
}

func timeCommits(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !strings.HasSuffix(method, "/Commit") {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	t0 := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	t1 := time.Now()
	timeline.mu.Lock()
	if !timeline.start.IsZero() {
		timeline.spans = append(timeline.spans, [2]time.Duration{t0.Sub(timeline.start), t1.Sub(timeline.start)})
	}
	timeline.mu.Unlock()
	return err
}

var timingOption = option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(timeCommits))

// describeTimeline summarises the commits of a measurement that took total.
func describeTimeline(total time.Duration) string {
	timeline.mu.Lock()
	defer timeline.mu.Unlock()
	sp := timeline.spans
	if len(sp) == 0 {
		return "no commits seen"
	}
	first, last := sp[0][0], sp[0][1]
	var busy time.Duration
	for _, x := range sp {
		first, last = min(first, x[0]), max(last, x[1])
		busy += x[1] - x[0]
	}
	return fmt.Sprintf("%d commits, first began at %.2f s, last ended at %.2f s of %.2f s; mean commit %.1f ms; %.2f commits in flight on average",
		len(sp), first.Seconds(), last.Seconds(), total.Seconds(), float64(busy.Milliseconds())/float64(len(sp)), float64(busy)/float64(last-first))
}

func init() {
	datastoreio.RegisterClientOptions("dswritebench-timing", func() []option.ClientOption { return []option.ClientOption{timingOption} })
	register.DoFn2x0[[]byte, func(entity)](&genFn{})
	register.Emitter1[entity]()
	datastoreio.RegisterType(reflect.TypeFor[entity]())
}

func main() {
	flag.Parse()
	beam.Init()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dswritebench: %v\n", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "dswritebench: %v\n", err)
			os.Exit(1)
		}
		code := run()
		pprof.StopCPUProfile()
		f.Close()
		os.Exit(code)
	}
	os.Exit(run())
}

// emu is an emulator and a client of it, with DATASTORE_EMULATOR_HOST set
// to it for the pipelines (which run in this process).
type emu struct {
	e *dstest.Emulator
	c *datastore.Client
}

func startEmu(ctx context.Context) (*emu, error) {
	if host := os.Getenv("DATASTORE_EMULATOR_HOST"); host != "" && *fresh {
		// dstest.New would use it; each measurement needs an emulator of its own
		os.Unsetenv("DATASTORE_EMULATOR_HOST")
	}
	e, err := dstest.New(ctx)
	if err != nil {
		return nil, err
	}
	os.Setenv("DATASTORE_EMULATOR_HOST", e.Host())
	os.Setenv("DATASTORE_PROJECT_ID", e.Project())
	c, err := datastore.NewClient(ctx, e.Project(), timingOption)
	if err != nil {
		e.Stop()
		return nil, err
	}
	return &emu{e: e, c: c}, nil
}

func (m *emu) stop() {
	m.c.Close()
	m.e.Stop()
}

// warm writes n entities with the loop and n with Write, untimed, into
// namespaces of their own: the emulator's JIT and the client's connection
// warmed up the same way for whichever measurement follows.
func (m *emu) warm(ctx context.Context, n int) error {
	if _, err := putLoop(ctx, m.c, "warmup-putmulti", n); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if _, err := pipelineWrite(ctx, m.e.Project(), "warmup-sdfio", n); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

func run() int {
	ctx := context.Background()
	shared, err := startEmu(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dswritebench: %v\n", err)
		return 1
	}
	defer func() { shared.stop() }()

	// Warm the emulator's JIT, Prism and the client up with one untimed
	// round of each: whichever measurement ran first against a cold
	// emulator took two to three times as long.
	warmN := min(*n, 5000)
	if err := shared.warm(ctx, warmN); err != nil {
		fmt.Fprintf(os.Stderr, "dswritebench: %v\n", err)
		return 1
	}
	fmt.Println("pkg: github.com/sdfio/sdfio/datastoreio (dswritebench)")
	how := "one emulator for the run"
	if *fresh {
		how = fmt.Sprintf("an emulator of its own per measurement, warmed up with %d entities by each path untimed", warmN)
	}
	fmt.Printf("note: dswritebench: %d entities per measurement (~200 bytes, 2 indexed properties), Cloud Datastore emulator (%s), %d rounds; Write without ramp-up throttling, timed with Prism's start\n", *n, how, *count)
	if d, err := pipelineWrite(ctx, shared.e.Project(), "bench-empty", 0); err == nil {
		fmt.Printf("note: dswritebench: a Write pipeline of no entities takes %.2f s on Prism here (start-up included in the sdfio figures)\n", d.Seconds())
	}
	failed := 0
	for round := 1; round <= *count; round++ {
		ms := []struct {
			name string
			f    func(m *emu, ns string) (time.Duration, error)
		}{
			{"sdfio", func(m *emu, ns string) (time.Duration, error) { return pipelineWrite(ctx, m.e.Project(), ns, *n) }},
			{"putmulti_500", func(m *emu, ns string) (time.Duration, error) { return putLoop(ctx, m.c, ns, *n) }},
		}
		if round%2 == 0 { // alternate which goes first: the emulator's store grows
			ms[0], ms[1] = ms[1], ms[0]
		}
		for _, mm := range ms {
			m := shared
			if *fresh {
				shared.stop()
				if m, err = startEmu(ctx); err == nil {
					err = m.warm(ctx, warmN)
				}
				if err != nil {
					fmt.Fprintf(os.Stderr, "dswritebench: round %d: %v\n", round, err)
					return 1
				}
				shared = m
			}
			ns := fmt.Sprintf("bench-%s-%d-%d", mm.name, round, time.Now().UnixNano())
			resetTimeline(time.Now())
			d, err := mm.f(m, ns)
			fmt.Fprintf(os.Stderr, "dswritebench: round %d %s: %s\n", round, mm.name, describeTimeline(d))
			resetTimeline(time.Time{})
			if err == nil {
				err = checkCount(ctx, m.c, ns, *n)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "dswritebench: round %d %s: %v\n", round, mm.name, err)
				fmt.Printf("note: dswritebench: round %d %s failed: %v\n", round, mm.name, err)
				failed++
				continue
			}
			rate := float64(*n) / d.Seconds()
			fmt.Fprintf(os.Stderr, "dswritebench: round %d %s: %.2f s, %.0f entities/s\n", round, mm.name, d.Seconds(), rate)
			fmt.Printf("BenchmarkDatastoreWrite/%s 1 %d ns/op %.1f entities/s\n", mm.name, d.Nanoseconds(), rate)
		}
	}
	fmt.Println("goal: BenchmarkDatastoreWrite/sdfio entities/s / BenchmarkDatastoreWrite/putmulti_500 # datastoreio.Write on Prism against a plain PutMulti loop of 500 (emulator)")
	if failed > 0 {
		return 1
	}
	return 0
}

func pipelineWrite(ctx context.Context, project, ns string, n int) (time.Duration, error) {
	p, s := beam.NewPipelineWithRoot()
	datastoreio.Write(s, project, beam.ParDo(s, &genFn{NS: ns, N: n}, beam.Impulse(s)), datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithClientOptions("dswritebench-timing"))
	start := time.Now()
	res, err := beam.Run(ctx, "prism", p)
	d := time.Since(start)
	if err == nil && n > 0 && res != nil {
		fmt.Fprintf(os.Stderr, "dswritebench: %s: metrics %s\n", ns, writeMetrics(res))
	}
	return d, err
}

// writeMetrics lists the Write's counters of a pipeline's result.
func writeMetrics(res beam.PipelineResult) string {
	cs := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == datastoreio.Namespace
	}).Counters()
	sums := map[string]int64{}
	var names []string
	for _, c := range cs {
		if _, ok := sums[c.Name()]; !ok {
			names = append(names, c.Name())
		}
		sums[c.Name()] += c.Result()
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, " %s=%d", name, sums[name])
	}
	return b.String()
}

func putLoop(ctx context.Context, c *datastore.Client, ns string, n int) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < n; i += 500 {
		end := min(i+500, n)
		keys := make([]*datastore.Key, 0, end-i)
		ents := make([]entity, 0, end-i)
		for j := i; j < end; j++ {
			e := makeEntity(ns, j)
			keys = append(keys, e.K)
			ents = append(ents, e)
		}
		if _, err := c.PutMulti(ctx, keys, ents); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func checkCount(ctx context.Context, c *datastore.Client, ns string, n int) error {
	got, err := c.Count(ctx, datastore.NewQuery("Bench").Namespace(ns).KeysOnly())
	if err != nil {
		return fmt.Errorf("counting: %w", err)
	}
	if got != n {
		return fmt.Errorf("%d entities written, want %d", got, n)
	}
	return nil
}
