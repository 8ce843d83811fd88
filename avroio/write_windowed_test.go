package avroio

// Windowed writes (WithWindowedWrites): the names of their files, a
// retried group, and an unbounded pipeline on Prism that watches for
// files and writes what it reads, window by window.

import (
	"context"
	"fmt"
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
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window/trigger"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.DoFn2x0[watchEvent, func(beam.EventTime, watchEvent)](&watchStampFn{})
	register.Emitter2[beam.EventTime, watchEvent]()
	register.Function1x1[watchEvent, string](watchEventDest)
}

func TestWindowedNames(t *testing.T) {
	start := time.Date(2026, 12, 3, 15, 4, 0, 0, time.UTC)
	iw := window.IntervalWindow{Start: mtime.FromTime(start), End: mtime.FromTime(start.Add(time.Minute))}
	odd := window.IntervalWindow{Start: mtime.FromTime(start.Add(1234 * time.Millisecond)), End: mtime.FromTime(start.Add(time.Hour + 5*time.Millisecond))}
	cfg := writeConfig{Prefix: "gs://b/out/part", Template: DefaultShardNameTemplate, Suffix: ".avro"}
	custom := writeConfig{Prefix: "/data/x", Template: "_S_of_N"}
	cases := []struct {
		cfg   writeConfig
		dest  string
		w     typex.Window
		pane  typex.PaneInfo
		shard int
		n     int
		want  string
	}{
		{cfg, "", iw, typex.PaneInfo{}, 0, 1, "gs://b/out/part-20261203T150400.000Z-20261203T150500.000Z-pane-0-00000-of-00001.avro"},
		{cfg, "", iw, typex.PaneInfo{Index: 7}, 2, 3, "gs://b/out/part-20261203T150400.000Z-20261203T150500.000Z-pane-7-00002-of-00003.avro"},
		{cfg, "/eu", odd, typex.PaneInfo{Index: 12}, 0, 1, "gs://b/out/part/eu-20261203T150401.234Z-20261203T160400.005Z-pane-12-00000-of-00001.avro"},
		{cfg, "", window.GlobalWindow{}, typex.PaneInfo{Index: 3}, 1, 2, "gs://b/out/part-global-pane-3-00001-of-00002.avro"},
		{custom, "-k", iw, typex.PaneInfo{Index: 1}, 4, 10, "/data/x-k-20261203T150400.000Z-20261203T150500.000Z-pane-1_4_of_10"},
	}
	for _, c := range cases {
		got, err := c.cfg.windowedName(c.dest, c.w, c.pane, c.shard, c.n)
		if err != nil || got != c.want {
			t.Errorf("windowedName(%q, %v, pane %d, %d of %d) = %q, %v; want %q", c.dest, c.w, c.pane.Index, c.shard, c.n, got, err, c.want)
		}
		if strings.Contains(strings.TrimPrefix(got, "gs://"), ":") {
			t.Errorf("%q has a ':'", got)
		}
	}
	// A window of another type has no name.
	if _, err := cfg.windowedName("", fakeWindow{}, typex.PaneInfo{}, 0, 1); err == nil || !strings.Contains(err.Error(), "fakeWindow") {
		t.Errorf("a window of an unknown type: error %v", err)
	}
	// One file per window unless WithNumShards.
	if n := cfg.windowShards(); n != 1 {
		t.Errorf("default shards per window: %d", n)
	}
	if n := (writeConfig{NumShards: 4}).windowShards(); n != 4 {
		t.Errorf("WithNumShards(4) shards per window: %d", n)
	}
	// Shard keys carry any destination, slashes included.
	for _, d := range []string{"", "a", "x/y/z", "7/8"} {
		for _, s := range []int{0, 3, errorShard} {
			dest, shard, err := parseShardKey(shardKey(d, s))
			if err != nil || dest != d || shard != s {
				t.Errorf("shard key of (%q, %d) parses to (%q, %d, %v)", d, s, dest, shard, err)
			}
		}
	}
	if _, _, err := parseShardKey("nokey"); err == nil {
		t.Error("parseShardKey(nokey) did not fail")
	}
}

type fakeWindow struct{}

func (fakeWindow) MaxTimestamp() typex.EventTime { return 0 }
func (fakeWindow) Equals(o typex.Window) bool    { return o == fakeWindow{} }

