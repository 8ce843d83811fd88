package avroio_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/workertest"
)

// Pipeline tests of avroio.Write on Prism: file names, sharding, codecs,
// metadata, generic records, leftovers of failed attempts, and a write from
// separate worker processes. Files are read back with the container reader
// and compared record by record.

const eventSchema = `{"type":"record","name":"Event","namespace":"sdfio.test","fields":[
 {"name":"id","type":"long"},
 {"name":"name","type":"string"},
 {"name":"score","type":["null","double"]},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C"]}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"inner","type":{"type":"record","name":"Inner","fields":[
   {"name":"x","type":"int"},{"name":"fx","type":{"type":"fixed","name":"F2","size":2}}]}}
]}`

type evInner struct {
	X  int32   `avro:"x"`
	Fx [2]byte `avro:"fx"`
}

type evRecord struct {
	ID    int64            `avro:"id"`
	Name  string           `avro:"name"`
	Score *float64         `avro:"score"`
	Kind  string           `avro:"kind"`
	Tags  []string         `avro:"tags"`
	Attrs map[string]int64 `avro:"attrs"`
	At    time.Time        `avro:"at"`
	Inner evInner          `avro:"inner"`
}

var epoch = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// makeEvent is record i.
func makeEvent(i int64) evRecord {
	e := evRecord{
		ID: i, Name: fmt.Sprintf("event-%d", i), Kind: []string{"A", "B", "C"}[i%3],
		Tags: []string{}, Attrs: map[string]int64{},
		At:    epoch.Add(time.Duration(i) * time.Microsecond * 1001),
		Inner: evInner{X: int32(-i), Fx: [2]byte{byte(i), byte(i >> 8)}},
	}
	if i%4 != 0 {
		s := float64(i) / 8
		e.Score = &s
	}
	for j := int64(0); j < i%3; j++ {
		e.Tags = append(e.Tags, fmt.Sprintf("t%d", j))
		e.Attrs[fmt.Sprintf("k%d", j)] = i * j
	}
	return e
}

// genericEvent is record i as a generic record.
func genericEvent(i int64) avroio.Record {
	e := makeEvent(i)
	var score any
	if e.Score != nil {
		score = *e.Score
	}
	tags := make([]any, len(e.Tags))
	for j, t := range e.Tags {
		tags[j] = t
	}
	attrs := map[string]any{}
	for k, v := range e.Attrs {
		attrs[k] = v
	}
	return avroio.Record{
		"id": e.ID, "name": e.Name, "score": score, "kind": e.Kind, "tags": tags, "attrs": attrs, "at": e.At,
		"inner": map[string]any{"x": e.Inner.X, "fx": e.Inner.Fx},
	}
}

func init() {
	register.DoFn2x0[[]byte, func(evRecord)](&eventsFn{})
	register.DoFn2x0[[]byte, func(avroio.Record)](&genericEventsFn{})
	register.DoFn2x0[int64, func(evRecord)](&slowChunkFn{})
	register.Emitter1[evRecord]()
	register.Emitter1[avroio.Record]()
	avroio.RegisterType(reflect.TypeFor[evRecord]())
	avroio.RegisterType(reflect.TypeFor[evInner]())
	filesystem.Register(attemptScheme, newAttemptFS)
}

// eventsFn emits the records [From, To) on an impulse. Records are made where
// they are written (fused), so no Beam coder touches them.
type eventsFn struct{ From, To int64 }

func (fn *eventsFn) ProcessElement(_ []byte, emit func(evRecord)) {
	for i := fn.From; i < fn.To; i++ {
		emit(makeEvent(i))
	}
}

type genericEventsFn struct{ From, To int64 }

func (fn *genericEventsFn) ProcessElement(_ []byte, emit func(avroio.Record)) {
	for i := fn.From; i < fn.To; i++ {
		emit(genericEvent(i))
	}
}

// slowChunkFn emits the Size records of chunk c after sleeping DelayMs.
type slowChunkFn struct{ Size, DelayMs int64 }

