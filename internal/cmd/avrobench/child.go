package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamavroio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/avroio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/hamba/avro/v2/ocf"
	"github.com/linkedin/goavro/v2"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/benchdata"
)

// The child modes: each measures one thing in a process of its own, so that
// the parent can read its peak RSS and CPU time from its rusage.
const (
	modeSdfio      = "sdfio"         // avroio.Read on Prism, counting with a combine
	modeBeamAvroio = "beam_avroio"   // Beam Go's avroio.Read on Prism, counting with a combine
	modeCeiling    = "prism_ceiling" // Impulse -> ParDo emitting N int64 -> combine count
	// Impulse -> ParDo emitting N benchdata.Records (a ring of 1024 built
	// before) -> combine count: the ceiling for the type the read emits.
	modeCeilingRecord  = "prism_ceiling_record"
	modeDecodeOurs     = "decode_sdfio"  // avroio/container Reader[benchdata.Record], one goroutine
	modeDecodeHamba    = "decode_hamba"  // hamba/avro's ocf.Decoder into benchdata.Record
	modeDecodeGoavro   = "decode_goavro" // goavro's OCF reader, generic values
	resultPrefix       = "avrobench-result: "
	countNamespace     = "avrobench"
	countName          = "count"
	childLogLevelLimit = slog.LevelWarn
)

// beamRecord is benchdata.Record as Beam Go's avroio needs it: that reader
// decodes with goavro into generic values, marshals them to JSON and
// unmarshals the JSON into the type, so fields are matched by JSON names and
// the nullable string arrives as goavro's union map {"string": value}.
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
	beam.RegisterType(reflect.TypeFor[benchdata.Record]())
	beam.RegisterType(reflect.TypeFor[beamRecord]())
	register.Combiner2[int64, benchdata.Record](&countRecordsFn{})
	register.Combiner2[int64, beamRecord](&countBeamRecordsFn{})
	register.Combiner2[int64, int64](&countInt64Fn{})
	register.DoFn2x0[[]byte, func(int64)](&emitNFn{})
	register.DoFn2x0[[]byte, func(benchdata.Record)](&emitNRecordsFn{})
	register.Emitter1[benchdata.Record]()
	register.Emitter1[int64]()
	register.DoFn2x0[context.Context, int64](&reportCountFn{})
}

// Counting is a combine in every pipeline: Prism lifts it, so records are
// counted in the read's own fused stage and never shuffled
// (stats.CountElms goes through a Flatten and shuffles every record).

type countRecordsFn struct{}

func (countRecordsFn) CreateAccumulator() int64                   { return 0 }
func (countRecordsFn) AddInput(n int64, _ benchdata.Record) int64 { return n + 1 }
func (countRecordsFn) MergeAccumulators(a, b int64) int64         { return a + b }
func (countRecordsFn) ExtractOutput(n int64) int64                { return n }
func (countBeamRecordsFn) CreateAccumulator() int64               { return 0 }
func (countBeamRecordsFn) AddInput(n int64, _ beamRecord) int64   { return n + 1 }
func (countBeamRecordsFn) MergeAccumulators(a, b int64) int64     { return a + b }
func (countBeamRecordsFn) ExtractOutput(n int64) int64            { return n }
func (countInt64Fn) CreateAccumulator() int64                     { return 0 }
func (countInt64Fn) AddInput(n int64, _ int64) int64              { return n + 1 }
func (countInt64Fn) MergeAccumulators(a, b int64) int64           { return a + b }
func (countInt64Fn) ExtractOutput(n int64) int64                  { return n }

type countBeamRecordsFn struct{}
type countInt64Fn struct{}

// emitNFn emits 0..N-1: the source of Prism's ceiling pipeline.
type emitNFn struct{ N int64 }

func (fn *emitNFn) ProcessElement(_ []byte, emit func(int64)) {
	for i := int64(0); i < fn.N; i++ {
		emit(i)
	}
}

// emitNRecordsFn emits N records, taken in turn from a ring of 1024 made
// before the first: Beam's per-element work for the record type the read
// emits, with no decoding.
type emitNRecordsFn struct{ N int64 }

func (fn *emitNRecordsFn) ProcessElement(_ []byte, emit func(benchdata.Record)) {
	ring := make([]benchdata.Record, 1024)
	for i := range ring {
		ring[i] = benchdata.Make(int64(i))
	}
	for i := int64(0); i < fn.N; i++ {
		emit(ring[i&1023])
	}
}

var countCounter = beam.NewCounter(countNamespace, countName)

// reportCountFn hands the pipeline's count to the launcher as a counter.
type reportCountFn struct{}

func (reportCountFn) ProcessElement(ctx context.Context, n int64) { countCounter.Inc(ctx, n) }

// childResult is what a child prints for the parent.
type childResult struct {
	Records int64   `json:"records"`
	Seconds float64 `json:"seconds"`
	// PeakRSSKiB is the process's VmHWM: its own peak resident set. (The
	// ru_maxrss that wait4 reports for a child also counts the parent's
	// peak, because Go starts children with vfork and Linux carries the
	// hiwater mark of the mm that exec replaces into ru_maxrss.)
	PeakRSSKiB int64            `json:"peak_rss_kib"`
	Counters   map[string]int64 `json:"counters,omitempty"`
}

