package avroio_test

// Dynamic destinations (WithDestination) in every write mode, and
// windowed writes (WithWindowedWrites) that fail.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	register.Function1x1[evRecord, string](eventKindDest)
	register.DoFn2x0[evRecord, func(beam.EventTime, evRecord)](&stampEventFn{})
	register.Emitter2[beam.EventTime, evRecord]()
	filesystem.Register(windowFailScheme, newWindowFailFS)
}

// eventKindDest routes an event to the directory of its kind.
func eventKindDest(e evRecord) string { return "/" + e.Kind + "/part" }

// eventKinds are the destinations' kinds; event i is of kind i%3.
var eventKinds = []string{"A", "B", "C"}

// windowBase is the start of the first window of stamped events.
var windowBase = time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC)

// eventTime is the event time of event id: 1.5 s apart from windowBase.
func eventTime(id int64) time.Time {
	return windowBase.Add(time.Duration(id) * 1500 * time.Millisecond)
}

// stampEventFn gives each event its eventTime.
type stampEventFn struct{}

func (*stampEventFn) ProcessElement(e evRecord, emit func(beam.EventTime, evRecord)) {
	emit(mtime.FromTime(eventTime(e.ID)), e)
}

// windowedEvents are the events [from, to), stamped, in fixed windows of
// one minute (40 events each).
func windowedEvents(s beam.Scope, from, to int64) beam.PCollection {
	return beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, &stampEventFn{}, events(s, from, to)))
}

