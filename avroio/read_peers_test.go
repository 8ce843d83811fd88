package avroio

// Files written by independent Avro implementations, read through the
// pipeline, must equal what avro-bin's avrocat prints for them: files of
// every Avro type (avrotest.AllSchema) written by Debian's python3-avro in
// six codecs and rewritten by avro-bin's avromod (Avro C) in four.

import (
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/avroio/internal/avrotest"
)

func init() {
	register.DoFn2x1[Record, func(string), error](&avrocatFn{})
}

// avrocatFn compares each record with avrocat's line for it (record i on
// line i; the records' "id" is i) and emits a description of every
// difference.
type avrocatFn struct {
	Schema string   // the file's writer schema
	Lines  []string // what avrocat printed
	schema avro.Schema
}

func (fn *avrocatFn) Setup() error {
	var err error
	fn.schema, err = avro.ParseWithCache(fn.Schema, "", &avro.SchemaCache{})
	return err
}

func (fn *avrocatFn) ProcessElement(r Record, emit func(string)) error {
	id, ok := r["id"].(int64)
	if !ok || id < 0 || id >= int64(len(fn.Lines)) {
		emit(fmt.Sprintf("record with id %v: not among avrocat's %d records", r["id"], len(fn.Lines)))
		return nil
	}
	theirs, err := avrotest.DecodeJSONLine(fn.Lines[id])
	if err != nil {
		return err
	}
	if err := avrotest.MatchAvrocat(fn.schema, map[string]any(r), theirs, fmt.Sprintf("record %d", id)); err != nil {
		emit(err.Error())
	}
	return nil
}

func TestPipelinePeers(t *testing.T) {
	avrotest.RequireTools(t)
	const n = 300
	dir := t.TempDir()
	files := map[string]string{}
	var order []string
	for _, codec := range pyCodecs {
		p, err := avrotest.WritePython(dir, codec, n, 2000)
		if err != nil {
			t.Fatal(err)
		}
		files["py-"+codec], order = p, append(order, "py-"+codec)
	}
	for _, codec := range []string{"null", "deflate", "snappy", "lzma"} {
		p := filepath.Join(dir, "c-"+codec+".avro")
		if err := avrotest.Avromod(files["py-null"], p, codec, 2048); err != nil {
			t.Fatal(err)
		}
		files["c-"+codec], order = p, append(order, "c-"+codec)
	}
	// avrocat reads null, deflate, snappy and lzma; the python files of
	// other codecs hold the same records as py-null.
	avrocat := func(key string) []string {
		lines, err := avrotest.Avrocat(files[key])
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) != n {
			t.Fatalf("avrocat printed %d records of %s, want %d", len(lines), key, n)
		}
		return lines
	}
	pyLines := avrocat("py-null")

	p, s := beam.NewPipelineWithRoot()
	for _, key := range order {
		path := files[key]
		lines := pyLines
		if key[:2] == "c-" || key == "py-deflate" || key == "py-snappy" {
			lines = avrocat(key)
		}
		blocks := len(blockOffsets(t, path))
		if blocks < 5 {
			t.Fatalf("%s has %d blocks, want several", key, blocks)
		}
		br, err := container.Open(path, container.FileOpener(path), 0, container.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		schema := br.Header().Schema
		br.Close()

		s := s.Scope(key)
		recs := ReadGeneric(s, path, WithDesiredBundleSize(8<<10), WithMinBundleSize(2<<10))
		// Through a shuffle, so that the records go through Record's coder.
		diffs := beam.ParDo(s, &avrocatFn{Schema: schema, Lines: lines}, beam.Reshuffle(s, recs))
		passert.Empty(s, diffs)
		passert.Equals(s, beam.Combine(s, &countRecordsFn{}, recs), int64(n))
		passert.Equals(s, beam.ParDo(s, recordID, recs), ids(0, n)...)
		t.Logf("%s: %d blocks, writer schema of %d bytes", key, blocks, len(schema))
	}
	res := run(t, p)
	if got := counterSum(t, res, "records"); got != int64(n*len(order)) {
		t.Errorf("records metric = %d, want %d", got, n*len(order))
	}
	t.Logf("ranges read %d, dynamic splits accepted %d, refused %d", counterSum(t, res, "ranges_read"),
		counterSum(t, res, "splits_accepted"), counterSum(t, res, "splits_refused"))
}

// TestRecordCoder round-trips generic values of every Avro type through
// Record's coder, exactly.
func TestRecordCoder(t *testing.T) {
	avrotest.RequireTools(t)
	path, err := avrotest.WritePython(t.TempDir(), "null", 40, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range readSource(t, newSource(t, path, RecordType)) {
		rec := r.(Record)
		b, err := encodeRecord(rec)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		back, err := decodeRecord(b)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !reflect.DeepEqual(back, rec) {
			t.Fatalf("record %d changed in the coder:\n got %#v\nwant %#v", i, back, rec)
		}
		again, _ := encodeRecord(back)
		if string(again) != string(b) {
			t.Fatalf("record %d: encoding is not deterministic", i)
		}
		if _, err := decodeRecord(b[:len(b)-1]); err == nil {
			t.Fatalf("record %d: a truncated encoding decoded", i)
		}
	}
}
