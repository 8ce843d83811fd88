package avroio

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/avroio/container"
)

// Unit tests of the write's commit protocol (finalize) and its file names,
// without a runner: Prism does not retry bundles, so the leftovers of failed
// and retried attempts, and a finalize step retried part way, are made by
// hand here. write_test.go shows the same in pipelines.

func TestExpandTemplate(t *testing.T) {
	cases := []struct {
		t        string
		shard, n int
		want     string
	}{
		{DefaultShardNameTemplate, 3, 10, "-00003-of-00010"},
		{DefaultShardNameTemplate, 0, 1, "-00000-of-00001"},
		{"SSS-NN", 5, 120, "005-120"}, // wider numbers are not cut
		{"S", 12, 20, "12"},
		{"", 0, 1, ""},
		{"part-S-of-N.P.W", 1, 2, "part-1-of-2.P.W"},
		{"SSNNSS", 7, 3, "070307"},
	}
	for _, c := range cases {
		if got := expandTemplate(c.t, c.shard, c.n); got != c.want {
			t.Errorf("expandTemplate(%q, %d, %d) = %q, want %q", c.t, c.shard, c.n, got, c.want)
		}
	}
	cfg := writeConfig{Prefix: "gs://b/dir/out", Template: DefaultShardNameTemplate, Suffix: ".avro"}
	if got := cfg.shardName(2, 4); got != "gs://b/dir/out-00002-of-00004.avro" {
		t.Errorf("shardName = %q", got)
	}
}

// TestTempDirPlacement: the temporary directory is a fresh hidden
// directory beside the prefix, or under TempDirectory.
func TestTempDirPlacement(t *testing.T) {
	schema := `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`
	typ := reflect.TypeFor[map[string]any]()
	for _, c := range []struct {
		prefix string
		opts   []WriteOption
		want   string
	}{
		{"/data/out/part", nil, "/data/out/.temp-sdfio-"},
		{"part", nil, ".temp-sdfio-"},
		{"/data/out/", nil, "/data/out/.temp-sdfio-"},
		{"/data/out/part", []WriteOption{WithTempDirectory("/scratch")}, "/scratch/.temp-sdfio-"},
		{"/data/out/part", []WriteOption{WithTempDirectory("/scratch/")}, "/scratch/.temp-sdfio-"},
	} {
		a, err := newWriteConfig(c.prefix, schema, typ, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := newWriteConfig(c.prefix, schema, typ, c.opts)
		if !strings.HasPrefix(a.TempDir, c.want) || !strings.HasSuffix(a.TempDir, "/") || len(a.TempDir) != len(c.want)+33 || a.TempDir == b.TempDir {
			t.Errorf("prefix %q: temp dirs %q and %q, want %q + 32 random hex digits + /", c.prefix, a.TempDir, b.TempDir, c.want)
		}
	}
}

const finalizeSchema = `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`

type finalizeRec struct {
	A int64 `avro:"a"`
}

// tempFileWith writes a container file of records [from, to) to path, as a
// bundle would, and returns its result.
func tempFileWith(t *testing.T, fs filesystem.Interface, cfg writeConfig, path string, from, to int64) fileResult {
	t.Helper()
	f, err := openTempFile(context.Background(), fs, cfg, path)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		if err := f.cw.Append(finalizeRec{i}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := f.finish()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readRecs(t *testing.T, path string) []int64 {
	t.Helper()
	var out []int64
	for _, rec := range readContainer[finalizeRec](t, path) {
		out = append(out, rec.A)
	}
	return out
}

// readContainer reads every record of the Avro file at path as a T.
func readContainer[T any](t *testing.T, path string) []T {
	t.Helper()
	r, err := container.OpenReader[T](path, container.FileOpener(path), 0, container.Options{})
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer r.Close()
	var out []T
	for {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		out = append(out, rec)
	}
}

func namesIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func testConfig(t *testing.T, dir string, shards int) writeConfig {
	t.Helper()
	cfg, err := newWriteConfig(filepath.Join(dir, "out"), finalizeSchema, reflect.TypeFor[finalizeRec](), []WriteOption{WithNumShards(shards), WithSuffix(".avro"), WithCodec("deflate")})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFinalizeRemovesLeftovers: the committed temporary files of runner-
// determined bundles become the final files; the files of a bundle attempt
// that failed half way and of a retried attempt whose output was
// discarded (a whole file with the same records as a committed one) are
// removed, as is the temporary directory. No record is doubled, no partial
// file appears.
func TestFinalizeRemovesLeftovers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, dir, 0)
	fs, _ := filesystem.New(ctx, cfg.TempDir)
	committed := []fileResult{
		tempFileWith(t, fs, cfg, cfg.TempDir+"b1-attempt2", 0, 100),
		tempFileWith(t, fs, cfg, cfg.TempDir+"b2-attempt1", 100, 250),
	}
	// Bundle 1's first attempt wrote everything and then failed to commit.
	tempFileWith(t, fs, cfg, cfg.TempDir+"b1-attempt1", 0, 100)
	// A third attempt died in the middle of its file.
	whole := tempFileWith(t, fs, cfg, cfg.TempDir+"b3-attempt1", 250, 400)
	b, _ := os.ReadFile(whole.Temp)
	os.WriteFile(whole.Temp, b[:len(b)/2], 0o644)

	st, err := finalize(ctx, fs, cfg, committed)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "out-00000-of-00002.avro"), filepath.Join(dir, "out-00001-of-00002.avro")}
	if !reflect.DeepEqual(st.files, want) || st.removed != 2 {
		t.Fatalf("finalize: files %v, %d leftovers removed; want %v, 2", st.files, st.removed, want)
	}
	if got := namesIn(t, dir); !reflect.DeepEqual(got, []string{"out-00000-of-00002.avro", "out-00001-of-00002.avro"}) {
		t.Fatalf("directory holds %v", got)
	}
	// Shards are numbered in the order of the temporary names.
	var all []int64
	for _, f := range want {
		all = append(all, readRecs(t, f)...)
	}
	if len(all) != 250 || all[0] != 0 || all[249] != 249 {
		t.Fatalf("%d records %v...", len(all), all[:min(5, len(all))])
	}
	for i, v := range all {
		if v != int64(i) {
			t.Fatalf("record %d is %d", i, v)
		}
	}
}

