package avroio

// Reads on Prism (ptest's default runner here): exact output for files read
// in many initial bundles, patterns over several files, typed and generic
// records, reader schemas, empty matches, ReadAll, ReadFiles, memfs, errors,
// runner-initiated splits.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/memfs"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	register.Combiner2[int64, event](&countEventsFn{})
	register.Combiner2[int64, Record](&countRecordsFn{})
	register.Function1x1[event, int64](eventID)
	register.Function1x1[Record, int64](recordID)
	register.DoFn3x0[context.Context, event, func(event)](&slowEventFn{})
	RegisterType(reflect.TypeFor[projected]())
	RegisterType(reflect.TypeFor[jsonTagged]())
	register.Function1x1[projected, string](projectedString)
}

// Counts with a combine, not through a shuffle of every record.
type countEventsFn struct{}

func (countEventsFn) CreateAccumulator() int64           { return 0 }
func (countEventsFn) AddInput(n int64, _ event) int64    { return n + 1 }
func (countEventsFn) MergeAccumulators(a, b int64) int64 { return a + b }
func (countEventsFn) ExtractOutput(n int64) int64        { return n }

type countRecordsFn struct{}

func (countRecordsFn) CreateAccumulator() int64           { return 0 }
func (countRecordsFn) AddInput(n int64, _ Record) int64   { return n + 1 }
func (countRecordsFn) MergeAccumulators(a, b int64) int64 { return a + b }
func (countRecordsFn) ExtractOutput(n int64) int64        { return n }

func eventID(e event) int64   { return e.ID }
func recordID(r Record) int64 { return r["id"].(int64) }

// slowEventFn passes records on after sleeping DelayMs each: work slower
// than Prism's progress poll, so that Prism splits the running read.
type slowEventFn struct{ DelayMs int64 }

func (fn *slowEventFn) ProcessElement(ctx context.Context, e event, emit func(event)) {
	time.Sleep(time.Duration(fn.DelayMs) * time.Millisecond)
	emit(e)
}

func run(t *testing.T, p *beam.Pipeline) beam.PipelineResult {
	t.Helper()
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	return res
}

func ids(from, to int) []any {
	out := make([]any, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, int64(i))
	}
	return out
}

// mustPanic runs f and returns what it panicked with, failing t if it did
// not panic.
func mustPanic(t *testing.T, what string, f func()) string {
	t.Helper()
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprint(r)
			}
		}()
		f()
		t.Fatalf("%s did not panic", what)
	}()
	return msg
}

// TestPipelineManyBundles reads one file of 2,000 records in 7-record
// blocks, cut into some 40 initial bundles that split blocks' bytes.
func TestPipelineManyBundles(t *testing.T) {
	recs := eventRecords(0, 2000)
	path, _ := writeLayoutFile(t, t.TempDir(), "many.avro", "snappy", recs, []int{7})
	size := newSource(t, path, reflect.TypeFor[event]()).File.Size
	bundle := size / 40
	for _, codec := range []string{"typed", "generic"} {
		t.Run(codec, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			var got, n beam.PCollection
			if codec == "typed" {
				got = Read(s, path, reflect.TypeFor[event](), WithDesiredBundleSize(bundle), WithMinBundleSize(1000))
				passert.Equals(s, got, anySlice(recs)...)
				n = beam.Combine(s, &countEventsFn{}, got)
			} else {
				got = ReadGeneric(s, path, WithDesiredBundleSize(bundle), WithMinBundleSize(1000))
				want := make([]any, len(recs))
				for i := range recs {
					want[i] = genericEvent(i)
				}
				passert.Equals(s, got, want...)
				n = beam.Combine(s, &countRecordsFn{}, got)
			}
			passert.Equals(s, n, int64(len(recs)))
			res := run(t, p)
			if n := counterSum(t, res, "records"); n != int64(len(recs)) {
				t.Errorf("records metric = %d, want %d", n, len(recs))
			}
			h := int64(blockOffsets(t, path)[0])
			if n := counterSum(t, res, "bytes_read"); n != size-h {
				t.Errorf("bytes_read metric = %d, want the %d bytes of the file's blocks", n, size-h)
			}
			if n := counterSum(t, res, "ranges_read"); n < 35 {
				t.Errorf("ranges_read metric = %d, want about 40 initial bundles", n)
			}
		})
	}
}

