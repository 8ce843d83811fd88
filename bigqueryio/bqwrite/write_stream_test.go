package bqwrite_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	register.Function1x1(producedSimple)
	register.Function1x1(resultRows)
	register.Function1x1(fileRowSimple)
	register.DoFn1x1[bqwrite.TableResult, error](&dieFn{})
	register.DoFn1x2[bqwrite.TableResult, int, error](&checkResultFn{})
	register.Function1x1(one)
	register.DoFn1x1[int, error](&atLeastFn{})
}

// produced is when each row of a streaming test passed its first step
// (Prism runs the workers in the test process): the time its input gave
// it, against which the test measures when it became visible.
var produced struct {
	sync.Mutex
	at map[int64]time.Time
}

func resetProduced() {
	produced.Lock()
	produced.at = map[int64]time.Time{}
	produced.Unlock()
}

func markProduced(id int64, at time.Time) {
	produced.Lock()
	if _, ok := produced.at[id]; !ok {
		produced.at[id] = at
	}
	produced.Unlock()
}

// producedSimple is seqSimple, noting when row i was made.
func producedSimple(i int64) Simple {
	markProduced(i, time.Now())
	return seqSimple(i)
}

func resultRows(r bqwrite.TableResult) int { return int(r.Rows) }

// visibility polls a table every 25 ms while a pipeline runs, keeping
// the first time each row id was seen in it.
type visibility struct {
	first        map[int64]time.Time
	done, polled chan struct{}
}

func watchVisibility(srv *bqtest.Server, table string) *visibility {
	v := &visibility{first: map[int64]time.Time{}, done: make(chan struct{}), polled: make(chan struct{})}
	go func() {
		defer close(v.polled)
		for {
			select {
			case <-v.done:
				return
			case <-time.After(25 * time.Millisecond):
			}
			rows, err := srv.TableRows(table)
			if err != nil {
				continue // not made yet
			}
			now := time.Now()
			for _, r := range rows {
				if id := r[0].(int64); v.first[id].IsZero() {
					v.first[id] = now
				}
			}
		}
	}()
	return v
}

// stop ends the polling and returns the first sightings.
func (v *visibility) stop() map[int64]time.Time {
	close(v.done)
	<-v.polled
	return v.first
}

// checkLatency compares when each row was produced with when the poll
// first saw it in the table. Every row must have been seen; at least a
// quarter of them before the last row was produced (rows are made visible
// while the input runs, not at its end). It logs the latencies, which
// should be about the triggering frequency and at most about twice it on
// a quiet machine; under load they are not asserted.
func checkLatency(t *testing.T, seen, made map[int64]time.Time, freq time.Duration) {
	t.Helper()
	var last time.Time
	for _, at := range made {
		if at.After(last) {
			last = at
		}
	}
	var lat []time.Duration
	early := 0
	for id, at := range made {
		v, ok := seen[id]
		if !ok {
			t.Errorf("row %d never seen in the table while the pipeline ran", id)
			continue
		}
		lat = append(lat, v.Sub(at))
		if v.Before(last) {
			early++
		}
	}
	if len(lat) == 0 {
		t.Fatal("no row produced")
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(time.Millisecond) }
	t.Logf("%d rows; %d visible before the last was produced; latency (produced -> visible) p50 %v, p90 %v, max %v; triggering frequency %v",
		len(made), early, q(0.5), q(0.9), q(1), freq)
	if early < len(made)/4 {
		t.Errorf("%d of %d rows visible before the input's last row: rows wait for the end of the input", early, len(made))
	}
}