// TestFinalizeRetried: a finalize step that failed after renaming some
// files (and is retried with the same committed results) finds them in
// place and finishes the others; running it again after it succeeded
// changes nothing.
func TestFinalizeRetried(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, dir, 3)
	fs, _ := filesystem.New(ctx, cfg.TempDir)
	var results []fileResult
	for i := 0; i < 3; i++ {
		r := tempFileWith(t, fs, cfg, fmt.Sprintf("%sshard-%d-x", cfg.TempDir, i), int64(i*10), int64(i*10+10))
		r.Shard = i
		results = append(results, r)
	}
	leftover := tempFileWith(t, fs, cfg, cfg.TempDir+"shard-1-failed", 10, 20)
	// The first attempt renamed shard 0, then died.
	if err := filesystem.Rename(ctx, fs, results[0].Temp, cfg.shardName(0, 3)); err != nil {
		t.Fatal(err)
	}
	st, err := finalize(ctx, fs, cfg, results)
	if err != nil {
		t.Fatalf("retried finalize: %v", err)
	}
	if st.removed != 1 || len(st.files) != 3 {
		t.Fatalf("retried finalize: %+v", st)
	}
	if _, err := os.Stat(leftover.Temp); !os.IsNotExist(err) {
		t.Fatalf("leftover %s: %v", leftover.Temp, err)
	}
	for i, f := range st.files {
		if got := readRecs(t, f); len(got) != 10 || got[0] != int64(i*10) {
			t.Fatalf("%s holds %v", f, got)
		}
	}
	before := map[string][]byte{}
	for _, f := range st.files {
		before[f], _ = os.ReadFile(f)
	}
	if _, err := finalize(ctx, fs, cfg, results); err != nil {
		t.Fatalf("finalize after success: %v", err)
	}
	for _, f := range st.files {
		if b, _ := os.ReadFile(f); !bytes.Equal(b, before[f]) {
			t.Fatalf("%s changed", f)
		}
	}
	if got := namesIn(t, dir); len(got) != 3 {
		t.Fatalf("directory holds %v", got)
	}
}

// begin makes Begin's marker, as the pipeline's Begin step does.
func begin(t *testing.T, cfg writeConfig) {
	t.Helper()
	if err := (&beginFn{Config: cfg}).ProcessElement(context.Background(), nil, func([]byte) {}); err != nil {
		t.Fatal(err)
	}
}

