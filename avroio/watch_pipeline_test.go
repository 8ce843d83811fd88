package avroio

// Watches on Prism: files appear in a directory while the pipeline runs,
// and the output is every record of every file exactly once.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	filesystem.Register(watchScheme, func(context.Context) filesystem.Interface { return watchFS{} })
	RegisterType(reflect.TypeFor[watchEvent]())
	register.Function1x1[watchEvent, int64](watchEventID)
	register.Function1x1[Record, int64](watchRecordID)
	register.Function1x1[fileio.FileMetadata, string](watchedPath)
	register.DoFn3x1[beam.EventTime, watchEvent, func(int64), error](&watchEventTimeFn{})
}

// watchEventTimeFn passes on record IDs, failing the pipeline unless the
// record's event time lies in [MinMillis, now]: the time of the poll that
// found its file.
type watchEventTimeFn struct{ MinMillis int64 }

func (fn *watchEventTimeFn) ProcessElement(et beam.EventTime, e watchEvent, emit func(int64)) error {
	if ms := et.Milliseconds(); ms < fn.MinMillis || ms > time.Now().UnixMilli() {
		return fmt.Errorf("record %d has event time %v, want a poll time after %v", e.ID, et.ToTime(), time.UnixMilli(fn.MinMillis))
	}
	emit(e.ID)
	return nil
}

// watchScheme is the local filesystem seen as an object store (no
// directories), counting the listings of each pattern, so that a test can
// write files between the polls of a running pipeline (Prism runs the
// workers in the test process).
const watchScheme = "watchtest"

// watchTimeout bounds a watch pipeline (they take a few seconds).
const watchTimeout = 45 * time.Second

var (
	watchListsMu sync.Mutex
	watchListsC  = sync.NewCond(&watchListsMu)
	watchLists   = map[string]int{} // glob -> listings
)

// waitLists waits until glob was listed at least n times and returns the
// count, or fails after timeout.
func waitLists(glob string, n int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, func() {
		watchListsMu.Lock()
		watchListsC.Broadcast()
		watchListsMu.Unlock()
	})
	defer t.Stop()
	watchListsMu.Lock()
	defer watchListsMu.Unlock()
	for watchLists[glob] < n {
		if time.Now().After(deadline) {
			return watchLists[glob], fmt.Errorf("%s listed %d times in %v, waiting for %d", glob, watchLists[glob], timeout, n)
		}
		watchListsC.Wait()
	}
	return watchLists[glob], nil
}

type watchFS struct{}

func (watchFS) local(p string) string { return strings.TrimPrefix(p, watchScheme+"://") }
func (watchFS) Close() error          { return nil }

func (fs watchFS) List(_ context.Context, glob string) ([]string, error) {
	names, err := filepath.Glob(fs.local(glob))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil && !fi.IsDir() {
			out = append(out, watchScheme+"://"+n)
		}
	}
	watchListsMu.Lock()
	watchLists[glob]++
	watchListsC.Broadcast()
	watchListsMu.Unlock()
	return out, nil
}

func (fs watchFS) OpenRead(_ context.Context, p string) (io.ReadCloser, error) {
	return os.Open(fs.local(p))
}

func (watchFS) OpenWrite(context.Context, string) (io.WriteCloser, error) {
	return nil, fmt.Errorf("read only")
}