// TestWriteStreamExactlyOnce writes an unbounded input (a periodic
// sequence: 80 rows over 8 s) with Write's defaults for unbounded input
// (exactly once) and a triggering frequency of 500 ms, on Prism: rows
// become visible while the pipeline runs (most about a frequency after
// they are produced), the results count every row, and at the end the
// table holds every row exactly once; so does a second table written from
// the same rows in fixed windows.
func TestWriteStreamExactlyOnce(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const (
		n     = 80
		every = 100 * time.Millisecond
		freq  = 500 * time.Millisecond
	)
	resetProduced()
	p, s := beam.NewPipelineWithRoot()
	start := time.Now().Add(time.Second)
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*every), every)))
	rows := beam.ParDo(s, producedSimple, seq)
	res := bqwrite.Write(s, "p.d.stream", rows, writeOpts(srv, bqwrite.WithTriggeringFrequency(freq))...)
	passert.Equals(s, stats.Sum(s, beam.ParDo(s, resultRows, res.Results)), n)
	passert.Empty(s, res.FailedRows)
	// The same rows in fixed windows of a second: each row-in-window once.
	fixed := bqwrite.Write(s, "p.d.stream_fixed", beam.WindowInto(s, window.NewFixedWindows(time.Second), rows),
		writeOpts(srv, bqwrite.WithTriggeringFrequency(freq), bqwrite.WithNumStreams(2))...)
	passert.Empty(s, fixed.FailedRows)

	v := watchVisibility(srv, "p.d.stream")
	run(t, p)
	seen := v.stop()
	checkCopies(t, srv, "p.d.stream", n, 1)
	checkCopies(t, srv, "p.d.stream_fixed", n, 1)
	produced.Lock()
	defer produced.Unlock()
	checkLatency(t, seen, produced.at, freq)
	ws := srv.WriteStats()
	t.Logf("server: %+v", ws)
}

// fileRow is a row of the Avro files of TestWriteStreamExactlyOnceWatch,
// and of the table.
type fileRow struct {
	ID   int64  `avro:"id"`
	Name string `avro:"name"`
}

var fileRowSchema = avro.MustParse(`{"type":"record","name":"fileRow","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`)

func fileRowSimple(r fileRow) Simple { return Simple{ID: r.ID, Name: r.Name} }

// writeRowFile writes rows ids from..to-1 as an Avro file under a name the
// watch does not match and renames it into place, so that it appears
// whole; it returns the time of the rename.
func writeRowFile(dir string, file, from, to int) (time.Time, error) {
	var buf bytes.Buffer
	enc, err := ocf.NewEncoderWithSchema(fileRowSchema, &buf)
	if err != nil {
		return time.Time{}, err
	}
	for id := from; id < to; id++ {
		if err := enc.Encode(fileRow{ID: int64(id), Name: fmt.Sprintf("file-%d", file)}); err != nil {
			return time.Time{}, err
		}
	}
	if err := enc.Close(); err != nil {
		return time.Time{}, err
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".f%03d.tmp", file))
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return time.Time{}, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("f%03d.avro", file))); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// TestWriteStreamExactlyOnceWatch is the proof: avroio's
// WatchForNewFiles over a directory that grows while the pipeline runs
// (16 files of 25 rows, one every 250 ms; the watch polls every 100 ms and
// ends 1.5 s after the last new file) writes to BigQuery exactly once,
// with a triggering frequency of 500 ms: rows become visible while files
// are still coming, and at the end every row is in the table once.
func TestWriteStreamExactlyOnceWatch(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const (
		files, perFile = 16, 25
		n              = files * perFile
		every          = 250 * time.Millisecond
		freq           = 500 * time.Millisecond
	)
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	recs := avroio.WatchForNewFiles(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[fileRow](), 100*time.Millisecond, avroio.AfterNoNewFilesFor(1500*time.Millisecond))
	res := bqwrite.Write(s, "p.d.files", beam.ParDo(s, fileRowSimple, recs), writeOpts(srv, bqwrite.WithTriggeringFrequency(freq))...)
	passert.Equals(s, stats.Sum(s, beam.ParDo(s, resultRows, res.Results)), n)
	passert.Empty(s, res.FailedRows)

	made := map[int64]time.Time{}
	writerErr := make(chan error, 1)
	go func() {
		writerErr <- func() error {
			time.Sleep(time.Second) // the pipeline starts
			for f := 0; f < files; f++ {
				at, err := writeRowFile(dir, f, f*perFile, (f+1)*perFile)
				if err != nil {
					return err
				}
				for id := f * perFile; id < (f+1)*perFile; id++ {
					made[int64(id)] = at
				}
				time.Sleep(every)
			}
			return nil
		}()
	}()
	v := watchVisibility(srv, "p.d.files")
	run(t, p)
	seen := v.stop()
	if err := <-writerErr; err != nil {
		t.Fatal(err)
	}
	checkCopies(t, srv, "p.d.files", n, 1)
	checkLatency(t, seen, made, freq)
}

