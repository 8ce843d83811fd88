package offsetsource_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/internal/testtmp"
	"github.com/sdfio/sdfio/internal/workertest"
	"github.com/sdfio/sdfio/offsetsource"
)

func init() {
	register.Combiner2[int64, string](&countFn{})
	register.DoFn3x0[context.Context, string, func(string)](&slowFn{})
}

func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}

// countFn counts strings: a combine, so that the count does not go through a
// shuffle of every record.
type countFn struct{}

func (countFn) CreateAccumulator() int64           { return 0 }
func (countFn) AddInput(n int64, _ string) int64   { return n + 1 }
func (countFn) MergeAccumulators(a, b int64) int64 { return a + b }
func (countFn) ExtractOutput(n int64) int64        { return n }
func countRecords(s beam.Scope, col beam.PCollection) beam.PCollection {
	return beam.Combine(s.Scope("count"), &countFn{}, col)
}

// slowFn passes records on after sleeping DelayMs each: per-record work
// slower than Prism's progress poll, fused after the read.
type slowFn struct{ DelayMs int64 }

func (fn *slowFn) ProcessElement(ctx context.Context, rec string, emit func(string)) {
	time.Sleep(time.Duration(fn.DelayMs) * time.Millisecond)
	emit(rec)
}

// counter sums the read's counter name over all steps.
func counter(t *testing.T, res beam.PipelineResult, name string) int64 {
	t.Helper()
	q := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == offsetsource.Namespace && r.Name() == name
	})
	cs := q.Counters()
	if len(cs) == 0 {
		t.Fatalf("no counter %s/%s in the pipeline's metrics", offsetsource.Namespace, name)
	}
	var sum int64
	for _, c := range cs {
		sum += c.Result()
	}
	return sum
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func run(t *testing.T, p *beam.Pipeline) beam.PipelineResult {
	t.Helper()
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	return res
}

// TestPipelineFixedManyBundles reads a file cut into 40 initial bundles.
func TestPipelineFixedManyBundles(t *testing.T) {
	src, want := writeFixedFile(t, t.TempDir(), 2000)
	p, s := beam.NewPipelineWithRoot()
	got := offsetsource.Read(s, src, offsetsource.WithDesiredBundleSize(50*fixedWidth))
	passert.Equals(s, got, anySlice(want)...)
	passert.Equals(s, countRecords(s, got), int64(len(want)))
	res := run(t, p)
	if n := counter(t, res, "records"); n != int64(len(want)) {
		t.Errorf("records metric = %d, want %d", n, len(want))
	}
	if n, size := counter(t, res, "bytes_read"), fileSize(t, src.Path); n != size {
		t.Errorf("bytes_read metric = %d, want the file's %d bytes", n, size)
	}
}

// TestPipelineBlocksManyBundles reads a block file whose initial bundles cut
// through blocks.
func TestPipelineBlocksManyBundles(t *testing.T) {
	src, want, _ := writeBlockFile(t, t.TempDir(), 300, []int{3, 1, 0, 7, 2, 5})
	p, s := beam.NewPipelineWithRoot()
	got := offsetsource.Read(s, src, offsetsource.WithDesiredBundleSize(500))
	passert.Equals(s, got, anySlice(want)...)
	passert.Equals(s, countRecords(s, got), int64(len(want)))
	res := run(t, p)
	if n := counter(t, res, "records"); n != int64(len(want)) {
		t.Errorf("records metric = %d, want %d", n, len(want))
	}
	// Every block's bytes are counted once, except that an empty block just
	// before the end of a bundle's range is counted by no one (its reader
	// stops at the next block, which the tracker refuses).
	blockBytes := fileSize(t, src.Path) - int64(fileHeaderSize)
	emptyBytes := int64(50 * blockHeaderSize) // 300 blocks, one in 6 empty
	if n := counter(t, res, "bytes_read"); n > blockBytes || n < blockBytes-emptyBytes {
		t.Errorf("bytes_read metric = %d, want the %d bytes of the file's blocks, less at most the %d bytes of empty blocks", n, blockBytes, emptyBytes)
	}
}

// TestPipelineReadAll reads a PCollection of sources, one of them a subrange
// that starts and ends inside records.
func TestPipelineReadAll(t *testing.T) {
	dir := t.TempDir()
	fixed, frecs := writeFixedFile(t, dir, 300)
	blocks, brecs, boffs := writeBlockFile(t, dir, 40, []int{2, 3})
	sub := fixed.Subrange(100, 1001).(FixedSource) // records at 108 .. 996
	bsub := blocks.Subrange(500, blocks.End).(BlockSource)
	var want []any
	for i := 9; i <= 83; i++ {
		want = append(want, frecs[i])
	}
	want = append(want, anySlice(frecs)...)
	for i, o := range boffs {
		if o >= 500 {
			want = append(want, brecs[i])
		}
	}

	p, s := beam.NewPipelineWithRoot()
	a := offsetsource.ReadAll[string, FixedSource](s, beam.Create(s, sub, fixed), offsetsource.WithBundleCount(5))
	b := offsetsource.ReadAll[string, BlockSource](s, beam.Create(s, bsub), offsetsource.WithDesiredBundleSize(100))
	passert.Equals(s, beam.Flatten(s, a, b), want...)
	run(t, p)
}

