package avroflink_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/internal/flinktest"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	register.DoFn3x1[beam.EventTime, Event, func(string), error](&markFn{})
	register.Emitter1[string]()
}

// watchFileIDs is the first id of watched file k; each holds watchPerFile
// records.
const (
	watchFileIDs = 100000
	watchPerFile = 60
)

// markFn notes in Dir that the pipeline read a record of file k (a file
// named k; the test adds file k+1 once it is there) and passes the
// record's key on with its event time, in milliseconds, after a tab.
type markFn struct{ Dir string }

func (fn *markFn) ProcessElement(et beam.EventTime, e Event, emit func(string)) error {
	mark := filepath.Join(fn.Dir, strconv.FormatInt(e.ID/watchFileIDs, 10))
	if _, err := os.Stat(mark); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(mark, nil, 0o644); err != nil {
			return err
		}
	}
	emit(fmt.Sprintf("%s\t%d", eventKey(e), et.Milliseconds()))
	return nil
}

// TestWatch runs avroio.WatchForNewFiles in Flink's streaming mode over a
// directory that grows while the job runs: file 0 is there when the job
// starts, and file k+1 (written before by python3-avro in a codec of its
// own, moved in by a rename) appears once the pipeline has read a record
// of file k. The watch ends when no new file came for the idle time
// (AfterNoNewFilesFor, bounded by AfterDuration), and with it the job.
// Every record of every file must be read once, with the event time of a
// poll after its file appeared, and the watch must count the files. What
// it reads is also written with WithWindowedWrites in fixed windows of
// 2 s, as an unbounded input is written: each record once, in the file of
// the window of its event time.
//
// What the test does not check, because Beam 2.62's Flink runner does not
// do it: polling once per interval. Once the watch's input (the pattern,
// a bounded Create) has ended, Flink calls the SDF operator's finish(),
// whose flushData fires every pending processing-time timer at once
// (DoFnOperator.FlinkTimerInternals.processPendingProcessingTimeTimers),
// and with it each new one the watch's self-checkpoint sets: the watch
// lists the pattern back to back, 10-30 ms apart, until its termination
// condition holds (about 200 polls a second here, whatever the interval).
// Without checkpointing the input ends at once; with it, when the sources
// shut down (shutdown_sources_after_idle_ms). Before that, the runner
// honours the delay in whole seconds only (BundleCheckpointHandlers drops
// the delay's nanos: 200 ms resumes at once).
func TestWatch(t *testing.T) {
	requireTools(t)
	const (
		files    = 5
		interval = time.Second
		idle     = 8 * time.Second
		win      = 2 * time.Second
		total    = 60 * time.Second
	)
	dir, staging, marks, out, wout := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	codecs := []string{"snappy", "deflate", "null", "zstandard", "xz", "bzip2"}
	var py []pyFile
	var ids [][2]int64
	for k := 0; k < files; k++ {
		f := pyFile{Path: filepath.Join(staging, fmt.Sprintf("w-%d.avro", k)), Codec: codecs[k%len(codecs)], First: int64(k) * watchFileIDs, N: watchPerFile}
		py, ids = append(py, f), append(ids, [2]int64{f.First, f.N})
	}
	writePython(t, 300, py...)
	appeared := make([]time.Time, files)
	place := func(k int) error {
		appeared[k] = time.Now()
		return os.Rename(py[k].Path, filepath.Join(dir, filepath.Base(py[k].Path)))
	}
	if err := place(0); err != nil {
		t.Fatal(err)
	}

	p, s := beam.NewPipelineWithRoot()
	recs := avroio.WatchForNewFiles(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[Event](), interval,
		avroio.EitherOf(avroio.AfterNoNewFilesFor(idle), avroio.AfterDuration(total)),
		avroio.WithDesiredBundleSize(readBundle), avroio.WithMinBundleSize(readMinBundle), avroio.WithMetricsNamespace("watch"))
	dump(s, beam.ParDo(s, &markFn{Dir: marks}, recs), filepath.Join(out, "watch.json"))
	ws := s.Scope("windowed")
	names := avroio.Write(ws, filepath.Join(wout, "part"), EventSchema, beam.WindowInto(ws, window.NewFixedWindows(win), recs),
		avroio.WithWindowedWrites(), avroio.WithSuffix(".avro"), avroio.WithMetricsNamespace("write"))
	dump(ws, names, filepath.Join(out, "names.json"))

	// The goroutine logs through the channel: it may outlive a failed test.
	type growth struct {
		logs []string
		err  error
	}
	grown := make(chan growth, 1)
	grow := func(ctx context.Context, _ *workertest.Live) {
		var g growth
		g.err = func() error {
			for k := 1; k < files; k++ {
				mark := filepath.Join(marks, strconv.Itoa(k-1))
				for {
					if _, err := os.Stat(mark); err == nil {
						break
					}
					select {
					case <-ctx.Done():
						return fmt.Errorf("the job ended before it read file %d", k-1)
					case <-time.After(50 * time.Millisecond):
					}
				}
				g.logs = append(g.logs, fmt.Sprintf("file %d read %v after it appeared; adding file %d", k-1, time.Since(appeared[k-1]).Round(time.Millisecond), k))
				if err := place(k); err != nil {
					return err
				}
			}
			return nil
		}()
		grown <- g
	}
	start := time.Now()
	res := flinktest.MustRun(t, p, flinktest.WithStreaming(),
		flinktest.WithWorkertest(workertest.WithTimeout(total+30*time.Second), workertest.WithWatch(grow)))
	end := time.Now()
	t.Logf("ran in %v on %d workers", res.Elapsed, len(res.Workers))
	select {
	case g := <-grown:
		for _, l := range g.logs {
			t.Log(l)
		}
		if g.err != nil {
			t.Fatalf("growing the directory: %v", g.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the goroutine growing the directory did not end with the job")
	}

	var keys []string
	eventTime := map[int64]time.Time{}
	for _, line := range readDump(t, filepath.Join(out, "watch.json")) {
		key, ms, ok := strings.Cut(line, "\t")
		et, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil {
			t.Fatalf("a result without its event time: %q", line)
		}
		keys = append(keys, key)
		idText, _, _ := strings.Cut(key, "|")
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil {
			continue // the oracle reports it
		}
		eventTime[id] = time.UnixMilli(et)
		k := int(id / watchFileIDs)
		if k < 0 || k >= files {
			continue // the oracle reports it
		}
		if got := time.UnixMilli(et); got.Before(appeared[k].Truncate(time.Millisecond)) || got.After(end) {
			t.Errorf("record %d of file %d has event time %v; the file appeared at %v, the job ended at %v", id, k, got, appeared[k], end)
		}
	}
	want := newOracle(ids...)
	want.check(t, "avroio.WatchForNewFiles", keys)
	polls := counter(res, "watch", "watch_polls")
	t.Logf("watch: polls %d, new files %d, files waiting %d, records %d, ranges_read %d; job %v",
		polls, counter(res, "watch", "watch_new_files"), counter(res, "watch", "watch_files_waiting"),
		counter(res, "watch", "records"), counter(res, "watch", "ranges_read"), end.Sub(start))
	if end.Sub(start) >= total {
		t.Errorf("the job ran %v: the watch ended by AfterDuration(%v), not when no file came for %v", end.Sub(start), total, idle)
	}
	if polls < files+1 {
		t.Errorf("watch_polls %d, want at least %d: a poll for each file and one more", polls, files+1)
	}
	if got := counter(res, "watch", "watch_new_files"); got != files {
		t.Errorf("watch_new_files %d, want %d", got, files)
	}
	if got := counter(res, "watch", "records"); got != files*watchPerFile {
		t.Errorf("records metric %d, want %d", got, files*watchPerFile)
	}

	// The windowed write of what the watch read.
	const stamp = "20060102T150405.000Z"
	name := regexp.MustCompile(`^part-(\d{8}T\d{6}\.\d{3}Z)-(\d{8}T\d{6}\.\d{3}Z)-pane-(\d+)-00000-of-00001\.avro$`)
	written := readWritten(t, wout, name)
	want.check(t, "avroio.Write windowed, of the watch", allKeys(written))
	checkNames(t, "windowed write", readDump(t, filepath.Join(out, "names.json")), written)
	for _, f := range written {
		m := name.FindStringSubmatch(filepath.Base(f.Path))
		start, err1 := time.Parse(stamp, m[1])
		end, err2 := time.Parse(stamp, m[2])
		if err1 != nil || err2 != nil || end.Sub(start) != win {
			t.Errorf("%s does not name a fixed window of %v", f.Path, win)
			continue
		}
		for _, id := range f.IDs {
			if et, ok := eventTime[id]; !ok || et.Before(start) || !et.Before(end) {
				t.Errorf("%s holds record %d, read with event time %v (known %v)", f.Path, id, et, ok)
				break
			}
		}
	}
	t.Logf("windowed write: %d files; records_written %d, files_written %d", len(written),
		counter(res, "write", "records_written"), counter(res, "write", "files_written"))
	if got := counter(res, "write", "records_written"); got != files*watchPerFile {
		t.Errorf("records_written %d, want %d", got, files*watchPerFile)
	}
}