// dieFn ends the job once the results it has seen count Visible rows made
// visible: with Exit, by ending its worker process (os.Exit, as a crash
// would; only in a worker process of workertest's, else it fails the
// bundle), otherwise by failing the bundle.
type dieFn struct {
	Visible int64
	Exit    bool

	seen int64
}

func (f *dieFn) ProcessElement(r bqwrite.TableResult) error {
	if f.seen += r.Rows; f.seen < f.Visible {
		return nil
	}
	if f.Exit && os.Getenv("SDFIO_WORKERTEST_WORKER") != "" {
		os.Exit(3)
	}
	return fmt.Errorf("bigqueryio_test: the bundle fails on purpose after %d rows were made visible", f.seen)
}

// TestWriteStreamDies: a streaming write whose job dies mid-stream, its
// worker process ended (os.Exit in a separate worker process, workertest)
// or a bundle failed, once 30 rows are visible: the job fails, and every
// row visible in the table is there exactly once (no duplicate), at least
// the 30 the results reported.
func TestWriteStreamDies(t *testing.T) {
	for _, exit := range []bool{true, false} {
		name := map[bool]string{true: "worker killed", false: "bundle failed"}[exit]
		t.Run(name, func(t *testing.T) {
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			const (
				n       = 150
				visible = 30
			)
			p, s := beam.NewPipelineWithRoot()
			start := time.Now().Add(time.Second)
			seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*100*time.Millisecond), 100*time.Millisecond)))
			res := bqwrite.Write(s, "p.d.dies", beam.ParDo(s, seqSimple, seq), writeOpts(srv, bqwrite.WithTriggeringFrequency(300*time.Millisecond))...)
			beam.ParDo0(s, &dieFn{Visible: visible, Exit: exit}, res.Results)
			_, err := workertest.Run(t, p)
			if err == nil {
				t.Fatal("the job succeeded")
			}
			if !exit && !strings.Contains(err.Error(), "fails on purpose") {
				t.Errorf("error %v: want the bundle's", err)
			}
			seen, rows := idCounts(t, srv, "p.d.dies")
			dup := 0
			for id, c := range seen {
				if id < 0 || id >= n {
					t.Errorf("row id %d in the table, not one of the input's", id)
				}
				dup += c - 1
			}
			t.Logf("%s: %d rows visible (%d distinct) of %d; job error: %.300v", name, rows, len(seen), n, err)
			if dup > 0 {
				t.Errorf("%d duplicate rows of %d visible", dup, rows)
			}
			if rows < visible {
				t.Errorf("%d rows visible, want at least the %d the results reported", rows, visible)
			}
		})
	}
}

// checkResultFn fails the pipeline on a TableResult that is not one of
// Table's: rows made visible (at least one), the streams that hold them
// (exactly Streams of them when Streams > 0, else at least one), and the
// time they were made visible (within the test's run); it passes on the
// rows.
type checkResultFn struct {
	Table         string
	Streams       int
	After, Before int64 // unix ms
}

