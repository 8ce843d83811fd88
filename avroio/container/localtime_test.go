package container

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"
)

// Local timestamps in files: every field of ltSchema holds wall clocks.
const ltSchema = `{"type":"record","name":"LT","namespace":"sdfio.test","fields":[
	{"name":"ms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
	{"name":"us","type":{"type":"long","logicalType":"local-timestamp-micros"}},
	{"name":"oms","type":["null",{"type":"long","logicalType":"local-timestamp-millis"}]},
	{"name":"ous","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]},
	{"name":"nested","type":{"type":"record","name":"LTN","fields":[
		{"name":"at","type":{"type":"array","items":{"type":"long","logicalType":"local-timestamp-millis"}}},
		{"name":"by","type":{"type":"map","values":["null",{"type":"long","logicalType":"local-timestamp-micros"}]}}
	]}}
]}`

// ltReaderSchema reads ltSchema's files with its fields reordered, one
// renamed through an alias, and one added with a default.
const ltReaderSchema = `{"type":"record","name":"LT","namespace":"sdfio.test","fields":[
	{"name":"nested","type":{"type":"record","name":"LTN","fields":[
		{"name":"by","type":{"type":"map","values":["null",{"type":"long","logicalType":"local-timestamp-micros"}]}},
		{"name":"at","type":{"type":"array","items":{"type":"long","logicalType":"local-timestamp-millis"}}}
	]}},
	{"name":"ous","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]},
	{"name":"millis","aliases":["ms"],"type":{"type":"long","logicalType":"local-timestamp-millis"}},
	{"name":"oms","type":["null",{"type":"long","logicalType":"local-timestamp-millis"}]},
	{"name":"us","type":{"type":"long","logicalType":"local-timestamp-micros"}},
	{"name":"extra","type":"long","default":7}
]}`

type ltNested struct {
	At []time.Time           `avro:"at"`
	By map[string]*time.Time `avro:"by"`
}

type ltRec struct {
	MS     time.Time  `avro:"ms"`
	US     time.Time  `avro:"us"`
	OMS    *time.Time `avro:"oms"`
	OUS    *time.Time `avro:"ous"`
	Nested ltNested   `avro:"nested"`
}

// ltReaderRec is ltRec by ltReaderSchema.
type ltReaderRec struct {
	MS     time.Time  `avro:"millis"`
	US     time.Time  `avro:"us"`
	OMS    *time.Time `avro:"oms"`
	OUS    *time.Time `avro:"ous"`
	Nested ltNested   `avro:"nested"`
	Extra  int64      `avro:"extra"`
}

