// Command bqbench measures bigqueryio.Read on Prism against two anchors on
// the same bqtest table, in benchmark format for internal/cmd/benchreport
// (make bench):
//
//   - BenchmarkBQRead/sdfio: bigqueryio.Read of the table over --streams
//     streams (Avro) on Prism in-process, into a struct, every row reaching
//     a DoFn that counts it (a counter per bundle);
//   - BenchmarkBQRead/official_client: the official client's own Storage API
//     reader (bigquery.Client with EnableStorageReadClient, Table.Read),
//     iterating the rows into the same struct;
//   - BenchmarkBQRead/raw_1core: a raw loop on one core (GOMAXPROCS 1): one
//     stream, ReadRows, each response's Avro rows decoded into a struct with
//     hamba/avro;
//   - BenchmarkBQRead/raw_2core: the same loop on two cores (GOMAXPROCS 2),
//     a session of two streams, each read by its own goroutine: what two
//     cores of this machine give a reader with no Beam and nothing but
//     decoding per row, beside the server;
//   - BenchmarkBQRead/prism_floor: no connector, no server: Beam Go's own
//     per-element work on Prism for the same number of rows, in the same
//     graph (Impulse, --streams elements, a Reshuffle, a DoFn emitting the
//     rows, the same counting sink), the rows pre-built (a ring of 1024
//     Events boxed once, emitted as bigqueryio.Read emits its rows, without a
//     copy). Prism runs the read stage's elements as one bundle, on one
//     goroutine, so no reader on Prism emits faster than this.
//
// The server runs in a child process (this binary with --serve), with
// bqtest.WithResponseCache, filled by one read before the measured runs, so
// that it spends as little as it can of the two cores the reader shares with
// it (BigQuery's CPU is not the worker's), and so that its CPU is measured
// apart: server-cpu-share is the server's share of all the
// CPU the run used (server and reader), cpu-cores the reader's CPU seconds
// per second of wall time, reader-cpu-ns/row and server-cpu-ns/row the CPU
// each side spent per row (for sdfio the reader's includes Prism's, which
// runs in the same process), rows/cpu-s the rows per second of the reader's
// CPU (per core: the raw loop's is its rows/s on its one core) and
// total-cpu-ns/row the reader's and the server's CPU per row together.
// Rates are rows per second of wall time. On a
// machine shared with other work the rates follow the CPU the run gets; the
// CPU per row does much less, and the note gives the load average.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/hamba/avro/v2"
	"google.golang.org/api/iterator"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/internal/benchenv"
)

var (
	rows    = flag.Int("rows", 2_000_000, "rows of the table")
	count   = flag.Int("count", 3, "runs per benchmark")
	streams = flag.Int("streams", 4, "streams of bigqueryio.Read and of the official client's session")
	serve   = flag.Bool("serve", false, "internal: serve the table and print its addresses")
	cpuProf = flag.String("cpuprofile", "", "write a CPU profile from the first to the last run of the -profile case to this file (it holds the other cases' runs in between too: use with -only)")
	memProf = flag.String("memprofile", "", "write the allocation profile after the last run of the -profile case to this file (it counts every allocation of the process: use with -only)")
	profOf  = flag.String("profile", "sdfio", "the case that -cpuprofile and -memprofile profile")
	only    = flag.String("only", "", "run only the case of this name")
)

const table = "bench.ds.events"

// Event is a row of the table.
type Event struct {
	ID    int64               `bigquery:"id" avro:"id"`
	Name  bigquery.NullString `bigquery:"name" avro:"-"`
	Score float64             `bigquery:"score" avro:"score"`
	Kind  string              `bigquery:"kind" avro:"kind"`
}

// rawEvent is the struct hamba decodes into in the raw loop.
type rawEvent struct {
	ID    int64    `avro:"id"`
	Name  *string  `avro:"name"`
	Score *float64 `avro:"score"`
	Kind  string   `avro:"kind"`
}

// countFn counts the rows it sees and adds them to a counter once per
// bundle: the cheapest sink that still makes every row reach a DoFn. It has
// an output it never emits to, for the reason internal/runnerfix's
// GiveStageAnOutput gives.
type countFn struct{ n int64 }

var rowsSeen = beam.NewCounter("bqbench", "rows_seen")

func (fn *countFn) ProcessElement(Event, func(int64)) { fn.n++ }

func (fn *countFn) FinishBundle(ctx context.Context, _ func(int64)) {
	rowsSeen.Inc(ctx, fn.n)
	fn.n = 0
}