// runChild runs one measurement and prints its result line on stdout.
func runChild(ctx context.Context, mode, input string, n, expect int64) error {
	// Prism logs every job at INFO; keep the child's stderr for problems.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: childLogLevelLimit})))
	var res childResult
	var err error
	stopProfile, err := startProfile(*childProf)
	if err != nil {
		return err
	}
	start := time.Now()
	switch mode {
	case modeSdfio, modeBeamAvroio, modeCeiling, modeCeilingRecord:
		res, err = runPipeline(ctx, mode, input, n)
	case modeDecodeOurs:
		res.Records, err = decodeOurs(input)
	case modeDecodeHamba:
		res.Records, err = decodeHamba(input)
	case modeDecodeGoavro:
		res.Records, err = decodeGoavro(input)
	case modeWriteSdfio, modeWriteSdfioOne, modeWriteSdfioGeneric, modeWriteBeam:
		res, err = runWrite(ctx, mode, input, n)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	res.Seconds = time.Since(start).Seconds()
	if perr := stopProfile(); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("%s on %s: %w", mode, input, err)
	}
	if expect >= 0 && res.Records != expect {
		return fmt.Errorf("%s on %s: counted %d records, want %d", mode, input, res.Records, expect)
	}
	res.PeakRSSKiB = peakRSSKiB()
	b, _ := json.Marshal(res)
	fmt.Printf("%s%s\n", resultPrefix, b)
	return nil
}

func runPipeline(ctx context.Context, mode, input string, n int64) (childResult, error) {
	p, s := beam.NewPipelineWithRoot()
	var count beam.PCollection
	switch mode {
	case modeSdfio:
		// avroio.Read with its defaults: initial bundles of 64 MiB, split
		// further by Prism while they run.
		recs := avroio.Read(s, input, reflect.TypeFor[benchdata.Record]())
		count = beam.Combine(s.Scope("count"), &countRecordsFn{}, recs)
	case modeBeamAvroio:
		recs := beamavroio.Read(s, input, reflect.TypeFor[beamRecord]())
		count = beam.Combine(s.Scope("count"), &countBeamRecordsFn{}, recs)
	case modeCeiling:
		ints := beam.ParDo(s, &emitNFn{N: n}, beam.Impulse(s))
		count = beam.Combine(s.Scope("count"), &countInt64Fn{}, ints)
	case modeCeilingRecord:
		recs := beam.ParDo(s, &emitNRecordsFn{N: n}, beam.Impulse(s))
		count = beam.Combine(s.Scope("count"), &countRecordsFn{}, recs)
	}
	beam.ParDo0(s, &reportCountFn{}, count)
	pr, err := prism.Execute(ctx, p)
	if err != nil {
		return childResult{}, err
	}
	res := childResult{Counters: map[string]int64{}}
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		if c.Namespace() == countNamespace && c.Name() == countName {
			res.Records += c.Result()
			continue
		}
		res.Counters[c.Namespace()+"/"+c.Name()] += c.Result()
	}
	return res, nil
}

// checkLast makes sure a decoder really decoded: the last record must be
// the generator's.
func checkLast(path string, n int64, last benchdata.Record) error {
	if n == 0 {
		return fmt.Errorf("%s: no records", path)
	}
	if want := benchdata.Make(n - 1); !reflect.DeepEqual(last, want) {
		return fmt.Errorf("%s: record %d is %+v, want %+v", path, n-1, last, want)
	}
	return nil
}

func decodeOurs(path string) (int64, error) {
	r, err := container.OpenReader[benchdata.Record](path, container.FileOpener(path), 0, container.Options{})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var n int64
	var last benchdata.Record
	for {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
		last = rec
		n++
	}
	return n, checkLast(path, n, last)
}

func decodeHamba(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	d, err := ocf.NewDecoder(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return 0, err
	}
	var n int64
	var last benchdata.Record
	for d.HasNext() {
		var rec benchdata.Record
		if err := d.Decode(&rec); err != nil {
			return n, err
		}
		last = rec
		n++
	}
	if err := d.Error(); err != nil {
		return n, err
	}
	return n, checkLast(path, n, last)
}

func decodeGoavro(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := goavro.NewOCFReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return 0, err
	}
	var n int64
	var last any
	for r.Scan() {
		v, err := r.Read()
		if err != nil {
			return n, err
		}
		last = v
		n++
	}
	if err := r.Err(); err != nil {
		return n, err
	}
	if m, ok := last.(map[string]any); !ok || m["id"] != (n-1)*7919 {
		return n, fmt.Errorf("%s: last record %v is not record %d", path, last, n-1)
	}
	return n, nil
}

// peakRSSKiB is VmHWM from /proc/self/status, or 0.
func peakRSSKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// startProfile starts the CPU profile of prefix+".cpu" (nothing without a
// prefix); the function it returns stops it and writes the allocation
// profile (every allocation since the start, sampled) to prefix+".alloc".
func startProfile(prefix string) (func() error, error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(prefix + ".cpu")
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return err
		}
		a, err := os.Create(prefix + ".alloc")
		if err != nil {
			return err
		}
		if err := pprof.Lookup("allocs").WriteTo(a, 0); err != nil {
			a.Close()
			return err
		}
		return a.Close()
	}, nil
}