// checkEventIDs reads the files and checks that together they hold
// exactly the events ids, each once and whole.
func checkEventIDs(t *testing.T, files []string, ids []int64) {
	t.Helper()
	var got []int64
	for _, f := range files {
		recs, _ := readEvents(t, f)
		for _, e := range recs {
			if want := makeEvent(e.ID); !equalEvent(e, want) {
				t.Fatalf("%s: record %d:\n got %+v\nwant %+v", f, e.ID, e, want)
			}
			got = append(got, e.ID)
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	if !reflect.DeepEqual(got, ids) {
		t.Errorf("%d files hold ids %v, want %v", len(files), got, ids)
	}
}

// idsWhere is the ids in [0, n) that keep holds for.
func idsWhere(n int64, keep func(int64) bool) []int64 {
	var out []int64
	for i := int64(0); i < n; i++ {
		if keep(i) {
			out = append(out, i)
		}
	}
	return out
}

var windowedEventName = regexp.MustCompile(`^part-(\d{8}T\d{6}\.\d{3}Z)-(\d{8}T\d{6}\.\d{3}Z)-pane-0-(\d{5})-of-(\d{5})$`)

// TestWriteDestinations routes events to three destinations (by kind,
// each a directory under the prefix) with runner sharding, with
// NumShards(2), and windowed in one-minute windows: each destination's
// files hold exactly its events, named and numbered on their own.
func TestWriteDestinations(t *testing.T) {
	dir := t.TempDir()
	const n = 300
	p, s := beam.NewPipelineWithRoot()
	dest := avroio.WithDestination(eventKindDest)
	runner := avroio.Write(s.Scope("runner"), filepath.Join(dir, "runner"), eventSchema, events(s, 0, n), dest)
	fixed := avroio.Write(s.Scope("fixed"), filepath.Join(dir, "fixed"), eventSchema, events(s, 0, n), dest, avroio.WithNumShards(2), avroio.WithSuffix(".avro"))
	windowed := avroio.Write(s.Scope("windowed"), filepath.Join(dir, "windowed"), eventSchema, windowedEvents(s, 0, n), dest, avroio.WithWindowedWrites())
	var wantFixed []any
	for _, k := range eventKinds {
		for i := 0; i < 2; i++ {
			wantFixed = append(wantFixed, filepath.Join(dir, "fixed", k, fmt.Sprintf("part-%05d-of-00002.avro", i)))
		}
	}
	// The names returned: of the fixed shards only; the files of the other
	// modes are checked on disk below. Each passert is a GroupByKey more,
	// and Prism v2.77 runs a GroupByKey as a runner transform whose
	// progress ticker, when the stage's goroutine is starved for 100 ms
	// (a loaded machine under -race), asks a nil worker for progress: a
	// nil dereference in worker.(*W).NextInst that fails the job.
	passert.Equals(s, fixed, wantFixed...)
	_, _ = runner, windowed
	res := runWritePipeline(t, p)

	for k, kind := range eventKinds {
		ids := idsWhere(n, func(i int64) bool { return i%3 == int64(k) })
		t.Run(kind, func(t *testing.T) {
			// Runner sharding: files numbered within the destination.
			names := dirNames(t, filepath.Join(dir, "runner", kind))
			var files []string
			for i, name := range names {
				if want := fmt.Sprintf("part-%05d-of-%05d", i, len(names)); name != want {
					t.Errorf("runner/%s: file %d is %s, want %s", kind, i, name, want)
				}
				files = append(files, filepath.Join(dir, "runner", kind, name))
			}
			checkEventIDs(t, files, ids)

			files = nil
			for _, f := range wantFixed {
				if strings.Contains(f.(string), "/"+kind+"/") {
					files = append(files, f.(string))
				}
			}
			if got := dirNames(t, filepath.Join(dir, "fixed", kind)); len(got) != 2 {
				t.Errorf("fixed/%s holds %v, want 2 shards", kind, got)
			}
			checkEventIDs(t, files, ids)

			// Windowed: a file per window, holding its events of the kind.
			files = nil
			for _, name := range dirNames(t, filepath.Join(dir, "windowed", kind)) {
				m := windowedEventName.FindStringSubmatch(name)
				if m == nil {
					t.Errorf("windowed/%s/%s is not a windowed name", kind, name)
					continue
				}
				if m[3] != "00000" || m[4] != "00001" {
					t.Errorf("windowed/%s/%s: want shard 0 of 1", kind, name)
				}
				start, _ := time.Parse("20060102T150405.000Z", m[1])
				path := filepath.Join(dir, "windowed", kind, name)
				files = append(files, path)
				recs, _ := readEvents(t, path)
				for _, e := range recs {
					if w := eventTime(e.ID).Truncate(time.Minute); !w.Equal(start) {
						t.Errorf("%s holds event %d of window %v", name, e.ID, w)
					}
				}
			}
			// 300 events 1.5 s apart: 8 windows (the last holds 20), each
			// with events of the three kinds.
			if len(files) != 8 {
				t.Errorf("windowed/%s: %d files, want 8", kind, len(files))
			}
			checkEventIDs(t, files, ids)
		})
	}
	for _, mode := range []string{"runner", "fixed", "windowed"} {
		if got := dirNames(t, filepath.Join(dir, mode)); !reflect.DeepEqual(got, eventKinds) {
			t.Errorf("%s/ holds %v, want the three destinations", mode, got)
		}
	}
	if left := tempLeftovers(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if got := writeMetric(t, res, "records_written"); got != 3*n {
		t.Errorf("records_written = %d, want %d", got, 3*n)
	}
	if got := writeMetric(t, res, "files_written"); got != 3+6+24 {
		t.Errorf("files_written = %d, want %d", got, 3+6+24)
	}
}

// TestWriteDestinationsEmpty: with destinations, an empty input writes no
// file (there is no destination to name one), in both global modes.
func TestWriteDestinationsEmpty(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	dest := avroio.WithDestination(eventKindDest)
	a := avroio.Write(s.Scope("runner"), filepath.Join(dir, "runner"), eventSchema, events(s, 0, 0), dest)
	b := avroio.Write(s.Scope("fixed"), filepath.Join(dir, "fixed"), eventSchema, events(s, 0, 0), dest, avroio.WithNumShards(3))
	passert.Empty(s, a)
	passert.Empty(s, b)
	runWritePipeline(t, p)
	if got := dirNames(t, dir); len(got) != 0 {
		t.Errorf("an empty input wrote %v", got)
	}
}

// windowfailfs:// is the local filesystem whose writers fail when closed
// for the temporary files of a windowed write in the window starting at
// windowFailStart; everything else it writes normally.
const windowFailScheme = "windowfailfs"

var windowFailStart = windowBase.Add(2 * time.Minute).Format("20060102T150405.000Z")

func newWindowFailFS(context.Context) filesystem.Interface {
	return localSchemeFS{scheme: windowFailScheme, wrap: func(p string, f *os.File) io.WriteCloser {
		if strings.Contains(p, "/.temp-sdfio-") && strings.HasPrefix(filepath.Base(p), "part-"+windowFailStart+"-") {
			return failingCloser{f}
		}
		return f
	}}
}

// TestWindowedWriteFailureLeavesNothing: in a windowed write, a window
// whose file fails to commit (its temporary file's Close fails, as an
// upload can) fails the pipeline naming the cause and leaves no file of
// it, under its final name or a temporary one; and a record the schema
// cannot hold fails it before any file of its window is written. Files
// of other windows that were committed before the failure are whole and
// hold exactly their window's events.
func TestWindowedWriteFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		want  string
		write func(s beam.Scope, dir string) (badWindow string)
	}{
		{"commit", errCommit.Error(), func(s beam.Scope, dir string) string {
			avroio.Write(s, windowFailScheme+"://"+dir+"/out/part", eventSchema, windowedEvents(s, 0, 200), avroio.WithWindowedWrites())
			return windowFailStart
		}},
		{"commit, NumShards(3)", errCommit.Error(), func(s beam.Scope, dir string) string {
			avroio.Write(s, windowFailScheme+"://"+dir+"/out/part", eventSchema, windowedEvents(s, 0, 200), avroio.WithWindowedWrites(), avroio.WithNumShards(3))
			return windowFailStart
		}},
		{"record", "NOT_A_SYMBOL", func(s beam.Scope, dir string) string {
			in := beam.ParDo(s, &badEventFn{Good: 100}, beam.Impulse(s))
			in = beam.WindowInto(s, window.NewFixedWindows(time.Minute), beam.ParDo(s, &stampEventFn{}, in))
			avroio.Write(s, filepath.Join(dir, "out/part"), eventSchema, in, avroio.WithWindowedWrites())
			return eventTime(100).Truncate(time.Minute).Format("20060102T150405.000Z")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p, s := beam.NewPipelineWithRoot()
			bad := tc.write(s, dir)
			err := workertest.RunFailing(t, p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("pipeline error %v, want one saying %q", err, tc.want)
			}
			if left := tempLeftovers(t, dir); len(left) > 0 {
				t.Errorf("the failed write left %v", left)
			}
			if _, err := os.Stat(filepath.Join(dir, "out")); err != nil {
				return // nothing was committed
			}
			for _, name := range dirNames(t, filepath.Join(dir, "out")) {
				if strings.HasPrefix(name, "part-"+bad+"-") {
					t.Errorf("out/%s: a file of the failed window", name)
					continue
				}
				m := windowedEventName.FindStringSubmatch(name)
				if m == nil {
					t.Errorf("out/%s is not a windowed name", name)
					continue
				}
				start, _ := time.Parse("20060102T150405.000Z", m[1])
				recs, _ := readEvents(t, filepath.Join(dir, "out", name))
				if len(recs) == 0 {
					t.Errorf("out/%s is empty", name)
				}
				for _, e := range recs {
					if w := eventTime(e.ID).Truncate(time.Minute); !w.Equal(start) {
						t.Errorf("out/%s holds event %d of window %v", name, e.ID, w)
					}
					if !equalEvent(e, makeEvent(e.ID)) {
						t.Errorf("out/%s: event %d is not whole", name, e.ID)
					}
				}
			}
		})
	}
}
