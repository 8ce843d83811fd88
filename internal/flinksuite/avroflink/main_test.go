package avroflink_test

// What the tests share: the record type and its oracle, the independent
// writers, and the way a pipeline hands what it read back to the test
// process (its workers are other processes): a multiset of canonical
// record keys, combined into one sorted list and written to a file.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/internal/flinktest"
)

func TestMain(m *testing.M) { flinktest.Main(m) }

func init() {
	avroio.RegisterType(reflect.TypeFor[Event]())
	register.Function1x1[Event, string](eventKey)
	register.Function1x1[avroio.Record, string](recordKey)
	register.Combiner3[[]string, string, []string](&multisetFn{})
	register.DoFn1x1[[]string, error](&dumpFn{})
}

// EventSchema is the schema of every file the tests read and write: a
// long id, a string, a double, an array, a nullable string and an enum.
const EventSchema = `{"type":"record","name":"Event","namespace":"sdfio.flinksuite","fields":[
 {"name":"id","type":"long"},
 {"name":"name","type":"string"},
 {"name":"score","type":"double"},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"note","type":["null","string"]},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C"]}}]}`

// Event is EventSchema's record.
type Event struct {
	ID    int64    `avro:"id"`
	Name  string   `avro:"name"`
	Score float64  `avro:"score"`
	Tags  []string `avro:"tags"`
	Note  *string  `avro:"note"`
	Kind  string   `avro:"kind"`
}

// expectedEvent is the oracle: the record with id i, as every writer of
// the tests writes it (genPy computes the same).
func expectedEvent(i int64) Event {
	e := Event{ID: i, Name: fmt.Sprintf("ev-%d", i), Score: float64(i) * 0.5, Tags: []string{}, Kind: []string{"A", "B", "C"}[i%3]}
	for j := int64(0); j < i%3; j++ {
		e.Tags = append(e.Tags, fmt.Sprintf("t%d", j))
	}
	if i%4 != 0 {
		n := fmt.Sprintf("n%d", i)
		e.Note = &n
	}
	return e
}

// eventKey is a record's canonical text: every field, so that two records
// have the same key only if they are equal.
func eventKey(e Event) string {
	note := "null"
	if e.Note != nil {
		note = strconv.Quote(*e.Note)
	}
	tags := make([]string, len(e.Tags))
	for i, t := range e.Tags {
		tags[i] = strconv.Quote(t)
	}
	return fmt.Sprintf("%d|%q|%s|[%s]|%s|%s", e.ID, e.Name, strconv.FormatFloat(e.Score, 'g', -1, 64), strings.Join(tags, ","), note, e.Kind)
}

// recordKey is eventKey of a generic record whose values have exactly the
// Go types avroio.Record documents; a record that does not is a key
// starting "BAD", which no file holds.
func recordKey(r avroio.Record) string {
	bad := func(what string) string { return fmt.Sprintf("BAD %s in %#v", what, map[string]any(r)) }
	if len(r) != 6 {
		return bad("field count")
	}
	var e Event
	var ok bool
	if e.ID, ok = r["id"].(int64); !ok {
		return bad("id")
	}
	if e.Name, ok = r["name"].(string); !ok {
		return bad("name")
	}
	if e.Score, ok = r["score"].(float64); !ok {
		return bad("score")
	}
	tags, ok := r["tags"].([]any)
	if !ok {
		return bad("tags")
	}
	e.Tags = []string{}
	for _, t := range tags {
		s, ok := t.(string)
		if !ok {
			return bad("tag")
		}
		e.Tags = append(e.Tags, s)
	}
	switch n := r["note"].(type) {
	case nil:
	case string:
		e.Note = &n
	default:
		return bad("note")
	}
	if e.Kind, ok = r["kind"].(string); !ok {
		return bad("kind")
	}
	return eventKey(e)
}

// multisetFn combines strings into one sorted list, duplicates kept.
type multisetFn struct{}

