package flinkbench_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/benchenv"
	"github.com/sdfio/sdfio/internal/flinktest"
	"github.com/sdfio/sdfio/internal/workertest"
)

var (
	bqRows       = flag.Int("flinkbench.bq_rows", 1_000_000, "rows of the batch BigQuery write")
	bqStreamRows = flag.Int("flinkbench.bq_stream_rows", 200_000, "rows of the streaming BigQuery write")
)

// Runners of the BigQuery write benchmarks: the same Go pipeline with its
// SDK workers as processes of their own (internal/workertest), on Beam's
// Flink job server (internal/flinktest) and on a Prism job server.
const (
	runnerFlink = "flink"
	runnerPrism = "prism"
)

// BQRow is a row of the BigQuery write benchmarks: an id, a name of about
// 12 bytes and a score (about 30 bytes encoded).
type BQRow struct {
	ID    int64   `bigquery:"id"`
	Name  string  `bigquery:"name"`
	Score float64 `bigquery:"score"`
}

func bqRowAt(i int64) BQRow {
	return BQRow{ID: i, Name: "name-" + strconv.FormatInt(i%1_000_000, 10), Score: float64(i) / 7}
}

func init() {
	bigqueryio.RegisterType(reflect.TypeFor[BQRow]())
	register.DoFn2x0[[]byte, func(int64)](&bqSeedsFn{})
	register.DoFn2x0[int64, func(BQRow)](&bqGenFn{})
	register.Function1x1(bqRowAt)
	register.Emitter1[BQRow]()
}

// bqSeedsFn emits the seeds 0..Seeds-1 of the generator from an impulse.
type bqSeedsFn struct{ Seeds int64 }

func (f *bqSeedsFn) ProcessElement(_ []byte, emit func(int64)) {
	for i := range f.Seeds {
		emit(i)
	}
}

// bqGenFn emits the rows i with i mod Seeds = seed, of [0, N).
type bqGenFn struct{ N, Seeds int64 }

func (f *bqGenFn) ProcessElement(seed int64, emit func(BQRow)) {
	for i := seed; i < f.N; i += f.Seeds {
		emit(bqRowAt(i))
	}
}

// bqBatchPipeline generates n rows in 8 seeds, spread over the workers by
// a Reshuffle of the seeds, and writes them with bqwrite.Write's
// defaults for bounded input (exactly once: PENDING streams, one commit).
func bqBatchPipeline(srv *bqtest.Server, table string, n int64) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	const seeds = 8
	seed := beam.Reshuffle(s, beam.ParDo(s, &bqSeedsFn{Seeds: seeds}, beam.Impulse(s)))
	rows := beam.ParDo(s, &bqGenFn{N: n, Seeds: seeds}, seed)
	bqwrite.Write(s, table, rows, bqBenchOpts(srv)...)
	return p
}

// bqStreamPipeline writes n rows of a periodic sequence whose elements are
// all due when it starts (so it emits as fast as the runner takes them)
// with bqwrite.Write's defaults for unbounded input (exactly once:
// BUFFERED streams, flushed), batching every 200 ms.
func bqStreamPipeline(srv *bqtest.Server, table string, n int64) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	// The definition keeps its ends in milliseconds: n is a multiple of
	// 100 (runBQ), so that n elements 10 us apart end on a millisecond.
	start := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(time.Duration(n)*10*time.Microsecond), 10*time.Microsecond)))
	rows := beam.ParDo(s, bqRowAt, seq)
	bqwrite.Write(s, table, rows, bqBenchOpts(srv, bqwrite.WithTriggeringFrequency(200*time.Millisecond))...)
	return p
}

func bqBenchOpts(srv *bqtest.Server, more ...bqwrite.WriteOption) []bqwrite.WriteOption {
	return append([]bqwrite.WriteOption{bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithInsecure(),
		bqwrite.WithRESTEndpoint(srv.RESTEndpoint())}, more...)
}

// BenchmarkFlinkBQWriteBatch writes -flinkbench.bq_rows rows (1,000,000)
// with the batch write, on Flink and on Prism, in interleaved rounds.
func BenchmarkFlinkBQWriteBatch(b *testing.B) {
	benchBQ(b, "batch write", int64(*bqRows), false)
}

// BenchmarkFlinkBQWriteStream writes -flinkbench.bq_stream_rows rows
// (200,000) with the exactly-once streaming write, on Flink (checkpoints
// every second) and on Prism, in interleaved rounds; a run ends when every
// row is visible in the table (the job is then cancelled, as an operator
// stops a streaming job).
func BenchmarkFlinkBQWriteStream(b *testing.B) {
	benchBQ(b, "streaming write", int64(*bqStreamRows), true)
}

