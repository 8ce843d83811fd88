package flinkbench_test

// What the benchmarks share: the flags, the files (internal/benchdata,
// generated once under the bench directory), the Go pipelines and their
// counting, and the CPU accounting of a run.

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	beamavroio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/avroio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/internal/benchdata"
	"github.com/sdfio/sdfio/internal/flinktest"
	"github.com/sdfio/sdfio/internal/workertest"
)

var (
	benchDir     = flag.String("flinkbench.dir", defaultDir(), "directory of the generated files and of the Java program's build ($BENCH_DIR, else /tmp/sdfio-bench)")
	rounds       = flag.Int("flinkbench.rounds", 3, "rounds: each runs every measurement of a benchmark once, in turn (A B C A B C ...)")
	largeBytes   = flag.Int64("flinkbench.large_bytes", 256<<20, "least size of the large file")
	smallFiles   = flag.Int("flinkbench.small_files", 16, "number of small files")
	smallRecords = flag.Int64("flinkbench.small_records", benchdata.DefaultConfig.SmallRecords, "records per small file")
	only         = flag.String("flinkbench.only", "", "comma-separated measurements to run (sdfio, beamgo, java); empty: all")
	javaDir      = flag.String("flinkbench.java_dir", "", "the Java program's build: avro-count.jar and classpath.txt (default <flinkbench.dir>/java, where make bench builds it)")
	runTimeout   = flag.Duration("flinkbench.timeout", 30*time.Minute, "limit of one run")
)

func defaultDir() string {
	if d := os.Getenv("BENCH_DIR"); d != "" {
		return d
	}
	// Evaluated at package initialisation, before TestMain points TMPDIR
	// at the test binary's own temporary directory.
	return filepath.Join(os.TempDir(), "sdfio-bench")
}

// TestMain runs every sub-benchmark body once (-benchtime=1x, whatever the
// command line says): each is one run of a pipeline, and go test would
// otherwise run a body that took under a second again, b.N times.
func TestMain(m *testing.M) {
	flag.Parse()
	// The runner's INFO lines (a job's states, its artifacts) for every
	// run would bury the benchmark's progress on stderr.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := flag.Set("test.benchtime", "1x"); err != nil {
		fmt.Fprintln(os.Stderr, "flinkbench:", err)
		os.Exit(2)
	}
	flinktest.Main(m)
}

// beamRecord is benchdata.Record as Beam Go's avroio needs it (as
// internal/cmd/avrobench's): that reader decodes with goavro into generic
// values, marshals them to JSON and unmarshals the JSON into the type, so
// fields are matched by JSON names and the nullable string arrives as
// goavro's union map {"string": value}.
type beamRecord struct {
	ID      int64             `json:"id"`
	Score   float64           `json:"score"`
	Name    string            `json:"name"`
	Payload []byte            `json:"payload"`
	Note    map[string]string `json:"note"`
	Values  []int64           `json:"values"`
	Point   beamPoint         `json:"point"`
	Kind    string            `json:"kind"`
}

type beamPoint struct {
	X int64   `json:"x"`
	Y float64 `json:"y"`
}

func init() {
	avroio.RegisterType(reflect.TypeFor[benchdata.Record]())
	beam.RegisterType(reflect.TypeFor[beamRecord]())
	register.DoFn2x0[benchdata.Record, func(int64)](&bundleCountFn{})
	register.DoFn2x0[beamRecord, func(int64)](&beamBundleCountFn{})
	register.Emitter1[int64]()
	register.Combiner2[int64, int64](&sumFn{})
	register.DoFn2x0[context.Context, int64](&reportFn{})
}

// Counting. Prism lifts a combine into the read's fused stage (avrobench
// counts with beam.Combine alone); Beam's portable Flink runner (2.62.0)
// does not: it runs a Go combine as a GroupByKey, which Flink pre-groups
// into lists in its JVM, and the combine over the grouped values on one
// worker (seen in the job server's log: "[2]{avroio.Read, count} -> ...
// GroupCombine at count/CombinePerKey/CoGBK", then "GroupReduce"). Every
// record would leave the SDK worker for the JVM over the Fn API's data
// plane, and the benchmark would measure that, not the read. So the Go
// pipelines lift the combine by hand, as a runner would: a DoFn fused to
// the read adds up each bundle's records and emits the bundle's count in
// FinishBundle, and a combine (sumFn) adds the partial counts. Beam Java's
// Count.globally() on the native FlinkRunner is lifted by the runner
// itself (a partial reduce in the read's task).

