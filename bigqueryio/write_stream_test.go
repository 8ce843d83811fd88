package bigqueryio_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"
	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

func init() {
	register.Function1x1(producedSimple)
	register.Function1x1(resultRows)
	register.Function1x1(fileRowSimple)
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

func resultRows(r bigqueryio.TableResult) int { return int(r.Rows) }

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
// sequence: 80 rows over 8 s) exactly once, with a triggering frequency
// of 500 ms, on Prism: rows become visible while the pipeline runs (most
// about a frequency after they are produced), the results count every
// row, and at the end the table holds every row exactly once.
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
	res := bigqueryio.Write(s, "p.d.stream", rows, writeOpts(srv, bigqueryio.WithExactlyOnceStreaming(), bigqueryio.WithTriggeringFrequency(freq))...)
	passert.Equals(s, stats.Sum(s, beam.ParDo(s, resultRows, res.Results)), n)
	passert.Empty(s, res.FailedRows)

	v := watchVisibility(srv, "p.d.stream")
	run(t, p)
	seen := v.stop()
	checkCopies(t, srv, "p.d.stream", n, 1)
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
	res := bigqueryio.Write(s, "p.d.files", beam.ParDo(s, fileRowSimple, recs), writeOpts(srv, bigqueryio.WithExactlyOnceStreaming(), bigqueryio.WithTriggeringFrequency(freq))...)
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