// wallClocks are the wall clocks the files hold: inside New York's
// daylight-saving gap (2024-03-10 02:00-03:00 does not exist there) and
// overlap (2024-11-03 01:00-02:00 happens twice), before 1883 (local mean
// time, an offset of -4:56:02), and ordinary ones.
var wallClocks = []time.Time{
	time.Date(2024, 3, 10, 2, 0, 0, 0, time.UTC),
	time.Date(2024, 3, 10, 2, 30, 0, 123_000_000, time.UTC),
	time.Date(2024, 3, 10, 2, 59, 59, 999_999_000, time.UTC),
	time.Date(2024, 3, 10, 3, 0, 0, 0, time.UTC),
	time.Date(2024, 11, 3, 1, 0, 0, 0, time.UTC),
	time.Date(2024, 11, 3, 1, 30, 0, 500_000, time.UTC),
	time.Date(2024, 11, 3, 1, 59, 59, 999_000_000, time.UTC),
	time.Date(1850, 6, 1, 12, 34, 56, 789_000_000, time.UTC),
	time.Date(1800, 1, 1, 0, 0, 0, 1_000, time.UTC),
	time.Date(1883, 11, 18, 12, 3, 58, 0, time.UTC),
	time.Date(1969, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
	time.Date(2024, 7, 4, 12, 0, 0, 0, time.UTC),
}

// ltWant is record i as ltRec: millis fields hold the wall clock to the
// millisecond, micros fields to the microsecond; nulls at odd i.
func ltWant(i int) ltRec {
	w := wallClocks[i%len(wallClocks)]
	ms, us := w.Truncate(time.Millisecond), w.Truncate(time.Microsecond)
	r := ltRec{MS: ms, US: us, Nested: ltNested{At: []time.Time{ms, us.Truncate(time.Millisecond)}, By: map[string]*time.Time{"nil": nil}}}
	if i%2 == 0 {
		r.OMS, r.OUS = &ms, &us
		r.Nested.By = map[string]*time.Time{"u": &us}
	}
	return r
}

// ltSync is the sync marker of ltFile's files.
var ltSync = [SyncSize]byte{'l', 'o', 'c', 'a', 'l', ' ', 't', 'i', 'm', 'e', 's', 't', 'a', 'm', 'p', 's'}

// ltFile writes n records of ltSchema, encoded by hand: the longs are the
// wall clocks' milli- or microseconds as if in UTC, as the spec says.
func ltFile(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, ltSchema, WriterOptions{SyncInterval: MinSyncInterval, Sync: ltSync})
	if err != nil {
		t.Fatal(err)
	}
	long := binary.AppendVarint
	str := func(b []byte, s string) []byte { return append(long(b, int64(len(s))), s...) }
	for i := 0; i < n; i++ {
		r := ltWant(i)
		var b []byte
		b = long(b, r.MS.UnixMilli())
		b = long(b, r.US.UnixMicro())
		if r.OMS == nil {
			b = long(long(b, 0), 0)
		} else {
			b = long(long(b, 1), r.OMS.UnixMilli())
			b = long(long(b, 1), r.OUS.UnixMicro())
		}
		b = long(b, 2)
		b = long(b, r.Nested.At[0].UnixMilli())
		b = long(b, r.Nested.At[1].UnixMilli())
		b = long(b, 0)
		b = long(b, 1)
		if u := r.Nested.By["u"]; u != nil {
			b = long(long(str(b, "u"), 1), u.UnixMicro())
		} else {
			b = long(str(b, "nil"), 0)
		}
		b = long(b, 0)
		if err := w.AppendEncoded(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sameWall reports whether got is want's wall clock, zone-free: in UTC,
// with want's fields.
func sameWall(got, want time.Time) bool {
	return got.Location() == time.UTC && got.Equal(want)
}

func samePtrWall(got, want *time.Time) bool {
	if got == nil || want == nil {
		return got == want
	}
	return sameWall(*got, *want)
}

func ltEqual(got, want ltRec) bool {
	if !sameWall(got.MS, want.MS) || !sameWall(got.US, want.US) || !samePtrWall(got.OMS, want.OMS) || !samePtrWall(got.OUS, want.OUS) {
		return false
	}
	if len(got.Nested.At) != len(want.Nested.At) || len(got.Nested.By) != len(want.Nested.By) {
		return false
	}
	for i := range want.Nested.At {
		if !sameWall(got.Nested.At[i], want.Nested.At[i]) {
			return false
		}
	}
	for k, v := range want.Nested.By {
		g, ok := got.Nested.By[k]
		if !ok || !samePtrWall(g, v) {
			return false
		}
	}
	return true
}

func readLT[T any](t *testing.T, b []byte, opts Options, each func(i int, rec T)) {
	t.Helper()
	r, err := OpenReader[T]("lt.avro", bytesOpener(b), 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	i := 0
	for ; ; i++ {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		each(i, rec)
	}
	if i == 0 {
		t.Fatal("no records")
	}
}

// checkLocalTimestamps reads ltFile's records every typed way and checks
// every value is its exact wall clock.
func checkLocalTimestamps(t *testing.T) {
	n := 2 * len(wallClocks)
	b := ltFile(t, n)
	rs := avro.MustParse(ltReaderSchema)
	for _, ahead := range []bool{false, true} {
		readLT(t, b, Options{DecodeAhead: ahead}, func(i int, got ltRec) {
			if want := ltWant(i); !ltEqual(got, want) {
				t.Fatalf("record %d: got %+v, want %+v", i, got, want)
			}
		})
		readLT(t, b, Options{DecodeAhead: ahead, ReaderSchema: rs}, func(i int, got ltReaderRec) {
			want := ltWant(i)
			g := ltRec{MS: got.MS, US: got.US, OMS: got.OMS, OUS: got.OUS, Nested: got.Nested}
			if !ltEqual(g, want) || got.Extra != 7 {
				t.Fatalf("record %d through the reader schema: got %+v, want %+v", i, got, want)
			}
		})
	}
	// Append writes the records back as the same longs.
	var buf bytes.Buffer
	w, err := NewWriter(&buf, ltSchema, WriterOptions{SyncInterval: MinSyncInterval, Sync: ltSync})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := w.Append(ltWant(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	appended := buf.Bytes()
	readLT(t, appended, Options{}, func(i int, got ltRec) {
		if want := ltWant(i); !ltEqual(got, want) {
			t.Fatalf("appended record %d: got %+v, want %+v", i, got, want)
		}
	})
	// The longs themselves, read as plain longs.
	type raw struct {
		MS int64 `avro:"ms"`
		US int64 `avro:"us"`
	}
	plain := avro.MustParse(`{"type":"record","name":"LT","namespace":"sdfio.test","fields":[{"name":"ms","type":"long"},{"name":"us","type":"long"}]}`)
	readLT(t, appended, Options{ReaderSchema: plain}, func(i int, got raw) {
		want := ltWant(i)
		if got.MS != want.MS.UnixMilli() || got.US != want.US.UnixMicro() {
			t.Fatalf("appended record %d holds %d, %d, want %d, %d", i, got.MS, got.US, want.MS.UnixMilli(), want.US.UnixMicro())
		}
	})
	// Generic values that hamba/avro makes.
	readLT(t, b, Options{}, func(i int, got map[string]any) {
		want := ltWant(i)
		ms, _ := got["ms"].(time.Time)
		us, _ := got["us"].(time.Time)
		nested, _ := got["nested"].(map[string]any)
		at, _ := nested["at"].([]any)
		if !sameWall(ms, want.MS) || !sameWall(us, want.US) || len(at) != 2 {
			t.Fatalf("generic record %d: %v, want %v", i, got, want)
		}
		if a, _ := at[0].(time.Time); !sameWall(a, want.Nested.At[0]) {
			t.Fatalf("generic record %d: nested.at[0] is %v, want %v", i, at[0], want.Nested.At[0])
		}
		if i%2 == 0 {
			// Bare, as a timestamp-millis branch is (hamba/avro alone
			// gives {"long.local-timestamp-millis": t in time.Local}).
			oms, _ := got["oms"].(time.Time)
			if !sameWall(oms, *want.OMS) {
				t.Fatalf("generic record %d: oms is %v, want %v", i, got["oms"], *want.OMS)
			}
		}
	})
	// NewReaderOf, as avroio's typed reads use it.
	r, err := OpenReaderOf("lt.avro", bytesOpener(b), 0, reflect.TypeFor[ltRec](), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; ; i++ {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := ltWant(i); !ltEqual(rec.(ltRec), want) {
			t.Fatalf("NewReaderOf record %d: got %+v, want %+v", i, rec, want)
		}
	}
	// The schemas the reader reports are the file's, not the relabelled copy.
	if s := r.WriterSchema().String(); !strings.Contains(s, "local-timestamp-millis") || !strings.Contains(s, "local-timestamp-micros") {
		t.Fatalf("WriterSchema lost the local timestamps: %s", s)
	}
	rr, err := OpenReader[ltReaderRec]("lt.avro", bytesOpener(b), 0, Options{ReaderSchema: rs})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	if s := rr.Schema().String(); !strings.Contains(s, "local-timestamp-millis") || strings.Contains(s, `"timestamp-millis"`) {
		t.Fatalf("Schema is not the resolved reader schema: %s", s)
	}
}

// TestLocalTimestampsAnyTZ decodes local timestamps as zone-free wall
// clocks, here and in a child process with TZ=America/New_York (Go reads
// TZ once, at startup), where hamba/avro's own decoding puts the wall
// clocks of the daylight-saving gap an hour off and those before 1883 off
// by 4:56:02's seconds.
func TestLocalTimestampsAnyTZ(t *testing.T) {
	if os.Getenv("SDFIO_LOCALTIME_CHILD") != "" {
		if _, off := time.Date(2024, 1, 15, 12, 0, 0, 0, time.Local).Zone(); off != -5*3600 {
			t.Fatalf("TZ=%s gives an offset of %ds in January, want -18000: is the zoneinfo of America/New_York missing?", os.Getenv("TZ"), off)
		}
		checkLocalTimestamps(t)
		return
	}
	checkLocalTimestamps(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLocalTimestampsAnyTZ$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TZ=America/New_York", "SDFIO_LOCALTIME_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestLocalTimestampsAnyTZ")) {
		t.Fatalf("under TZ=America/New_York: %v\n%s", err, out)
	}
}

// TestLocalTimestampsDuplicateBranch: a union of timestamp-millis and
// local-timestamp-millis cannot be read typed (both would be one branch),
// and the error says which field and what reads it; a decoder of
// NewReaderWith gets the schemas as they are and reads it.
func TestLocalTimestampsDuplicateBranch(t *testing.T) {
	const schema = `{"type":"record","name":"D","fields":[
		{"name":"id","type":"long"},
		{"name":"inner","type":{"type":"record","name":"DI","fields":[
			{"name":"when","type":["null",{"type":"long","logicalType":"timestamp-millis"},{"type":"long","logicalType":"local-timestamp-millis"}]}
		]}}
	]}`
	var buf bytes.Buffer
	w, err := NewWriter(&buf, schema, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AppendEncoded([]byte{2, 4, 10}); err != nil { // id 1, branch 2, 5 ms
		t.Fatal(err)
	}
	if err := w.Append(map[string]any{"id": int64(2), "inner": map[string]any{"when": nil}}); err == nil || !strings.Contains(err.Error(), `field "inner.when"`) {
		t.Fatalf("Append by a schema with a union of both timestamps: %v, want an error naming inner.when", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	type rec struct {
		ID    int64 `avro:"id"`
		Inner struct {
			When any `avro:"when"`
		} `avro:"inner"`
	}
	_, err = OpenReader[rec]("dup.avro", bytesOpener(b), 0, Options{})
	e := checkErr(t, err, ErrSchema, "dup.avro")
	for _, want := range []string{`field "inner.when"`, "timestamp-millis and local-timestamp-millis", "avroio.Record"} {
		if !strings.Contains(e.Error(), want) {
			t.Fatalf("error %q does not say %q", e, want)
		}
	}
	_, err = OpenReader[map[string]any]("dup.avro", bytesOpener(b), 0, Options{ReaderSchema: avro.MustParse(schema)})
	checkErr(t, err, ErrSchema, "dup.avro")

	var gotWriter avro.Schema
	newDec := func(writer, _ avro.Schema) (avro.ValDecoder, error) {
		gotWriter = writer
		return skipDecoder{writer}, nil
	}
	r, err := OpenReaderWith("dup.avro", bytesOpener(b), 0, reflect.TypeFor[map[string]any](), newDec, Options{})
	if err != nil {
		t.Fatalf("NewReaderWith refused the schema: %v", err)
	}
	defer r.Close()
	if _, _, _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gotWriter.String(), "local-timestamp-millis") {
		t.Fatalf("NewReaderWith's decoder got a relabelled writer schema: %s", gotWriter)
	}
}

// skipDecoder reads a datum of its schema and keeps nothing.
type skipDecoder struct{ s avro.Schema }

func (d skipDecoder) Decode(_ unsafe.Pointer, r *avro.Reader) { r.ReadNext(d.s) }

func TestRelabelLocalJSON(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{in: `"long"`, want: `"long"`},
		{in: `{"type":"long","logicalType":"local-timestamp-millis"}`, want: `{"logicalType":"timestamp-millis","type":"long"}`},
		{in: `{"type":{"type":"long","logicalType":"local-timestamp-micros"}}`, want: `{"type":{"logicalType":"timestamp-micros","type":"long"}}`},
		// An int is no timestamp, and a field's own property is no logical type.
		{in: `{"type":"record","name":"R","fields":[{"name":"a","type":"long","logicalType":"local-timestamp-millis"},{"name":"b","type":{"type":"int","logicalType":"local-timestamp-millis"}}]}`,
			want: `{"type":"record","name":"R","fields":[{"name":"a","type":"long","logicalType":"local-timestamp-millis"},{"name":"b","type":{"type":"int","logicalType":"local-timestamp-millis"}}]}`},
		{in: `{"type":"array","items":{"type":"map","values":["null",{"type":"long","logicalType":"local-timestamp-millis"},{"type":"long","logicalType":"timestamp-micros"}]}}`,
			want: `{"items":{"type":"map","values":["null",{"logicalType":"timestamp-millis","type":"long"},{"logicalType":"timestamp-micros","type":"long"}]},"type":"array"}`},
		{in: `{"type":"record","name":"R","fields":[{"name":"xs","type":{"type":"array","items":{"type":"map","values":[{"type":"long","logicalType":"timestamp-micros"},{"type":"long","logicalType":"local-timestamp-micros"}]}}}]}`,
			err: `field "xs[]{}": the union holds both timestamp-micros and local-timestamp-micros`},
		{in: `{"type":"record","name":"R","fields":[{"name":"d","type":"double","default":1.00000000000000000001}, {"name":"t","type":{"type":"long","logicalType":"local-timestamp-millis"}}]}`,
			want: `{"fields":[{"default":1.00000000000000000001,"name":"d","type":"double"},{"name":"t","type":{"logicalType":"timestamp-millis","type":"long"}}],"name":"R","type":"record"}`},
	} {
		got, changed, err := RelabelLocalTimestamps(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || changed != (c.in != c.want) {
			t.Errorf("%s:\n got %s, %v, %v\nwant %s", c.in, got, changed, err, c.want)
		}
	}
	if _, _, err := RelabelLocalTimestamps(`{"type":"long","logicalType":"local-timestamp-millis"`); err == nil || errors.Unwrap(err) == nil {
		t.Errorf("malformed JSON: %v, want a wrapped error", err)
	}
}
