package avroflink_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/hamba/avro/v2/ocf"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/internal/flinktest"
)

func init() {
	register.DoFn2x0[[]byte, func(Event)](&genFn{})
	register.Emitter1[Event]()
	register.DoFn2x0[Event, func(beam.EventTime, Event)](&stampFn{})
	register.Emitter2[beam.EventTime, Event]()
}

// genFn emits the oracle's records First to First+N-1.
type genFn struct{ First, N int64 }

func (fn *genFn) ProcessElement(_ []byte, emit func(Event)) {
	for i := fn.First; i < fn.First+fn.N; i++ {
		emit(expectedEvent(i))
	}
}

// stampFn gives record i the event time Base + i*StepMillis.
type stampFn struct{ BaseMillis, StepMillis int64 }

func (fn *stampFn) ProcessElement(e Event, emit func(beam.EventTime, Event)) {
	emit(mtime.FromMilliseconds(fn.BaseMillis+e.ID*fn.StepMillis), e)
}

// writtenFile is a file a write left in its directory.
type writtenFile struct {
	Path string
	Keys []string // its records' keys
	IDs  []int64
}

// readWritten lists dir, fails t on anything in it that is not a file
// whose name matches name (a temporary file or directory left behind),
// and reads every file with hamba/avro's decoder, not avroio's reader.
func readWritten(t *testing.T, dir string, name *regexp.Regexp) []writtenFile {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []writtenFile
	for _, e := range ents {
		if e.IsDir() || !name.MatchString(e.Name()) {
			t.Errorf("%s: %s is left in the output directory (directory %v), want only files named %v", dir, e.Name(), e.IsDir(), name)
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := ocf.NewDecoder(f)
		if err != nil {
			f.Close()
			t.Fatalf("%s: %v", p, err)
		}
		w := writtenFile{Path: p}
		for dec.HasNext() {
			var ev Event
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("%s: record %d: %v", p, len(w.Keys), err)
			}
			if ev.Tags == nil {
				ev.Tags = []string{}
			}
			w.Keys, w.IDs = append(w.Keys, eventKey(ev)), append(w.IDs, ev.ID)
		}
		err = dec.Error()
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		files = append(files, w)
	}
	return files
}

// allKeys is the records of all files.
func allKeys(files []writtenFile) (keys []string) {
	for _, f := range files {
		keys = append(keys, f.Keys...)
	}
	return keys
}

// checkNames fails t unless the names the write returned are the files in
// its directory.
func checkNames(t *testing.T, what string, returned []string, files []writtenFile) {
	t.Helper()
	var listed []string
	for _, f := range files {
		listed = append(listed, f.Path)
	}
	sort.Strings(listed)
	if fmt.Sprint(returned) != fmt.Sprint(listed) {
		t.Errorf("%s: Write returned the names %v, the directory holds %v", what, returned, listed)
	}
}

// TestWrite writes N records with avroio.Write on Flink, twice in one
// job: with runner sharding (a file per bundle, the records reshuffled
// over both workers first) and with WithNumShards(3) in deflate. The
// files, read back here with hamba/avro, hold every record once; their
// names are part-SSSSS-of-NNNNN.avro with the shards 0..n-1 of one n
// (3 for the fixed write); Write returns exactly those names; nothing else
// (no temporary file or directory) is left; records_written and
// files_written agree.
func TestWrite(t *testing.T) {
	const n = 2000
	dir, out := t.TempDir(), t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	events := beam.Reshuffle(s, beam.ParDo(s, &genFn{First: 0, N: n}, beam.Impulse(s)))
	writes := []struct {
		ns     string
		shards int
		opts   []avroio.WriteOption
	}{
		{"auto", 0, nil},
		{"fixed", 3, []avroio.WriteOption{avroio.WithNumShards(3), avroio.WithCodec("deflate")}},
	}
	for _, w := range writes {
		ws := s.Scope(w.ns)
		opts := append([]avroio.WriteOption{avroio.WithSuffix(".avro"), avroio.WithMetricsNamespace(w.ns), avroio.WithSyncInterval(2000)}, w.opts...)
		names := avroio.Write(ws, filepath.Join(dir, w.ns, "part"), EventSchema, events, opts...)
		dump(ws, names, filepath.Join(out, w.ns+".json"))
	}
	res := flinktest.MustRun(t, p)
	t.Logf("ran in %v on %d workers", res.Elapsed, len(res.Workers))

	want := newOracle([2]int64{0, n})
	name := regexp.MustCompile(`^part-(\d{5})-of-(\d{5})\.avro$`)
	for _, w := range writes {
		files := readWritten(t, filepath.Join(dir, w.ns), name)
		want.check(t, "avroio.Write "+w.ns, allKeys(files))
		checkNames(t, w.ns, readDump(t, filepath.Join(out, w.ns+".json")), files)
		// Shards 0..n-1 of one n.
		shards := map[int]bool{}
		total := -1
		var sizes []int
		for _, f := range files {
			m := name.FindStringSubmatch(filepath.Base(f.Path))
			i, _ := strconv.Atoi(m[1])
			of, _ := strconv.Atoi(m[2])
			if total != -1 && of != total {
				t.Errorf("%s: %s says %d shards, another file %d", w.ns, f.Path, of, total)
			}
			total = of
			shards[i] = true
			sizes = append(sizes, len(f.Keys))
		}
		if len(files) == 0 || len(shards) != total || (w.shards > 0 && total != w.shards) {
			t.Errorf("%s: %d files of shards %v of %d, want shards 0..n-1 of n (n = %d when fixed)", w.ns, len(files), shards, total, w.shards)
		}
		for i := 0; i < total; i++ {
			if !shards[i] {
				t.Errorf("%s: no file for shard %d of %d", w.ns, i, total)
			}
		}
		t.Logf("%s: %d files, records per file %v; records_written %d, files_written %d, bytes_written %d, temp_files_removed %d", w.ns, len(files), sizes,
			counter(res, w.ns, "records_written"), counter(res, w.ns, "files_written"), counter(res, w.ns, "bytes_written"), counter(res, w.ns, "temp_files_removed"))
		if got := counter(res, w.ns, "records_written"); got != n {
			t.Errorf("%s: records_written %d, want %d", w.ns, got, n)
		}
		if got := counter(res, w.ns, "files_written"); got != int64(len(files)) {
			t.Errorf("%s: files_written %d, want the %d files", w.ns, got, len(files))
		}
	}
}