func (fn *slowChunkFn) ProcessElement(c int64, emit func(evRecord)) {
	time.Sleep(time.Duration(fn.DelayMs) * time.Millisecond)
	for i := c * fn.Size; i < (c+1)*fn.Size; i++ {
		emit(makeEvent(i))
	}
}

func events(s beam.Scope, from, to int64) beam.PCollection {
	return beam.ParDo(s, &eventsFn{From: from, To: to}, beam.Impulse(s))
}

// readEvents reads every record of the container file path.
func readEvents(t *testing.T, path string) ([]evRecord, *container.Header) {
	t.Helper()
	return readAs[evRecord](t, path)
}

// checkEvents reads the files and checks that together they hold exactly
// the records [0, n), each once.
func checkEvents(t *testing.T, files []string, n int64) map[string][]evRecord {
	t.Helper()
	byFile := map[string][]evRecord{}
	var all []evRecord
	for _, f := range files {
		recs, _ := readEvents(t, f)
		byFile[f] = recs
		all = append(all, recs...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	if int64(len(all)) != n {
		t.Fatalf("%d records in %d files, want %d", len(all), len(files), n)
	}
	for i, e := range all {
		if want := makeEvent(int64(i)); !equalEvent(e, want) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, e, want)
		}
	}
	return byFile
}

func equalEvent(a, b evRecord) bool {
	if !a.At.Equal(b.At) {
		return false
	}
	a.At, b.At = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// listDir lists the names in dir, hidden ones included.
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

func writeMetric(t *testing.T, res beam.PipelineResult, name string) int64 {
	t.Helper()
	cs := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == avroio.Namespace && r.Name() == name
	}).Counters()
	var sum int64
	for _, c := range cs {
		sum += c.Result()
	}
	return sum
}

func runWritePipeline(t *testing.T, p *beam.Pipeline) beam.PipelineResult {
	t.Helper()
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	return res
}