// TestPipelineBundleSizes: the defaults read a small file as one bundle;
// the minimum bundle size wins over a smaller desired size. (It failed 1
// run in CI at load 9: Prism had split a range while it ran.)
func TestPipelineBundleSizes(t *testing.T) {
	path, _ := writeLayoutFile(t, t.TempDir(), "b.avro", "null", eventRecords(0, 9000), []int{50})
	size := newSource(t, path, reflect.TypeFor[event]()).File.Size
	if size < 2*DefaultMinBundleSize || size > 3*DefaultMinBundleSize {
		t.Fatalf("file of %d bytes, want 2 to 3 times the default minimum bundle size", size)
	}
	for _, tc := range []struct {
		name   string
		opts   []ReadOption
		ranges int64
	}{
		{"defaults", nil, 1},
		{"min bundle size wins", []ReadOption{WithDesiredBundleSize(1000)}, 2}, // 128,000 + the rest
		{"both small", []ReadOption{WithDesiredBundleSize(size / 10), WithMinBundleSize(1000)}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			got := Read(s, path, reflect.TypeFor[event](), tc.opts...)
			passert.Equals(s, beam.Combine(s, &countEventsFn{}, got), int64(9000))
			res := run(t, p)
			// A range Prism splits while it runs (it does when a bundle
			// makes no progress for a while, as under load) is read as
			// two: the initial ranges are those read less the splits.
			n, split := counterSum(t, res, "ranges_read"), counterSum(t, res, "splits_accepted")
			if n-split != tc.ranges {
				t.Errorf("ranges_read metric = %d with %d dynamic splits, want %d initial ranges", n, split, tc.ranges)
			}
		})
	}
}

// TestPipelinePattern reads a glob over several files, of several codecs.
func TestPipelinePattern(t *testing.T) {
	dir := t.TempDir()
	var want []any
	for i, codec := range []string{"null", "deflate", "snappy", "zstandard"} {
		recs := eventRecords(i*100, i*100+100)
		writeLayoutFile(t, dir, fmt.Sprintf("part-%d.avro", i), codec, recs, []int{5, 9})
		want = append(want, ids(i*100, i*100+100)...)
	}
	// Not matched by the pattern.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not avro"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub.avro"), 0o755)

	p, s := beam.NewPipelineWithRoot()
	typed := Read(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[event](), WithDesiredBundleSize(2000), WithMinBundleSize(500))
	passert.Equals(s, beam.ParDo(s, eventID, typed), want...)
	generic := ReadGeneric(s, filepath.Join(dir, "part-[12].avro"))
	passert.Equals(s, beam.ParDo(s, recordID, generic), want[100:300]...)
	res := run(t, p)
	if n := counterSum(t, res, "records"); n != 600 {
		t.Errorf("records metric = %d, want 600", n)
	}
}

// projected is a record of projectedSchema.
type projected struct {
	ID     int64   `avro:"id"`
	Kind   string  `avro:"kind"`
	Score  float64 `avro:"score"`
	Source string  `avro:"source"`
}

func projectedString(p projected) string {
	return fmt.Sprintf("%d/%s/%g/%s", p.ID, p.Kind, p.Score, p.Source)
}

// projectedSchema reads events with fewer fields, one of them promoted from
// int in the writer's schema (see intScoreSchema), and one the writer lacks.
const projectedSchema = `{"type": "record", "name": "Event", "namespace": "sdfio.avroio.test", "fields": [
  {"name": "id", "type": "long"},
  {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C", "D"]}},
  {"name": "score", "type": "double"},
  {"name": "source", "type": "string", "default": "unknown"}
]}`