// TestDestinationChecks: the destination function's type must be the
// element type, and destinations that would leave the prefix are refused.
func TestDestinationChecks(t *testing.T) {
	schema := watchEventSchema
	_, err := newWriteConfig("/x/out", schema, reflect.TypeFor[watchEvent](), []WriteOption{WithDestination(func(r Record) string { return "" })})
	if err == nil || !strings.Contains(err.Error(), "WithDestination") || !strings.Contains(err.Error(), "takes avroio.Record") {
		t.Errorf("a destination function of another type: error %v", err)
	}
	_, err = newWriteConfig("/x/out", schema, reflect.TypeFor[watchEvent](), []WriteOption{WithDestination[watchEvent](nil)})
	if err == nil || !strings.Contains(err.Error(), "nil function") {
		t.Errorf("a nil destination function: error %v", err)
	}
	cfg, dest, err := newWriteConfigDest("/x/out", schema, reflect.TypeFor[watchEvent](), []WriteOption{WithDestination(watchEventDest)})
	if err != nil || dest == nil || !cfg.Dynamic {
		t.Fatalf("WithDestination(watchEventDest): %v, %v, %v", cfg.Dynamic, dest, err)
	}
	for _, c := range []struct {
		name string
		bad  string
	}{{"../up", `".." element`}, {"a/../../b", `".." element`}, {"gs://x", `"://"`}} {
		if _, err := dest.of(watchEvent{Name: c.name}); err == nil || !strings.Contains(err.Error(), c.bad) {
			t.Errorf("destination %q: error %v, want one saying %s", c.name, err, c.bad)
		}
	}
	if d, err := dest.of(watchEvent{Name: "w/x"}); err != nil || d != "w/x" {
		t.Errorf("destination of w/x: %q, %v", d, err)
	}
}

// watchEventDest routes a watch event by its name.
func watchEventDest(e watchEvent) string { return e.Name }