func discard(int64) {}

// floorStreamsFn emits the rows of each of Streams elements, as the read
// session emits its streams.
type floorStreamsFn struct{ Rows, Streams int64 }

func (fn *floorStreamsFn) ProcessElement(_ []byte, emit func(int64)) {
	for i := int64(0); i < fn.Streams; i++ {
		emit(fn.Rows*(i+1)/fn.Streams - fn.Rows*i/fn.Streams)
	}
}

// floorRowsFn emits n rows built beforehand: a ring of Events boxed once in
// Setup, so that an emit neither copies nor allocates, as bigqueryio.Read's
// interface values point into the []T its response was decoded into.
type floorRowsFn struct{ ring []any }

func (fn *floorRowsFn) Setup() {
	fn.ring = make([]any, 1024)
	for i := range fn.ring {
		v := rowOf(i)
		e := Event{ID: v[0].(int64), Score: v[2].(float64), Kind: v[3].(string)}
		if v[1] != nil {
			e.Name = bigquery.NullString{StringVal: v[1].(string), Valid: true}
		}
		fn.ring[i] = e
	}
}

func (fn *floorRowsFn) ProcessElement(n int64, emit func(beam.X)) {
	for i := int64(0); i < n; i++ {
		emit(fn.ring[i&1023])
	}
}

func init() {
	register.Function1x0(discard)
	register.DoFn2x0[Event, func(int64)](&countFn{})
	register.DoFn2x0[[]byte, func(int64)](&floorStreamsFn{})
	register.DoFn2x0[int64, func(beam.X)](&floorRowsFn{})
	register.Emitter1[int64]()
	register.Emitter1[beam.X]()
	beam.RegisterType(reflect.TypeOf((*Event)(nil)).Elem())
}

// rowOf is row i of the table.
func rowOf(i int) []bigquery.Value {
	var name bigquery.Value = "user-" + strconv.Itoa(i%5000)
	if i%10 == 0 {
		name = nil
	}
	return []bigquery.Value{int64(i), name, float64(i%1000) / 8, kinds[i%3]}
}

var kinds = []string{"click", "view", "buy"}

func main() {
	flag.Parse()
	beam.Init()
	if *serve {
		if err := serveTable(*rows); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bqbench:", err)
		os.Exit(1)
	}
}

func serveTable(n int) error {
	srv, err := bqtest.NewServer(bqtest.WithBlockRows(1024), bqtest.WithResponseRows(1024), bqtest.WithResponseCache())
	if err != nil {
		return err
	}
	defer srv.Close()
	data := make([][]bigquery.Value, n)
	for i := range data {
		data[i] = rowOf(i)
	}
	err = srv.AddTable(table, bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
		{Name: "kind", Type: bigquery.StringFieldType, Required: true},
	}, Rows: data})
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %s %s\n", srv.Addr(), srv.RESTEndpoint())
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
	return nil
}

// cpuOf is the user+system CPU seconds of a process, from /proc.
func cpuOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100 // USER_HZ
}