// intScoreSchema is eventsSchema with an int score.
var intScoreSchema = strings.Replace(eventsSchema, `{"name": "score", "type": "double"}`, `{"name": "score", "type": "int"}`, 1)

type intScoreEvent struct {
	ID    int64    `avro:"id"`
	Name  string   `avro:"name"`
	Score int32    `avro:"score"`
	Tags  []string `avro:"tags"`
	Note  *string  `avro:"note"`
	Kind  string   `avro:"kind"`
}

// intScoreFile writes n events with an int score (intScoreSchema) to
// dir/int.avro, and returns its path and the events as projectedString
// gives them read with projectedSchema.
func intScoreFile(t *testing.T, dir string, n int) (string, []any) {
	t.Helper()
	var recs []intScoreEvent
	var want []any
	for i := range n {
		e := eventRecord(i)
		recs = append(recs, intScoreEvent{ID: e.ID, Name: e.Name, Score: int32(i * 3), Tags: e.Tags, Note: e.Note, Kind: e.Kind})
		want = append(want, fmt.Sprintf("%d/%s/%g/unknown", i, e.Kind, float64(i*3)))
	}
	b, _ := layoutFile(t, intScoreSchema, "deflate", recs, []int{4})
	path := filepath.Join(dir, "int.avro")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// TestPipelineReaderSchema reads with a reader schema that drops fields,
// adds one with a default, and promotes int to double; then one that cannot
// be resolved, which fails the read naming the file.
func TestPipelineReaderSchema(t *testing.T) {
	path, want := intScoreFile(t, t.TempDir(), 50)

	p, s := beam.NewPipelineWithRoot()
	got := Read(s, path, reflect.TypeFor[projected](), WithReaderSchema(projectedSchema), WithDesiredBundleSize(300), WithMinBundleSize(100))
	passert.Equals(s, beam.ParDo(s, projectedString, got), want...)
	g := ReadGeneric(s, path, WithReaderSchema(projectedSchema))
	passert.Equals(s, beam.ParDo(s, recordID, g), ids(0, 50)...)
	run(t, p)

	t.Run("unresolvable", func(t *testing.T) {
		bad := strings.Replace(projectedSchema, `"name": "id", "type": "long"`, `"name": "id", "type": "boolean"`, 1)
		p, s := beam.NewPipelineWithRoot()
		ReadGeneric(s, path, WithReaderSchema(bad))
		err := workertest.RunFailing(t, p)
		if err == nil {
			t.Fatal("reading with a reader schema that cannot be resolved succeeded")
		}
		for _, w := range []string{path, "schema error", "resolving the reader schema"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error does not say %q: %v", w, err)
			}
		}
	})
	t.Run("invalid json", func(t *testing.T) {
		_, s := beam.NewPipelineWithRoot()
		msg := mustPanic(t, "Read with an invalid reader schema", func() { ReadGeneric(s, path, WithReaderSchema(`{"type":"record"`)) })
		if !strings.Contains(msg, "reader schema") {
			t.Errorf("panic does not mention the reader schema: %s", msg)
		}
	})
}

