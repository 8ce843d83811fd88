package bigqueryio_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"

	"github.com/sdfio/sdfio/bigqueryio"
)

func init() {
	register.Function1x0(discardSimple)
	register.Function2x0(genSimple)
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
// process, with bqtest) three ways, to set the exactly-once write of
// unbounded input beside the batch write on the same runner: stream (a
// periodic sequence whose elements are all due within 1 s, so it emits as
// fast as Prism takes them, written with Write's defaults for unbounded
// input: exactly once, BUFFERED streams, flushes every 200 ms), seq_only
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
			start := time.Now()
			seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*10*time.Microsecond), 10*time.Microsecond)))
			bigqueryio.Write(s, table, beam.ParDo(s, seqSimple, seq), writeOpts(srv, bigqueryio.WithTriggeringFrequency(200*time.Millisecond))...)
		}},
		{"seq_only", func(s beam.Scope, _ string) {
			start := time.Now()
			seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*10*time.Microsecond), 10*time.Microsecond)))
			beam.ParDo0(s, discardSimple, beam.ParDo(s, seqSimple, seq))
		}},
		{"batch", func(s beam.Scope, table string) {
			rows := beam.ParDo(s, genSimple, beam.Create(s, int64(n)))
			bigqueryio.Write(s, table, rows, writeOpts(srv)...)
		}},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			cpu0 := benchCPU()
			for i := 0; i < b.N; i++ {
				table := fmt.Sprintf("p.d.%s%d", sh.name, i)
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

// benchCPU is the process's CPU time so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