func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func run() error {
	child := exec.Command(os.Args[0], "--serve", "--rows="+strconv.Itoa(*rows))
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	if err := child.Start(); err != nil {
		return err
	}
	defer func() { stdin.Close(); child.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "ADDR" {
		return fmt.Errorf("server said %q", line)
	}
	grpcAddr, restURL := f[1], f[2]

	fmt.Printf("goos: %s\ngoarch: %s\npkg: github.com/sdfio/sdfio/internal/cmd/bqbench\n", runtime.GOOS, runtime.GOARCH)
	fmt.Printf("note: bqbench: bqtest table of %d rows (id INTEGER, name STRING nullable, score FLOAT, kind STRING), Avro, responses of 1024 rows; the server in its own process on the same %d-core machine, its Avro encoded once and cached (bqtest.WithResponseCache), so server-cpu-share is the share of the run's CPU the server used; prism_floor is Beam's per-element work alone on Prism (the rows pre-built, no server, same graph and sink); %d runs each, the cases alternating, medians; load average before the runs %s\n", *rows, runtime.NumCPU(), *count, benchenv.LoadAvg())
	fmt.Println("goal: BenchmarkBQRead/sdfio rows/s >= 2.5x BenchmarkBQRead/official_client # issue 38: at least 2.5x the official client's own Storage API reader")
	fmt.Println("goal: BenchmarkBQRead/sdfio rows/s >= 1.8x BenchmarkBQRead/raw_1core # close to 2x the raw single-core ReadRows loop")
	fmt.Println("goal: BenchmarkBQRead/prism_floor rows/cpu-s / BenchmarkBQRead/raw_1core # Beam's own per-element floor on Prism (pre-built rows, same graph and sink), rows per CPU-second against the raw loop's: Prism emits a stage's rows on one goroutine, so no Read on Prism reaches 2x the one-core loop unless this is well above 2x")
	fmt.Println("goal: BenchmarkBQRead/prism_floor rows/s / BenchmarkBQRead/raw_1core # the floor's rate against the raw loop's (each follows the CPU the load leaves it)")
	fmt.Println("goal: BenchmarkBQRead/raw_2core rows/s / BenchmarkBQRead/raw_1core # what a second core gives the raw loop, with the server on the same two cores")
	fmt.Println("goal: BenchmarkBQRead/sdfio rows/s / BenchmarkBQRead/raw_2core # sdfio on Prism against the raw loop on the same two cores")
	fmt.Println("goal: BenchmarkBQRead/sdfio rows/s >= 0.85x BenchmarkBQRead/prism_floor # issue 39: sdfio against that floor")
	fmt.Println("goal: BenchmarkBQRead/sdfio rows/cpu-s / BenchmarkBQRead/raw_1core # per core: rows per second of reader CPU (Prism included) against the raw loop's")
	fmt.Println("goal: BenchmarkBQRead/prism_floor reader-cpu-ns/row / BenchmarkBQRead/sdfio # the share of sdfio's reader CPU per row that is Beam's floor")
	fmt.Println("goal: BenchmarkBQRead/sdfio reader-cpu-ns/row / BenchmarkBQRead/raw_1core # reader CPU per row (Prism included) against the raw loop's")
	fmt.Println("goal: BenchmarkBQRead/sdfio reader-cpu-ns/row / BenchmarkBQRead/official_client # reader CPU per row against the official client's")
	cases := []struct {
		name string
		fn   func(ctx context.Context) (int64, error)
	}{
		{"sdfio", func(ctx context.Context) (int64, error) { return readSdfio(ctx, grpcAddr) }},
		{"official_client", func(ctx context.Context) (int64, error) { return readOfficial(ctx, grpcAddr, restURL) }},
		{"raw_1core", func(ctx context.Context) (int64, error) { return readRaw(ctx, grpcAddr) }},
		{"raw_2core", func(ctx context.Context) (int64, error) { return readRawOn(ctx, grpcAddr, 2) }},
		{"prism_floor", readFloor},
	}
	ctx := context.Background()
	// One read before the measured runs fills the server's response cache
	// (bqtest.WithResponseCache): every case then reads the same bytes.
	if _, err := readRaw(ctx, grpcAddr); err != nil {
		return fmt.Errorf("warming the server: %w", err)
	}
	for i := 0; i < *count; i++ {
		for _, c := range cases {
			if *only != "" && c.name != *only {
				continue
			}
			runtime.GC()
			prof := c.name == *profOf && *cpuProf != ""
			if prof && i == 0 {
				f, err := os.Create(*cpuProf)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
			}
			s0, c0, t0 := cpuOf(child.Process.Pid), selfCPU(), time.Now()
			n, err := c.fn(ctx)
			wall := time.Since(t0)
			s1, c1 := cpuOf(child.Process.Pid), selfCPU()
			if prof && i == *count-1 {
				pprof.StopCPUProfile()
			}
			if c.name == *profOf && *memProf != "" && i == *count-1 {
				if err := writeHeapProfile(*memProf); err != nil {
					return err
				}
			}
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if n != int64(*rows) {
				return fmt.Errorf("%s read %d rows, want %d", c.name, n, *rows)
			}
			srvCPU, ownCPU := s1-s0, c1-c0
			share := 0.0
			if srvCPU+ownCPU > 0 {
				share = srvCPU / (srvCPU + ownCPU)
			}
			perCPU := 0.0
			if ownCPU > 0 {
				perCPU = float64(n) / ownCPU
			}
			fmt.Printf("BenchmarkBQRead/%s\t1\t%d ns/op\t%.0f rows/s\t%.0f rows/cpu-s\t%.3f server-cpu-share\t%.2f cpu-cores\t%.0f reader-cpu-ns/row\t%.0f server-cpu-ns/row\t%.0f total-cpu-ns/row\n",
				c.name, wall.Nanoseconds(), float64(n)/wall.Seconds(), perCPU, share, ownCPU/wall.Seconds(), ownCPU*1e9/float64(n), srvCPU*1e9/float64(n), (ownCPU+srvCPU)*1e9/float64(n))
		}
	}
	fmt.Printf("note: bqbench: load average after the runs %s\n", benchenv.LoadAvg())
	return nil
}

// writeHeapProfile writes the allocation profile of the process to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC() // the profile is as of the last GC
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

func readSdfio(ctx context.Context, addr string) (int64, error) {
	p, s := beam.NewPipelineWithRoot()
	col := bigqueryio.Read(s, table, reflect.TypeOf(Event{}), bigqueryio.WithEndpoint(addr), bigqueryio.WithInsecure(), bigqueryio.WithMaxStreams(*streams))
	return countRows(ctx, p, s, col)
}

// readFloor is the prism_floor case: the same graph as readSdfio's with
// the rows pre-built, no server, no connector.
func readFloor(ctx context.Context) (int64, error) {
	p, s := beam.NewPipelineWithRoot()
	elms := beam.Reshuffle(s, beam.ParDo(s, &floorStreamsFn{Rows: int64(*rows), Streams: int64(*streams)}, beam.Impulse(s)))
	col := beam.ParDo(s, &floorRowsFn{}, elms, beam.TypeDefinition{Var: beam.XType, T: reflect.TypeOf(Event{})})
	return countRows(ctx, p, s, col)
}

// countRows runs p on Prism with col's rows reaching countFn, and returns the
// rows it saw.
func countRows(ctx context.Context, p *beam.Pipeline, s beam.Scope, col beam.PCollection) (int64, error) {
	beam.ParDo0(s, discard, beam.Reshuffle(s, beam.ParDo(s, &countFn{}, col)))
	pr, err := prism.Execute(ctx, p)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if c.Namespace() == "bqbench" && c.Name() == "rows_seen" {
			n += c.Result()
		}
	}
	return n, nil
}