// jsonTagged is the kind of struct Beam Go's avroio reads (through JSON):
// without avro tags its Go field names do not name the schema's fields.
type jsonTagged struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// TestPipelineFieldsMustMatch: a struct whose fields name no schema field
// fails the read instead of yielding zero values.
func TestPipelineFieldsMustMatch(t *testing.T) {
	path := testdataPath(t, "events-null.avro")
	p, s := beam.NewPipelineWithRoot()
	Read(s, path, reflect.TypeFor[jsonTagged]())
	err := workertest.RunFailing(t, p)
	if err == nil {
		t.Fatal("reading into a struct whose fields name no schema field succeeded")
	}
	for _, w := range []string{path, "field ID of Go type avroio.jsonTagged", `Avro field "ID"`, "id, name, score"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

// TestEmptyMatch checks the three treatments, for Read and ReadAll. A
// pattern that matches nothing is an error when the pipeline runs, naming
// the pattern, as in Beam Java: building the pipeline does not panic (it
// did before).
func TestEmptyMatch(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.avro")
	glob := filepath.Join(dir, "*.avro")
	typ := reflect.TypeFor[event]()

	t.Run("Read", func(t *testing.T) {
		for _, tc := range []struct {
			pattern string
			opts    []ReadOption
			ok      bool
		}{
			{missing, nil, false}, // Disallow by default
			{glob, nil, false},
			{missing, []ReadOption{WithEmptyMatch(EmptyMatchAllow)}, true},
			{glob, []ReadOption{WithEmptyMatch(EmptyMatchAllow)}, true},
			{missing, []ReadOption{WithEmptyMatch(EmptyMatchAllowIfWildcard)}, false},
			{glob, []ReadOption{WithEmptyMatch(EmptyMatchAllowIfWildcard)}, true},
			{glob, []ReadOption{WithEmptyMatch(EmptyMatchDisallow)}, false},
		} {
			name := fmt.Sprintf("%s %v", filepath.Base(tc.pattern), tc.opts != nil)
			if !tc.ok {
				p, s := beam.NewPipelineWithRoot()
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("Read of %s panicked while the pipeline was built: %v; want the pipeline to fail when it runs", name, r)
						}
					}()
					Read(s, tc.pattern, typ, tc.opts...)
				}()
				err := workertest.RunFailing(t, p)
				if err == nil {
					t.Fatalf("Read of %s: the pipeline succeeded", name)
				}
				if msg := err.Error(); !strings.Contains(msg, "no file matches") || !strings.Contains(msg, tc.pattern) {
					t.Errorf("%s: the error does not say that no file matches the pattern: %s", name, msg)
				}
				continue
			}
			p, s := beam.NewPipelineWithRoot()
			passert.Empty(s, Read(s, tc.pattern, typ, tc.opts...))
			run(t, p)
		}
	})
	t.Run("Read/file made after the pipeline was built", func(t *testing.T) {
		// Matched when the pipeline runs, as in Java: a file that came
		// since is read.
		dir := t.TempDir()
		p, s := beam.NewPipelineWithRoot()
		got := Read(s, filepath.Join(dir, "*.avro"), typ)
		passert.Equals(s, beam.ParDo(s, eventID, got), ids(0, 12)...)
		writeLayoutFile(t, dir, "late.avro", "null", eventRecords(0, 12), []int{5})
		run(t, p)
	})
	t.Run("ReadAll", func(t *testing.T) {
		// AllowIfWildcard by default: the glob reads nothing...
		p, s := beam.NewPipelineWithRoot()
		passert.Empty(s, ReadAll(s, beam.Create(s, glob), typ))
		run(t, p)
		// ... the plain path fails the pipeline.
		p, s = beam.NewPipelineWithRoot()
		ReadAll(s, beam.Create(s, glob, missing), typ)
		err := workertest.RunFailing(t, p)
		if err == nil || !strings.Contains(err.Error(), "no file matches") || !strings.Contains(err.Error(), missing) {
			t.Errorf("ReadAll of a missing file: %v, want an error saying no file matches %s", err, missing)
		}
		// Allow reads nothing from both.
		p, s = beam.NewPipelineWithRoot()
		passert.Empty(s, ReadAll(s, beam.Create(s, glob, missing), typ, WithEmptyMatch(EmptyMatchAllow)))
		run(t, p)
	})
}