func benchBQ(b *testing.B, what string, n int64, streaming bool) {
	if c := flag.Lookup("test.count"); c != nil && c.Value.String() != "1" {
		b.Fatalf("flinkbench interleaves its runs itself: run it with -count=1 and -flinkbench.rounds=N (got -count=%s)", c.Value)
	}
	var runners []string
	for _, r := range []string{runnerFlink, runnerPrism} {
		if selected(r) {
			runners = append(runners, r)
		}
	}
	if len(runners) == 0 {
		b.Skip("-flinkbench.only selects neither flink nor prism")
	}
	if selected(runnerFlink) {
		flinktest.Start(b)
	}
	// Untimed: a small write on each runner, so that the job server's JVM
	// has loaded and compiled what the write uses.
	for _, r := range runners {
		runBQ(b, r, n/20, streaming)
	}
	printf("note: flinkbench: BigQuery %s: load average before the runs: %s\n", what, benchenv.LoadAvg())
	for round := 1; round <= *rounds; round++ {
		for _, r := range runners {
			b.Run(r, func(b *testing.B) {
				m := runBQ(b, r, n, streaming)
				fmt.Fprintf(os.Stderr, "flinkbench: BigQuery %s round %d/%d %s: %.1f s, %.3g k rows/s, %.0f cpu-ns/row, %.2f cpu-cores, %.2f other-cores\n",
					what, round, *rounds, r, m.seconds, float64(m.records)/m.seconds/1e3, m.cpu*1e9/float64(m.records), m.cpu/m.seconds, m.other)
				b.ReportMetric(float64(m.records)/m.seconds, "rows/s")
				b.ReportMetric(m.cpu*1e9/float64(m.records), "cpu-ns/row")
				b.ReportMetric(m.cpu/m.seconds, "cpu-cores")
				b.ReportMetric(m.other, "other-cores")
				b.ReportMetric(m.seconds, "sec/run")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
	printf("note: flinkbench: BigQuery %s: %d rows of ~30 bytes encoded; load average after the runs: %s\n", what, n, benchenv.LoadAvg())
	name := b.Name()
	printf("goal: %s/flink rows/s / %s/prism # %s, rows/s on Flink (job server, 2 workers) against Prism (job server, workers), same pipeline\n", name, name, what)
	printf("goal: %s/flink cpu-ns/row / %s/prism # %s, CPU per row on Flink against Prism (runner, workers, bqtest)\n", name, name, what)
}

// runBQ runs one write of n rows on runner into a bqtest server of its own
// (in this process), checks that the table holds every row once, and
// measures the run: its wall time (for the streaming write from the run's
// start until every row is visible) and the CPU of this process (the test,
// bqtest), of its children (the SDK workers, a Prism job server) and of the
// Flink job server's JVM.
func runBQ(b *testing.B, runner string, n int64, streaming bool) measurement {
	b.Helper()
	srv, err := bqtest.NewServer()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	const table = "p.d.bench"
	var p *beam.Pipeline
	if streaming {
		n = (n + 99) / 100 * 100
		p = bqStreamPipeline(srv, table, n)
	} else {
		p = bqBatchPipeline(srv, table, n)
	}
	visible := func() bool {
		rows, err := srv.TableRows(table)
		return err == nil && int64(len(rows)) >= n
	}
	var wt []workertest.Option
	wt = append(wt, workertest.WithTimeout(*runTimeout))
	var doneAt atomic.Int64 // unix nanos when every row was seen visible
	if streaming {
		wt = append(wt, workertest.WithWatch(func(ctx context.Context, l *workertest.Live) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
				if visible() {
					doneAt.Store(time.Now().UnixNano())
					l.Cancel()
					return
				}
			}
		}))
	}
	jsPID := 0
	if runner == runnerFlink {
		jsPID = flinkServerPID(b)
	}
	js0 := procCPU(jsPID)
	self0, children0 := rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
	busy0 := cpuBusyTicks()
	start := time.Now()
	var res *workertest.Result
	if runner == runnerFlink {
		opts := []flinktest.Option{flinktest.WithWorkertest(wt...)}
		if streaming {
			opts = append(opts, flinktest.WithCheckpointing(time.Second))
		}
		res, err = flinktest.Run(b, p, opts...)
	} else {
		res, err = workertest.Run(b, p, wt...)
	}
	busy1 := cpuBusyTicks()
	cpu := rusage(syscall.RUSAGE_SELF) - self0 + rusage(syscall.RUSAGE_CHILDREN) - children0 + procCPU(jsPID) - js0
	if err != nil {
		b.Fatalf("%s: %v\n%s", runner, err, tail(res.RunnerOutput, 32<<10))
	}
	seconds := res.Elapsed.Seconds()
	if streaming {
		// A job that ends by itself (Prism, once the sequence is done and
		// its last batches flushed) before the watch saw every row is
		// timed to its end.
		if at := doneAt.Load(); at != 0 {
			seconds = time.Unix(0, at).Sub(start).Seconds()
		}
	}
	rows, err := srv.TableRows(table)
	if err != nil {
		b.Fatal(err)
	}
	seen := make(map[int64]bool, n)
	for _, r := range rows {
		seen[r[0].(int64)] = true
	}
	if int64(len(rows)) != n || int64(len(seen)) != n {
		b.Fatalf("%s: %s holds %d rows, %d distinct, want %d once each", runner, table, len(rows), len(seen), n)
	}
	m := measurement{records: n, seconds: seconds, cpu: cpu}
	m.other = otherCores(busy0, busy1, cpu, seconds)
	return m
}

// flinkServerPID is the Flink job server's process id: the runner of any
// run on it (a small batch write, once per test binary).
func flinkServerPID(b *testing.B) int {
	ep := flinktest.Start(b).Endpoint
	if pid, ok := jsPIDs[ep]; ok {
		return pid
	}
	srv, err := bqtest.NewServer()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	res := flinktest.MustRun(b, bqBatchPipeline(srv, "p.d.pid", 16))
	jsPIDs[ep] = res.RunnerPID
	return res.RunnerPID
}
