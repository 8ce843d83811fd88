package bqwrite_test

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

func init() {
	register.Function1x0(discardSimple)
	register.Function2x0(genSimple)
	register.Function2x0(tickSimple)
	register.Emitter1[Simple]()
}

func discardSimple(Simple) {}

// genSimple emits n rows from one impulse.
func genSimple(n int64, emit func(Simple)) {
	for i := range n {
		emit(seqSimple(i))
	}
}

// BenchmarkStreamWritePrism writes 100,000 rows on Prism (in this
// process, with bqtest) four ways, to set the exactly-once write of
// unbounded input beside the batch write on the same runner: stream (a
// periodic sequence whose elements are all due when it starts, so it
// emits as fast as Prism takes them, written with Write's defaults for unbounded
// input: exactly once, BUFFERED streams, flushes every 50 ms: a run is about half a second, and the last batch waits up to one frequency),
// stream_ticks (the same write of the same number of rows from a sequence
// a thousandth as long, each element made into 1,000 rows: the source's
// per-element cost in Beam's harness spread over 1,000 rows), seq_only
// (the same sequence, no write: the runner's and the source's share) and
// batch (the same rows from an impulse, Write's batch path). rows/s is
// over the whole pipeline, from Run to its end; cpu-ns/row is the
// process's CPU (Prism, the SDK, bqtest) per row. Figures are the lead's
// (docs/BENCHMARKS.md).
func BenchmarkStreamWritePrism(b *testing.B) {
	const n = 100_000
	srv := newServer(b)
	srv.AddDataset("p", "d", "")
	shapes := []struct {
		name  string
		build func(s beam.Scope, table string)
	}{
		{"stream", func(s beam.Scope, table string) {
			seq := dueSequence(s, n)
			bqwrite.Write(s, table, beam.ParDo(s, seqSimple, seq), writeOpts(srv, bqwrite.WithTriggeringFrequency(50*time.Millisecond))...)
		}},
		{"stream_ticks", func(s beam.Scope, table string) {
			ticks := dueSequence(s, n/tickRows)
			bqwrite.Write(s, table, beam.ParDo(s, tickSimple, ticks), writeOpts(srv, bqwrite.WithTriggeringFrequency(50*time.Millisecond))...)
		}},
		{"seq_only", func(s beam.Scope, _ string) {
			seq := dueSequence(s, n)
			beam.ParDo0(s, discardSimple, beam.ParDo(s, seqSimple, seq))
		}},
		{"batch", func(s beam.Scope, table string) {
			rows := beam.ParDo(s, genSimple, beam.Create(s, int64(n)))
			bqwrite.Write(s, table, rows, writeOpts(srv)...)
		}},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			cpu0 := benchCPU()
			for i := 0; i < b.N; i++ {
				table := fmt.Sprintf("p.d.%s%d", sh.name, benchRun.Add(1))
				p, s := beam.NewPipelineWithRoot()
				sh.build(s, table)
				if err := ptest.Run(p); err != nil {
					b.Fatal(err)
				}
				if sh.name == "seq_only" {
					continue
				}
				got, err := srv.TableRows(table)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != n {
					b.Fatalf("%s: %d rows, want %d", table, len(got), n)
				}
			}
			rows := float64(n) * float64(b.N)
			b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric(float64(benchCPU()-cpu0)/rows, "cpu-ns/row")
		})
	}
}

// tickRows is how many rows stream_ticks makes of each element of its
// sequence.
const tickRows = 1000

// tickSimple makes the tickRows rows of element i of a sequence (its
// index).
func tickSimple(i int64, emit func(Simple)) {
	for j := range int64(tickRows) {
		emit(seqSimple(i*tickRows + j))
	}
}

// dueSequence is a periodic sequence of n elements all due already, which
// its source emits as fast as the runner takes them.
func dueSequence(s beam.Scope, n int) beam.PCollection {
	end := time.Now()
	start := end.Add(-time.Duration(n) * 10 * time.Microsecond)
	return periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, end, 10*time.Microsecond)))
}

var benchRun atomic.Int64

// benchCPU is the process's CPU time so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