// TestPipelineReadAllAndFiles reads patterns from a PCollection, files from
// fileio, and a pattern with the many-files hint.
func TestPipelineReadAllAndFiles(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		writeLayoutFile(t, dir, fmt.Sprintf("f%d.avro", i), "zstandard", eventRecords(i*40, i*40+40), []int{3, 0, 6})
	}
	p, s := beam.NewPipelineWithRoot()
	all := ReadAll(s, beam.Create(s, filepath.Join(dir, "f0.avro"), filepath.Join(dir, "f[12].avro")), reflect.TypeFor[event](),
		WithDesiredBundleSize(500), WithMinBundleSize(200))
	passert.Equals(s, beam.ParDo(s, eventID, all), ids(0, 120)...)

	files := fileio.ReadMatches(s, fileio.MatchFiles(s, filepath.Join(dir, "f[01].avro")))
	fromFiles := ReadFiles(s, files, RecordType, WithDesiredBundleSize(500), WithMinBundleSize(200))
	passert.Equals(s, beam.ParDo(s, recordID, fromFiles), ids(0, 80)...)

	many := Read(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[event](), WithMatchesManyFiles())
	passert.Equals(s, beam.ParDo(s, eventID, many), ids(0, 120)...)
	res := run(t, p)
	if n := counterSum(t, res, "files_matched"); n != 3+2+3 {
		t.Errorf("files_matched metric = %d, want 8", n)
	}
}

// TestPipelineManyBraces: a pattern of eleven brace groups {0,1} (2,048
// alternatives, past filesource.MaxBraceListings) over 64 files of 30
// records, read by Read, ReadGeneric with MatchesManyFiles and ReadAll:
// 1,920 records each, every one once. Before, the expansion stopped at
// 1,024 alternatives and the reads gave the 960 records of the files whose
// first digit is 0, with no error.
func TestPipelineManyBraces(t *testing.T) {
	dir := t.TempDir()
	const files, per = 64, 30
	for k := 0; k < files; k++ {
		i := k * 32 // of 2,048
		name := fmt.Sprintf("part-%011b.avro", i)
		writeLayoutFile(t, dir, name, "deflate", eventRecords(k*per, k*per+per), []int{7})
	}
	// Look-alikes the pattern must not take.
	writeLayoutFile(t, dir, "part-0000000000.avro", "null", eventRecords(10000, 10001), []int{1})
	writeLayoutFile(t, dir, "part-000000000002.avro", "null", eventRecords(10001, 10002), []int{1})
	pattern := filepath.Join(dir, "part-"+strings.Repeat("{0,1}", 11)+".avro")

	p, s := beam.NewPipelineWithRoot()
	typed := Read(s, pattern, reflect.TypeFor[event](), WithDesiredBundleSize(1000), WithMinBundleSize(200))
	passert.Equals(s, beam.ParDo(s, eventID, typed), ids(0, files*per)...)
	generic := ReadGeneric(s, pattern, WithMatchesManyFiles())
	passert.Equals(s, beam.ParDo(s, recordID, generic), ids(0, files*per)...)
	all := ReadAll(s, beam.Create(s, pattern), reflect.TypeFor[event]())
	passert.Equals(s, beam.ParDo(s, eventID, all), ids(0, files*per)...)
	res := run(t, p)
	if n := counterSum(t, res, "records"); n != 3*files*per {
		t.Errorf("records metric = %d, want %d", n, 3*files*per)
	}
}

// TestPipelineMemfs reads files in Beam's in-memory filesystem, whose
// streams cannot seek: a range is reached by skipping.
func TestPipelineMemfs(t *testing.T) {
	var want []any
	for i := 0; i < 2; i++ {
		b, _ := layoutFile(t, eventsSchema, "snappy", eventRecords(i*300, i*300+300), []int{11})
		name := fmt.Sprintf("memfs://avroio-test/%s/f%d.avro", t.Name(), i)
		memfs.Write(name, b)
		want = append(want, ids(i*300, i*300+300)...)
	}
	p, s := beam.NewPipelineWithRoot()
	got := Read(s, fmt.Sprintf("memfs://avroio-test/%s/*.avro", t.Name()), reflect.TypeFor[event](), WithDesiredBundleSize(1000), WithMinBundleSize(500))
	passert.Equals(s, beam.ParDo(s, eventID, got), want...)
	run(t, p)
}

