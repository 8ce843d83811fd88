package avroio

// Values at the edges of Avro's types, in files python3-avro wrote: every
// logical type at its extremes, read by ReadGeneric and by Read, directly
// and on Prism through a shuffle (so that Record's coder and Beam's schema
// coder carry every value), must come out exactly as the file holds them;
// a value the Go type cannot hold is an error naming the field and file.

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/avroio/internal/avrotest"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	RegisterType(reflect.TypeFor[edges]())
	RegisterType(reflect.TypeFor[rawMicros]())
	register.Function1x1[edges, string](describeEdges)
	register.Function1x1[Record, string](describeEdgeRecord)
}

const edgesSchema = `{"type":"record","name":"Edges","namespace":"sdfio.edges","fields":[
 {"name":"id","type":"long"},
 {"name":"i","type":"int"},
 {"name":"l","type":"long"},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"tms","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tus","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"tsms","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tsus","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"lms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"lus","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":40,"scale":5}},
 {"name":"fdec","type":{"type":"fixed","name":"D16","size":16,"logicalType":"decimal","precision":38,"scale":0}},
 {"name":"dur","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}}
]}`

// edges is the struct Read decodes edgesSchema into.
type edges struct {
	ID   int64                `avro:"id"`
	I    int32                `avro:"i"`
	L    int64                `avro:"l"`
	Day  time.Time            `avro:"day"`
	TMs  time.Duration        `avro:"tms"`
	TUs  time.Duration        `avro:"tus"`
	TsMs time.Time            `avro:"tsms"`
	TsUs time.Time            `avro:"tsus"`
	LMs  time.Time            `avro:"lms"`
	LUs  time.Time            `avro:"lus"`
	Dec  *big.Rat             `avro:"dec"`
	FDec *big.Rat             `avro:"fdec"`
	Dur  avro.LogicalDuration `avro:"dur"`
	UID  string               `avro:"uid"`
}

const maxMicros = math.MaxInt64 / 1000

// Day numbers and instants just past the years 0-9999 that RFC 3339 text
// (Beam's own coder for time.Time) can write.
const (
	dayYear10000    = 2932897         // 10000-01-01
	dayBeforeYear0  = -719529         // -0001-12-31
	msYear10000     = 253402300800000 // 10000-01-01T00:00:00Z
	msBeforeYear0   = -62167219200001 // just before 0000-01-01
	usYear10000     = msYear10000 * 1000
	usBeforeYear0   = msBeforeYear0 * 1000
	timeMillisDay   = 86400000
	timeMicrosDay   = 86400000000
	decimalMaxDigit = "9999999999999999999999999999999999999999" // 40 nines
)

// edgeCandidates are the values of each numeric field: record k takes
// candidate k mod len of each.
var edgeCandidates = map[string][]int64{
	"i":    {math.MinInt32, math.MaxInt32, 0, -1, 1},
	"l":    {math.MinInt64, math.MaxInt64, 0, -1, 1},
	"day":  {math.MinInt32, math.MaxInt32, dayYear10000, dayBeforeYear0, 0, -1},
	"tms":  {math.MinInt32, math.MaxInt32, timeMillisDay, timeMillisDay + 1, -1},
	"tus":  {-maxMicros, maxMicros, timeMicrosDay, timeMicrosDay + 1, -1},
	"tsms": {math.MinInt64, math.MaxInt64, msYear10000, msBeforeYear0, -1},
	"tsus": {math.MinInt64, math.MaxInt64, usYear10000, usBeforeYear0, -1},
	"lms":  {math.MaxInt64, math.MinInt64, msBeforeYear0, msYear10000, 1},
	"lus":  {math.MaxInt64, math.MinInt64, usBeforeYear0, usYear10000, 1},
}

// twos is v as a big-endian two's complement of size bytes (0: as few as
// it takes).
func twos(v *big.Int, size int) []byte {
	b, err := decimalBytes(new(big.Rat).SetInt(v), 0, size)
	if err != nil {
		panic(err)
	}
	return b
}

func edgeDecimals(k int) (dec, fdec *big.Int) {
	nines, _ := new(big.Int).SetString(decimalMaxDigit, 10)
	min128 := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 127))
	max128 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1))
	decs := []*big.Int{nines, new(big.Int).Neg(nines), big.NewInt(0), big.NewInt(-1), big.NewInt(1)}
	fdecs := []*big.Int{min128, max128, big.NewInt(-1), big.NewInt(0), big.NewInt(1)}
	return decs[k%len(decs)], fdecs[k%len(fdecs)]
}

func edgeDuration(k int) []byte {
	d := make([]byte, 12)
	switch k % 3 {
	case 0:
		for i := range d {
			d[i] = 0xff
		}
	case 1:
		d[0], d[4], d[8] = 1, 2, 3
	}
	return d
}