// TestFinalizeEmptyAndBadShards: runner-determined sharding of an empty
// input writes one empty file (with Begin's marker there), also when the
// finalize step is retried after it; impossible results and clashing names
// are errors.
func TestFinalizeEmptyAndBadShards(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, dir, 3)
	fs, _ := filesystem.New(ctx, cfg.TempDir)
	r := tempFileWith(t, fs, cfg, cfg.TempDir+"shard-1", 0, 5)
	r.Shard = 1

	dir0 := t.TempDir()
	cfg0 := testConfig(t, dir0, 0)
	begin(t, cfg0)
	st, err := finalize(ctx, fs, cfg0, nil)
	if err != nil || !reflect.DeepEqual(st.files, []string{filepath.Join(dir0, "out-00000-of-00001.avro")}) || st.emptyBytes == 0 {
		t.Fatalf("empty input: %+v, %v", st, err)
	}
	if recs := readRecs(t, st.files[0]); len(recs) != 0 {
		t.Fatalf("empty input wrote %v", recs)
	}
	h, err := container.ReadHeader(st.files[0], mustOpen(t, st.files[0]), container.Limits{})
	if err != nil || h.Codec != "deflate" {
		t.Fatalf("%s: %v %v", st.files[0], h, err)
	}
	if got := namesIn(t, dir0); !reflect.DeepEqual(got, []string{"out-00000-of-00001.avro"}) {
		t.Fatalf("empty input: directory holds %v", got)
	}
	// Retried after it finished: the file is there, the marker gone.
	if st, err := finalize(ctx, fs, cfg0, nil); err != nil || len(st.files) != 1 {
		t.Fatalf("retried empty input: %+v, %v", st, err)
	}

	bad := r
	bad.Shard = 3
	if _, err := finalize(ctx, fs, cfg, []fileResult{bad}); err == nil || !strings.Contains(err.Error(), "shard 3") {
		t.Errorf("shard out of range: %v", err)
	}
	other := tempFileWith(t, fs, cfg, cfg.TempDir+"shard-1-other", 0, 5)
	other.Shard = 1
	if _, err := finalize(ctx, fs, cfg, []fileResult{r, other}); err == nil || !strings.Contains(err.Error(), "written twice") {
		t.Errorf("shard written twice: %v", err)
	}
	// The same result delivered twice is one: the write lacks shards 0
	// and 2, not a second file of shard 1.
	if _, err := finalize(ctx, fs, cfg, []fileResult{r, r}); err == nil || !strings.Contains(err.Error(), "shard 0 of 3 has no file") {
		t.Errorf("a result delivered twice: %v", err)
	}
	cfgOne := cfg0
	cfgOne.Template = "-single"
	x := tempFileWith(t, fs, cfgOne, cfgOne.TempDir+"x", 0, 1)
	y := tempFileWith(t, fs, cfgOne, cfgOne.TempDir+"y", 1, 2)
	if _, err := finalize(ctx, fs, cfgOne, []fileResult{x, y}); err == nil || !strings.Contains(err.Error(), "would both be named") {
		t.Errorf("clashing names: %v", err)
	}
	// A temporary file that is neither there nor renamed is an error.
	gone := fileResult{Temp: cfg0.TempDir + "missing", Shard: -1}
	cfgGone := cfg0
	cfgGone.Prefix = filepath.Join(t.TempDir(), "g")
	if _, err := finalize(ctx, fs, cfgGone, []fileResult{gone}); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing temporary file: %v", err)
	}
}