func fileSizes(t *testing.T, files []string) int64 {
	t.Helper()
	var n int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// TestWriteFixedShards: NumShards(3) writes exactly three files named by
// the default template and the suffix, snappy by default, holding every
// record once; NumShards(5) with two records writes three empty files
// beside the two. The returned PCollection names the files; the metrics
// count records, bytes and files; no temporary directory is left.
func TestWriteFixedShards(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	const n = 999
	a := avroio.Write(s, filepath.Join(dir, "a/part"), eventSchema, events(s, 0, n), avroio.WithNumShards(3), avroio.WithSuffix(".avro"))
	b := avroio.Write(s, filepath.Join(dir, "b/few"), eventSchema, events(s, 0, 2), avroio.WithNumShards(5))
	wantA := []string{
		filepath.Join(dir, "a/part-00000-of-00003.avro"),
		filepath.Join(dir, "a/part-00001-of-00003.avro"),
		filepath.Join(dir, "a/part-00002-of-00003.avro"),
	}
	var wantB []string
	for i := 0; i < 5; i++ {
		wantB = append(wantB, filepath.Join(dir, fmt.Sprintf("b/few-%05d-of-00005", i)))
	}
	passert.Equals(s, a, toAnys(wantA)...)
	passert.Equals(s, b, toAnys(wantB)...)
	res := runWritePipeline(t, p)

	if got := dirNames(t, filepath.Join(dir, "a")); !reflect.DeepEqual(got, []string{"part-00000-of-00003.avro", "part-00001-of-00003.avro", "part-00002-of-00003.avro"}) {
		t.Fatalf("files in a/: %v", got)
	}
	byFile := checkEvents(t, wantA, n)
	for _, f := range wantA {
		_, h := readEvents(t, f)
		if h.Codec != "snappy" || h.Schema != eventSchema {
			t.Errorf("%s: codec %q, schema as given: %v", f, h.Codec, h.Schema == eventSchema)
		}
		if len(byFile[f]) == 0 {
			t.Errorf("%s is empty; round-robin sharding should fill all three shards", f)
		}
	}
	if got := dirNames(t, filepath.Join(dir, "b")); len(got) != 5 {
		t.Fatalf("files in b/: %v", got)
	}
	empty := 0
	byFile = checkEvents(t, wantB, 2)
	for _, f := range wantB {
		if len(byFile[f]) == 0 {
			empty++
		}
	}
	if empty != 3 {
		t.Errorf("%d empty shards, want 3", empty)
	}
	if got := writeMetric(t, res, "records_written"); got != n+2 {
		t.Errorf("records_written = %d, want %d", got, n+2)
	}
	if got := writeMetric(t, res, "files_written"); got != 8 {
		t.Errorf("files_written = %d, want 8", got)
	}
	if got, want := writeMetric(t, res, "bytes_written"), fileSizes(t, append(wantA, wantB...)); got != want {
		t.Errorf("bytes_written = %d, want the files' %d bytes", got, want)
	}
	if got := writeMetric(t, res, "temp_files_removed"); got != 0 {
		t.Errorf("temp_files_removed = %d with no failed attempt", got)
	}
}

// TestWriteRunnerSharding: without NumShards every bundle writes one file.
// The records are made, slowly, from chunks after a Reshuffle, so that
// Prism splits the bundle (it splits one that makes no progress between two
// polls); they land in as many files as there were bundles, named by a
// custom template. An empty input writes one empty file.
func TestWriteRunnerSharding(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	chunks := beam.Reshuffle(s, beam.CreateList(s, []int64{0, 1, 2, 3, 4, 5, 6}))
	in := beam.ParDo(s, &slowChunkFn{Size: 100, DelayMs: 250}, chunks)
	avroio.Write(s, filepath.Join(dir, "out/data"), eventSchema, in,
		avroio.WithShardNameTemplate("_part-SSS_of_NN"), avroio.WithSuffix(".avro"))
	none := avroio.Write(s, filepath.Join(dir, "none/x"), eventSchema, events(s, 0, 0))
	passert.Equals(s, none, filepath.Join(dir, "none/x-00000-of-00001"))
	res := runWritePipeline(t, p)

	got := dirNames(t, filepath.Join(dir, "out"))
	if len(got) < 2 {
		t.Fatalf("files in out/: %v; want one per bundle, at least 2", got)
	}
	var paths []string
	for i, name := range got {
		if want := fmt.Sprintf("data_part-%03d_of_%02d.avro", i, len(got)); name != want {
			t.Errorf("file %d is %s, want %s", i, name, want)
		}
		paths = append(paths, filepath.Join(dir, "out", name))
	}
	checkEvents(t, paths, 700)
	t.Logf("%d bundles wrote %v", len(got), got)
	recs, h := readEvents(t, filepath.Join(dir, "none/x-00000-of-00001"))
	if len(recs) != 0 || h.Codec != "snappy" {
		t.Fatalf("empty input: %d records, codec %q", len(recs), h.Codec)
	}
	if got := dirNames(t, filepath.Join(dir, "none")); len(got) != 1 {
		t.Fatalf("files in none/: %v", got)
	}
	if got := writeMetric(t, res, "files_written"); got != int64(len(paths)+1) {
		t.Errorf("files_written = %d, want %d", got, len(paths)+1)
	}
	if got := writeMetric(t, res, "records_written"); got != 700 {
		t.Errorf("records_written = %d, want 700", got)
	}
}

// TestWriteCodecsAndMetadata writes the same records with every codec,
// levels, a small sync interval and user metadata, and checks the headers
// and blocks of the files and every record.
func TestWriteCodecsAndMetadata(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	const n = 400
	cases := []struct {
		name  string
		codec string
		opts  []avroio.WriteOption
	}{
		{"null", "null", []avroio.WriteOption{avroio.WithCodec("null")}},
		{"deflate9", "deflate", []avroio.WriteOption{avroio.WithDeflateLevel(9)}},
		{"deflate", "deflate", []avroio.WriteOption{avroio.WithCodec("deflate")}},
		{"zstd", "zstandard", []avroio.WriteOption{avroio.WithZstandardLevel(7)}},
		{"xz", "xz", []avroio.WriteOption{avroio.WithCodec("xz")}},
		{"snappy", "snappy", nil},
	}
	meta := avroio.WithMetadata(map[string]string{"origin": "sdfio test", "avroio.note": "x"})
	metaBytes := avroio.WithMetadata(map[string][]byte{"bin": {0, 1, 255}})
	for _, c := range cases {
		opts := append([]avroio.WriteOption{avroio.WithNumShards(1), avroio.WithSyncInterval(1000), meta, metaBytes}, c.opts...)
		avroio.Write(s.Scope(c.name), filepath.Join(dir, c.name, "f"), eventSchema, events(s.Scope(c.name), 0, n), opts...)
	}
	runWritePipeline(t, p)
	for _, c := range cases {
		path := filepath.Join(dir, c.name, "f-00000-of-00001")
		checkEvents(t, []string{path}, n)
		_, h := readEvents(t, path)
		if h.Codec != c.codec {
			t.Errorf("%s: codec %q, want %q", c.name, h.Codec, c.codec)
		}
		if string(h.Meta["origin"]) != "sdfio test" || string(h.Meta["avroio.note"]) != "x" || string(h.Meta["bin"]) != "\x00\x01\xff" {
			t.Errorf("%s: metadata %q", c.name, h.Meta)
		}
		// About 60 bytes a record: 1000-byte blocks make about 24 blocks.
		br, err := container.Open(path, container.FileOpener(path), 0, container.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		blocks := 0
		for {
			b, err := br.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Records > 0 {
				blocks++
			}
			if len(b.Data) > 1000+200 {
				t.Errorf("%s: block of %d bytes with a sync interval of 1000", c.name, len(b.Data))
			}
		}
		br.Close()
		if blocks < 15 {
			t.Errorf("%s: %d blocks, want about 24 for a 1000-byte sync interval", c.name, blocks)
		}
	}
	// Deflate at level 9 is no larger than at the default level.
	d9, _ := os.Stat(filepath.Join(dir, "deflate9", "f-00000-of-00001"))
	d6, _ := os.Stat(filepath.Join(dir, "deflate", "f-00000-of-00001"))
	if d9.Size() > d6.Size() {
		t.Errorf("deflate level 9 made %d bytes, the default level %d", d9.Size(), d6.Size())
	}
}

// TestWriteGenericRecords writes generic records (avroio.Record), which
// cross a Reshuffle on their way (so Beam encodes them), with fixed and
// runner-determined sharding, and reads them back into structs.
func TestWriteGenericRecords(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	const n = 250
	gen := beam.ParDo(s, &genericEventsFn{From: 0, To: n}, beam.Impulse(s))
	gen = beam.Reshuffle(s, gen)
	avroio.Write(s, filepath.Join(dir, "fixed/g"), eventSchema, gen, avroio.WithNumShards(2), avroio.WithCodec("deflate"))
	avroio.Write(s, filepath.Join(dir, "bundles/g"), eventSchema, gen)
	runWritePipeline(t, p)
	checkEvents(t, []string{filepath.Join(dir, "fixed/g-00000-of-00002"), filepath.Join(dir, "fixed/g-00001-of-00002")}, n)
	checkEvents(t, []string{filepath.Join(dir, "bundles/g-00000-of-00001")}, n)
}

// TestWriteSeparateWorker writes from SDK workers that are separate
// processes (as on Dataflow or Flink): the configuration travels in the
// DoFns, the paths are absolute, and the finalize step runs there too.
func TestWriteSeparateWorker(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	const n = 500
	avroio.Write(s, filepath.Join(dir, "w/part"), eventSchema, events(s, 0, n), avroio.WithNumShards(2), avroio.WithZstandardLevel(5), avroio.WithSuffix(".avro"))
	avroio.Write(s, filepath.Join(dir, "r/part"), eventSchema, events(s, n, n), avroio.WithMetadata(map[string]string{"k": "v"}))
	res, err := workertest.Run(t, p)
	if err != nil {
		t.Fatalf("pipeline with separate workers failed: %v", err)
	}
	if len(res.Workers) == 0 || res.Workers[0].PID == os.Getpid() {
		t.Fatalf("workers %+v did not run in separate processes", res.Workers)
	}
	checkEvents(t, []string{filepath.Join(dir, "w/part-00000-of-00002.avro"), filepath.Join(dir, "w/part-00001-of-00002.avro")}, n)
	_, h := readEvents(t, filepath.Join(dir, "r/part-00000-of-00001"))
	if string(h.Meta["k"]) != "v" {
		t.Errorf("metadata %q", h.Meta)
	}
	if got := dirNames(t, filepath.Join(dir, "w")); len(got) != 2 {
		t.Errorf("files in w/: %v", got)
	}
	if got := writeMetric(t, res, "records_written"); got != n {
		t.Errorf("records_written = %d, want %d", got, n)
	}
}

// attemptFS is the local filesystem under the scheme attemptfs://, with
// one twist that simulates bundles that failed or were retried: every
// temporary file the write makes also leaves two leftovers beside it, as a
// failed attempt of the same bundle would: a copy cut in half (a worker
// that died while writing) and a whole copy (an attempt whose output the
// runner discarded). Neither may reach the final files.
type attemptFS struct{ localSchemeFS }

const attemptScheme = "attemptfs"

func newAttemptFS(context.Context) filesystem.Interface {
	return attemptFS{localSchemeFS{scheme: attemptScheme, wrap: func(p string, f *os.File) io.WriteCloser {
		if !strings.Contains(p, "/.temp-sdfio-") {
			return f
		}
		return &leavingWriter{File: f, path: p}
	}}}
}

func (a attemptFS) Rename(_ context.Context, from, to string) error {
	return os.Rename(a.local(from), a.local(to))
}

// localSchemeFS is the local filesystem under scheme://, for test
// filesystems that change one thing about it (attemptFS, closeFailFS).
// Its Remove removes a file, and its directory with its last file, as
// directories come and go with their objects on object stores. wrap, when
// set, wraps every file opened for writing.
type localSchemeFS struct {
	scheme string
	wrap   func(path string, f *os.File) io.WriteCloser
}

func (l localSchemeFS) local(p string) string { return strings.TrimPrefix(p, l.scheme+"://") }

func (localSchemeFS) Close() error { return nil }

func (l localSchemeFS) List(_ context.Context, glob string) ([]string, error) {
	m, err := filepath.Glob(l.local(glob))
	for i := range m {
		m[i] = l.scheme + "://" + m[i]
	}
	return m, err
}

func (l localSchemeFS) OpenRead(_ context.Context, name string) (io.ReadCloser, error) {
	return os.Open(l.local(name))
}

func (l localSchemeFS) OpenWrite(_ context.Context, name string) (io.WriteCloser, error) {
	p := l.local(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(p)
	if err != nil {
		return nil, err
	}
	if l.wrap == nil {
		return f, nil
	}
	return l.wrap(p, f), nil
}

func (l localSchemeFS) Size(_ context.Context, name string) (int64, error) {
	st, err := os.Stat(l.local(name))
	if err != nil {
		return -1, err
	}
	return st.Size(), nil
}

func (l localSchemeFS) Remove(_ context.Context, name string) error {
	p := l.local(name)
	if err := os.Remove(p); err != nil {
		return err
	}
	os.Remove(filepath.Dir(p)) // fails unless empty
	return nil
}

type leavingWriter struct {
	*os.File
	path string
	data []byte
}

func (w *leavingWriter) Write(p []byte) (int, error) {
	w.data = append(w.data, p...)
	return w.File.Write(p)
}

func (w *leavingWriter) Close() error {
	if err := w.File.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(w.path+"-died-attempt", w.data[:len(w.data)/2], 0o644); err != nil {
		return err
	}
	return os.WriteFile(w.path+"-discarded-attempt", w.data, 0o644)
}

// TestWriteLeavesNoAttemptBehind: with every temporary file shadowed by a
// half-written and a whole leftover of other attempts, both sharding modes
// write exactly their final files, each record once, remove every
// leftover and the temporary directory.
func TestWriteLeavesNoAttemptBehind(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	const n = 300
	root := attemptScheme + "://" + dir
	fixed := avroio.Write(s, root+"/fixed/part", eventSchema, events(s, 0, n), avroio.WithNumShards(4))
	bundles := avroio.Write(s, root+"/bundles/part", eventSchema, events(s, 0, n))
	passert.Count(s, fixed, "fixed", 4)
	passert.Count(s, bundles, "bundles", 1)
	res := runWritePipeline(t, p)

	var fixedFiles []string
	for i := 0; i < 4; i++ {
		fixedFiles = append(fixedFiles, filepath.Join(dir, fmt.Sprintf("fixed/part-%05d-of-00004", i)))
	}
	checkEvents(t, fixedFiles, n)
	checkEvents(t, []string{filepath.Join(dir, "bundles/part-00000-of-00001")}, n)
	if got := dirNames(t, filepath.Join(dir, "fixed")); len(got) != 4 {
		t.Errorf("fixed/ holds %v, want the 4 shards only", got)
	}
	if got := dirNames(t, filepath.Join(dir, "bundles")); len(got) != 1 {
		t.Errorf("bundles/ holds %v, want 1 file only", got)
	}
	// 4 shard files + 1 bundle file + the runner-sharded write's marker
	// and lease (see beginFn), each with 2 leftovers.
	if got := writeMetric(t, res, "temp_files_removed"); got != 14 {
		t.Errorf("temp_files_removed = %d, want 14", got)
	}
}

// TestWriteConstructionErrors: invalid writes panic when the pipeline is
// built, saying why.
func TestWriteConstructionErrors(t *testing.T) {
	type noID struct {
		Name string `avro:"name"`
	}
	cases := []struct {
		name   string
		schema string
		col    func(s beam.Scope) beam.PCollection
		opts   []avroio.WriteOption
		want   string
	}{
		{"codec", eventSchema, nil, []avroio.WriteOption{avroio.WithCodec("lz4")}, `cannot write codec "lz4"`},
		{"level", eventSchema, nil, []avroio.WriteOption{avroio.WithDeflateLevel(12)}, "deflate level 12"},
		{"schema", `{"type":"record","name":"X","fields":[{"name":"a","type":"nope"}]}`, nil, nil, "parsing the writer schema"},
		{"interval", eventSchema, nil, []avroio.WriteOption{avroio.WithSyncInterval(10)}, "sync interval 10"},
		{"max block", eventSchema, nil, []avroio.WriteOption{avroio.WithMaxBlockSize(-1)}, "negative MaxBlockSize"},
		{"interval over max block", eventSchema, nil, []avroio.WriteOption{avroio.WithSyncInterval(8000), avroio.WithMaxBlockSize(4096)}, "sync interval 8000 is above MaxBlockSize 4096"},
		{"metadata", eventSchema, nil, []avroio.WriteOption{avroio.WithMetadata(map[string]string{"avro.schema": "x"})}, "reserved"},
		{"shards", eventSchema, nil, []avroio.WriteOption{avroio.WithNumShards(-1)}, "negative"},
		{"stale age", eventSchema, nil, []avroio.WriteOption{avroio.WithStaleTempAge(0)}, "WithStaleTempAge(0s): the age must be positive"},
		{"template", eventSchema, nil, []avroio.WriteOption{avroio.WithNumShards(2), avroio.WithShardNameTemplate("-of-NN")}, "has no S"},
		{"field", eventSchema, func(s beam.Scope) beam.PCollection { return beam.Create(s, noID{"x"}) }, nil, `no field for field "id" of Avro record sdfio.test.Event`},
		{"inferred", "", func(s beam.Scope) beam.PCollection { return beam.Create(s, badUint{U: 1}) }, nil, "no schema given, and none can be inferred from Go type avroio_test.badUint: field badUint.U: Avro has no type for a Go uint64"},
		{"inferred records", "", func(s beam.Scope) beam.PCollection { return beam.Create(s, avroio.Record{"a": int64(1)}) }, nil, "avroio.Record values have none to infer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			col := events(s, 0, 1)
			if c.col != nil {
				col = c.col(s)
			}
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(fmt.Sprint(p), c.want) {
					t.Fatalf("panic %v, want one saying %q", p, c.want)
				}
			}()
			avroio.Write(s, filepath.Join(t.TempDir(), "x"), c.schema, col, c.opts...)
		})
	}
	// An unregistered filesystem scheme.
	func() {
		_, s := beam.NewPipelineWithRoot()
		defer func() {
			if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), `"nosuchfs" not registered`) {
				t.Fatalf("unknown scheme: panic %v", p)
			}
		}()
		avroio.Write(s, "nosuchfs://b/x", eventSchema, events(s, 0, 1))
	}()
}

