package avroio

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/avroio/internal/avrotest"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// sameRecord compares two Records by the Record coder's encoding, which is
// deterministic and distinguishes every Go type and value a Record holds
// (decimals by value, times by instant and offset).
func sameRecord(t testing.TB, a, b Record) bool {
	t.Helper()
	ea, err := encodeRecord(a)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := encodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ea, eb)
}

// unionRecord is record i of avrotest.UnionsJS in Record form, as
// Record's documentation says unions look.
func unionRecord(i int) Record {
	lms := int64(avrotest.UnionsBaseMillis) + int64(i%120)*60000
	rec := map[string]any{"a": int64(i)}
	dec := big.NewRat(int64(i*37-500), 100)
	r := Record{
		"id":    int64(i),
		"when":  []any{nil, map[string]any{"int.date": time.Unix(int64(18000+i)*86400, 0).UTC()}, map[string]any{"long.timestamp-millis": time.UnixMilli(1600000000000 + int64(i)*1000 + int64(i%1000)).UTC()}}[i%3],
		"lms":   time.UnixMilli(lms).UTC(),
		"lus":   time.UnixMicro(lms*1000 + int64(i%1000)).UTC(),
		"nrec":  nil,
		"narr":  nil,
		"nmap":  nil,
		"nenum": nil,
		"nfix":  nil,
		"recs":  []any{nil, map[string]any{"sdfio.unions.Rec": rec}, map[string]any{"sdfio.unions.Other": map[string]any{"b": fmt.Sprintf("o%d", i)}}}[i%3],
	}
	if i%2 == 0 {
		r["tod"] = map[string]any{"int.time-millis": time.Duration((i*1000)%86400000) * time.Millisecond}
		r["is"] = fmt.Sprintf("s%d", i)
		r["se"] = map[string]any{"sdfio.unions.Color": "GREEN"}
		r["decs"] = map[string]any{"sdfio.unions.D4": dec}
	} else {
		r["tod"] = map[string]any{"long.time-micros": time.Duration((int64(i)*1000003)%86400000000) * time.Microsecond}
		r["is"] = -i
		r["se"] = map[string]any{"string": "RED"}
		r["decs"] = map[string]any{"bytes.decimal": dec}
		r["nrec"] = map[string]any{"a": int64(i)}
	}
	if i%3 != 0 {
		r["narr"] = []any{int64(i), int64(-i)}
		r["nenum"] = []string{"RED", "GREEN"}[i%2]
	}
	if i%4 != 0 {
		r["nmap"] = map[string]any{"k": fmt.Sprintf("v%d", i)}
	}
	if i%5 != 0 {
		r["nfix"] = [2]byte{byte(i), byte(i >> 8)}
	}
	return r
}

