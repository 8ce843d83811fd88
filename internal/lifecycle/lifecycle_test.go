package lifecycle_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/testtmp"
	"github.com/sdfio/sdfio/internal/workertest"
)

// logDirEnv names the directory where every process of a run records the
// lifecycle calls it sees, one file per process (the workers inherit the
// test's environment).
const logDirEnv = "SDFIO_LIFECYCLE_LOG_DIR"

var logMu sync.Mutex

// record appends "<DoFn type>\t<method>" to this process's file.
func record(t reflect.Type, method string) {
	dir := os.Getenv(logDirEnv)
	if dir == "" {
		return
	}
	logMu.Lock()
	defer logMu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(os.Getpid())), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s\t%s\n", typeKey(t), method); err != nil {
		panic(err)
	}
}

func typeKey(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

// Elements of the test's pipeline shapes.
type event struct {
	ID   int64  `avro:"id"`
	Kind string `avro:"kind"`
}

const eventSchema = `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"kind","type":"string"}]}`

type row struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

// seqRow is the row of a periodic sequence's element.
func seqRow(i int64) row { return row{ID: i, Name: fmt.Sprint("s", i)} }

type entity struct {
	Key *datastore.Key `datastore:"__key__"`
	N   int64
}

func init() {
	beamreg.SetLifecycleHook(record)
	register.Function1x1(eventKind)
	register.Function2x0(stampEvent)
	register.Function1x2(entityKV)
	register.Function1x1(seqRow)
	register.Emitter2[beam.EventTime, event]()
	beam.RegisterType(reflect.TypeFor[event]())
	beam.RegisterType(reflect.TypeFor[row]())
	datastoreio.RegisterType(reflect.TypeFor[entity]())
}

func eventKind(e event) string { return "/" + e.Kind + "/part" }

func stampEvent(e event, emit func(beam.EventTime, event)) {
	emit(mtime.FromTime(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC).Add(time.Duration(e.ID)*time.Minute)), e)
}

func entityKV(e entity) (*datastore.Key, entity) { return e.Key, e }

func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int {
		return dstest.RunSharedFunc(func() int { return ptest.MainRetWithDefault(m, "prism") })
	}))
}

func events(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = event{ID: int64(i), Kind: []string{"a", "b"}[i%2]}
	}
	return out
}

// shape adds one use of an IO to the pipeline; a shape per way an IO's
// transforms are built, so that every production DoFn runs.
type shape struct {
	name  string
	build func(t *testing.T, s beam.Scope)
}

func avroShapes(dir string) []shape {
	in := func(s beam.Scope) beam.PCollection { return beam.Create(s, events(40)...) }
	written := filepath.Join(dir, "in", "events")
	return []shape{
		{"avroio.Write", func(t *testing.T, s beam.Scope) {
			avroio.Write(s, filepath.Join(dir, "bundles", "part"), eventSchema, in(s))
		}},
		{"avroio.Write/WithNumShards", func(t *testing.T, s beam.Scope) {
			avroio.Write(s, filepath.Join(dir, "shards", "part"), eventSchema, in(s), avroio.WithNumShards(2))
		}},
		{"avroio.Write/WithDestination", func(t *testing.T, s beam.Scope) {
			avroio.Write(s, filepath.Join(dir, "dests"), eventSchema, in(s), avroio.WithDestination(eventKind))
		}},
		{"avroio.Write/WithDestination/WithNumShards", func(t *testing.T, s beam.Scope) {
			avroio.Write(s, filepath.Join(dir, "destshards"), eventSchema, in(s), avroio.WithDestination(eventKind), avroio.WithNumShards(2))
		}},
		{"avroio.Write/WithWindowedWrites", func(t *testing.T, s beam.Scope) {
			stamped := beam.WindowInto(s, window.NewFixedWindows(10*time.Minute), beam.ParDo(s, stampEvent, in(s)))
			avroio.Write(s, filepath.Join(dir, "windowed", "part"), eventSchema, stamped, avroio.WithWindowedWrites())
		}},
		{"avroio.Read", func(t *testing.T, s beam.Scope) {
			writeAvro(t, written)
			passert.Count(s, avroio.Read(s, written+"*", reflect.TypeFor[event]()), "read", 40)
		}},
		{"avroio.ReadWithBadFiles", func(t *testing.T, s beam.Scope) {
			writeAvro(t, written)
			recs, bad := avroio.ReadWithBadFiles(s, written+"*", reflect.TypeFor[event]())
			passert.Count(s, recs, "readbad", 40)
			passert.Empty(s, bad)
		}},
		{"avroio.ReadAll", func(t *testing.T, s beam.Scope) {
			writeAvro(t, written)
			passert.Count(s, avroio.ReadAll(s, beam.Create(s, written+"*"), reflect.TypeFor[event]()), "readall", 40)
		}},
		{"avroio.ReadFiles", func(t *testing.T, s beam.Scope) {
			writeAvro(t, written)
			files := fileio.ReadMatches(s, fileio.MatchFiles(s, written+"*"))
			passert.Count(s, avroio.ReadFiles(s, files, reflect.TypeFor[event]()), "readfiles", 40)
		}},
	}
}