// TestFinalizeRefusesFailedWrites: a finalize step run after the write
// failed (as Prism v2.77 runs it, now and then, after a failed bundle)
// commits nothing and removes every temporary file and the directory:
// when a result carries a record's error; under fixed sharding, when a
// shard has no file; with runner-determined sharding and no result, when
// Begin's marker is gone (a failing attempt removed it) or an attempt
// left its file. On the code before, the last three committed empty files.
func TestFinalizeRefusesFailedWrites(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		shards  int
		begun   bool
		results func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult
		want    string
	}{
		{"record error", 0, true, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			return []fileResult{tempFileWith(t, fs, cfg, cfg.TempDir+"a", 0, 10), {Shard: -1, Err: "record 3: bad enum"}}
		}, "record 3: bad enum"},
		{"record error, fixed", 2, false, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			r := tempFileWith(t, fs, cfg, cfg.TempDir+"shard-0-x", 0, 10)
			r.Shard = 0
			return []fileResult{r, {Shard: 1, Err: "record 7: too long"}, {Shard: errorShard, Err: "record 2: bad enum"}}
		}, "record 2: bad enum (and 1 more bundles failed)"},
		{"shard missing", 3, false, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			r := tempFileWith(t, fs, cfg, cfg.TempDir+"shard-1-x", 0, 10)
			r.Shard = 1
			return []fileResult{r}
		}, "shard 0 of 3 has no file"},
		{"no result, marker gone", 0, false, func(*testing.T, filesystem.Interface, writeConfig) []fileResult { return nil }, "marker is gone"},
		{"no result, attempt left", 0, true, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			tempFileWith(t, fs, cfg, cfg.TempDir+"died", 0, 10)
			return nil
		}, "left " + "%TEMP%died"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir, tc.shards)
			fs, _ := filesystem.New(ctx, cfg.TempDir)
			if tc.begun {
				begin(t, cfg)
			}
			results := tc.results(t, fs, cfg)
			st, err := finalize(ctx, fs, cfg, results)
			want := strings.ReplaceAll(tc.want, "%TEMP%", cfg.TempDir)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "no file was committed") {
				t.Fatalf("finalize: %+v, %v; want an error saying %q", st, err, want)
			}
			if len(st.files) > 0 {
				t.Errorf("committed %v", st.files)
			}
			if got := namesIn(t, dir); len(got) > 0 {
				t.Errorf("the failed write left %v", got)
			}
		})
	}
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestFinalizeDests: with destinations, each destination's files are
// numbered on their own; under fixed sharding every destination a bundle
// reported must have all its shards, and a file of a destination no
// bundle reported, a shard missing, a record error, or (runner sharding)
// no file and no marker, commit nothing and remove every temporary file.
func TestFinalizeDests(t *testing.T) {
	ctx := context.Background()
	file := func(t *testing.T, fs filesystem.Interface, cfg writeConfig, dest string, shard int, from, to int64) fileResult {
		r := tempFileWith(t, fs, cfg, fmt.Sprintf("%s%s-%d-%s", cfg.TempDir, dest, shard, randomID()), from, to)
		r.Dest, r.Shard = dest, shard
		return r
	}
	t.Run("fixed", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig(t, dir, 2)
		fs, _ := filesystem.New(ctx, cfg.TempDir)
		results := []fileResult{file(t, fs, cfg, "/a", 1, 10, 20), file(t, fs, cfg, "/a", 0, 0, 10), file(t, fs, cfg, "-b", 0, 20, 25), file(t, fs, cfg, "-b", 1, 25, 25)}
		tempFileWith(t, fs, cfg, cfg.TempDir+"failed-attempt", 0, 10)
		st, err := finalizeDests(ctx, fs, cfg, results, []string{"/a", "-b", "/a"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{filepath.Join(dir, "out-b-00000-of-00002.avro"), filepath.Join(dir, "out-b-00001-of-00002.avro"), filepath.Join(dir, "out/a-00000-of-00002.avro"), filepath.Join(dir, "out/a-00001-of-00002.avro")}
		if !reflect.DeepEqual(st.files, want) || st.removed != 1 {
			t.Fatalf("files %v, %d removed; want %v, 1", st.files, st.removed, want)
		}
		if got := readRecs(t, want[2]); len(got) != 10 || got[0] != 0 {
			t.Errorf("a's shard 0 holds %v", got)
		}
		if got := readRecs(t, want[3]); len(got) != 10 || got[0] != 10 {
			t.Errorf("a's shard 1 holds %v", got)
		}
		if got := readRecs(t, want[1]); len(got) != 0 {
			t.Errorf("b's empty shard holds %v", got)
		}
		if got := namesIn(t, dir); !reflect.DeepEqual(got, []string{"out", "out-b-00000-of-00002.avro", "out-b-00001-of-00002.avro"}) {
			t.Errorf("directory holds %v", got)
		}
	})
	for _, tc := range []struct {
		name    string
		shards  int
		results func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult
		dests   []string
		marker  bool
		want    string
	}{
		{"missing shard", 2, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			return []fileResult{file(t, fs, cfg, "a", 0, 0, 5), file(t, fs, cfg, "a", 1, 5, 9), file(t, fs, cfg, "b", 0, 9, 10)}
		}, []string{"a", "b"}, false, `shard 1 of 2 of destination "b" has no file`},
		{"destination not reported", 1, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			return []fileResult{file(t, fs, cfg, "a", 0, 0, 5), file(t, fs, cfg, "c", 0, 5, 9)}
		}, []string{"a"}, false, `destination "c", which no bundle reported`},
		{"all shards of a destination missing", 1, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			return []fileResult{file(t, fs, cfg, "a", 0, 0, 5)}
		}, []string{"a", "b"}, false, `destination "b" has no file`},
		{"record error", 0, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			return []fileResult{file(t, fs, cfg, "a", -1, 0, 5), {Shard: -1, Err: "record 3: bad enum"}}
		}, nil, true, "record 3: bad enum"},
		{"no file, marker gone", 0, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			tempFileWith(t, fs, cfg, cfg.TempDir+"failed-attempt", 0, 10)
			return nil
		}, nil, false, "marker is gone"},
		{"no file, an attempt's file left", 0, func(t *testing.T, fs filesystem.Interface, cfg writeConfig) []fileResult {
			tempFileWith(t, fs, cfg, cfg.TempDir+"failed-attempt", 0, 10)
			return nil
		}, nil, true, "left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir, tc.shards)
			fs, _ := filesystem.New(ctx, cfg.TempDir)
			if tc.marker {
				tempFileWith(t, fs, cfg, cfg.TempDir+begunMarker, 0, 0)
			}
			_, err := finalizeDests(ctx, fs, cfg, tc.results(t, fs, cfg), tc.dests)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "no file was committed") {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if got := namesIn(t, dir); len(got) != 0 {
				t.Errorf("a failed finalize left %v", got)
			}
		})
	}
	t.Run("runner sharding", func(t *testing.T) {
		dir := t.TempDir()
		cfg := testConfig(t, dir, 0)
		fs, _ := filesystem.New(ctx, cfg.TempDir)
		results := []fileResult{file(t, fs, cfg, "/x", -1, 0, 3), file(t, fs, cfg, "/y", -1, 3, 4), file(t, fs, cfg, "/x", -1, 4, 9)}
		st, err := finalizeDests(ctx, fs, cfg, results, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{filepath.Join(dir, "out/x-00000-of-00002.avro"), filepath.Join(dir, "out/x-00001-of-00002.avro"), filepath.Join(dir, "out/y-00000-of-00001.avro")}
		if !reflect.DeepEqual(st.files, want) {
			t.Fatalf("files %v, want %v", st.files, want)
		}
		if got := namesIn(t, filepath.Join(dir, "out")); !reflect.DeepEqual(got, []string{"x-00000-of-00002.avro", "x-00001-of-00002.avro", "y-00000-of-00001.avro"}) {
			t.Errorf("out/ holds %v", got)
		}
		// An empty input, Begin's marker in place: no file, nothing left.
		dir = t.TempDir()
		cfg = testConfig(t, dir, 0)
		tempFileWith(t, fs, cfg, cfg.TempDir+begunMarker, 0, 0)
		st, err = finalizeDests(ctx, fs, cfg, nil, nil)
		if err != nil || len(st.files) != 0 {
			t.Fatalf("empty input: %v, %v", st.files, err)
		}
		if got := namesIn(t, dir); len(got) != 0 {
			t.Errorf("empty input left %v", got)
		}
	})
}

