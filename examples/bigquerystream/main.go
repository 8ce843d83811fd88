// Command bigquerystream streams Avro files into BigQuery, exactly once: a
// goroutine drops a file of --rows_per_file events into a new directory
// every --every, avroio.WatchForNewFiles reads each new file once it is
// whole, and bqwrite.Write writes the events (an unbounded PCollection:
// exactly once by default) to a table of an in-process bqtest server.
// While the pipeline runs, the command prints what the table shows every
// --report; at the end, the rows the table holds against those written:
// duplicates and missing rows (none), then the write's counters.
//
//	go run ./examples/bigquerystream                                  # 12 files of 50 events, one every 250 ms
//	go run ./examples/bigquerystream --files=40 --frequency=2s        # rows wait up to 2 s to be appended
//
// The write keys rows by table and shard (--streams), batches each shard's
// rows for at most --frequency, appends each batch at its shard's offset
// of a BUFFERED write stream, and makes the rows visible with FlushRows
// after a shuffle: a row appears about a frequency after its file did.
// The watch ends --idle after the last new file, and the job with it.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // the watched directory

	// The runners this program runs on, registered by import: Prism (the
	// default, in this process), the portable runner (universal, flink) and
	// Dataflow.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

var (
	files     = flag.Int("files", 12, "Avro files to write into the watched directory")
	perFile   = flag.Int("rows_per_file", 50, "events per file")
	every     = flag.Duration("every", 250*time.Millisecond, "time between two files")
	frequency = flag.Duration("frequency", 500*time.Millisecond, "the write's triggering frequency: the longest a row waits to be appended")
	streams   = flag.Int("streams", 2, "shards of the table, each appending to a write stream of its own")
	poll      = flag.Duration("poll", 100*time.Millisecond, "how often the watch lists the directory")
	idle      = flag.Duration("idle", time.Second, "the watch ends when no new file came for this long")
	report    = flag.Duration("report", 500*time.Millisecond, "how often to print what the table shows")
)

// Event is a record of the files and a row of the table (its schema
// inferred from the struct: CreateIfNeeded).
type Event struct {
	ID     int64   `avro:"id" bigquery:"id"`
	File   int64   `avro:"file" bigquery:"file"`
	Kind   string  `avro:"kind" bigquery:"kind"`
	Amount float64 `avro:"amount" bigquery:"amount"`
}

const eventSchema = `{"type":"record","name":"Event","fields":[
	{"name":"id","type":"long"},{"name":"file","type":"long"},
	{"name":"kind","type":"string"},{"name":"amount","type":"double"}]}`

const table = "demo-project.stream.events"

func init() {
	beam.RegisterType(reflect.TypeFor[Event]())
	register.Function1x0(printFailed)
}

func printFailed(f bqwrite.FailedRow) {
	fmt.Printf("refused by %s: %s: %s\n", f.Table, f.Row, f.Error)
}

// writeFile writes events ids [from, to) as file number f under a name the
// watch does not match, then renames it into place, so that the watch sees
// it whole.
func writeFile(dir string, f, from, to int) error {
	var buf bytes.Buffer
	w, err := container.NewWriter(&buf, eventSchema, container.WriterOptions{Codec: "snappy"})
	if err != nil {
		return err
	}
	kinds := []string{"click", "view", "buy"}
	for id := from; id < to; id++ {
		if err := w.Append(Event{ID: int64(id), File: int64(f), Kind: kinds[id%3], Amount: float64(id%100) / 4}); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".events-%03d.tmp", f))
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("events-%03d.avro", f)))
}

// visible is what the table shows: its rows, and how many times each id.
func visible(srv *bqtest.Server) (int, map[int64]int) {
	rows, err := srv.TableRows(table)
	if err != nil {
		return 0, nil // not created yet
	}
	ids := map[int64]int{}
	for _, r := range rows {
		ids[r[0].(int64)]++
	}
	return len(rows), ids
}

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()

	srv, err := bqtest.NewServer()
	if err != nil {
		log.Exitf(ctx, "starting bqtest: %v", err)
	}
	defer srv.Close()
	srv.AddDataset("demo-project", "stream", "") // where the write makes its table (CreateIfNeeded)
	dir, err := os.MkdirTemp("", "bigquerystream-")
	if err != nil {
		log.Exitf(ctx, "%v", err)
	}
	defer os.RemoveAll(dir)

	p, s := beam.NewPipelineWithRoot()
	events := avroio.WatchForNewFiles(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[Event](), *poll, avroio.AfterNoNewFilesFor(*idle))
	res := bqwrite.Write(s, table, events, // unbounded: exactly once
		bqwrite.WithTriggeringFrequency(*frequency),
		bqwrite.WithNumStreams(*streams),
		bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithRESTEndpoint(srv.RESTEndpoint()), bqwrite.WithInsecure())
	beam.ParDo0(s, printFailed, res.FailedRows)

	total := *files * *perFile
	fmt.Printf("watching %s: %d files of %d events, one every %v; writing to %s on an in-process bqtest server, exactly once, triggering frequency %v, %d streams\n\n",
		dir, *files, *perFile, *every, table, *frequency, *streams)
	start := time.Now()
	var written atomic.Int64
	go func() {
		time.Sleep(time.Second) // the pipeline starts
		for f := 0; f < *files; f++ {
			if err := writeFile(dir, f, f**perFile, (f+1)**perFile); err != nil {
				log.Exitf(ctx, "writing file %d: %v", f, err)
			}
			written.Store(int64((f + 1) * *perFile))
			time.Sleep(*every)
		}
	}()
	done := make(chan struct{})
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		t := time.NewTicker(*report)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			n, _ := visible(srv)
			fmt.Printf("  %5.1fs  events in files %4d   rows visible in %s %4d\n", time.Since(start).Seconds(), written.Load(), table, n)
		}
	}()
	run(ctx, p, fmt.Sprintf("%d files and wrote %s", *files, table), bigqueryio.Namespace)
	close(done)
	<-reported

	n, ids := visible(srv)
	dup, missing := 0, 0
	for id := 0; id < total; id++ {
		switch c := ids[int64(id)]; {
		case c == 0:
			missing++
		case c > 1:
			dup += c - 1
		}
	}
	fmt.Printf("\n%s holds %d rows of the %d events written: %d duplicates, %d missing\n", table, n, total, dup, missing)
	var streamInfo []string
	for _, ws := range srv.WriteStreams(table) {
		streamInfo = append(streamInfo, fmt.Sprintf("%d rows (finalized %v)", ws.Rows, ws.Finalized))
	}
	fmt.Printf("write streams: %v\n", streamInfo)
	if dup > 0 || missing > 0 || n != total {
		os.Exit(1)
	}
}

// counterHelp says in a line what each counter of the IO counts.
var counterHelp = map[string]string{
	"rows_appended":      "rows appended to write streams",
	"bytes_appended":     "bytes of rows appended",
	"appends":            "AppendRows requests sent",
	"append_retries":     "appends retried after a transient error",
	"rows_refused":       "rows the service refused, sent to the failed-rows output",
	"streams_created":    "BUFFERED write streams created by the exactly-once streaming write",
	"streams_finalized":  "write streams finalized (rotated, idle or at the end of input)",
	"rows_flushed":       "rows made visible by FlushRows",
	"batches_repeated":   "batches delivered again and skipped (already appended)",
	"streams_abandoned":  "streams left at their committed offset after an append met a retried or replayed attempt's rows (ALREADY_EXISTS); the batch went to a new stream",
	"streams_committed":  "write streams committed",
	"connections_closed": "write streams' connections closed after the idle time, or past 64 open in a worker",
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