// bundleCountFn counts the records of a bundle of sdfio's read.
type bundleCountFn struct{ n int64 }

func (fn *bundleCountFn) StartBundle(func(int64))                      { fn.n = 0 }
func (fn *bundleCountFn) ProcessElement(benchdata.Record, func(int64)) { fn.n++ }
func (fn *bundleCountFn) FinishBundle(emit func(int64)) {
	if fn.n > 0 {
		emit(fn.n)
	}
}

// beamBundleCountFn counts the records of a bundle of Beam Go's read.
type beamBundleCountFn struct{ n int64 }

func (fn *beamBundleCountFn) StartBundle(func(int64))                { fn.n = 0 }
func (fn *beamBundleCountFn) ProcessElement(beamRecord, func(int64)) { fn.n++ }
func (fn *beamBundleCountFn) FinishBundle(emit func(int64)) {
	if fn.n > 0 {
		emit(fn.n)
	}
}

// sumFn adds the partial counts.
type sumFn struct{}

func (sumFn) CreateAccumulator() int64           { return 0 }
func (sumFn) AddInput(a, n int64) int64          { return a + n }
func (sumFn) MergeAccumulators(a, b int64) int64 { return a + b }
func (sumFn) ExtractOutput(a int64) int64        { return a }

const countNamespace, countName = "flinkbench", "records"

var countCounter = beam.NewCounter(countNamespace, countName)

// reportFn hands the pipeline's count to the test process as a counter.
type reportFn struct{}

func (reportFn) ProcessElement(ctx context.Context, n int64) { countCounter.Inc(ctx, n) }

// Implementations of the read.
const (
	implSdfio  = "sdfio"
	implBeamGo = "beamgo"
	implJava   = "java"
)

// countPipeline reads pattern with impl (sdfio's avroio.Read with its
// defaults, or Beam Go's avroio.Read) and counts the records.
func countPipeline(impl, pattern string) *beam.Pipeline {
	p, s := beam.NewPipelineWithRoot()
	var partial beam.PCollection
	switch impl {
	case implSdfio:
		recs := avroio.Read(s, pattern, reflect.TypeFor[benchdata.Record]())
		partial = beam.ParDo(s.Scope("count"), &bundleCountFn{}, recs)
	case implBeamGo:
		recs := beamavroio.Read(s, pattern, reflect.TypeFor[beamRecord]())
		partial = beam.ParDo(s.Scope("count"), &beamBundleCountFn{}, recs)
	default:
		panic("flinkbench: no Go pipeline for " + impl)
	}
	beam.ParDo0(s, &reportFn{}, beam.Combine(s.Scope("sum"), &sumFn{}, partial))
	return p
}

// files are the benchmark's inputs.
func files(b *testing.B) *benchdata.Set {
	b.Helper()
	cfg := benchdata.Config{LargeBytes: *largeBytes, SmallFiles: *smallFiles, SmallRecords: *smallRecords}
	start := time.Now()
	set, err := benchdata.Ensure(*benchDir, cfg, os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		b.Logf("files ready in %v", d.Round(time.Second))
	}
	return set
}

// selected says whether impl is to be measured (-flinkbench.only).
func selected(impl string) bool {
	if *only == "" {
		return true
	}
	for _, s := range strings.Split(*only, ",") {
		if strings.TrimSpace(s) == impl {
			return true
		}
	}
	return false
}

// measurement is one run of one implementation.
type measurement struct {
	records int64
	seconds float64 // the run's wall time
	cpu     float64 // CPU seconds of the processes that ran it
	// other is the CPU the rest of the machine used meanwhile, in cores.
	other float64
}