func (fs watchFS) Size(_ context.Context, p string) (int64, error) {
	fi, err := os.Stat(fs.local(p))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (fs watchFS) LastModified(_ context.Context, p string) (time.Time, error) {
	fi, err := os.Stat(fs.local(p))
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

const watchEventSchema = `{"type":"record","name":"WatchEvent","namespace":"sdfio.test","fields":[
 {"name":"id","type":"long"},{"name":"name","type":"string"}]}`

type watchEvent struct {
	ID   int64  `avro:"id"`
	Name string `avro:"name"`
}

func watchEventID(e watchEvent) int64            { return e.ID }
func watchRecordID(r Record) int64               { return r["id"].(int64) }
func watchedPath(m fileio.FileMetadata) string   { return m.Path }
func watchFileIDs(file, records int) (ids []any) { return watchIDRange(file*1000, file*1000+records) }

func watchIDRange(from, to int) []any {
	var out []any
	for i := from; i < to; i++ {
		out = append(out, int64(i))
	}
	return out
}

// writeWatchFile writes file number i of records records with hamba's
// encoder (an independent writer), in blocks of 7 records, under a
// temporary name that the pattern does not match, and renames it into
// place: files appear whole.
func writeWatchFile(dir, name string, i, records int) (string, error) {
	var buf bytes.Buffer
	enc, err := ocf.NewEncoder(watchEventSchema, &buf, ocf.WithBlockLength(7), ocf.WithCodec(ocf.Snappy))
	if err != nil {
		return "", err
	}
	for j := 0; j < records; j++ {
		if err := enc.Encode(watchEvent{ID: int64(i*1000 + j), Name: fmt.Sprintf("%s#%d", name, j)}); err != nil {
			return "", err
		}
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	final := filepath.Join(dir, name)
	return final, os.Rename(tmp, final)
}

// watchRun runs p on ptest's runner, failing it if it runs longer than
// timeout: a watch that never stops must fail the test, not hang it.
func watchRun(p *beam.Pipeline, timeout time.Duration) (beam.PipelineResult, error) {
	r := *ptest.Runner
	if r == "" {
		r = ptest.DefaultRunner()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := beam.Run(ctx, r, p)
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("pipeline still running after %v", timeout)
	}
	return res, err
}

func watchCounter(t *testing.T, res beam.PipelineResult, name string) int64 {
	t.Helper()
	var sum int64
	for _, c := range res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == Namespace && r.Name() == name
	}).Counters() {
		sum += c.Result()
	}
	return sum
}

// TestWatchPipeline runs a watch of a directory on Prism while a goroutine
// adds Avro files to it, each after the watch listed the directory twice
// more (two of them at once), then touches the first file. The pipeline
// ends when no new file came for the idle time. Every record of every file
// is read exactly once, and MatchNewFiles, beside it, emits each path once.
func TestWatchPipeline(t *testing.T) {
	dir := t.TempDir()
	glob := watchScheme + "://" + filepath.Join(dir, "*.avro")
	const (
		interval = 100 * time.Millisecond
		idle     = 2 * time.Second
	)
	// Files and their record counts; files 3 and 4 appear together.
	sizes := []int{5, 1, 40, 17, 0, 23}
	var want, wantPaths []any
	for i, n := range sizes {
		want = append(want, watchFileIDs(i, n)...)
		wantPaths = append(wantPaths, watchScheme+"://"+filepath.Join(dir, fmt.Sprintf("f%d.avro", i)))
	}

	p, s := beam.NewPipelineWithRoot()
	recs := WatchForNewFiles(s, glob, reflect.TypeFor[watchEvent](), interval, AfterNoNewFilesFor(idle))
	passert.Equals(s, beam.ParDo(s, &watchEventTimeFn{MinMillis: time.Now().UnixMilli()}, recs), want...)
	files := MatchNewFiles(s, beam.Create(s, glob), interval, AfterNoNewFilesFor(idle))
	passert.Equals(s, beam.ParDo(s, watchedPath, files), wantPaths...)

	watchListsMu.Lock()
	lists := watchLists[glob]
	watchListsMu.Unlock()
	writerErr := make(chan error, 1)
	go func() {
		writerErr <- func() error {
			for i := 0; i < len(sizes); i++ {
				// Wait until both watches polled since the last file.
				n, err := waitLists(glob, lists+4, time.Minute)
				if err != nil {
					return err
				}
				lists = n
				if _, err := writeWatchFile(dir, fmt.Sprintf("f%d.avro", i), i, sizes[i]); err != nil {
					return err
				}
				if i == 3 {
					i++
					if _, err := writeWatchFile(dir, fmt.Sprintf("f%d.avro", i), i, sizes[i]); err != nil {
						return err
					}
				}
			}
			if _, err := waitLists(glob, lists+4, time.Minute); err != nil {
				return err
			}
			// A touched file is not new.
			now := time.Now()
			return os.Chtimes(filepath.Join(dir, "f0.avro"), now, now)
		}()
	}()

	start := time.Now()
	res, err := watchRun(p, watchTimeout)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("pipeline failed after %v: %v", elapsed, err)
	}
	if err := <-writerErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	t.Logf("watch pipeline ran %v; %d listings", elapsed, lists)
	if got := watchCounter(t, res, "watch_new_files"); got != 2*int64(len(sizes)) {
		t.Errorf("watch_new_files = %d, want %d (each file once in each watch)", got, 2*len(sizes))
	}
	if polls := watchCounter(t, res, "watch_polls"); polls < 2*int64(len(sizes)) {
		t.Errorf("watch_polls = %d, want at least %d", polls, 2*len(sizes))
	}
	if elapsed < idle {
		t.Errorf("pipeline ended after %v, before the idle time %v", elapsed, idle)
	}
}