func (*multisetFn) CreateAccumulator() []string            { return nil }
func (*multisetFn) AddInput(a []string, s string) []string { return append(a, s) }
func (*multisetFn) MergeAccumulators(a, b []string) []string {
	return append(append([]string(nil), a...), b...)
}
func (*multisetFn) ExtractOutput(a []string) []string {
	out := append([]string(nil), a...)
	sort.Strings(out)
	return out
}

// dumpFn writes the list it gets to Path, as JSON, whole (a temporary
// name, then a rename).
type dumpFn struct{ Path string }

func (fn *dumpFn) ProcessElement(keys []string) error {
	b, err := json.Marshal(keys)
	if err != nil {
		return err
	}
	tmp := fn.Path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, fn.Path)
}

// dump makes the pipeline write the multiset of col (strings, of any
// windows) to path, once its input is complete.
func dump(s beam.Scope, col beam.PCollection, path string) {
	s = s.Scope("dump")
	col = beam.WindowInto(s, window.NewGlobalWindows(), col)
	beam.ParDo0(s, &dumpFn{Path: path}, beam.Combine(s, &multisetFn{}, col))
}

// readDump is what the pipeline wrote to path.
func readDump(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the pipeline wrote no result: %v", err)
	}
	var keys []string
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return keys
}

// oracle is the multiset of records a run must see: each key once.
type oracle map[string]bool

func newOracle(ids ...[2]int64) oracle {
	o := oracle{}
	for _, r := range ids {
		for i := r[0]; i < r[0]+r[1]; i++ {
			o[eventKey(expectedEvent(i))] = true
		}
	}
	return o
}

// diff compares the keys a run saw with the oracle: the keys seen more
// than once (with their counts), the keys never seen, the keys the oracle
// does not hold, and how many copies there were beyond the first.
func (o oracle) diff(got []string) (dups, missing, unexpected []string, extra int) {
	count := map[string]int{}
	for _, k := range got {
		count[k]++
	}
	for k, n := range count {
		switch {
		case !o[k]:
			unexpected = append(unexpected, fmt.Sprintf("%s (x%d)", k, n))
		case n > 1:
			dups = append(dups, fmt.Sprintf("%s (x%d)", k, n))
			extra += n - 1
		}
	}
	for k := range o {
		if count[k] == 0 {
			missing = append(missing, k)
		}
	}
	return dups, missing, unexpected, extra
}

// check fails t unless the keys a run saw are the oracle's, each exactly
// once, naming up to 10 keys of each kind of difference; it logs the
// counts either way.
func (o oracle) check(t *testing.T, what string, got []string) {
	t.Helper()
	dups, missing, unexpected, extra := o.diff(got)
	t.Logf("%s: %d records read, %d expected; %d duplicated (%d extra copies), %d missing, %d unexpected",
		what, len(got), len(o), len(dups), extra, len(missing), len(unexpected))
	if len(got) != len(o) || len(dups)+len(missing)+len(unexpected) > 0 {
		t.Errorf("%s: %d records, want %d, each once: duplicated %v; missing %v; unexpected %v",
			what, len(got), len(o), first(dups), first(missing), first(unexpected))
	}
}

func first(l []string) []string {
	sort.Strings(l)
	if len(l) > 10 {
		return append(l[:10:10], fmt.Sprintf("... %d more", len(l)-10))
	}
	return l
}

// counter is the sum of the counter ns/name over the run's steps.
func counter(res beam.PipelineResult, ns, name string) int64 {
	var sum int64
	for _, c := range res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == ns && r.Name() == name
	}).Counters() {
		sum += c.Result()
	}
	return sum
}

// debianPython is Debian's python3, which has python3-avro (a pyenv python
// may come first on PATH).
const debianPython = "/usr/bin/python3"