func toAnys[T any](l []T) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

// TestWriteMemfs writes to Beam's in-memory filesystem, which has no
// directories: names, renames and the removal of temporary files go
// through Beam's filesystem interface only, as on an object store.
func TestWriteMemfs(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	const n = 200
	root := fmt.Sprintf("memfs://%s/", strings.ReplaceAll(t.Name(), "/", "_"))
	fixed := avroio.Write(s, root+"fixed/part", eventSchema, events(s, 0, n), avroio.WithNumShards(2), avroio.WithSuffix(".avro"))
	bundles := avroio.Write(s, root+"bundles/part", eventSchema, events(s, 0, n), avroio.WithCodec("deflate"))
	passert.Equals(s, fixed, root+"fixed/part-00000-of-00002.avro", root+"fixed/part-00001-of-00002.avro")
	passert.Equals(s, bundles, root+"bundles/part-00000-of-00001")
	runWritePipeline(t, p)

	ctx := context.Background()
	fs, err := filesystem.New(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	// Everything under root, temporary files included ("*" stops at "/").
	var all []string
	for _, glob := range []string{"*", "*/*", "*/*/*", "*/*/*/*"} {
		l, err := fs.List(ctx, root+glob)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l...)
	}
	sort.Strings(all)
	want := []string{root + "bundles/part-00000-of-00001", root + "fixed/part-00000-of-00002.avro", root + "fixed/part-00001-of-00002.avro"}
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("memfs holds %v, want %v", all, want)
	}
	local := t.TempDir()
	for _, group := range [][]string{want[:1], want[1:]} {
		var paths []string
		for _, f := range group {
			b, err := filesystem.Read(ctx, fs, f)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(local, filepath.Base(f))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, path)
		}
		checkEvents(t, paths, n)
	}
}