// TestRemoveStaleTempDirs: the rule by which a write removes the temporary
// directories of writes no longer running (write_temp.go), on the local
// filesystem and on memfs (an object store's flat names): a directory of
// a write whose newest file is older than the age goes, files and all;
// one with a fresh file stays, as do the write's own directory, names
// that are not a write's temporary directory, final files, and
// directories beside another prefix's directory.
func TestRemoveStaleTempDirs(t *testing.T) {
	id := func(c string) string { return strings.Repeat(c, 32) }
	now := time.Now()
	old, fresh := now.Add(-8*24*time.Hour), now.Add(-time.Hour)
	t.Run("local", func(t *testing.T) {
		dir := t.TempDir() + "/"
		cfg := writeConfig{Prefix: dir + "part", TempDir: dir + ".temp-sdfio-" + id("0") + "/", StaleTempAge: 7 * 24 * time.Hour}
		files := map[string]time.Time{
			".temp-sdfio-" + id("0") + "/begun":             old, // our own
			".temp-sdfio-" + id("a") + "/begun":             old, // stale
			".temp-sdfio-" + id("a") + "/" + id("1"):        old,
			".temp-sdfio-" + id("b") + "-" + id("c") + "/x": old, // a windowed write's, stale
			".temp-sdfio-" + id("d") + "/begun":             old, // running: one fresh file
			".temp-sdfio-" + id("d") + "/" + id("2"):        fresh,
			".temp-sdfio-notanid/begun":                     old,
			"part-00000-of-00001":                           old,
			"sub/.temp-sdfio-" + id("e") + "/begun":         old,
		}
		for name, tm := range files {
			p := dir + name
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(p, tm, tm)
		}
		// A stale directory left empty.
		empty := dir + ".temp-sdfio-" + id("f")
		os.Mkdir(empty, 0o755)
		os.Chtimes(empty, old, old)
		fs, err := openTempFS(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		sw, err := removeStaleTempDirs(context.Background(), fs, cfg, now)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{dir + ".temp-sdfio-" + id("a") + "/", dir + ".temp-sdfio-" + id("b") + "-" + id("c") + "/", empty + "/"}
		if sw.removed != 3 || !reflect.DeepEqual(sw.dirs, want) {
			t.Errorf("removed %d files, directories %v; want 3, %v", sw.removed, sw.dirs, want)
		}
		for name := range files {
			_, err := os.Stat(dir + name)
			gone := strings.Contains(name, id("a")) || strings.Contains(name, id("b"))
			if gone != (err != nil) {
				t.Errorf("%s: gone %v, want %v", name, err != nil, gone)
			}
		}
		for _, d := range append(want, dir+".temp-sdfio-"+id("0")+"/") {
			if _, err := os.Stat(d); (err == nil) != (d == dir+".temp-sdfio-"+id("0")+"/") {
				t.Errorf("directory %s: %v", d, err)
			}
		}
	})
	t.Run("memfs", func(t *testing.T) {
		ctx := context.Background()
		fs, err := filesystem.New(ctx, "memfs://")
		if err != nil {
			t.Fatal(err)
		}
		base := "memfs://stale-" + id("9")[:8] + "/"
		cfg := writeConfig{Prefix: base + "part", TempDir: base + ".temp-sdfio-" + id("0") + "/", StaleTempAge: time.Hour}
		for _, p := range []string{".temp-sdfio-" + id("a") + "/begun", ".temp-sdfio-" + id("a") + "/" + id("1"), "part-00000-of-00001"} {
			w, err := fs.OpenWrite(ctx, base+p)
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
		// Fresh: an hour and a second has not passed.
		if sw, err := removeStaleTempDirs(ctx, fs, cfg, time.Now()); err != nil || sw.removed != 0 {
			t.Fatalf("fresh: %+v, %v", sw, err)
		}
		sw, err := removeStaleTempDirs(ctx, fs, cfg, time.Now().Add(2*time.Hour))
		if err != nil || sw.removed != 2 {
			t.Fatalf("stale: %+v, %v", sw, err)
		}
		if left, _ := fs.List(ctx, base+"*"); len(left) != 1 || left[0] != base+"part-00000-of-00001" {
			t.Errorf("left %v", left)
		}
	})
}

// TestTempDirLeases (issue 37, item 17): a temporary directory that holds
// a lease is removed by a write beside it as soon as the lease is released
// or went leaseTTL without renewal, whatever the age of its other files;
// one whose lease is fresh stays, even with files older than
// WithStaleTempAge; one without a lease keeps the age rule. On the local
// filesystem and on memfs (an object store: the lease rewritten, not
// touched).
func TestTempDirLeases(t *testing.T) {
	id := func(c string) string { return strings.Repeat(c, 32) }
	now := time.Now()
	t.Run("local", func(t *testing.T) {
		dir := t.TempDir() + "/"
		cfg := writeConfig{Prefix: dir + "part", TempDir: dir + ".temp-sdfio-" + id("0") + "/", StaleTempAge: 7 * 24 * time.Hour}
		type file struct {
			content string
			at      time.Time
		}
		old := now.Add(-8 * 24 * time.Hour)
		files := map[string]file{
			".temp-sdfio-" + id("a") + "/lease":      {"released", now}, // released: dead
			".temp-sdfio-" + id("a") + "/begun":      {"", now},
			".temp-sdfio-" + id("a") + "/" + id("1"): {"x", now},
			".temp-sdfio-" + id("b") + "/lease":      {"", now.Add(-leaseTTL - time.Minute)}, // not renewed: dead
			".temp-sdfio-" + id("b") + "/begun":      {"", now},
			".temp-sdfio-" + id("c") + "/lease":      {"", now.Add(-time.Minute)}, // renewed: running
			".temp-sdfio-" + id("c") + "/begun":      {"", old},
			".temp-sdfio-" + id("d") + "/begun":      {"", now}, // no lease, young: running
		}
		for name, f := range files {
			p := dir + name
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chtimes(p, f.at, f.at)
		}
		fs, err := openTempFS(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		sw, err := removeStaleTempDirs(context.Background(), fs, cfg, now)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{dir + ".temp-sdfio-" + id("a") + "/", dir + ".temp-sdfio-" + id("b") + "/"}
		if sw.removed != 5 || !reflect.DeepEqual(sw.dirs, want) {
			t.Errorf("removed %d files, directories %v; want 5, %v", sw.removed, sw.dirs, want)
		}
		for name := range files {
			_, err := os.Stat(dir + name)
			gone := strings.Contains(name, id("a")) || strings.Contains(name, id("b"))
			if gone != (err != nil) {
				t.Errorf("%s: gone %v, want %v", name, err != nil, gone)
			}
		}
		for _, d := range want {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("directory %s is still there", d)
			}
		}
	})
	t.Run("memfs", func(t *testing.T) {
		ctx := context.Background()
		fs, err := filesystem.New(ctx, "memfs://")
		if err != nil {
			t.Fatal(err)
		}
		base := "memfs://lease-" + id("8")[:8] + "/"
		cfg := writeConfig{Prefix: base + "part", TempDir: base + ".temp-sdfio-" + id("0") + "/", StaleTempAge: time.Hour}
		held, released := base+".temp-sdfio-"+id("a")+"/", base+".temp-sdfio-"+id("b")+"/"
		for _, d := range []string{held, released} {
			if err := writeLease(ctx, d, "", true); err != nil {
				t.Fatal(err)
			}
			w, _ := fs.OpenWrite(ctx, d+begunMarker)
			w.Close()
		}
		// A release (and a renewal) rewrites a lease that is there, and
		// makes none that is not.
		if err := writeLease(ctx, released, leaseReleased, false); err != nil {
			t.Fatal(err)
		}
		if err := writeLease(ctx, base+".temp-sdfio-"+id("c")+"/", leaseReleased, false); err == nil {
			t.Fatal("a release made a lease that was not there")
		}
		sw, err := removeStaleTempDirs(ctx, fs, cfg, time.Now())
		if err != nil || sw.removed != 2 || len(sw.dirs) != 1 || sw.dirs[0] != released {
			t.Fatalf("released: %+v, %v", sw, err)
		}
		// The held lease goes once leaseTTL passed without renewal.
		sw, err = removeStaleTempDirs(ctx, fs, cfg, time.Now().Add(leaseTTL+time.Minute))
		if err != nil || sw.removed != 2 || len(sw.dirs) != 1 || sw.dirs[0] != held {
			t.Fatalf("not renewed: %+v, %v", sw, err)
		}
		if left, _ := fs.List(ctx, base+"*"); len(left) != 0 {
			t.Errorf("left %v", left)
		}
	})
	t.Run("renewal", func(t *testing.T) {
		dir := t.TempDir() + "/.temp-sdfio-" + id("e") + "/"
		os.MkdirAll(dir, 0o755)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := writeLease(ctx, dir, "", true); err != nil {
			t.Fatal(err)
		}
		stale := time.Now().Add(-time.Hour)
		os.Chtimes(dir+leaseFile, stale, stale)
		waitFor := func(what string, ok func() bool) {
			t.Helper()
			for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%s: not within 30 s", what)
				}
			}
		}
		holdLeaseEvery(ctx, dir, 10*time.Millisecond)
		waitFor("renewed", func() bool {
			fi, err := os.Stat(dir + leaseFile)
			return err == nil && time.Since(fi.ModTime()) < time.Minute
		})
		// The worker stops: the lease is released.
		cancel()
		waitFor("released", func() bool {
			b, _ := os.ReadFile(dir + leaseFile)
			return string(b) == leaseReleased
		})
		// A lease that is gone is never made again, and its renewal ends.
		os.Remove(dir + leaseFile)
		holdLeaseEvery(context.Background(), dir, 10*time.Millisecond)
		waitFor("renewal ended", func() bool {
			renewalsMu.Lock()
			defer renewalsMu.Unlock()
			return renewals[dir] == nil
		})
		if _, err := os.Stat(dir + leaseFile); err == nil {
			t.Fatal("a renewal made the lease again")
		}
		// dropLease stops a renewal at once.
		writeLease(context.Background(), dir, "", true)
		holdLeaseEvery(context.Background(), dir, time.Hour)
		dropLease(dir)
		renewalsMu.Lock()
		r := renewals[dir]
		renewalsMu.Unlock()
		if r != nil {
			t.Error("a renewal after dropLease")
		}
	})
}

