package bqwrite_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"google.golang.org/grpc/codes"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	bqwrite.RegisterType(reflect.TypeFor[WideRow]())
	register.Function1x1(wideRowOf)
}

// checkStreamsDone fails unless every write stream of table holds only
// visible rows and is finalized: each shard's last batch was appended and
// flushed, and its stream ended, before the job ended.
func checkStreamsDone(t *testing.T, srv *bqtest.Server, table string) {
	t.Helper()
	streams := srv.WriteStreams(table)
	if len(streams) == 0 {
		t.Errorf("%s: no write stream", table)
	}
	for i, ws := range streams {
		if ws.Visible != ws.Rows || !ws.Finalized {
			t.Errorf("%s: stream %d: %+v: rows left unflushed, or the stream not finalized, at the end of the job", table, i, ws)
		}
	}
}

// TestWriteStreamEndOfInput: unbounded input that ends (a periodic
// sequence that stops; avroio.WatchForNewFiles with a termination
// condition) written with a triggering frequency of an hour, so that no
// batch is output before the input ends, on Prism: when the job ends,
// every row is in the table once, the results count them all, and every
// stream is flushed to its end and finalized. The batching step's
// event-time timer fires when the watermark passes the end of the window,
// which it does when the input ends (and when a job is drained): each
// shard's last batch is appended and flushed then.
func TestWriteStreamEndOfInput(t *testing.T) {
	const freq = time.Hour
	t.Run("sequence", func(t *testing.T) {
		srv := newServer(t)
		srv.AddDataset("p", "d", "")
		const n = 40
		p, s := beam.NewPipelineWithRoot()
		start := time.Now().Add(500 * time.Millisecond)
		seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*25*time.Millisecond), 25*time.Millisecond)))
		res := bqwrite.Write(s, "p.d.ends", beam.ParDo(s, seqSimple, seq), writeOpts(srv, bqwrite.WithTriggeringFrequency(freq), bqwrite.WithNumStreams(3))...)
		passert.Equals(s, stats.Sum(s, beam.ParDo(s, resultRows, res.Results)), n)
		passert.Empty(s, res.FailedRows)
		began := time.Now()
		run(t, p)
		if d := time.Since(began); d > 2*time.Minute {
			t.Errorf("the job took %v: it waited for a timer instead of ending with its input", d)
		}
		checkCopies(t, srv, "p.d.ends", n, 1)
		checkStreamsDone(t, srv, "p.d.ends")
	})
	t.Run("watch", func(t *testing.T) {
		srv := newServer(t)
		srv.AddDataset("p", "d", "")
		const files, perFile = 4, 25
		dir := t.TempDir()
		for f := range files {
			if _, err := writeRowFile(dir, f, f*perFile, (f+1)*perFile); err != nil {
				t.Fatal(err)
			}
		}
		p, s := beam.NewPipelineWithRoot()
		recs := avroio.WatchForNewFiles(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[fileRow](), 100*time.Millisecond, avroio.AfterNoNewFilesFor(500*time.Millisecond))
		res := bqwrite.Write(s, "p.d.watched", beam.ParDo(s, fileRowSimple, recs), writeOpts(srv, bqwrite.WithTriggeringFrequency(freq))...)
		passert.Equals(s, stats.Sum(s, beam.ParDo(s, resultRows, res.Results)), files*perFile)
		passert.Empty(s, res.FailedRows)
		run(t, p)
		checkCopies(t, srv, "p.d.watched", files*perFile, 1)
		checkStreamsDone(t, srv, "p.d.watched")
	})
}

// counters sums the counters of the bigqueryio namespace by name.
func counters(res metrics.Results) map[string]int64 {
	got := map[string]int64{}
	for _, c := range res.AllMetrics().Counters() {
		if c.Namespace() == bqwrite.Namespace {
			got[c.Name()] += c.Result()
		}
	}
	return got
}

// TestWriteStreamCountersExact: at the end of a streaming write on Prism
// (a periodic sequence, four shards, streams rotated every 40 rows, so
// that several streams are made and finalized per shard), the write's
// counters are the server's own counts: rows_flushed and rows_appended are
// the rows in the table, appends the AppendRows requests, streams_created
// and streams_finalized the streams the server made and finalized.
func TestWriteStreamCountersExact(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const n = 200
	p, s := beam.NewPipelineWithRoot()
	start := time.Now().Add(500 * time.Millisecond)
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*10*time.Millisecond), 10*time.Millisecond)))
	res := bqwrite.Write(s, "p.d.counted", beam.ParDo(s, seqSimple, seq), writeOpts(srv, bqwrite.WithTriggeringFrequency(200*time.Millisecond),
		bqwrite.WithNumStreams(4), bqwrite.WithStreamRotation(40, time.Hour))...)
	passert.Equals(s, stats.Sum(s, beam.ParDo(s, resultRows, res.Results)), n)
	passert.Empty(s, res.FailedRows)
	got := counters(run(t, p))
	checkCopies(t, srv, "p.d.counted", n, 1)
	checkStreamsDone(t, srv, "p.d.counted")
	ws := srv.WriteStats()
	t.Logf("counters %v; server %+v", got, ws)
	if ws.RowsAppended != n || ws.StreamsCreated < 5 {
		t.Errorf("server: %+v: want %d rows appended in several streams", ws, n)
	}
	checkCounters(t, got, ws, n)
}