func (f *checkResultFn) ProcessElement(r bqwrite.TableResult) (int, error) {
	at := r.CommitTime.UnixMilli()
	switch {
	case r.Table != f.Table:
		return 0, fmt.Errorf("a result of table %q, want %q: %+v", r.Table, f.Table, r)
	case r.Rows <= 0:
		return 0, fmt.Errorf("a result of %d rows: %+v", r.Rows, r)
	case len(r.Streams) == 0 || f.Streams > 0 && len(r.Streams) != f.Streams:
		return 0, fmt.Errorf("a result naming %d streams, want %d: %+v", len(r.Streams), f.Streams, r)
	case at < f.After || at > f.Before:
		return 0, fmt.Errorf("a result made visible at %v, outside the run [%v, %v]: %+v", r.CommitTime, time.UnixMilli(f.After), time.UnixMilli(f.Before), r)
	}
	return int(r.Rows), nil
}

func one(int) int { return 1 }

// checkResults asserts, in the pipeline, that res's results are
// well-formed results of table whose rows sum to n, and that there are
// count of them (count < 0: at least -count).
func checkResults(s beam.Scope, res bqwrite.WriteResult, table string, streams, n, count int) {
	s = s.Scope("check " + table)
	now := time.Now()
	rows := beam.ParDo(s, &checkResultFn{Table: table, Streams: streams, After: now.UnixMilli(), Before: now.Add(10 * time.Minute).UnixMilli()}, res.Results)
	passert.Equals(s, stats.Sum(s, rows), n)
	results := stats.Sum(s, beam.ParDo(s, one, rows))
	if count >= 0 {
		passert.Equals(s, results, count)
	} else {
		beam.ParDo0(s, &atLeastFn{N: -count}, results)
	}
	passert.Empty(s, res.FailedRows)
}

// atLeastFn fails the pipeline on a count under N.
type atLeastFn struct{ N int }

func (f *atLeastFn) ProcessElement(n int) error {
	if n < f.N {
		return fmt.Errorf("%d results, want at least %d", n, f.N)
	}
	return nil
}

// TestWriteResults: what WriteResult.Results gives in each mode, on
// Prism. Bounded input: one TableResult per table once its rows are
// visible, with every row (exactly once: the PENDING streams committed;
// WithAtLeastOnce: the _default stream). Unbounded input, exactly once: a
// result per append made visible, as the pipeline runs (several), each
// naming the one stream flushed, their rows summing to the input's;
// WithAtLeastOnce, a result per bundle appended (several). Each
// result's time is when its rows were made visible.
func TestWriteResults(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const n = 40
	p, s := beam.NewPipelineWithRoot()
	bounded := beam.Create(s, anys(simpleRows(n))...)
	checkResults(s, bqwrite.Write(s, "p.d.once", bounded, writeOpts(srv)...), "p.d.once", 0, n, 1)
	checkResults(s, bqwrite.Write(s, "p.d.alo", bounded, writeOpts(srv, bqwrite.WithAtLeastOnce())...), "p.d.alo", 1, n, 1)
	start := time.Now().Add(time.Second)
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*100*time.Millisecond), 100*time.Millisecond)))
	checkResults(s, bqwrite.Write(s, "p.d.stream", beam.ParDo(s, seqSimple, seq), writeOpts(srv, bqwrite.WithTriggeringFrequency(300*time.Millisecond))...), "p.d.stream", 1, n, -2)
	// Unbounded WithAtLeastOnce: a result per bundle appended, as the
	// pipeline runs (a GroupByKey in the global window would give none
	// before the input ends).
	checkResults(s, bqwrite.Write(s, "p.d.stream_alo", beam.ParDo(s, seqSimple, seq), writeOpts(srv, bqwrite.WithAtLeastOnce())...), "p.d.stream_alo", 1, n, -2)
	run(t, p)
	for _, tbl := range []string{"p.d.once", "p.d.alo", "p.d.stream", "p.d.stream_alo"} {
		checkCopies(t, srv, tbl, n, 1)
	}
}