// startFakeGCS serves an empty bucket from fake-gcs-server on a loopback
// port and points Beam's gs:// filesystem (through the storage client's
// STORAGE_EMULATOR_HOST) at it for the rest of the test.
func startFakeGCS(t *testing.T, bucket string) *fakestorage.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, PublicHost: l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	fake.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	ts := httptest.NewUnstartedServer(fake.HTTPHandler())
	ts.Listener.Close()
	ts.Listener = l
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(fake.Stop)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(ts.URL, "http://"))
	return fake
}

// TestWriteGCS writes to gs:// (fake-gcs-server through the real storage
// client): objects are uploaded under temporary names, renamed (copied and
// deleted) to their final names, and no temporary object is left.
func TestWriteGCS(t *testing.T) {
	const bucket = "avroio-write"
	fake := startFakeGCS(t, bucket)
	p, s := beam.NewPipelineWithRoot()
	const n = 300
	root := "gs://" + bucket + "/"
	fixed := avroio.Write(s, root+"out/fixed", eventSchema, events(s, 0, n), avroio.WithNumShards(3), avroio.WithSuffix(".avro"))
	bundles := avroio.Write(s, root+"out/bundle", eventSchema, events(s, 0, n), avroio.WithZstandardLevel(3))
	passert.Count(s, fixed, "fixed", 3)
	passert.Equals(s, bundles, root+"out/bundle-00000-of-00001")
	runWritePipeline(t, p)

	objs, _, err := fake.ListObjectsWithOptions(bucket, fakestorage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	sort.Strings(names)
	want := []string{"out/bundle-00000-of-00001", "out/fixed-00000-of-00003.avro", "out/fixed-00001-of-00003.avro", "out/fixed-00002-of-00003.avro"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("bucket holds %v, want %v", names, want)
	}
	local := t.TempDir()
	for _, group := range [][]string{want[:1], want[1:]} {
		var paths []string
		for _, name := range group {
			o, err := fake.GetObject(bucket, name)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(local, filepath.Base(name))
			if err := os.WriteFile(path, o.Content, 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, path)
		}
		checkEvents(t, paths, n)
	}
}