// TestBundleFailedBeforeBegin: a writing bundle no longer waits for Begin
// (no side input: it made Prism spin), so an attempt may fail before
// Begin made its marker. Its evidence is then a tombstone, and a finalize
// step run after it (as Prism runs it, now and then, after a failed
// bundle) with no result commits nothing and removes everything; after
// Begin, the evidence is the marker's removal, and no tombstone is made.
// On the code before (giveUp only removed the marker), the failure before
// Begin left no evidence, and the finalize step committed an empty file.
func TestBundleFailedBeforeBegin(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		beginFirst bool
		tombstones int
		want       string
	}{
		{"before Begin", false, 1, "a bundle attempt failed before the write's Begin step ran"},
		{"after Begin", true, 0, "marker is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir, 0)
			if tc.beginFirst {
				begin(t, cfg)
			}
			fn := &writeBundleFn{Config: cfg}
			if err := fn.Setup(ctx); err != nil {
				t.Fatal(err)
			}
			fn.StartBundle(ctx, nil)
			if err := fn.ProcessElement(ctx, finalizeRec{A: 1}, nil); err != nil {
				t.Fatal(err)
			}
			// The attempt fails as a fault of the filesystem fails it.
			fn.giveUp(ctx)
			if err := fn.Teardown(ctx); err != nil {
				t.Fatal(err)
			}
			stones, _ := filepath.Glob(cfg.TempDir + failedPrefix + "*")
			if len(stones) != tc.tombstones {
				t.Fatalf("tombstones %v, want %d", stones, tc.tombstones)
			}
			if !tc.beginFirst {
				begin(t, cfg) // Begin runs after the failed attempt
			}
			fs, _ := filesystem.New(ctx, cfg.TempDir)
			st, err := finalize(ctx, fs, cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "no file was committed") {
				t.Fatalf("finalize: %+v, %v; want an error saying %q", st, err, tc.want)
			}
			if got := namesIn(t, dir); len(got) > 0 {
				t.Errorf("the failed write left %v", got)
			}
		})
	}
}