// TestPipelineCorruptFile fails the read with an error naming the file,
// the offset and what was wrong; the other files' records do not matter.
func TestPipelineCorruptFile(t *testing.T) {
	dir := t.TempDir()
	b, offs := layoutFile(t, eventsSchema, "null", eventRecords(0, 60), []int{6})
	// Damage the sync marker after the 4th block.
	at := offs[30] - container.SyncSize
	b[at] ^= 0xff
	path := filepath.Join(dir, "bad.avro")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	Read(s, path, reflect.TypeFor[event](), WithDesiredBundleSize(200), WithMinBundleSize(100))
	err := workertest.RunFailing(t, p)
	if err == nil {
		t.Fatal("reading a file with a damaged sync marker succeeded")
	}
	for _, w := range []string{path, fmt.Sprintf("at byte %d", at), "sync marker mismatch"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

// TestPipelineRunnerSplit makes every record slower than Prism's progress
// poll, so that Prism splits the running read of one file: a split must be
// accepted and the output stay exact.
func TestPipelineRunnerSplit(t *testing.T) {
	recs := eventRecords(0, 12)
	path, _ := writeLayoutFile(t, t.TempDir(), "slow.avro", "deflate", recs, []int{1})
	p, s := beam.NewPipelineWithRoot()
	slow := beam.ParDo(s, &slowEventFn{DelayMs: 180}, Read(s, path, reflect.TypeFor[event]()))
	passert.Equals(s, beam.ParDo(s, eventID, slow), ids(0, 12)...)
	res := run(t, p)
	accepted, refused := counterSum(t, res, "splits_accepted"), counterSum(t, res, "splits_refused")
	t.Logf("splits accepted %d, refused %d", accepted, refused)
	if accepted < 1 {
		t.Errorf("no runner-initiated split was accepted (refused: %d)", refused)
	}
	if n := counterSum(t, res, "records"); n != 12 {
		t.Errorf("records metric = %d, want 12", n)
	}
}

type unregistered struct {
	ID int64 `avro:"id"`
}

// TestUnregisteredType: a named record type must be registered with Beam.
func TestUnregisteredType(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	msg := mustPanic(t, "Read of an unregistered type", func() {
		Read(s, testdataPath(t, "events-null.avro"), reflect.TypeFor[unregistered]())
	})
	if !strings.Contains(msg, "avroio.RegisterType(reflect.TypeFor[avroio.unregistered]())") {
		t.Errorf("panic does not say how to register the type: %s", msg)
	}
}

// TestPipelineSeparateWorker reads through a Prism job server whose SDK
// workers are separate processes started from this test binary, as on
// Dataflow and Flink: sources, record types, the Record coder and the
// options must reach the workers through the pipeline and the binary's own
// registrations. (memfs:// files would not: they live in this process.)
func TestPipelineSeparateWorker(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeLayoutFile(t, dir, "w.avro", "zstandard", eventRecords(0, 500), []int{8, 3})
	p, s := beam.NewPipelineWithRoot()
	typed := Read(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[event](), WithDesiredBundleSize(2000), WithMinBundleSize(1000))
	passert.Equals(s, beam.ParDo(s, eventID, typed), ids(0, 500)...)
	generic := ReadGeneric(s, testdataPath(t, "events-xz.avro"), WithReaderSchema(projectedSchema))
	want := make([]any, 30)
	for i := range want {
		want[i] = Record{"id": int64(i), "kind": eventRecord(i).Kind, "score": float64(i) * 0.5, "source": "unknown"}
	}
	passert.Equals(s, generic, want...)

	res, err := workertest.Run(t, p)
	if err != nil {
		t.Fatalf("pipeline with separate worker processes failed: %v", err)
	}
	if len(res.Workers) == 0 {
		t.Fatal("no worker process was started")
	}
	for _, w := range res.Workers {
		if w.PID == 0 || w.PID == os.Getpid() {
			t.Errorf("worker %s ran as pid %d, want a separate process (test pid %d)", w.ID, w.PID, os.Getpid())
		}
	}
	if n := counterSum(t, res, "records"); n != 530 {
		t.Errorf("records metric = %d, want 530", n)
	}
	t.Logf("%s: %d workers, %v", path, len(res.Workers), res.Elapsed)
}
