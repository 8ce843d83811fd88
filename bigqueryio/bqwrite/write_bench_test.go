package bqwrite

import (
	"context"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beambq "github.com/apache/beam/sdks/v2/go/pkg/beam/io/bigqueryio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/internal/beamreg"
)

func init() {
	RegisterType(reflect.TypeFor[benchRow]())
	register.Function1x0(discardBenchRow)
	beamreg.DoFn2x0[[]byte, func(benchRow)](&genRowsFn{})
	register.Emitter1[benchRow]()
}

func discardBenchRow(benchRow) {}

// benchNames are the 1,000 names the rows of the write benchmark take.
var benchNames = func() []string {
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("user-%d", i)
	}
	return names
}()

// benchRowAt is row i of the write benchmark.
func benchRowAt(i int) benchRow {
	return benchRow{ID: int64(i), Name: bigquery.NullString{StringVal: benchNames[i%1000], Valid: true}, Score: float64(i) / 4}
}

// genRowsFn emits the N rows of the write benchmark from an impulse: a
// source that costs little more than the runner's per-element work,
// beside beam.Create, which encodes every row into the pipeline when it
// is built and decodes it when it runs.
type genRowsFn struct{ N int }

func (f *genRowsFn) ProcessElement(_ []byte, emit func(benchRow)) {
	for i := range f.N {
		emit(benchRowAt(i))
	}
}

// benchSources are the two sources of the write benchmark's pipelines:
// beam.Create of the rows, and genRowsFn making them.
var benchSources = []struct {
	suffix string
	rows   func(s beam.Scope, rows []any) beam.PCollection
}{
	{"", func(s beam.Scope, rows []any) beam.PCollection { return beam.Create(s, rows...) }},
	{"_gen", func(s beam.Scope, rows []any) beam.PCollection {
		return beam.ParDo(s, &genRowsFn{N: len(rows)}, beam.Impulse(s))
	}},
}

var benchWriteSchema = bigquery.Schema{
	{Name: "id", Type: bigquery.IntegerFieldType},
	{Name: "name", Type: bigquery.StringFieldType},
	{Name: "score", Type: bigquery.FloatFieldType},
}

func benchWriteRows(n int) []any {
	rows := make([]any, n)
	for i := range rows {
		rows[i] = benchRowAt(i)
	}
	return rows
}

