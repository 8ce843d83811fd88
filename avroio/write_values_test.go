package avroio

// Write refuses every value the schema cannot hold exactly, naming the
// field and the record, for Records (this package's encoder) and for
// structs (hamba/avro's, with fit.go's checks before it).

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/workertest"
)

const valuesSchema = `{"type":"record","name":"V","namespace":"sdfio.values","fields":[
 {"name":"i","type":"int","default":0},
 {"name":"f","type":"float","default":0.1},
 {"name":"d","type":"double","default":0},
 {"name":"tms","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tus","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"tsms","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"lus","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"arr","type":{"type":"array","items":"long"},"default":[]},
 {"name":"m","type":{"type":"map","values":"long"},"default":{}},
 {"name":"inner","type":["null",{"type":"record","name":"In","fields":[{"name":"tms","type":{"type":"array","items":{"type":"int","logicalType":"time-millis"}}}]}],"default":null}
]}`

// values is valuesSchema as a struct.
type values struct {
	I     int              `avro:"i"`
	F     float32          `avro:"f"`
	D     float64          `avro:"d"`
	TMs   time.Duration    `avro:"tms"`
	TUs   time.Duration    `avro:"tus"`
	Day   time.Time        `avro:"day"`
	TsMs  time.Time        `avro:"tsms"`
	LUs   time.Time        `avro:"lus"`
	Arr   []int64          `avro:"arr"`
	M     map[string]int64 `avro:"m"`
	Inner *inValues        `avro:"inner"`
}

type inValues struct {
	TMs []time.Duration `avro:"tms"`
}

func valuesEncoder(t *testing.T, elem reflect.Type) (*elementEncoder, writeConfig) {
	t.Helper()
	cfg, err := newWriteConfig(t.TempDir()+"/out", valuesSchema, elem, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newElementEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return enc, cfg
}

var (
	day25    = 25 * 24 * time.Hour
	farAhead = time.Date(300_000_000, 1, 1, 0, 0, 0, 0, time.UTC) // beyond ±2^63 ms
)

// TestWriteRecordValuesExact: a Record value the schema cannot hold is an
// error naming the field and the record's schema, on both of Write's paths
// (straight into a block, and encoded for fixed sharding); values it
// holds are written and read back unchanged.
func TestWriteRecordValuesExact(t *testing.T) {
	enc, cfg := valuesEncoder(t, RecordType)
	bad := []struct {
		name string
		rec  Record
		want string
	}{
		{"a key naming no field", Record{"i": 1, "typo": 2}, `record sdfio.values.V has no field "typo"`},
		{"1e300 into a float", Record{"f": 1e300}, "field f: the float64 1e+300 is not a float32"},
		{"0.1 into a float", Record{"f": 0.1}, "field f: the float64 0.1 is not a float32"},
		{"2^24+1 into a float", Record{"f": int64(1<<24 + 1)}, "field f: the integer 16777217 is not a float32"},
		{"2^53+1 into a double", Record{"d": int64(1<<53 + 1)}, "field d: the integer 9007199254740993 is not a float64"},
		{"2^40 into an int", Record{"i": 1 << 40}, "field i: 1099511627776 does not fit Avro int"},
		{"time-millis of 25 days", Record{"tms": day25}, "field tms: the duration 600h0m0s is 2160000000 ms"},
		{"nested time-millis of 25 days", Record{"inner": map[string]any{"tms": []any{day25}}}, "field inner: union branch sdfio.values.In: field tms: item 0: the duration 600h0m0s"},
		{"date beyond an int", Record{"day": farAhead}, "field day: 300000000-01-01 00:00:00 +0000 UTC is day"},
		{"timestamp beyond a long", Record{"tsms": farAhead}, "field tsms: 300000000-01-01 00:00:00 +0000 UTC is beyond the ±2^63 ms"},
		{"local timestamp beyond a long", Record{"lus": time.Date(300_000, 1, 1, 0, 0, 0, 0, time.UTC)}, "field lus: 300000-01-01 00:00:00 +0000 UTC is beyond the ±2^63 µs"},
		{"nil for an array", Record{"arr": nil}, "field arr: nil for an Avro array"},
		{"nil for a map", Record{"m": nil}, "field m: nil for an Avro map"},
	}
	base := func() Record {
		return Record{"tms": time.Duration(0), "tus": time.Duration(0), "day": time.Unix(0, 0), "tsms": time.Unix(0, 0), "lus": time.Unix(0, 0)}
	}
	for _, c := range bad {
		r := base()
		for k, v := range c.rec {
			r[k] = v
		}
		c.rec = r
		if _, err := enc.encode(c.rec); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sdfio.values.V") {
			t.Errorf("%s: encode: %v, want %q", c.name, err, c.want)
		}
		var buf bytes.Buffer
		w, err := container.NewWriter(&buf, cfg.Schema, cfg.writerOptions())
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.append(w, c.rec); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "record 0") {
			t.Errorf("%s: append: %v, want %q naming record 0", c.name, err, c.want)
		}
	}
	// What the schema holds exactly goes through, and comes back the same.
	good := Record{
		"i": math.MinInt32, "f": 0.5, "d": int64(1 << 53), "tms": time.Duration(math.MaxInt32) * time.Millisecond,
		"tus": time.Duration(math.MinInt64) / 1000 * 1000, "day": time.Unix(math.MinInt32*86400, 0).UTC(),
		"tsms": time.UnixMilli(math.MinInt64).UTC(), "lus": time.UnixMicro(math.MaxInt64).UTC(),
		"arr": []any{}, "m": map[string]any{}, "inner": map[string]any{"tms": []any{-time.Duration(math.MaxInt32) * time.Millisecond}},
	}
	d, err := enc.encode(good)
	if err != nil {
		t.Fatal(err)
	}
	back := decodeDatum(t, valuesSchema, d)
	good["f"], good["d"] = float32(0.5), float64(1<<53)
	for k, v := range good {
		if describeValue(back[k]) != describeValue(v) {
			t.Errorf("%s: wrote %v, read back %v", k, v, back[k])
		}
	}
	// The float default 0.1 is rounded to a float, as Java reads it.
	d, err = enc.encode(base())
	if err != nil {
		t.Fatalf("a Record of defaults: %v", err)
	}
	if f := decodeDatum(t, valuesSchema, d)["f"]; f != float32(0.1) {
		t.Errorf("float default: %v", f)
	}
}