// TestWriteWindowRetried: a group written twice (a bundle retried after
// its first attempt committed) makes one file, whole, with the group's
// records once, and leaves no temporary directory.
func TestWriteWindowRetried(t *testing.T) {
	dir := t.TempDir()
	cfg, err := newWriteConfig(filepath.Join(dir, "out/p"), watchEventSchema, reflect.TypeFor[watchEvent](), []WriteOption{WithWindowedWrites(), WithNumShards(2)})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newElementEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var datums [][]byte
	for i := int64(0); i < 50; i++ {
		d, err := enc.encode(watchEvent{ID: i, Name: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		datums = append(datums, append([]byte(nil), d...))
	}
	start := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	w := window.IntervalWindow{Start: mtime.FromTime(start), End: mtime.FromTime(start.Add(time.Minute))}
	ctx := context.Background()
	fn := &writeWindowFn{Config: cfg}
	if err := fn.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	var emitted []string
	for attempt := 0; attempt < 2; attempt++ {
		i := 0
		iter := func(d *[]byte) bool {
			if i == len(datums) {
				return false
			}
			*d = datums[i]
			i++
			return true
		}
		if err := fn.ProcessElement(ctx, typex.PaneInfo{Index: 2}, w, shardKey("/k", 1), iter, func(s string) { emitted = append(emitted, s) }); err != nil {
			t.Fatalf("attempt %d: %v", attempt, err)
		}
	}
	want := filepath.Join(dir, "out/p/k-20260102T030400.000Z-20260102T030500.000Z-pane-2-00001-of-00002")
	if len(emitted) != 2 || emitted[0] != want || emitted[1] != want {
		t.Fatalf("emitted %v, want %s twice", emitted, want)
	}
	if got := dirNames(t, filepath.Join(dir, "out/p")); !reflect.DeepEqual(got, []string{filepath.Base(want)}) {
		t.Errorf("out/p holds %v", got)
	}
	if got := dirNames(t, filepath.Join(dir, "out")); !reflect.DeepEqual(got, []string{"p"}) {
		t.Errorf("out holds %v, want no temporary directory", got)
	}
	recs := readContainer[watchEvent](t, want)
	if len(recs) != 50 {
		t.Fatalf("%d records, want 50", len(recs))
	}
	for i, r := range recs {
		if r.ID != int64(i) {
			t.Fatalf("record %d has id %d", i, r.ID)
		}
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// watchStampFn gives each event its event time (watchEventTime).
type watchStampFn struct{ BaseMillis int64 }

func (fn *watchStampFn) ProcessElement(e watchEvent, emit func(beam.EventTime, watchEvent)) {
	emit(mtime.FromTime(watchEventTime(time.UnixMilli(fn.BaseMillis), e.ID)), e)
}

// watchEventTime is the event time of event id of a watch file (file
// id/1000, record id%1000): 50 s a file and 7 s a record after base, so
// that the files' records spread over several one-minute windows, and
// most windows hold records of more than one file.
func watchEventTime(base time.Time, id int64) time.Time {
	return base.Add(time.Duration(id/1000)*50*time.Second + time.Duration(id%1000)*7*time.Second)
}

// windowedFile is an output file of a windowed write, by its name.
type windowedFile struct {
	path       string
	start, end time.Time
	pane       int
	shard, n   int
}

var windowedNameRE = regexp.MustCompile(`^part-(\d{8}T\d{6}\.\d{3}Z)-(\d{8}T\d{6}\.\d{3}Z)-pane-(\d+)-(\d{5})-of-(\d{5})\.avro$`)

// windowedFiles parses the names of the files in dir; any other name
// fails the test.
func windowedFiles(t *testing.T, dir string) []windowedFile {
	t.Helper()
	var out []windowedFile
	for _, name := range dirNames(t, dir) {
		m := windowedNameRE.FindStringSubmatch(name)
		if m == nil {
			t.Errorf("%s in %s is not a windowed file name", name, dir)
			continue
		}
		f := windowedFile{path: filepath.Join(dir, name)}
		var err error
		if f.start, err = time.Parse(windowTimeLayout, m[1]); err != nil {
			t.Fatal(err)
		}
		if f.end, err = time.Parse(windowTimeLayout, m[2]); err != nil {
			t.Fatal(err)
		}
		fmt.Sscan(m[3], &f.pane)
		fmt.Sscan(m[4], &f.shard)
		fmt.Sscan(m[5], &f.n)
		out = append(out, f)
	}
	return out
}

// TestWindowedWatchPipeline: an unbounded pipeline on Prism watches a
// directory while files appear in it, gives each record an event time
// from its id, windows them in fixed windows of one minute and writes
// them with WithWindowedWrites, twice: with the default trigger (one
// pane per window, when the watch ends and the watermark passes the
// windows), and with a trigger firing early after every 5 records and on time
// (discarding), so that windows have several panes. In both, every record is written
// exactly once, into a file of its own window, named by the window, the
// pane and the shard; the panes of a window are numbered from 0 without
// a gap; no temporary file is left.
func TestWindowedWatchPipeline(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	glob := watchScheme + "://" + filepath.Join(in, "*.avro")
	const interval = 100 * time.Millisecond
	sizes := []int{9, 4, 12, 1, 8}
	// Event times an hour ahead: past the watch's watermark (its last
	// poll), so no record is late; the windows fire when the watch ends.
	base := time.Now().UTC().Truncate(time.Minute).Add(time.Hour)

	p, s := beam.NewPipelineWithRoot()
	// The watch ends 4 s after the last new file: long enough that a
	// loaded machine does not end it between two of the writer's files.
	recs := WatchForNewFiles(s, glob, reflect.TypeFor[watchEvent](), interval, AfterNoNewFilesFor(4*time.Second))
	stamped := beam.ParDo(s, &watchStampFn{BaseMillis: base.UnixMilli()}, recs)
	windowed := beam.WindowInto(s, window.NewFixedWindows(time.Minute), stamped)
	Write(s.Scope("once"), filepath.Join(dir, "once/part"), watchEventSchema, windowed, WithWindowedWrites(), WithSuffix(".avro"))
	panes := beam.WindowInto(s, window.NewFixedWindows(time.Minute), stamped,
		beam.Trigger(trigger.AfterEndOfWindow().EarlyFiring(trigger.Repeat(trigger.AfterCount(5)))), beam.PanesDiscard())
	Write(s.Scope("panes"), filepath.Join(dir, "panes/part"), watchEventSchema, panes, WithWindowedWrites(), WithSuffix(".avro"))

	watchListsMu.Lock()
	lists := watchLists[glob]
	watchListsMu.Unlock()
	writerErr := make(chan error, 1)
	go func() {
		writerErr <- func() error {
			for i, n := range sizes {
				var err error
				if lists, err = waitLists(glob, lists+2, time.Minute); err != nil {
					return err
				}
				if _, err := writeWatchFile(in, fmt.Sprintf("f%d.avro", i), i, n); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	res, err := watchRun(p, watchTimeout)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	if err := <-writerErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if got := watchCounter(t, res, "watch_new_files"); got != int64(len(sizes)) {
		t.Fatalf("watch_new_files = %d, want %d: the watch ended before the last file", got, len(sizes))
	}

	// The records of each window, by its start.
	want := map[time.Time][]int64{}
	total := 0
	for i, n := range sizes {
		for j := 0; j < n; j++ {
			id := int64(i*1000 + j)
			w := watchEventTime(base, id).Truncate(time.Minute)
			want[w] = append(want[w], id)
			total++
		}
	}
	for _, ids := range want {
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	}
	for _, out := range []string{"once", "panes"} {
		t.Run(out, func(t *testing.T) {
			files := windowedFiles(t, filepath.Join(dir, out))
			got := map[time.Time][]int64{}
			panesOf := map[time.Time][]int{}
			for _, f := range files {
				if !f.end.Equal(f.start.Add(time.Minute)) || !f.start.Equal(f.start.Truncate(time.Minute)) {
					t.Errorf("%s: window [%v, %v) is not a one-minute fixed window", f.path, f.start, f.end)
				}
				if f.shard != 0 || f.n != 1 {
					t.Errorf("%s: shard %d of %d, want one file per window and pane", f.path, f.shard, f.n)
				}
				recs := readContainer[watchEvent](t, f.path)
				if len(recs) == 0 {
					t.Errorf("%s is empty", f.path)
				}
				for _, r := range recs {
					if w := watchEventTime(base, r.ID).Truncate(time.Minute); !w.Equal(f.start) {
						t.Errorf("%s holds record %d of window %v", f.path, r.ID, w)
					}
					if wantName := fmt.Sprintf("f%d.avro#%d", r.ID/1000, r.ID%1000); r.Name != wantName {
						t.Errorf("%s: record %d is named %q, want %q", f.path, r.ID, r.Name, wantName)
					}
					got[f.start] = append(got[f.start], r.ID)
				}
				panesOf[f.start] = append(panesOf[f.start], f.pane)
			}
			for w, ids := range got {
				sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
				if !reflect.DeepEqual(ids, want[w]) {
					t.Errorf("window %v: records %v, want %v", w, ids, want[w])
				}
			}
			for w := range want {
				if _, ok := got[w]; !ok {
					t.Errorf("window %v has no file", w)
				}
			}
			multi := 0
			for w, ps := range panesOf {
				sort.Ints(ps)
				for i, p := range ps {
					if p != i {
						t.Errorf("window %v: panes %v, want 0 to %d each once", w, ps, len(ps)-1)
						break
					}
				}
				if out == "once" && len(ps) != 1 {
					t.Errorf("window %v: %d panes with the default trigger", w, len(ps))
				}
				if len(ps) > 1 {
					multi++
				}
			}
			if out == "panes" && multi == 0 {
				t.Errorf("no window has more than one pane: %v", panesOf)
			}
			t.Logf("%s: %d files, panes per window %v", out, len(files), panesOf)
		})
	}
	if got := watchCounter(t, res, "records_written"); got != int64(2*total) {
		t.Errorf("records_written = %d, want %d", got, 2*total)
	}
	nfiles := len(dirNames(t, filepath.Join(dir, "once"))) + len(dirNames(t, filepath.Join(dir, "panes")))
	if got := watchCounter(t, res, "files_written"); got != int64(nfiles) {
		t.Errorf("files_written = %d, want the %d files", got, nfiles)
	}
	if got := dirNames(t, dir); !reflect.DeepEqual(got, []string{"in", "once", "panes"}) {
		t.Errorf("%s holds %v, want no temporary directory", dir, got)
	}
}