func readAllRecords(t *testing.T, path string, opts ...ReadOption) []Record {
	t.Helper()
	src := newSource(t, path, RecordType)
	if len(opts) > 0 {
		o, err := parseReadOptions(opts, EmptyMatchDisallow)
		if err != nil {
			t.Fatal(err)
		}
		src.Format = o.format(RecordType)
	}
	var out []Record
	rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: src.File.Size})
	if err := offsetsource.ReadRestriction(context.Background(), src, rt, func(x beam.X) { out = append(out, x.(Record)) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestGenericUnionsFromAvsc reads unions that avsc (npm) wrote, naming
// every branch, as Records: each branch kept where branches share a Go
// type, nullable records, arrays, maps, enums and fixed bare, local
// timestamps as zone-free wall clocks even under a daylight-saving time
// zone; then writes the Records back as Write does and has avsc check
// that every record kept its branches.
func TestGenericUnionsFromAvsc(t *testing.T) {
	const n = 3000
	if dir := os.Getenv(unionsDirEnv); dir != "" {
		roundTripUnions(t, dir, n)
		return
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "unions.avro")
	if _, err := avrotest.Avsc(t, "write", path, n); err != nil {
		t.Fatal(err)
	}
	// Read and written back under New York's zone, in a child process.
	runInNewYork(t, unionsDirEnv+"="+dir)
	res, err := avrotest.Avsc(t, "check", filepath.Join(dir, "back.avro"), n)
	if err != nil || res != fmt.Sprintf("ok %d", n) {
		t.Fatalf("avsc reading what we wrote back: %q, %v", res, err)
	}
}

const unionsDirEnv = "SDFIO_TEST_UNIONS_DIR"

// roundTripUnions is the child's part of TestGenericUnionsFromAvsc: it
// reads dir/unions.avro as Records, checks them, and writes them back to
// dir/back.avro by the writer path of Write.
func roundTripUnions(t *testing.T, dir string, n int) {
	if _, off := time.Date(2024, 7, 1, 0, 0, 0, 0, time.Local).Zone(); off != -4*3600 {
		t.Fatalf("time.Local has offset %d s in July, want New York's -14400", off)
	}
	path := filepath.Join(dir, "unions.avro")
	recs := readAllRecords(t, path)
	if len(recs) != n {
		t.Fatalf("read %d records, want %d", len(recs), n)
	}
	bad := 0
	for i, r := range recs {
		if want := unionRecord(i); !sameRecord(t, r, want) {
			if bad < 3 {
				t.Errorf("record %d:\n got %v\nwant %v", i, r, want)
			}
			bad++
		}
		if lms := r["lms"].(time.Time); lms.Location() != time.UTC || lms.Hour() != 2+(i%120)/60 || lms.Minute() != i%60 {
			t.Fatalf("record %d: local-timestamp-millis %v, want 2021-03-14 %02d:%02d as UTC fields", i, lms, 2+(i%120)/60, i%60)
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d records differ", bad, n)
	}

	// Write them back by the writer path of Write, under New York's zone.
	out := filepath.Join(dir, "back.avro")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	w, err := container.NewWriter(f, avrotest.UnionsSchema, container.WriterOptions{Codec: "deflate"})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newElementEncoder(writeConfig{Schema: avrotest.UnionsSchema})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		// Through the Record coder too, as between stages.
		b, err := encodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := decodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.append(w, r2); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestRecordWriteAmbiguousBranch: a bare value that two branches could
// take is refused, naming the union, rather than written by a guess.
func TestRecordWriteAmbiguousBranch(t *testing.T) {
	enc, err := newRecordEncoder(avrotest.UnionsSchema)
	if err != nil {
		t.Fatal(err)
	}
	r := unionRecord(1)
	r["when"] = time.Now()
	_, err = enc.encode(r)
	if err == nil || !strings.Contains(err.Error(), "when") || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("got %v, want an error naming field when and the ambiguity", err)
	}
}

// TestRecordCoderTimes: the Record coder keeps instants, wall clocks and
// offsets of times in zones with offsets of seconds (New York before
// 1883), which time.MarshalBinary moves.
func TestRecordCoderTimes(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	amsterdam, err := time.LoadLocation("Europe/Amsterdam")
	if err != nil {
		t.Fatal(err)
	}
	times := []time.Time{
		{},
		time.Date(1850, 6, 1, 12, 0, 0, 123456789, ny),
		time.Date(1880, 1, 1, 0, 0, 0, 0, ny),
		time.Date(1920, 7, 1, 0, 0, 1, 5, amsterdam), // +00:19:32
		time.Date(2021, 3, 14, 2, 30, 0, 0, time.UTC),
		time.Date(2021, 11, 7, 1, 30, 0, 0, ny),
		time.Unix(-1<<40, 999999999).UTC(),
	}
	for _, tm := range times {
		b, err := encodeRecord(Record{"t": tm})
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		got := r["t"].(time.Time)
		_, wantOff := tm.Zone()
		_, gotOff := got.Zone()
		if !got.Equal(tm) || gotOff != wantOff || got.Format(time.RFC3339Nano) != tm.Format(time.RFC3339Nano) {
			t.Errorf("%v (offset %d s) came back as %v (offset %d s)", tm, wantOff, got, gotOff)
		}
	}
}

// TestGenericMatchesPython: Records of every Avro type (avrotest.AllSchema,
// written by python3-avro) as avrocat prints them, by MatchRecord, which
// knows the shape Record documents.
func TestGenericMatchesPython(t *testing.T) {
	avrotest.RequireTools(t)
	path, err := avrotest.WritePython(t.TempDir(), "snappy", 60, 1000)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := avrotest.Avrocat(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := readAllRecords(t, path)
	if len(recs) != len(lines) {
		t.Fatalf("%d records, avrocat printed %d", len(recs), len(lines))
	}
	s := avro.MustParse(avrotest.AllSchema)
	for i, r := range recs {
		theirs, err := avrotest.DecodeJSONLine(lines[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := avrotest.MatchRecord(s, map[string]any(r), theirs, fmt.Sprintf("record %d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGenericReaderSchema: Records read by a reader schema have its shape:
// defaults for fields the writer lacks, writer-only fields dropped, ints
// promoted, unions of the reader.
func TestGenericReaderSchema(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "unions.avro")
	if _, err := avrotest.Avsc(t, "write", path, 30); err != nil {
		t.Fatal(err)
	}
	reader := `{"type":"record","name":"U","namespace":"sdfio.unions","fields":[
	 {"name":"ident","aliases":["id"],"type":"double"},
	 {"name":"when","type":["null",{"type":"int","logicalType":"date"},{"type":"long","logicalType":"timestamp-millis"}]},
	 {"name":"is","type":["string","long"]},
	 {"name":"extra","type":"string","default":"dflt"},
	 {"name":"more","type":["null","long"],"default":null}
	]}`
	recs := readAllRecords(t, path, WithReaderSchema(reader))
	for i, r := range recs {
		want := Record{"ident": float64(i), "when": unionRecord(i)["when"], "extra": "dflt", "more": nil}
		if i%2 == 0 {
			want["is"] = fmt.Sprintf("s%d", i)
		} else {
			want["is"] = int64(-i)
		}
		if !sameRecord(t, r, want) {
			t.Fatalf("record %d: got %v, want %v", i, r, want)
		}
	}
	if len(recs) != 30 {
		t.Fatalf("%d records", len(recs))
	}
}

// TestRecordDecoderHostile: the generic decoder stops at the end of the
// data on hostile counts and indexes, with an error.
func TestRecordDecoderHostile(t *testing.T) {
	n, err := compileSchema(avro.MustParse(`{"type":"record","name":"H","fields":[{"name":"a","type":{"type":"array","items":"long"}},{"name":"u","type":["null","string"]},{"name":"e","type":{"type":"enum","name":"E","symbols":["X"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{
		{0xfe, 0xff, 0xff, 0xff, 0x0f, 2}, // an array of 2^31 longs, then one
		{0, 0x08},                         // union branch 4
		{0, 0, 0x04},                      // enum symbol 2
		{0, 2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // string length overflow
	} {
		r := avro.NewReader(bytes.NewReader(data), 16, avro.WithReaderConfig(avro.Config{MaxByteSliceSize: 1 << 20}.Freeze()))
		var rec Record
		recordDecoder{root: n}.Decode(unsafePointer(&rec), r)
		if r.Error == nil {
			t.Errorf("% x: decoded %v without error", data, rec)
		}
	}
}

func TestReadGenericNonRecordSchema(t *testing.T) {
	_, err := newRecordDecoder(avro.MustParse(`"long"`), nil)
	if err == nil || !strings.Contains(err.Error(), "record schema") {
		t.Fatalf("got %v", err)
	}
}

func unsafePointer(p *Record) unsafe.Pointer { return unsafe.Pointer(p) }