var writeOnce sync.Map

// writeAvro writes 40 events to prefix's file once, before the pipeline
// runs.
func writeAvro(t *testing.T, prefix string) {
	if _, done := writeOnce.LoadOrStore(prefix, true); done {
		return
	}
	p, s := beam.NewPipelineWithRoot()
	avroio.Write(s, prefix, eventSchema, beam.Create(s, events(40)...), avroio.WithNumShards(1))
	ptest.RunAndValidate(t, p)
}

func bigqueryShapes(srv *bqtest.Server) []shape {
	rows := func(s beam.Scope) beam.PCollection {
		var rs []any
		for i := range 30 {
			rs = append(rs, row{ID: int64(i), Name: fmt.Sprint("n", i)})
		}
		return beam.Create(s, rs...)
	}
	wopts := func(more ...bqwrite.WriteOption) []bqwrite.WriteOption {
		return append([]bqwrite.WriteOption{bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithInsecure(),
			bqwrite.WithRESTEndpoint(srv.RESTEndpoint()), bqwrite.WithRetries(8, 5*time.Millisecond)}, more...)
	}
	return []shape{
		{"bigqueryio.Read", func(t *testing.T, s beam.Scope) {
			col := bigqueryio.Read(s, "p.d.src", reflect.TypeFor[row](), bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(), bigqueryio.WithMaxStreams(2))
			passert.Count(s, col, "bqread", 20)
		}},
		{"bqwrite.Write", func(t *testing.T, s beam.Scope) {
			res := bqwrite.Write(s, "p.d.dst", rows(s), wopts()...)
			passert.Empty(s, res.FailedRows)
		}},
		{"bqwrite.Write/WriteTruncate", func(t *testing.T, s beam.Scope) {
			res := bqwrite.Write(s, "p.d.trunc", rows(s), wopts(bqwrite.WithWriteDisposition(bqwrite.WriteTruncate))...)
			passert.Empty(s, res.FailedRows)
		}},
		// Unbounded input: the exactly-once streaming write's stateful steps.
		{"bqwrite.Write/unbounded", func(t *testing.T, s beam.Scope) {
			start := time.Now().Add(500 * time.Millisecond)
			seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(10*100*time.Millisecond), 100*time.Millisecond)))
			res := bqwrite.Write(s, "p.d.stream", beam.ParDo(s, seqRow, seq), wopts(bqwrite.WithTriggeringFrequency(300*time.Millisecond))...)
			passert.Empty(s, res.FailedRows)
		}},
	}
}

