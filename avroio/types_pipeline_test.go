package avroio

// Every Avro type a Go struct can hold through hamba/avro, read by Read
// and carried through a Reshuffle (so Beam's schema coder encodes and
// decodes every value between stages): the values after the shuffle must
// be exactly the values in the file.

import (
	"bytes"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

func init() {
	RegisterType(reflect.TypeFor[allTypes]())
	RegisterType(reflect.TypeFor[allInner]())
	register.Function1x1[allTypes, string](describeAllTypes)
}

// allTypesSchema has a field of every Avro type and logical type hamba/avro
// maps to a Go struct field.
const allTypesSchema = `{"type": "record", "name": "AllTypes", "namespace": "sdfio.avroio.types", "fields": [
  {"name": "id", "type": "long"},
  {"name": "b", "type": "boolean"},
  {"name": "i", "type": "int"},
  {"name": "i8", "type": "int"},
  {"name": "i16", "type": "int"},
  {"name": "u8", "type": "int"},
  {"name": "u16", "type": "int"},
  {"name": "gi", "type": "int"},
  {"name": "l", "type": "long"},
  {"name": "u32", "type": "long"},
  {"name": "gl", "type": "long"},
  {"name": "f", "type": "float"},
  {"name": "d", "type": "double"},
  {"name": "s", "type": "string"},
  {"name": "by", "type": "bytes"},
  {"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
  {"name": "fx8", "type": {"type": "fixed", "name": "F8", "size": 8}},
  {"name": "en", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
  {"name": "nested", "type": {"type": "record", "name": "Inner", "fields": [
    {"name": "x", "type": "int"},
    {"name": "when", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}}
  ]}},
  {"name": "arr", "type": {"type": "array", "items": "long"}},
  {"name": "recs", "type": {"type": "array", "items": "Inner"}},
  {"name": "m", "type": {"type": "map", "values": "int"}},
  {"name": "decs", "type": {"type": "map", "values": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}},
  {"name": "ns", "type": ["null", "string"]},
  {"name": "nl", "type": ["null", "long"]},
  {"name": "nrec", "type": ["null", "Inner"]},
  {"name": "narr", "type": ["null", {"type": "array", "items": "string"}]},
  {"name": "decb", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
  {"name": "decf", "type": {"type": "fixed", "name": "D12", "size": 12, "logicalType": "decimal", "precision": 24, "scale": 2}},
  {"name": "ndec", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]},
  {"name": "uuid", "type": {"type": "string", "logicalType": "uuid"}},
  {"name": "date", "type": {"type": "int", "logicalType": "date"}},
  {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
  {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
  {"name": "tsms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "tsus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
  {"name": "ltsms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
  {"name": "ltsus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
  {"name": "nts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
  {"name": "dur", "type": {"type": "fixed", "name": "Dur", "size": 12, "logicalType": "duration"}}
]}`

// allInner is a record of the schema's Inner.
type allInner struct {
	X    int32     `avro:"x"`
	When time.Time `avro:"when"`
	Dec  *big.Rat  `avro:"dec"`
}

// allTypes holds a record of allTypesSchema.
type allTypes struct {
	ID     int64                `avro:"id"`
	B      bool                 `avro:"b"`
	I      int32                `avro:"i"`
	I8     int8                 `avro:"i8"`
	I16    int16                `avro:"i16"`
	U8     uint8                `avro:"u8"`
	U16    uint16               `avro:"u16"`
	GI     int                  `avro:"gi"`
	L      int64                `avro:"l"`
	U32    uint32               `avro:"u32"`
	GL     int                  `avro:"gl"`
	F      float32              `avro:"f"`
	D      float64              `avro:"d"`
	S      string               `avro:"s"`
	By     []byte               `avro:"by"`
	Fx     [4]byte              `avro:"fx"`
	Fx8    uint64               `avro:"fx8"`
	En     string               `avro:"en"`
	Nested allInner             `avro:"nested"`
	Arr    []int64              `avro:"arr"`
	Recs   []allInner           `avro:"recs"`
	M      map[string]int32     `avro:"m"`
	Decs   map[string]*big.Rat  `avro:"decs"`
	NS     *string              `avro:"ns"`
	NL     *int64               `avro:"nl"`
	NRec   *allInner            `avro:"nrec"`
	NArr   []string             `avro:"narr"`
	DecB   *big.Rat             `avro:"decb"`
	DecF   *big.Rat             `avro:"decf"`
	NDec   **big.Rat            `avro:"ndec"`
	UUID   string               `avro:"uuid"`
	Date   time.Time            `avro:"date"`
	TMs    time.Duration        `avro:"tms"`
	TUs    time.Duration        `avro:"tus"`
	TsMs   time.Time            `avro:"tsms"`
	TsUs   time.Time            `avro:"tsus"`
	LTsMs  time.Time            `avro:"ltsms"`
	LTsUs  time.Time            `avro:"ltsus"`
	NTs    *time.Time           `avro:"nts"`
	Dur    avro.LogicalDuration `avro:"dur"`
}

// allTypesRecord is record i of the test file; odd records have their
// nullable fields set, even ones leave them null.
func allTypesRecord(i int) allTypes {
	base := time.Date(2026, 3, 8, 2, 30, 0, 0, time.UTC) // a wall clock in New York's DST gap
	inner := func(k int) allInner {
		return allInner{X: int32(i*10 + k), When: base.Add(time.Duration(i*1000+k) * time.Microsecond), Dec: big.NewRat(int64(i*1000+k)-5000, 1000)}
	}
	r := allTypes{
		ID: int64(i), B: i%2 == 1, I: int32(-i * 7), I8: int8(i - 100), I16: int16(i * -300), U8: uint8(200 + i), U16: uint16(60000 + i),
		GI: -i * 11, L: int64(i) << 40, U32: uint32(4e9) + uint32(i), GL: i << 35,
		F: float32(i) + 0.25, D: float64(i)/3 - 7, S: fmt.Sprintf("é-%d", i), By: []byte{0, byte(i), 255},
		Fx: [4]byte{1, 2, byte(i), 4}, Fx8: uint64(1)<<63 + uint64(i), En: []string{"RED", "GREEN", "BLUE"}[i%3],
		Nested: inner(0), Arr: []int64{int64(i), -1, 1 << 50}, Recs: []allInner{inner(1), inner(2)},
		M: map[string]int32{"a": int32(i), "b": -2}, Decs: map[string]*big.Rat{"x": big.NewRat(int64(i)*7-3, 100)},
		DecB: big.NewRat(int64(i)*123456789-98765, 10000), DecF: big.NewRat(-int64(i)*987654321012-1, 100),
		UUID: fmt.Sprintf("123e4567-e89b-12d3-a456-%012d", i),
		Date: time.Date(1500+i, 2, 28, 0, 0, 0, 0, time.UTC), // before 1883: zones had sub-minute offsets
		TMs:  time.Duration(i)*time.Hour + 1234*time.Millisecond, TUs: time.Duration(i)*time.Minute + 5678*time.Microsecond,
		TsMs: base.Add(time.Duration(i) * 1001 * time.Millisecond), TsUs: time.Date(1850, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Microsecond + time.Hour),
		LTsMs: base.Add(time.Duration(i) * time.Minute), LTsUs: time.Date(1850, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * 3 * time.Microsecond),
		Dur: avro.LogicalDuration{Months: uint32(i), Days: 30, Milliseconds: uint32(i * 1000)},
	}
	if i%2 == 1 {
		s := fmt.Sprintf("n%d", i)
		n := -int64(i)
		nr := inner(3)
		ts := base.Add(-time.Duration(i) * time.Hour)
		nd := big.NewRat(int64(i), 4)
		r.NS, r.NL, r.NRec, r.NArr, r.NDec, r.NTs = &s, &n, &nr, []string{"p", "q"}, &nd, &ts
	}
	return r
}

// describeAllTypes spells out every value of r, exactly: decimals as
// fractions, times as instants with their zone offset and location.
func describeAllTypes(r allTypes) string {
	var b strings.Builder
	rat := func(x *big.Rat) string {
		if x == nil {
			return "nil"
		}
		return x.RatString()
	}
	tm := func(t time.Time) string {
		_, off := t.Zone()
		return fmt.Sprintf("%s(%d,%s)", t.Format(time.RFC3339Nano), off, t.Location())
	}
	in := func(x allInner) string { return fmt.Sprintf("{%d %s %s}", x.X, tm(x.When), rat(x.Dec)) }
	fmt.Fprintf(&b, "id=%d b=%v i=%d i8=%d i16=%d u8=%d u16=%d gi=%d l=%d u32=%d gl=%d f=%v d=%v s=%q by=%x fx=%x fx8=%d en=%s",
		r.ID, r.B, r.I, r.I8, r.I16, r.U8, r.U16, r.GI, r.L, r.U32, r.GL, r.F, r.D, r.S, r.By, r.Fx, r.Fx8, r.En)
	fmt.Fprintf(&b, " nested=%s arr=%v recs=[", in(r.Nested), r.Arr)
	for _, x := range r.Recs {
		b.WriteString(in(x))
	}
	fmt.Fprintf(&b, "] m=%v decs=[", r.M)
	var keys []string
	for k := range r.Decs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s:%s ", k, rat(r.Decs[k]))
	}
	b.WriteString("]")
	if r.NS != nil {
		fmt.Fprintf(&b, " ns=%q", *r.NS)
	}
	if r.NL != nil {
		fmt.Fprintf(&b, " nl=%d", *r.NL)
	}
	if r.NRec != nil {
		fmt.Fprintf(&b, " nrec=%s", in(*r.NRec))
	}
	fmt.Fprintf(&b, " narr=%v(%v)", r.NArr, r.NArr == nil)
	nd := "nil"
	if r.NDec != nil {
		nd = rat(*r.NDec)
	}
	fmt.Fprintf(&b, " decb=%s decf=%s ndec=%s uuid=%s", rat(r.DecB), rat(r.DecF), nd, r.UUID)
	fmt.Fprintf(&b, " date=%s tms=%v tus=%v tsms=%s tsus=%s ltsms=%s ltsus=%s", tm(r.Date), r.TMs, r.TUs, tm(r.TsMs), tm(r.TsUs), tm(r.LTsMs), tm(r.LTsUs))
	if r.NTs != nil {
		fmt.Fprintf(&b, " nts=%s", tm(*r.NTs))
	}
	fmt.Fprintf(&b, " dur=%+v", r.Dur)
	return b.String()
}