func readOfficial(ctx context.Context, addr, restURL string) (int64, error) {
	c, err := bigquery.NewClient(ctx, "bench", bqtest.RESTOptions(restURL)...)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if err := c.EnableStorageReadClient(ctx, bqtest.Endpoint(addr)...); err != nil {
		return 0, err
	}
	it := c.DatasetInProject("bench", "ds").Table("events").Read(ctx)
	var n int64
	for {
		var e Event
		err := it.Next(&e)
		if errors.Is(err, iterator.Done) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

func readRaw(ctx context.Context, addr string) (int64, error) { return readRawOn(ctx, addr, 1) }

// readRawOn is the raw loop on procs cores (GOMAXPROCS procs): a session of
// procs streams, each read by its own goroutine.
func readRawOn(ctx context.Context, addr string, procs int) (int64, error) {
	old := runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(old)
	c, err := bqstorage.NewBigQueryReadClient(ctx, bqtest.Endpoint(addr)...)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	s, err := c.CreateReadSession(ctx, &storagepb.CreateReadSessionRequest{Parent: "projects/bench", MaxStreamCount: int32(procs),
		ReadSession: &storagepb.ReadSession{Table: "projects/bench/datasets/ds/tables/events", DataFormat: storagepb.DataFormat_AVRO}})
	if err != nil {
		return 0, err
	}
	schema, err := avro.Parse(s.GetAvroSchema().GetSchema())
	if err != nil {
		return 0, err
	}
	type result struct {
		n   int64
		err error
	}
	res := make(chan result, len(s.GetStreams()))
	for _, st := range s.GetStreams() {
		go func() {
			n, err := readRawStream(ctx, c, st.GetName(), schema)
			res <- result{n, err}
		}()
	}
	var n int64
	var errs []error
	for range s.GetStreams() {
		r := <-res
		n += r.n
		errs = append(errs, r.err)
	}
	return n, errors.Join(errs...)
}

// readRawStream reads one stream with ReadRows, decoding each response's
// rows into rawEvent with hamba/avro.
func readRawStream(ctx context.Context, c *bqstorage.BigQueryReadClient, stream string, schema avro.Schema) (int64, error) {
	rc, err := c.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: stream})
	if err != nil {
		return 0, err
	}
	var n int64
	r := avro.NewReader(nil, 0)
	for {
		resp, err := rc.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		r.Reset(resp.GetAvroRows().GetSerializedBinaryRows())
		for i := int64(0); i < resp.GetRowCount(); i++ {
			var e rawEvent
			r.ReadVal(schema, &e)
			if r.Error != nil {
				return n, r.Error
			}
			n++
		}
	}
}