func edgeRaw(k int) map[string]any {
	r := map[string]any{"id": int64(k)}
	for f, c := range edgeCandidates {
		r[f] = c[k%len(c)]
	}
	dec, fdec := edgeDecimals(k)
	r["dec"], r["fdec"], r["dur"] = twos(dec, 0), twos(fdec, 16), edgeDuration(k)
	r["uid"] = fmt.Sprintf("%08x-0000-4000-8000-%012x", k, k)
	return r
}

// edgeWant is record k as ReadGeneric gives it.
func edgeWant(k int) Record {
	raw := edgeRaw(k)
	n := func(f string) int64 { return raw[f].(int64) }
	dec, fdec := edgeDecimals(k)
	d := raw["dur"].([]byte)
	le := func(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24 }
	return Record{
		"id":   int64(k),
		"i":    int(n("i")),
		"l":    n("l"),
		"day":  time.Unix(n("day")*86400, 0).UTC(),
		"tms":  time.Duration(n("tms")) * time.Millisecond,
		"tus":  time.Duration(n("tus")) * time.Microsecond,
		"tsms": time.UnixMilli(n("tsms")).UTC(),
		"tsus": time.UnixMicro(n("tsus")).UTC(),
		"lms":  time.UnixMilli(n("lms")).UTC(),
		"lus":  time.UnixMicro(n("lus")).UTC(),
		"dec":  new(big.Rat).SetFrac(dec, big.NewInt(100000)),
		"fdec": new(big.Rat).SetInt(fdec),
		"dur":  avro.LogicalDuration{Months: le(d), Days: le(d[4:]), Milliseconds: le(d[8:])},
		"uid":  raw["uid"],
	}
}

const edgeCount = 6