// writeAllTypesFile writes n records of allTypesSchema with hamba/avro's
// encoder.
func writeAllTypesFile(t testing.TB, dir string, n int) (string, []allTypes) {
	t.Helper()
	var buf bytes.Buffer
	w, err := container.NewWriter(&buf, allTypesSchema, container.WriterOptions{Codec: "null"})
	if err != nil {
		t.Fatal(err)
	}
	var recs []allTypes
	for i := 0; i < n; i++ {
		r := allTypesRecord(i)
		if err := w.Append(&r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		recs = append(recs, r)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "all.avro")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, recs
}

// TestPipelineAllTypesReshuffle reads a record of every type a struct can
// hold, shuffles them (Beam encodes every value), and checks every value
// after the shuffle against the file's.
func TestPipelineAllTypesReshuffle(t *testing.T) {
	path, recs := writeAllTypesFile(t, t.TempDir(), 6)
	var want []any
	for _, r := range recs {
		want = append(want, describeAllTypes(r))
	}
	p, s := beam.NewPipelineWithRoot()
	got := Read(s, path, reflect.TypeFor[allTypes]())
	passert.Equals(s, beam.ParDo(s, describeAllTypes, beam.Reshuffle(s, got)), want...)
	run(t, p)
}

type ratValue struct {
	ID  int64   `avro:"id"`
	Dec big.Rat `avro:"dec"`
}

type ratInList struct {
	ID   int64     `avro:"id"`
	Decs []big.Rat `avro:"decs"`
}

type nullableRat struct {
	ID  int64    `avro:"id"`
	Dec *big.Rat `avro:"dec"`
}

// TestDecimalsHambaLoses: the Go types into which hamba/avro reads
// decimals as 0 are refused, naming the field: a big.Rat value when the
// read is built, a *big.Rat for a nullable decimal when the file's schema
// is known.
func TestDecimalsHambaLoses(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[ratValue](), reflect.TypeFor[ratInList]()} {
		err := checkReadable(typ)
		if err == nil || !strings.Contains(err.Error(), "is a big.Rat") || !strings.Contains(err.Error(), "field Dec") {
			t.Errorf("%v: %v", typ, err)
		}
		if _, err := splitSubject(t, "unused.avro", typ); err == nil || !strings.Contains(err.Error(), "big.Rat") {
			t.Errorf("FileSource of %v: %v", typ, err)
		}
	}
	if err := checkReadable(reflect.TypeFor[allTypes]()); err != nil {
		t.Errorf("allTypes: %v", err)
	}

	const schema = `{"type": "record", "name": "N", "fields": [{"name": "id", "type": "long"},
	  {"name": "dec", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}]}]}`
	var buf bytes.Buffer
	w, err := container.NewWriter(&buf, schema, container.WriterOptions{Codec: "null"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&nullableRat{ID: 1, Dec: big.NewRat(5, 4)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "n.avro")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sub, err := splitSubject(t, path, reflect.TypeFor[nullableRat]())
	if err != nil {
		t.Fatal(err)
	}
	err = sub.Read(t.Context(), sub.NewTracker(sub.Restriction), func(beam.X) {})
	if err == nil || !strings.Contains(err.Error(), "field Dec of Go type avroio.nullableRat") || !strings.Contains(err.Error(), "**big.Rat") || !strings.Contains(err.Error(), path) {
		t.Errorf("reading a nullable decimal into a *big.Rat: %v", err)
	}
}