// requireTools skips t (fails it under CI=true) when an independent writer
// is missing: Debian's python3-avro with snappy and zstandard, and Avro C's
// avromod (apt-get install avro-bin python3-avro python3-snappy
// python3-zstandard; the Makefile's deps install them).
func requireTools(t *testing.T) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("avromod"); err != nil {
		missing = append(missing, "avromod (avro-bin)")
	}
	out, err := exec.Command(debianPython, "-c", "import avro.codecs as c, sys; sys.exit(0 if {'snappy','zstandard'} <= set(c.KNOWN_CODECS) else 3)").CombinedOutput()
	if err != nil {
		missing = append(missing, fmt.Sprintf("%s with python3-avro, python3-snappy, python3-zstandard: %v %s", debianPython, err, out))
	}
	if len(missing) == 0 {
		return
	}
	msg := "independent Avro writers missing: " + strings.Join(missing, "; ")
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// genPy writes container files with python3-avro: argv[1] is the schema
// file, argv[2] the sync interval (bytes of records per block), then
// groups of four: path, codec, first id, records. Record i is
// expectedEvent(i). xz is registered around Python's lzma module
// (python3-avro has no writer for it), and bzip2 at level 1 (Go's bzip2
// reader allocates a table of the level's block size for every block).
const genPy = `
import sys, bz2, lzma
import avro.schema, avro.datafile, avro.io, avro.codecs

class XzCodec(avro.codecs.Codec):
    @staticmethod
    def compress(data):
        c = lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)
        return c, len(c)
    @staticmethod
    def decompress(readers_decoder):
        raise NotImplementedError
avro.codecs.KNOWN_CODECS["xz"] = XzCodec

class Bzip2Level1Codec(avro.codecs.Codec):
    @staticmethod
    def compress(data):
        c = bz2.compress(data, 1)
        return c, len(c)
    @staticmethod
    def decompress(readers_decoder):
        raise NotImplementedError
avro.codecs.KNOWN_CODECS["bzip2"] = Bzip2Level1Codec

schema = avro.schema.parse(open(sys.argv[1]).read())
avro.datafile.SYNC_INTERVAL = int(sys.argv[2])
args = sys.argv[3:]
for k in range(0, len(args), 4):
    out, codec, base, n = args[k], args[k + 1], int(args[k + 2]), int(args[k + 3])
    w = avro.datafile.DataFileWriter(open(out, "wb"), avro.io.DatumWriter(), schema, codec=codec)
    w.set_meta("user.writer", b"python3-avro")
    for i in range(base, base + n):
        w.append({
            "id": i,
            "name": "ev-%d" % i,
            "score": i * 0.5,
            "tags": ["t%d" % j for j in range(i % 3)],
            "note": None if i % 4 == 0 else "n%d" % i,
            "kind": ["A", "B", "C"][i % 3],
        })
    w.close()
`

// pyFile is a file for genPy to write.
type pyFile struct {
	Path  string
	Codec string
	First int64
	N     int64
}

// writePython writes files with python3-avro, cutting blocks after
// syncInterval bytes of records.
func writePython(t *testing.T, syncInterval int, files ...pyFile) {
	t.Helper()
	dir := t.TempDir()
	schema, script := filepath.Join(dir, "event.avsc"), filepath.Join(dir, "gen.py")
	if err := os.WriteFile(schema, []byte(EventSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(genPy), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{script, schema, strconv.Itoa(syncInterval)}
	for _, f := range files {
		args = append(args, f.Path, f.Codec, strconv.FormatInt(f.First, 10), strconv.FormatInt(f.N, 10))
	}
	if out, err := exec.Command(debianPython, args...).CombinedOutput(); err != nil {
		t.Fatalf("python3-avro: %v\n%s", err, out)
	}
}

// avromod rewrites src as dst with Avro C's avromod, in codec (null,
// deflate, snappy or lzma) with blocks of blockSize bytes.
func avromod(t *testing.T, src, dst, codec string, blockSize int) {
	t.Helper()
	out, err := exec.Command("avromod", "--codec="+codec, fmt.Sprintf("--block-size=%d", blockSize), src, dst).CombinedOutput()
	if err != nil {
		t.Fatalf("avromod %s -> %s: %v\n%s", src, dst, err, out)
	}
}