func writeEdges(t *testing.T, dir string) string {
	t.Helper()
	avrotest.RequireTools(t)
	var recs []map[string]any
	for k := range edgeCount {
		recs = append(recs, edgeRaw(k))
	}
	p, err := avrotest.WriteRawLogical(dir, "edges.avro", edgesSchema, recs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tm describes a time exactly, whatever its year.
func tm(v any) string {
	t, ok := v.(time.Time)
	if !ok {
		return fmt.Sprintf("not a time: %T %v", v, v)
	}
	_, off := t.Zone()
	return fmt.Sprintf("%d.%09d%+d", t.Unix(), t.Nanosecond(), off)
}

func rat(v any) string {
	r, ok := v.(*big.Rat)
	if !ok || r == nil {
		return fmt.Sprintf("not a decimal: %T %v", v, v)
	}
	return r.RatString()
}

// describeEdgeRecord and describeEdges describe a record of edgesSchema
// in one format, with every value exact.
func describeEdgeRecord(r Record) string {
	return fmt.Sprintf("%v i=%v:%T l=%v:%T day=%s tms=%v:%T tus=%v:%T tsms=%s tsus=%s lms=%s lus=%s dec=%s fdec=%s dur=%v uid=%v",
		r["id"], r["i"], r["i"], r["l"], r["l"], tm(r["day"]), int64(r["tms"].(time.Duration)), r["tms"], int64(r["tus"].(time.Duration)), r["tus"],
		tm(r["tsms"]), tm(r["tsus"]), tm(r["lms"]), tm(r["lus"]), rat(r["dec"]), rat(r["fdec"]), r["dur"], r["uid"])
}

func describeEdges(e edges) string {
	return describeEdgeRecord(Record{
		"id": e.ID, "i": int(e.I), "l": e.L, "day": e.Day, "tms": e.TMs, "tus": e.TUs,
		"tsms": e.TsMs, "tsus": e.TsUs, "lms": e.LMs, "lus": e.LUs, "dec": e.Dec, "fdec": e.FDec,
		"dur": e.Dur, "uid": e.UID,
	})
}

func edgeWants() []any {
	var want []any
	for k := range edgeCount {
		want = append(want, describeEdgeRecord(edgeWant(k)))
	}
	return want
}

// TestEdgesDirect reads the file straight from its source, as Records and
// as structs, and compares every value.
func TestEdgesDirect(t *testing.T) {
	path := writeEdges(t, t.TempDir())
	got := readSource(t, newSource(t, path, RecordType))
	if len(got) != edgeCount {
		t.Fatalf("%d records, want %d", len(got), edgeCount)
	}
	for k, r := range got {
		want := edgeWant(k)
		for f, w := range want {
			v := r.(Record)[f]
			if fmt.Sprint(v) != fmt.Sprint(w) || reflect.TypeOf(v) != reflect.TypeOf(w) || (reflect.TypeOf(w) == reflect.TypeFor[time.Time]() && tm(v) != tm(w)) {
				t.Errorf("record %d field %s: got %T %v, want %T %v", k, f, v, v, w, w)
			}
		}
		// Through Record's coder.
		b, err := encodeRecord(r.(Record))
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if describeEdgeRecord(back) != describeEdgeRecord(want) {
			t.Errorf("record %d after the coder:\n got %s\nwant %s", k, describeEdgeRecord(back), describeEdgeRecord(want))
		}
	}
	structs := readSource(t, newSource(t, path, reflect.TypeFor[edges]()))
	for k, e := range structs {
		if got, want := describeEdges(e.(edges)), describeEdgeRecord(edgeWant(k)); got != want {
			t.Errorf("struct %d:\n got %s\nwant %s", k, got, want)
		}
	}
}

// TestEdgesPipeline reads the file on Prism, generic and typed, through a
// shuffle, so that Record's coder and Beam's schema coder (time.Time of
// years beyond 9999 included) encode every value between stages.
func TestEdgesPipeline(t *testing.T) {
	path := writeEdges(t, t.TempDir())
	p, s := beam.NewPipelineWithRoot()
	gen := ReadGeneric(s, path)
	passert.Equals(s, beam.ParDo(s, describeEdgeRecord, beam.Reshuffle(s, gen)), edgeWants()...)
	typed := Read(s, path, reflect.TypeFor[edges]())
	passert.Equals(s, beam.ParDo(s, describeEdges, beam.Reshuffle(s, typed)), edgeWants()...)
	run(t, p)
}

// TestTimeMicrosBeyondDuration: a time-micros that a time.Duration cannot
// hold (2^63-1 and 2^62 wrapped to -1 and 0) fails the read, by
// ReadGeneric and Read, naming the field and the file; the raw long is
// read with a reader schema in which the field is a plain long, or into
// a Go int field.
func TestTimeMicrosBeyondDuration(t *testing.T) {
	avrotest.RequireTools(t)
	const schema = `{"type":"record","name":"M","fields":[{"name":"id","type":"long"},{"name":"tus","type":{"type":"long","logicalType":"time-micros"}}]}`
	dir := t.TempDir()
	path, err := avrotest.WriteRawLogical(dir, "micros.avro", schema, []map[string]any{
		{"id": int64(0), "tus": int64(math.MaxInt64)}, {"id": int64(1), "tus": int64(1) << 62}, {"id": int64(2), "tus": int64(-maxMicros - 1)},
	})
	if err != nil {
		t.Fatal(err)
	}
	type micros struct {
		ID  int64         `avro:"id"`
		TUs time.Duration `avro:"tus"`
	}
	for _, typ := range []reflect.Type{RecordType, reflect.TypeFor[micros](), reflect.TypeFor[map[string]any]()} {
		_, err := sdftestReadAll(t, newSource(t, path, typ))
		if !errors.Is(err, container.ErrRange) || !strings.Contains(err.Error(), `field "tus"`) || !strings.Contains(err.Error(), path) {
			t.Errorf("%v: %v, want ErrRange naming field tus and the file", typ, err)
		}
	}
	plain := strings.Replace(schema, `{"type":"long","logicalType":"time-micros"}`, `"long"`, 1)
	src := newSource(t, path, RecordType)
	src.Format.Settings.ReaderSchema = plain
	recs, err := sdftestReadAll(t, src)
	if err != nil || len(recs) != 3 || recs[0].(Record)["tus"] != int64(math.MaxInt64) || recs[1].(Record)["tus"] != int64(1)<<62 {
		t.Fatalf("raw longs by a reader schema: %v, %v", recs, err)
	}
	src = newSource(t, path, reflect.TypeFor[rawMicros]())
	src.Format.Settings.ReaderSchema = plain
	if recs, err = sdftestReadAll(t, src); err != nil || recs[0].(rawMicros).TUs != math.MaxInt64 {
		t.Fatalf("raw longs into int64 by a reader schema: %v, %v", recs, err)
	}
	type intMicros struct {
		ID  int64 `avro:"id"`
		TUs int   `avro:"tus"`
	}
	if recs, err = sdftestReadAll(t, newSource(t, path, reflect.TypeFor[intMicros]())); err != nil || recs[1].(intMicros).TUs != 1<<62 {
		t.Fatalf("raw longs into a Go int: %v, %v", recs, err)
	}

	// On Prism, the pipeline fails, naming the field and the file.
	p, s := beam.NewPipelineWithRoot()
	passert.Count(s, ReadGeneric(s, path), "records", 3)
	err = workertest.RunFailing(t, p)
	if err == nil || !strings.Contains(err.Error(), `field "tus"`) || !strings.Contains(err.Error(), "micros.avro") {
		t.Fatalf("pipeline: %v, want an error naming field tus and the file", err)
	}
}

type rawMicros struct {
	ID  int64 `avro:"id"`
	TUs int64 `avro:"tus"`
}