func decodeDatum(t *testing.T, schema string, d []byte) Record {
	t.Helper()
	n, err := compileSchema(parsedSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	r := avro.NewReader(nil, 0)
	r.Reset(d)
	v := new(datumDecoder).decode(r, n, 0)
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	return Record(v.(map[string]any))
}

func describeValue(v any) string {
	if t, ok := v.(time.Time); ok {
		return tm(t)
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// TestLogicalTypeDefaults: the default of a field of a logical type is the
// number it is encoded as (a JSON number), and a Record without the field
// is written with it.
func TestLogicalTypeDefaults(t *testing.T) {
	const schema = `{"type":"record","name":"D","fields":[
 {"name":"tms","type":{"type":"int","logicalType":"time-millis"},"default":5},
 {"name":"tus","type":{"type":"long","logicalType":"time-micros"},"default":-7},
 {"name":"day","type":{"type":"int","logicalType":"date"},"default":-1},
 {"name":"tsms","type":{"type":"long","logicalType":"timestamp-millis"},"default":1000}]}`
	enc, err := newRecordEncoder(schema)
	if err != nil {
		t.Fatal(err)
	}
	d, err := enc.encode(Record{})
	if err != nil {
		t.Fatal(err)
	}
	got := decodeDatum(t, schema, d)
	want := Record{"tms": 5 * time.Millisecond, "tus": -7 * time.Microsecond, "day": time.Unix(-86400, 0).UTC(), "tsms": time.Unix(1, 0).UTC()}
	for k, v := range want {
		if describeValue(got[k]) != describeValue(v) {
			t.Errorf("%s: default read back as %v, want %v", k, got[k], v)
		}
	}
}

// TestWriteStructValuesExact: hamba/avro writes a struct's out-of-range
// values wrapped (a time-millis of 25 days as -593h); Write refuses them,
// naming the field and the record, at any depth.
func TestWriteStructValuesExact(t *testing.T) {
	enc, cfg := valuesEncoder(t, reflect.TypeFor[values]())
	ok := values{Arr: []int64{}, M: map[string]int64{}}
	bad := []struct {
		name string
		mod  func(*values)
		want string
	}{
		{"time-millis of 25 days", func(v *values) { v.TMs = day25 }, "field tms: the duration 600h0m0s is 2160000000 ms"},
		{"time-millis of 25 days in a list in a pointer", func(v *values) { v.Inner = &inValues{TMs: []time.Duration{0, -day25}} }, "field inner.tms[]: the duration -600h0m0s"},
		{"a Go int of 2^40 into an Avro int", func(v *values) { v.I = 1 << 40 }, "field i: 1099511627776 does not fit an Avro int"},
		{"a date beyond an int", func(v *values) { v.Day = farAhead }, "field day:"},
		{"a date before 1970 with a time of day", func(v *values) { v.Day = time.Date(1969, 12, 31, 12, 0, 0, 0, time.UTC) }, "hamba/avro would write the next day"},
		{"a timestamp beyond a long", func(v *values) { v.TsMs = farAhead }, "field tsms: 300000000-01-01"},
		{"a local timestamp beyond a long", func(v *values) { v.LUs = time.Date(-300_000, 1, 1, 0, 0, 0, 0, time.UTC) }, "field lus:"},
	}
	for _, c := range bad {
		v := ok
		c.mod(&v)
		if _, err := enc.encode(v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: encode: %v, want %q", c.name, err, c.want)
		}
		var buf bytes.Buffer
		w, err := container.NewWriter(&buf, cfg.Schema, cfg.writerOptions())
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.append(w, &v); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "record 0") {
			t.Errorf("%s: append: %v, want %q naming record 0", c.name, err, c.want)
		}
	}
	v := ok
	v.TMs, v.I, v.Day = time.Duration(math.MaxInt32)*time.Millisecond, math.MaxInt32, time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)
	if _, err := enc.encode(v); err != nil {
		t.Fatalf("values in range: %v", err)
	}
}

type int64Millis struct {
	TMs int64 `avro:"tms"`
}
type float64Float struct {
	F float64 `avro:"f"`
}
type int64Int struct {
	I int64 `avro:"i"`
}

// TestWriteRefusesTypesThatChangeValues: Go types hamba/avro would write
// changed, or fail every record of, are refused when Write is built,
// naming the field.
func TestWriteRefusesTypesThatChangeValues(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[int64Millis](), "Go field TMs (int64) holds an Avro time-millis, which hamba/avro reads and writes as a time.Duration in nanoseconds"},
		{reflect.TypeFor[float64Float](), "Go field F (float64) cannot hold Avro float: avro: float64 is unsupported for Avro float"},
		{reflect.TypeFor[int64Int](), "Go field I (int64) cannot hold Avro int"},
	} {
		const schema = `{"type":"record","name":"S","fields":[{"name":"tms","type":{"type":"int","logicalType":"time-millis"},"default":0},{"name":"f","type":"float","default":0},{"name":"i","type":"int","default":0}]}`
		if _, err := newWriteConfig(t.TempDir()+"/out", schema, c.typ, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.typ, err, c.want)
		}
	}
}

// TestWriteRefusesOnPrism: a Record with a key the schema lacks fails the
// pipeline, naming the field, and leaves no file.
func TestWriteRefusesOnPrism(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	recs := beam.CreateList(s, []Record{{"i": 1}, {"i": 2, "typo": 3}})
	// (A shuffle: Create's records travel by Record's coder.)
	Write(s, dir+"/out", `{"type":"record","name":"S","fields":[{"name":"i","type":"int"}]}`, recs)
	err := workertest.RunFailing(t, p)
	if err == nil || !strings.Contains(err.Error(), `has no field "typo"`) {
		t.Fatalf("pipeline: %v, want an error naming field typo", err)
	}
}