// TestWatchAllPipeline watches two patterns of generic records, each until
// AfterDuration; files exist before the run and appear during it. A file
// that both patterns match is read once by each.
func TestWatchAllPipeline(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"a0.avro", "b0.avro"} {
		if _, err := writeWatchFile(dir, name, i, 3); err != nil {
			t.Fatal(err)
		}
	}
	globA := watchScheme + "://" + filepath.Join(dir, "a*.avro")
	globAll := watchScheme + "://" + filepath.Join(dir, "*.avro")
	const total = 2 * time.Second

	// Pattern a*: a0 (file 0), a1 (file 2); pattern *: a0, b0 (file 1), a1, b1 (file 3).
	want := append(watchFileIDs(0, 3), watchFileIDs(2, 4)...)
	want = append(want, watchFileIDs(0, 3)...)
	want = append(want, watchFileIDs(1, 3)...)
	want = append(want, watchFileIDs(2, 4)...)
	want = append(want, watchFileIDs(3, 6)...)

	p, s := beam.NewPipelineWithRoot()
	recs := WatchAllForNewFiles(s, beam.Create(s, globA, globAll), RecordType, 100*time.Millisecond, AfterDuration(total))
	passert.Equals(s, beam.ParDo(s, watchRecordID, recs), want...)

	watchListsMu.Lock()
	la, lall := watchLists[globA], watchLists[globAll]
	watchListsMu.Unlock()
	writerErr := make(chan error, 1)
	go func() {
		writerErr <- func() error {
			// Both watches have begun.
			if _, err := waitLists(globA, la+1, time.Minute); err != nil {
				return err
			}
			if _, err := waitLists(globAll, lall+1, time.Minute); err != nil {
				return err
			}
			if _, err := writeWatchFile(dir, "a1.avro", 2, 4); err != nil {
				return err
			}
			_, err := writeWatchFile(dir, "b1.avro", 3, 6)
			return err
		}()
	}()
	start := time.Now()
	if _, err := watchRun(p, watchTimeout); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	if err := <-writerErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if elapsed := time.Since(start); elapsed < total {
		t.Errorf("pipeline ended after %v, before %v", elapsed, total)
	}
}

func TestWatchConstruction(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	typ := reflect.TypeFor[watchEvent]()
	mustPanic(t, "zero poll interval", func() { WatchForNewFiles(s, "/tmp/*.avro", typ, 0, Never()) })
	mustPanic(t, "empty pattern", func() { WatchForNewFiles(s, " ", typ, time.Second, Never()) })
	mustPanic(t, "bad option", func() { WatchForNewFiles(s, "/tmp/*.avro", typ, time.Second, Never(), WithDesiredBundleSize(-1)) })
	mustPanic(t, "nil type", func() { WatchForNewFiles(s, "/tmp/*.avro", nil, time.Second, Never()) })
	mustPanic(t, "MatchNewFiles negative interval", func() { MatchNewFiles(s, beam.Create(s, "x"), -time.Second, Never()) })
}

// TestWatchPipelineSeparateWorker runs a watch with every SDK worker a
// separate process, as on Dataflow or Flink: the DoFn, its restriction
// coder and watermark estimator travel in the pipeline, and nothing is
// shared with the test process but the directory. A file appears while the
// pipeline runs.
func TestWatchPipelineSeparateWorker(t *testing.T) {
	dir := t.TempDir()
	if _, err := writeWatchFile(dir, "w0.avro", 0, 30); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	recs := WatchForNewFiles(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[watchEvent](), 200*time.Millisecond, AfterNoNewFilesFor(3*time.Second))
	passert.Equals(s, beam.ParDo(s, watchEventID, recs), append(watchFileIDs(0, 30), watchFileIDs(1, 12)...)...)
	writerErr := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		_, err := writeWatchFile(dir, "w1.avro", 1, 12)
		writerErr <- err
	}()
	res, err := workertest.Run(t, p)
	if err != nil {
		t.Fatalf("pipeline with separate worker processes failed: %v", err)
	}
	if err := <-writerErr; err != nil {
		t.Fatal(err)
	}
	if len(res.Workers) == 0 {
		t.Fatal("no worker process was started")
	}
	for _, w := range res.Workers {
		if w.PID == 0 || w.PID == os.Getpid() {
			t.Errorf("worker %s ran as pid %d, want a separate process", w.ID, w.PID)
		}
	}
	if n := watchCounter(t, res, "watch_new_files"); n != 2 {
		t.Errorf("watch_new_files = %d, want 2", n)
	}
	t.Logf("%d workers, %v", len(res.Workers), res.Elapsed)
}
