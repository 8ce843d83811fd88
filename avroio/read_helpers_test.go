package avroio

// Helpers of the read tests: the records of testdata/events-*.avro, a small
// container writer for files with a chosen block layout, and sources.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/offsetsource/filesource"
)

func init() {
	RegisterType(reflect.TypeFor[event]())
}

// eventsSchema is testdata/events.avsc.
const eventsSchema = `{"type": "record", "name": "Event", "namespace": "sdfio.avroio.test", "fields": [
  {"name": "id", "type": "long"},
  {"name": "name", "type": "string"},
  {"name": "score", "type": "double"},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "note", "type": ["null", "string"]},
  {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}}
]}`

// event is a record of eventsSchema.
type event struct {
	ID    int64    `avro:"id"`
	Name  string   `avro:"name"`
	Score float64  `avro:"score"`
	Tags  []string `avro:"tags"`
	Note  *string  `avro:"note"`
	Kind  string   `avro:"kind"`
}

// eventRecord is record i of testdata/gen.py.
func eventRecord(i int) event {
	e := event{ID: int64(i), Name: fmt.Sprintf("ev-%d", i), Score: float64(i) * 0.5, Tags: []string{}, Kind: []string{"A", "B", "C"}[i%3]}
	for j := 0; j < i%3; j++ {
		e.Tags = append(e.Tags, fmt.Sprintf("t%d", j))
	}
	if i%4 != 0 {
		n := fmt.Sprintf("n%d", i)
		e.Note = &n
	}
	return e
}

func eventRecords(from, to int) []event {
	out := make([]event, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, eventRecord(i))
	}
	return out
}

// genericEvent is eventRecord(i) as ReadGeneric returns it.
func genericEvent(i int) Record {
	e := eventRecord(i)
	tags := make([]any, len(e.Tags))
	for j, t := range e.Tags {
		tags[j] = t
	}
	var note any
	if e.Note != nil {
		note = *e.Note
	}
	return Record{"id": e.ID, "name": e.Name, "score": e.Score, "tags": tags, "note": note, "kind": e.Kind}
}

// pyCodecs are the codecs of testdata/events-<codec>.avro.
var pyCodecs = []string{"null", "deflate", "snappy", "zstandard", "bzip2", "xz"}

func testdataPath(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ---- a small container writer for files of chosen block layouts ----

func appendLong(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

func appendBytes(b, v []byte) []byte { return append(appendLong(b, int64(len(v))), v...) }

var testSync = [container.SyncSize]byte{0xa7, 0x0f, 0x5e, 0x11, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0xff, 0x42}

func compressBlock(t testing.TB, codec string, data []byte) []byte {
	t.Helper()
	switch codec {
	case "null":
		return data
	case "deflate":
		var buf bytes.Buffer
		w, err := flate.NewWriter(&buf, flate.BestSpeed)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		w.Close()
		return buf.Bytes()
	case "snappy":
		return binary.BigEndian.AppendUint32(snappy.Encode(nil, data), crc32.ChecksumIEEE(data))
	case "zstandard":
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(data, nil)
	}
	t.Fatalf("test writer has no codec %q", codec)
	return nil
}

// layoutFile encodes recs with schema into blocks of the given record
// counts (cycled; 0 makes an empty block) and returns the file's bytes and
// the offset of the block of each record.
func layoutFile[T any](t testing.TB, schema, codec string, recs []T, layout []int) ([]byte, []int64) {
	t.Helper()
	s := avro.MustParse(schema)
	b := append([]byte(nil), container.Magic[:]...)
	b = appendLong(b, 2)
	b = appendBytes(b, []byte(container.MetaSchema))
	b = appendBytes(b, []byte(schema))
	b = appendBytes(b, []byte(container.MetaCodec))
	b = appendBytes(b, []byte(codec))
	b = appendLong(b, 0)
	b = append(b, testSync[:]...)
	var offs []int64
	var w bytes.Buffer
	for i, k := 0, 0; i < len(recs); k++ {
		n := min(layout[k%len(layout)], len(recs)-i)
		w.Reset()
		enc := avro.NewEncoderForSchema(s, &w)
		for _, r := range recs[i : i+n] {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
			offs = append(offs, int64(len(b)))
		}
		c := compressBlock(t, codec, w.Bytes())
		b = appendLong(b, int64(n))
		b = appendLong(b, int64(len(c)))
		b = append(b, c...)
		b = append(b, testSync[:]...)
		i += n
	}
	return b, offs
}

// writeLayoutFile writes layoutFile's bytes to dir/name and returns the path
// and the block offset of each record.
func writeLayoutFile[T any](t testing.TB, dir, name, codec string, recs []T, layout []int) (string, []int64) {
	t.Helper()
	b, offs := layoutFile(t, eventsSchema, codec, recs, layout)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, offs
}

// blockOffsets lists the offsets of the blocks of the file at path.
func blockOffsets(t testing.TB, path string) []int64 {
	t.Helper()
	br, err := container.Open(path, container.FileOpener(path), 0, container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var offs []int64
	for {
		b, err := br.Next()
		if err != nil {
			break
		}
		offs = append(offs, b.Offset)
	}
	return offs
}

// recordOffsets is the block offset of each record of the file at path.
func recordOffsets(t testing.TB, path string) []int64 {
	t.Helper()
	r, err := container.OpenReader[Record](path, container.FileOpener(path), 0, container.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var offs []int64
	for {
		_, off, _, err := r.Next()
		if err == io.EOF {
			return offs
		}
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
	}
}

// ---- sources ----

// newSource is the source of the whole file at path, read as records of
// type t with the default settings, as Read makes it.
func newSource(t testing.TB, path string, typ reflect.Type) fileSource {
	t.Helper()
	m, err := filesource.Stat(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseReadOptions(nil, EmptyMatchDisallow)
	if err != nil {
		t.Fatal(err)
	}
	return filesource.NewSource[beam.X](m, o.format(typ))
}

// counterSum sums the read's counter name over all steps.
func counterSum(t testing.TB, res beam.PipelineResult, name string) int64 {
	t.Helper()
	q := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == Namespace && r.Name() == name
	})
	cs := q.Counters()
	if len(cs) == 0 {
		t.Fatalf("no counter %s/%s in the pipeline's metrics", Namespace, name)
	}
	var sum int64
	for _, c := range cs {
		sum += c.Result()
	}
	return sum
}

func anySlice[T any](l []T) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}