// TestBundleRetriedAfterTombstone: an attempt that failed before Begin
// left its tombstone; the runner retried the bundle, which committed its
// file. The finalize step commits that file and removes the tombstone,
// the marker, the lease and the directory: the evidence never fails a
// write that succeeded.
func TestBundleRetriedAfterTombstone(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, dir, 0)
	fn := &writeBundleFn{Config: cfg}
	if err := fn.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	fn.StartBundle(ctx, nil)
	if err := fn.ProcessElement(ctx, finalizeRec{A: 1}, nil); err != nil {
		t.Fatal(err)
	}
	fn.giveUp(ctx)
	if err := fn.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	begin(t, cfg)
	fs, _ := filesystem.New(ctx, cfg.TempDir)
	retried := tempFileWith(t, fs, cfg, cfg.TempDir+"retried", 0, 10)
	st, err := finalize(ctx, fs, cfg, []fileResult{retried})
	if err != nil || len(st.files) != 1 {
		t.Fatalf("finalize after a retried attempt: %+v, %v", st, err)
	}
	if recs := readRecs(t, st.files[0]); len(recs) != 10 {
		t.Errorf("committed %d records, want 10", len(recs))
	}
	if got := namesIn(t, dir); !reflect.DeepEqual(got, []string{filepath.Base(st.files[0])}) {
		t.Errorf("directory holds %v, want only %s", got, filepath.Base(st.files[0]))
	}
}