func (m measurement) report(b *testing.B) {
	b.ReportMetric(float64(m.records)/m.seconds, "records/s")
	if m.cpu > 0 {
		b.ReportMetric(float64(m.records)/m.cpu, "records/cpu-s")
		b.ReportMetric(m.cpu/m.seconds, "cpu-cores")
	}
	b.ReportMetric(m.other, "other-cores")
	b.ReportMetric(m.seconds, "sec/run")
	// No ns/op: it would be the body's time, which for java includes the
	// JVM's start and its warm-up run; sec/run is the run's.
	b.ReportMetric(0, "ns/op")
}

// runGo runs the Go pipeline of impl on the job server and measures it:
// wall time is the run's (translation, submission, the workers' start, the
// job, its metrics), CPU that of the job server's JVM, of the SDK worker
// processes (children of this process, reaped before Run returns) and of
// this process.
func runGo(b *testing.B, impl, pattern string, want int64) measurement {
	b.Helper()
	p := countPipeline(impl, pattern)
	jsPID := jobServerPID(b)
	js0 := procCPU(jsPID)
	self0, children0 := rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
	busy0 := cpuBusyTicks()
	res := flinktest.MustRun(b, p, flinktest.WithWorkertest(workertest.WithTimeout(*runTimeout)))
	busy1 := cpuBusyTicks()
	cpu := rusage(syscall.RUSAGE_SELF) - self0 + rusage(syscall.RUSAGE_CHILDREN) - children0 + procCPU(jsPID) - js0
	n := counter(res.Metrics(), countNamespace, countName)
	if n != want {
		b.Fatalf("%s counted %d records of %s, want %d", impl, n, pattern, want)
	}
	m := measurement{records: n, seconds: res.Elapsed.Seconds(), cpu: cpu}
	m.other = otherCores(busy0, busy1, cpu, m.seconds)
	return m
}

var jsPIDs = map[string]int{}

// jobServerPID is the Flink job server's process id, learnt from the
// result of the warm-up run (runWarmup) of this test binary.
func jobServerPID(b *testing.B) int {
	pid, ok := jsPIDs[flinktest.Start(b).Endpoint]
	if !ok {
		b.Fatal("flinkbench: no warm-up run yet: the job server's process is unknown")
	}
	return pid
}

// runWarmup runs both Go pipelines on one small file, untimed: the job
// server's JVM then has loaded and compiled what the runs use before the
// first measured one, as the Java program's warm-up run does for its JVM.
func runWarmup(b *testing.B, file string, want int64) {
	b.Helper()
	for _, impl := range []string{implSdfio, implBeamGo} {
		if !selected(impl) {
			continue
		}
		res := flinktest.MustRun(b, countPipeline(impl, file))
		if n := counter(res.Metrics(), countNamespace, countName); n != want {
			b.Fatalf("warm-up: %s counted %d records of %s, want %d", impl, n, file, want)
		}
		jsPIDs[flinktest.Start(b).Endpoint] = res.RunnerPID
	}
}

func counter(res metrics.Results, ns, name string) int64 {
	var sum int64
	for _, c := range res.Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == ns && r.Name() == name
	}).Counters() {
		sum += c.Result()
	}
	return sum
}

func rusage(who int) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// clockTicks is USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100

// procCPU is the CPU seconds (user and system) of a running process, or 0.
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	bs, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after its closing parenthesis (state is field 3).
	s := string(bs)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return float64(utime+stime) / clockTicks
}

// cpuBusyTicks is the machine's non-idle CPU time from /proc/stat, or -1.
func cpuBusyTicks() int64 {
	bs, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(bs), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return -1
	}
	var busy int64
	for i, s := range f[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return -1
		}
		// user nice system idle iowait irq softirq steal (guest is in user)
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += v
	}
	return busy
}

// otherCores is the CPU the rest of the machine used during a run, in
// cores: the noise of a measurement.
func otherCores(busy0, busy1 int64, cpu, seconds float64) float64 {
	if busy0 < 0 || busy1 < busy0 || seconds <= 0 {
		return 0
	}
	return max(0, (float64(busy1-busy0)/clockTicks-cpu)/seconds)
}