func datastoreShapes(project, ns string) []shape {
	ents := func(s beam.Scope, kind string) beam.PCollection {
		var es []any
		for i := range 20 {
			k := datastore.IDKey(kind, int64(i+1), nil)
			k.Namespace = ns
			es = append(es, entity{Key: k, N: int64(i)})
		}
		return beam.Create(s, es...)
	}
	return []shape{
		{"datastoreio.Write", func(t *testing.T, s beam.Scope) {
			datastoreio.Write(s, project, ents(s, "Life"))
		}},
		{"datastoreio.Write/KV", func(t *testing.T, s beam.Scope) {
			kvs := beam.ParDo(s, entityKV, ents(s, "LifeKV"))
			datastoreio.Write(s, project, kvs)
		}},
		{"datastoreio.Read", func(t *testing.T, s beam.Scope) {
			datastoreio.Read(s, project, datastoreio.NewQuery("Nothing"), reflect.TypeFor[entity](), datastoreio.WithNamespace(ns))
		}},
	}
}

// TestLifecycleOnWorkers runs every shape in one pipeline on separate
// worker processes, then checks that every lifecycle method of every DoFn
// registered through beamreg was called in a worker process.
func TestLifecycleOnWorkers(t *testing.T) {
	logDir := t.TempDir()
	t.Setenv(logDirEnv, logDir)

	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	srv.AddDataset("p", "d", "")
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType, Required: true}, {Name: "name", Type: bigquery.StringFieldType, Required: true}}
	var src [][]bigquery.Value
	for i := range 20 {
		src = append(src, []bigquery.Value{int64(i), fmt.Sprint("n", i)})
	}
	for name, rows := range map[string][][]bigquery.Value{"p.d.src": src, "p.d.dst": nil, "p.d.stream": nil, "p.d.trunc": src[:3]} {
		if err := srv.AddTable(name, bqtest.Table{Schema: schema, Rows: rows}); err != nil {
			t.Fatal(err)
		}
	}
	emu := dstest.Start(t)

	var shapes []shape
	shapes = append(shapes, avroShapes(t.TempDir())...)
	shapes = append(shapes, bigqueryShapes(srv)...)
	shapes = append(shapes, datastoreShapes(emu.Project(), dstest.Namespace(t))...)
	p, s := beam.NewPipelineWithRoot()
	for _, sh := range shapes {
		sh.build(t, s.Scope(sh.name))
	}
	res := workertest.MustRun(t, p)
	if len(res.Workers) == 0 {
		t.Fatal("no worker process was started")
	}

	calls := readCalls(t, logDir)
	checked := 0
	for _, typ := range beamreg.DoFns() {
		ptr := reflect.PointerTo(typ)
		for _, m := range beamreg.LifecycleMethods() {
			if _, ok := ptr.MethodByName(m); !ok {
				continue
			}
			checked++
			if m == "Teardown" {
				// Never called by Beam Go's harness: the wrapper must still give it to Beam.
				if ms, ok := reflectx.WrapMethods(reflect.New(typ).Interface()); !ok || ms[m] == nil {
					t.Errorf("%v has %s, but its struct wrapper does not give it to Beam", typ, m)
				}
				continue
			}
			if calls[typeKey(typ)][m] == 0 {
				t.Errorf("%v.%s was never called in a worker process (calls seen: %v); if no shape of this test runs %v, add one", typ, m, calls[typeKey(typ)], typ.Name())
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d lifecycle methods of %d DoFns checked: beamreg's registry does not list the production DoFns", checked, len(beamreg.DoFns()))
	}
	t.Logf("%d lifecycle methods of %d DoFns checked, on %d worker processes", checked, len(beamreg.DoFns()), len(res.Workers))
}

// readCalls reads the records of the worker processes (not this one's):
// calls[DoFn type][method] = count.
func readCalls(t *testing.T, dir string) map[string]map[string]int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]map[string]int{}
	var pids []string
	for _, e := range ents {
		if e.Name() == fmt.Sprint(os.Getpid()) {
			continue
		}
		pids = append(pids, e.Name())
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			typ, m, _ := strings.Cut(sc.Text(), "\t")
			if calls[typ] == nil {
				calls[typ] = map[string]int{}
			}
			calls[typ][m]++
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(pids)
	t.Logf("lifecycle calls recorded by processes %v", pids)
	return calls
}