// TestWriteWindowed writes N timestamped records (record i at base +
// i*100 ms, 200 per window) in fixed windows of 20 s with
// WithWindowedWrites on Flink, with one file per window and with
// WithNumShards(2). Each window has its files, named
// part-<start>-<end>-pane-0-SSSSS-of-NNNNN.avro; each file holds only
// records of its window; all files together hold every record once;
// Write returns exactly their names; no temporary file or directory is
// left; records_written agrees.
func TestWriteWindowed(t *testing.T) {
	const (
		n    = 1000
		step = 100 // ms between records
		win  = 20 * time.Second
	)
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	dir, out := t.TempDir(), t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	events := beam.ParDo(s, &genFn{First: 0, N: n}, beam.Impulse(s))
	stamped := beam.ParDo(s, &stampFn{BaseMillis: base.UnixMilli(), StepMillis: step}, events)
	windowed := beam.WindowInto(s, window.NewFixedWindows(win), stamped)
	writes := []struct {
		ns     string
		shards int
		opts   []avroio.WriteOption
	}{
		{"window", 1, nil},
		{"window2", 2, []avroio.WriteOption{avroio.WithNumShards(2), avroio.WithCodec("null")}},
	}
	for _, w := range writes {
		ws := s.Scope(w.ns)
		opts := append([]avroio.WriteOption{avroio.WithWindowedWrites(), avroio.WithSuffix(".avro"), avroio.WithMetricsNamespace(w.ns)}, w.opts...)
		names := avroio.Write(ws, filepath.Join(dir, w.ns, "part"), EventSchema, windowed, opts...)
		dump(ws, names, filepath.Join(out, w.ns+".json"))
	}
	res := flinktest.MustRun(t, p)
	t.Logf("ran in %v on %d workers", res.Elapsed, len(res.Workers))

	want := newOracle([2]int64{0, n})
	const stamp = "20060102T150405.000Z"
	name := regexp.MustCompile(`^part-(\d{8}T\d{6}\.\d{3}Z)-(\d{8}T\d{6}\.\d{3}Z)-pane-(\d+)-(\d{5})-of-(\d{5})\.avro$`)
	windows := int(time.Duration(n*step) * time.Millisecond / win)
	for _, w := range writes {
		files := readWritten(t, filepath.Join(dir, w.ns), name)
		want.check(t, "avroio.Write windowed "+w.ns, allKeys(files))
		checkNames(t, w.ns, readDump(t, filepath.Join(out, w.ns+".json")), files)
		perWindow := map[time.Time]map[int]int{} // window start -> shard -> records
		for _, f := range files {
			m := name.FindStringSubmatch(filepath.Base(f.Path))
			start, err1 := time.Parse(stamp, m[1])
			end, err2 := time.Parse(stamp, m[2])
			shard, _ := strconv.Atoi(m[4])
			of, _ := strconv.Atoi(m[5])
			if err1 != nil || err2 != nil || end.Sub(start) != win || !start.Equal(start.Truncate(win)) {
				t.Errorf("%s: %s does not name a fixed window of %v: %v %v", w.ns, f.Path, win, err1, err2)
				continue
			}
			if m[3] != "0" || of != w.shards || shard >= of {
				t.Errorf("%s: %s: pane %s, shard %d of %d; want pane 0, a shard of %d", w.ns, f.Path, m[3], shard, of, w.shards)
			}
			if perWindow[start] == nil {
				perWindow[start] = map[int]int{}
			}
			perWindow[start][shard] += len(f.IDs)
			for _, id := range f.IDs {
				ts := base.Add(time.Duration(id*step) * time.Millisecond)
				if ts.Before(start) || !ts.Before(end) {
					t.Errorf("%s: %s holds record %d of event time %v, outside its window", w.ns, f.Path, id, ts)
					break
				}
			}
		}
		if len(perWindow) != windows {
			t.Errorf("%s: files for %d windows, want %d", w.ns, len(perWindow), windows)
		}
		for start, shards := range perWindow {
			if len(shards) != w.shards {
				t.Errorf("%s: window at %v has files for shards %v, want %d shards", w.ns, start, shards, w.shards)
			}
		}
		t.Logf("%s: %d files for %d windows; records_written %d, files_written %d", w.ns, len(files), len(perWindow),
			counter(res, w.ns, "records_written"), counter(res, w.ns, "files_written"))
		if got := counter(res, w.ns, "records_written"); got != n {
			t.Errorf("%s: records_written %d, want %d", w.ns, got, n)
		}
		if got := counter(res, w.ns, "files_written"); got != int64(len(files)) {
			t.Errorf("%s: files_written %d, want the %d files", w.ns, got, len(files))
		}
	}
}