// TestPipelineRunnerSplit makes every record take longer than Prism's
// progress poll, so that Prism sees no progress and splits the running
// bundle: at least one split must be accepted by the tracker, and the output
// must still be exact.
func TestPipelineRunnerSplit(t *testing.T) {
	fixed, frecs := writeFixedFile(t, t.TempDir(), 12)
	blocks, brecs, _ := writeBlockFile(t, t.TempDir(), 4, []int{3})
	for _, tc := range []struct {
		name string
		read func(s beam.Scope) beam.PCollection // one initial bundle
		want []string
	}{
		{"fixed", func(s beam.Scope) beam.PCollection { return offsetsource.Read(s, fixed) }, frecs},
		{"blocks", func(s beam.Scope) beam.PCollection { return offsetsource.Read(s, blocks) }, brecs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			slow := beam.ParDo(s, &slowFn{DelayMs: 180}, tc.read(s))
			passert.Equals(s, slow, anySlice(tc.want)...)
			passert.Equals(s, countRecords(s, slow), int64(len(tc.want)))
			start := time.Now()
			res := run(t, p)
			accepted, refused := counter(t, res, "splits_accepted"), counter(t, res, "splits_refused")
			t.Logf("%d records in %v: splits accepted %d, refused %d", len(tc.want), time.Since(start), accepted, refused)
			if accepted < 1 {
				t.Errorf("no runner-initiated split was accepted (refused: %d)", refused)
			}
			if n := counter(t, res, "records"); n != int64(len(tc.want)) {
				t.Errorf("records metric = %d, want %d", n, len(tc.want))
			}
		})
	}
}

// TestPipelineReadError fails the pipeline with the reader's error, which
// names the file and the offset.
func TestPipelineReadError(t *testing.T) {
	src, _ := writeFixedFile(t, t.TempDir(), 50)
	f, err := os.OpenFile(src.Path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("rec")
	f.Close()
	p, s := beam.NewPipelineWithRoot()
	offsetsource.Read(s, src)
	err = workertest.RunFailing(t, p)
	if err == nil {
		t.Fatal("pipeline reading a truncated file succeeded")
	}
	for _, want := range []string{src.Path, "truncated record at offset 600"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("pipeline error does not say %q: %v", want, err)
		}
	}
}

func anySlice[T any](l []T) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

// TestPipelineSeparateWorker runs a read through a Prism job server whose SDK
// workers are separate processes started from this test binary, as Dataflow
// and Flink run Go workers: the sources, the generic DoFn, its restriction and
// tracker must travel through the pipeline proto and the worker's own init
// registrations, nothing through this process's memory.
func TestPipelineSeparateWorker(t *testing.T) {
	dir := t.TempDir()
	fixed, frecs := writeFixedFile(t, dir, 500)
	blocks, brecs, _ := writeBlockFile(t, dir, 60, []int{3, 1, 0, 4})
	p, s := beam.NewPipelineWithRoot()
	a := offsetsource.Read(s, fixed, offsetsource.WithDesiredBundleSize(40*fixedWidth))
	b := offsetsource.Read(s, blocks, offsetsource.WithDesiredBundleSize(300))
	all := beam.Flatten(s, a, b)
	passert.Equals(s, all, append(anySlice(frecs), anySlice(brecs)...)...)
	passert.Equals(s, countRecords(s, all), int64(len(frecs)+len(brecs)))

	res, err := workertest.Run(t, p)
	if err != nil {
		t.Fatalf("pipeline with separate worker processes failed: %v", err)
	}
	if len(res.Workers) == 0 {
		t.Fatal("no worker process was started")
	}
	for _, w := range res.Workers {
		if w.PID == 0 || w.PID == os.Getpid() {
			t.Errorf("worker %s ran as pid %d, want a separate process (test pid %d)", w.ID, w.PID, os.Getpid())
		}
	}
	if n := counter(t, res, "records"); n != int64(len(frecs)+len(brecs)) {
		t.Errorf("records metric = %d, want %d", n, len(frecs)+len(brecs))
	}
	t.Logf("%d workers, %v", len(res.Workers), res.Elapsed)
}