// checkCounters fails unless the streaming write's counters are the
// server's counts of a write of n rows: rows_flushed and rows_appended the
// rows, bytes_appended their encoded bytes, appends the AppendRows requests, streams_created and
// streams_finalized the streams made and finalized.
func checkCounters(t *testing.T, got map[string]int64, ws bqtest.WriteStats, n int64) {
	t.Helper()
	want := map[string]int64{
		"rows_flushed":      n,
		"rows_appended":     ws.RowsAppended,
		"bytes_appended":    ws.BytesAppended,
		"appends":           int64(ws.Appends),
		"streams_created":   int64(ws.StreamsCreated),
		"streams_finalized": int64(ws.StreamsFinalized),
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("counter %s = %d, the server's count is %d", name, got[name], w)
		}
	}
}

// TestWriteAtLeastOnceErrorNoOffset: an append to _default that fails
// for good fails the at-least-once write with an error naming the table,
// the stream and the service's message, and no offset (appends to _default
// carry none).
func TestWriteAtLeastOnceErrorNoOffset(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const msg = "Input schema has more fields than BigQuery schema."
	srv.SetWriteFaults(bqtest.WriteFaults{AppendErrorCode: codes.InvalidArgument, AppendErrorMessage: msg, AppendErrorAfter: 0})
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.alo", beam.Create(s, anys(simpleRows(50))...), writeOpts(srv, bqwrite.WithAtLeastOnce())...)
	err := runFailing(p)
	if err == nil {
		t.Fatal("the write succeeded")
	}
	for _, want := range []string{"bqwrite.Write to p.d.alo", "/_default", msg} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want %q in it", err, want)
		}
	}
	if strings.Contains(err.Error(), "offset") {
		t.Errorf("error %q quotes an offset, which appends to _default never carry", err)
	}
}

// WideRow is a row of a wide table, whose writer schema is kilobytes.
type WideRow struct {
	ID int64 `bigquery:"id"`
	A0, A1, A2, A3, A4, A5, A6, A7, A8, A9,
	B0, B1, B2, B3, B4, B5, B6, B7, B8, B9,
	C0, C1, C2, C3, C4, C5, C6, C7, C8, C9 string
	LongColumnNameOfAWideTableNumberOne, LongColumnNameOfAWideTableNumberTwo     float64
	LongColumnNameOfAWideTableNumberThree, LongColumnNameOfAWideTableNumberFour  float64
	LongColumnNameOfAWideTableNumberFive, LongColumnNameOfAWideTableNumberSix    float64
	LongColumnNameOfAWideTableNumberSeven, LongColumnNameOfAWideTableNumberEight float64
}

func wideRowOf(i int64) WideRow { return WideRow{ID: i, A0: fmt.Sprintf("row-%d", i), C9: "last"} }

// TestWriteStreamWideSeparateWorkers writes a wide table's unbounded rows
// with Prism's worker in a process of its own (workertest: nothing of the
// test process's memory reaches it): the writer schema travels once per
// shard and epoch (and every 16th batch), not with every batch, and the
// append step, which gets it from its state or a batch that carries it,
// appends every batch: every row is in the table once, every stream
// finalized, and the counters are the server's counts.
func TestWriteStreamWideSeparateWorkers(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const n = 120
	p, s := beam.NewPipelineWithRoot()
	start := time.Now().Add(time.Second)
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*20*time.Millisecond), 20*time.Millisecond)))
	res := bqwrite.Write(s, "p.d.wide", beam.ParDo(s, wideRowOf, seq), writeOpts(srv, bqwrite.WithTriggeringFrequency(200*time.Millisecond),
		bqwrite.WithNumStreams(2))...)
	passert.Equals(s, stats.Sum(s, beam.ParDo(s, resultRows, res.Results)), n)
	passert.Empty(s, res.FailedRows)
	res2, err := workertest.Run(t, p)
	if err != nil {
		t.Fatal(err)
	}
	checkCopies(t, srv, "p.d.wide", n, 1)
	checkStreamsDone(t, srv, "p.d.wide")
	got, ws := counters(res2.Metrics()), srv.WriteStats()
	t.Logf("%d worker processes; counters %v; server %+v", len(res2.Workers), got, ws)
	checkCounters(t, got, ws, n)
}