// BenchmarkWrite writes 100,000 rows to bqtest (in this process, sharing
// the CPU) three ways, beside create_only (the same pipeline without a
// write): this package's Write (exactly once, on the direct
// runner), Beam Go's bigqueryio.Write (tabledata.insertAll, reached through
// RouteGoogleAPIs), and a plain managedwriter loop appending the same
// encoded rows to one PENDING stream on one goroutine, the anchor of the
// writer's CPU per row. Each pipeline runs twice: its rows from
// beam.Create (sdfio, create_only, beamgo), whose decoding costs about
// 1 us a row in every variant, and from genRowsFn (sdfio_gen, gen_only,
// beamgo_gen), which makes them. Figures are the lead's
// (docs/BENCHMARKS.md).
func BenchmarkWrite(b *testing.B) {
	const n = 100_000
	rows := benchWriteRows(n)
	// Each pipeline twice: rows from beam.Create (sdfio, create_only,
	// beamgo) and from genRowsFn (sdfio_gen, gen_only, beamgo_gen).
	for _, src := range benchSources {
		b.Run("sdfio"+src.suffix, func(b *testing.B) {
			srv := newTestServer(b)
			cpu0 := processCPU()
			srv.AddDataset("p", "d", "")
			for i := 0; i < b.N; i++ {
				p, s := beam.NewPipelineWithRoot()
				table := fmt.Sprintf("p.d.w%d", i)
				Write(s, table, src.rows(s, rows), WithEndpoint(srv.Addr()), WithInsecure(), WithRESTEndpoint(srv.RESTEndpoint()))
				if _, err := direct.Execute(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
			reportWrite(b, n, cpu0)
		})
	}
	// WriteTruncate's overhead against a plain write: the same rows staged
	// and copied over one table each iteration (a staging table, a copy
	// job, a delete).
	b.Run("sdfio_truncate", func(b *testing.B) {
		srv := newTestServer(b)
		cpu0 := processCPU()
		srv.AddDataset("p", "d", "")
		for i := 0; i < b.N; i++ {
			p, s := beam.NewPipelineWithRoot()
			Write(s, "p.d.truncated", beam.Create(s, rows...), WithWriteDisposition(WriteTruncate),
				WithEndpoint(srv.Addr()), WithInsecure(), WithRESTEndpoint(srv.RESTEndpoint()))
			if _, err := direct.Execute(context.Background(), p); err != nil {
				b.Fatal(err)
			}
		}
		reportWrite(b, n, cpu0)
	})
	// The cost of the pipeline without a write (beam.Create decoding the
	// rows, the direct runner): the sdfio and beamgo figures less this are
	// what their writes cost.
	for _, src := range benchSources {
		name := map[string]string{"": "create_only", "_gen": "gen_only"}[src.suffix]
		b.Run(name, func(b *testing.B) {
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				p, s := beam.NewPipelineWithRoot()
				beam.ParDo0(s, discardBenchRow, src.rows(s, rows))
				if _, err := direct.Execute(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
			reportWrite(b, n, cpu0)
		})
	}
	for _, src := range benchSources {
		b.Run("beamgo"+src.suffix, func(b *testing.B) {
			srv := newTestServer(b)
			cpu0 := processCPU()
			if err := srv.AddTable("p.d.other", bqtest.Table{Schema: benchWriteSchema}); err != nil {
				b.Fatal(err)
			}
			restore, err := srv.RouteGoogleAPIs()
			if err != nil {
				b.Fatal(err)
			}
			defer restore()
			for i := 0; i < b.N; i++ {
				p, s := beam.NewPipelineWithRoot()
				beambq.Write(s, "p", fmt.Sprintf("p:d.b%d", i), src.rows(s, rows))
				if _, err := direct.Execute(context.Background(), p); err != nil {
					b.Fatal(err)
				}
			}
			reportWrite(b, n, cpu0)
		})
	}
	b.Run("managedwriter", func(b *testing.B) {
		srv := newTestServer(b)
		cpu0 := processCPU()
		ctx := context.Background()
		enc, err := newRowEncoder(benchWriteSchema, reflect.TypeFor[benchRow]())
		if err != nil {
			b.Fatal(err)
		}
		mw, err := managedwriter.NewClient(ctx, "p", srv.ClientOptions()...)
		if err != nil {
			b.Fatal(err)
		}
		defer mw.Close()
		b.ResetTimer()
		cpu0 = processCPU()
		for i := 0; i < b.N; i++ {
			name := fmt.Sprintf("p.d.m%d", i)
			if err := srv.AddTable(name, bqtest.Table{Schema: benchWriteSchema}); err != nil {
				b.Fatal(err)
			}
			res, _ := bqtest.TableResource(name)
			ms, err := mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(res), managedwriter.WithType(managedwriter.PendingStream), managedwriter.WithSchemaDescriptor(enc.desc))
			if err != nil {
				b.Fatal(err)
			}
			var batch [][]byte
			var size int
			var off int64
			var results []*managedwriter.AppendResult
			send := func() {
				r, err := ms.AppendRows(ctx, batch, managedwriter.WithOffset(off))
				if err != nil {
					b.Fatal(err)
				}
				results = append(results, r)
				off += int64(len(batch))
				batch, size = nil, 0
			}
			for _, x := range rows {
				row, err := enc.encode(nil, x)
				if err != nil {
					b.Fatal(err)
				}
				if size+len(row) > maxAppendBytes {
					send()
				}
				batch, size = append(batch, row), size+len(row)
			}
			send()
			for _, r := range results {
				if _, err := r.GetResult(ctx); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := ms.Finalize(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := mw.BatchCommitWriteStreams(ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: []string{ms.StreamName()}}); err != nil {
				b.Fatal(err)
			}
			ms.Close()
		}
		reportWrite(b, n, cpu0)
	})
}

// processCPU is the CPU time (user and system) of the process so far: the
// writer's and the in-process server's together.
// BenchmarkStreamWrite writes 100,000 rows (the rows of BenchmarkWrite)
// through the steps of the exactly-once write of unbounded input
// (WithExactlyOnceStreaming), one shard, run by hand as a runner would run
// them (batching in state, appending to a BUFFERED stream, flushing),
// against bqtest in this process: rows/s and CPU per row, to set beside
// BenchmarkWrite's sdfio (the batch Write) and managedwriter (the plain
// loop) on the same machine. Beam's runner is left out: on Prism v2.77 a
// pipeline with the streaming write does not progress (docs/DESIGN.md).
// Figures are the lead's.
func BenchmarkStreamWrite(b *testing.B) {
	const n = 100_000
	rows := benchWriteRows(n)
	srv := newTestServer(b)
	srv.AddDataset("p", "d", "")
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		cfg, err := newWriteConfig(fmt.Sprintf("p.d.s%d", i), []WriteOption{WithEndpoint(srv.Addr()), WithInsecure(), WithRESTEndpoint(srv.RESTEndpoint()),
			WithExactlyOnceStreaming(), WithNumStreams(1), WithSchema(benchWriteSchema)})
		if err != nil {
			b.Fatal(err)
		}
		st := newStreamStepsOf(b, cfg, reflect.TypeFor[benchRow]())
		ops := st.appendAll(newFakeState(), st.batchRows(newFakeState(), rows))
		if got := st.flushAll(ops); got != n {
			b.Fatalf("%d rows flushed, want %d", got, n)
		}
	}
	reportWrite(b, n, cpu0)
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportWrite reports rows/s and the CPU per row of b's n-row writes since
// cpu0 (client and server: the server's share is the same per row for
// every writer that appends the same rows, so differences are the
// writers').
func reportWrite(b *testing.B, n int, cpu0 time.Duration) {
	rows := float64(n) * float64(b.N)
	b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(processCPU()-cpu0)/rows, "cpu-ns/row")
}
