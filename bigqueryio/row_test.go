package bigqueryio_test

import (
	"bytes"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

func init() {
	register.Function1x1(canonRow)
	register.Function1x1(canonTyped)
	register.Function1x1(canonNullTyped)
	bigqueryio.RegisterType(reflect.TypeOf((*Typed)(nil)).Elem())
	bigqueryio.RegisterType(reflect.TypeOf((*NullTyped)(nil)).Elem())
}

// The table of every BigQuery type: row 0 has a value in every column,
// row 1 a NULL in every nullable one.
var (
	typesSchema = bigquery.Schema{
		{Name: "i", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "n", Type: bigquery.NumericFieldType},
		{Name: "bn", Type: bigquery.BigNumericFieldType},
		{Name: "d", Type: bigquery.DateFieldType},
		{Name: "tm", Type: bigquery.TimeFieldType},
		{Name: "dt", Type: bigquery.DateTimeFieldType},
		{Name: "ts", Type: bigquery.TimestampFieldType},
		{Name: "g", Type: bigquery.GeographyFieldType},
		{Name: "j", Type: bigquery.JSONFieldType},
		{Name: "b", Type: bigquery.BytesFieldType},
		{Name: "ok", Type: bigquery.BooleanFieldType},
		{Name: "f", Type: bigquery.FloatFieldType},
		{Name: "s", Type: bigquery.StringFieldType},
		{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{
			{Name: "a", Type: bigquery.StringFieldType},
			{Name: "tags", Type: bigquery.IntegerFieldType, Repeated: true},
			{Name: "when", Type: bigquery.DateFieldType}}},
		{Name: "rs", Type: bigquery.RecordFieldType, Repeated: true, Schema: bigquery.Schema{{Name: "x", Type: bigquery.NumericFieldType}}},
		{Name: "days", Type: bigquery.DateFieldType, Repeated: true},
	}
	bigNum, _ = new(big.Rat).SetString("-578960446186580977117854925043439539266.34992332820282019728792003956564819967")
	typesRows = [][]bigquery.Value{
		{int64(-1) << 62, big.NewRat(-123456789012345, 1000000000), bigNum, civil.Date{Year: 1, Month: 1, Day: 1},
			civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000},
			civil.DateTime{Date: civil.Date{Year: 9999, Month: 12, Day: 31}, Time: civil.Time{Hour: 1, Nanosecond: 1000}},
			time.Date(1969, 7, 20, 20, 17, 40, 123456000, time.UTC), "POLYGON((0 0, 1 0, 1 1, 0 0))", `{"a":[1,2.5,"x"],"b":null}`,
			[]byte{0, 1, 254, 255}, true, -0.1, "héllo\x00wörld",
			[]bigquery.Value{"in", []bigquery.Value{int64(3), int64(-4)}, civil.Date{Year: 2024, Month: 2, Day: 29}},
			[]bigquery.Value{[]bigquery.Value{big.NewRat(1, 8)}, []bigquery.Value{big.NewRat(-5, 2)}},
			[]bigquery.Value{civil.Date{Year: 2000, Month: 1, Day: 2}}},
		{int64(7), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, []bigquery.Value{}, []bigquery.Value{}},
	}
)

func typesTable(t *testing.T, srv *bqtest.Server) {
	t.Helper()
	if err := srv.AddTable("p.d.types", bqtest.Table{Schema: typesSchema, Rows: typesRows}); err != nil {
		t.Fatal(err)
	}
}

// canon is an exact text of a value and its Go type.
func canon(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case *big.Rat:
		if x == nil {
			return "(*big.Rat)nil"
		}
		return "rat:" + x.RatString()
	case time.Time:
		return "ts:" + x.UTC().Format(time.RFC3339Nano) + "@" + x.Location().String()
	case []byte:
		return fmt.Sprintf("bytes:%x", x)
	case []bigquery.Value:
		parts := make([]string, len(x))
		for i, it := range x {
			parts[i] = canon(it)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case map[string]bigquery.Value:
		return "map" + canonMap(x)
	case bigqueryio.Row:
		return "row" + canonMap(x)
	}
	return fmt.Sprintf("%T:%v", v, v)
}

func canonMap(m map[string]bigquery.Value) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s;", k, canon(m[k]))
	}
	b.WriteString("}")
	return b.String()
}

func canonRow(r bigqueryio.Row) string { return canon(r) }

// wantRow is row i of the types table as a Row, built by the test.
func wantRow(i int) bigqueryio.Row {
	r := typesRows[i]
	var rec bigquery.Value
	if r[13] != nil {
		v := r[13].([]bigquery.Value)
		rec = map[string]bigquery.Value{"a": v[0], "tags": v[1], "when": v[2]}
	}
	var rs []bigquery.Value
	for _, it := range r[14].([]bigquery.Value) {
		rs = append(rs, map[string]bigquery.Value{"x": it.([]bigquery.Value)[0]})
	}
	if rs == nil {
		rs = []bigquery.Value{}
	}
	out := bigqueryio.Row{"rec": rec, "rs": rs, "days": r[15]}
	for c, f := range typesSchema[:13] {
		out[f.Name] = r[c]
	}
	return out
}

func TestRowCoderRoundTrip(t *testing.T) {
	for i := range typesRows {
		r := wantRow(i)
		b, err := bigqueryio.EncodeRow(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := bigqueryio.DecodeRow(b)
		if err != nil {
			t.Fatal(err)
		}
		if canon(got) != canon(r) {
			t.Errorf("row %d:\n got %s\nwant %s", i, canon(got), canon(r))
		}
		// Every strict prefix is an error, never a panic.
		for n := 0; n < len(b); n++ {
			if _, err := bigqueryio.DecodeRow(b[:n]); err == nil {
				t.Fatalf("row %d: a prefix of %d of %d bytes decoded", i, n, len(b))
			}
		}
	}
	// A hostile count allocates nothing of its size.
	if _, err := bigqueryio.DecodeRow([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil || !strings.Contains(err.Error(), "count of") {
		t.Errorf("hostile count: %v", err)
	}
	if _, err := bigqueryio.EncodeRow(bigqueryio.Row{"x": int32(1)}); err == nil || !strings.Contains(err.Error(), "column x") {
		t.Errorf("an int32 was encoded: %v", err)
	}
}

// Typed holds row 0 of the types table in plain Go types.
type Typed struct {
	I    int64
	N    *big.Rat
	BN   *big.Rat
	D    civil.Date
	Tm   civil.Time
	Dt   civil.DateTime
	Ts   time.Time
	G    string
	J    string
	B    []byte
	OK   bool
	F    float64
	S    string
	Rec  Inner
	RS   []Item
	Days []civil.Date
}

// Inner is the rec column.
type Inner struct {
	A    string
	Tags []int64
	When civil.Date
}

// Item is an item of the rs column.
type Item struct{ X *big.Rat }

// NullTyped holds both rows of the types table in the bigquery.NullX types
// and pointers.
type NullTyped struct {
	I   int64
	N   *big.Rat
	D   bigquery.NullDate
	Tm  bigquery.NullTime
	Dt  bigquery.NullDateTime
	Ts  bigquery.NullTimestamp
	G   bigquery.NullGeography
	J   bigquery.NullJSON
	B   []byte
	OK  bigquery.NullBool
	F   bigquery.NullFloat64
	S   bigquery.NullString
	Rec *Inner
	RS  []Item
}

func canonTyped(v Typed) string {
	rs := make([]string, len(v.RS))
	for i, it := range v.RS {
		rs[i] = canon(it.X)
	}
	return fmt.Sprintf("%d %s %s %v %v %v %s %q %q %x %v %v %q {%q %v %v} %v %v", v.I, canon(v.N), canon(v.BN), v.D, v.Tm, v.Dt, canon(v.Ts),
		v.G, v.J, v.B, v.OK, v.F, v.S, v.Rec.A, v.Rec.Tags, v.Rec.When, rs, v.Days)
}

func canonNullTyped(v NullTyped) string {
	rs := make([]string, len(v.RS))
	for i, it := range v.RS {
		rs[i] = canon(it.X)
	}
	rec := "nil"
	if v.Rec != nil {
		rec = fmt.Sprintf("{%q %v %v}", v.Rec.A, v.Rec.Tags, v.Rec.When)
	}
	ts := "invalid"
	if v.Ts.Valid {
		ts = canon(v.Ts.Timestamp)
	}
	return fmt.Sprintf("%d %s %+v %+v %+v %s %+v %+v %x %+v %+v %+v %s %v", v.I, canon(v.N), v.D, v.Tm, v.Dt, ts, v.G, v.J, v.B, v.OK, v.F, v.S, rec, rs)
}

func wantTyped() Typed {
	r := typesRows[0]
	rec := r[13].([]bigquery.Value)
	return Typed{I: r[0].(int64), N: r[1].(*big.Rat), BN: r[2].(*big.Rat), D: r[3].(civil.Date), Tm: r[4].(civil.Time), Dt: r[5].(civil.DateTime),
		Ts: r[6].(time.Time), G: r[7].(string), J: r[8].(string), B: r[9].([]byte), OK: r[10].(bool), F: r[11].(float64), S: r[12].(string),
		Rec:  Inner{A: rec[0].(string), Tags: []int64{3, -4}, When: rec[2].(civil.Date)},
		RS:   []Item{{big.NewRat(1, 8)}, {big.NewRat(-5, 2)}},
		Days: []civil.Date{{Year: 2000, Month: 1, Day: 2}}}
}

func wantNullTyped() []NullTyped {
	w := wantTyped()
	return []NullTyped{
		{I: w.I, N: w.N, D: bigquery.NullDate{Date: w.D, Valid: true}, Tm: bigquery.NullTime{Time: w.Tm, Valid: true},
			Dt: bigquery.NullDateTime{DateTime: w.Dt, Valid: true}, Ts: bigquery.NullTimestamp{Timestamp: w.Ts, Valid: true},
			G: bigquery.NullGeography{GeographyVal: w.G, Valid: true}, J: bigquery.NullJSON{JSONVal: w.J, Valid: true}, B: w.B,
			OK: bigquery.NullBool{Bool: true, Valid: true}, F: bigquery.NullFloat64{Float64: w.F, Valid: true},
			S: bigquery.NullString{StringVal: w.S, Valid: true}, Rec: &w.Rec, RS: w.RS},
		{I: 7},
	}
}

// TestSchemaCoderKeepsFields encodes the output structs with the coder
// Beam gives their PCollections, which carries them between stages, and
// checks every field comes back (big.Rat and civil.Date need the coder
// RegisterType gives them).
func TestSchemaCoderKeepsFields(t *testing.T) {
	check := func(v any, canonOf func(any) string) {
		t.Helper()
		rt := reflect.TypeOf(v)
		var buf bytes.Buffer
		if err := beam.NewElementEncoder(rt).Encode(v, &buf); err != nil {
			t.Fatal(err)
		}
		got, err := beam.NewElementDecoder(rt).Decode(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if canonOf(got) != canonOf(v) {
			t.Errorf("%s:\n got %s\nwant %s", rt, canonOf(got), canonOf(v))
		}
	}
	check(wantTyped(), func(v any) string { return canonTyped(v.(Typed)) })
	for _, v := range wantNullTyped() {
		check(v, func(v any) string { return canonNullTyped(v.(NullTyped)) })
	}
	// A type Beam cannot encode is refused when the pipeline is built.
	p, s := beam.NewPipelineWithRoot()
	_ = p
	type bad struct {
		I int64
		C chan int
	}
	_, err := bigqueryio.TryRead(s, "p.d.types", reflect.TypeOf(bad{}))
	if err == nil || !strings.Contains(err.Error(), "field C") {
		t.Errorf("a chan field: %v", err)
	}
}

// TestPipelineReshuffleExact reads the types table as Rows and as structs,
// in Avro and in Arrow, sends them through a Reshuffle (so they are
// encoded by their coders) and checks every value exactly.
func TestPipelineReshuffleExact(t *testing.T) {
	srv := newServer(t)
	typesTable(t, srv)
	for _, format := range []bigqueryio.DataFormat{bigqueryio.Avro, bigqueryio.Arrow} {
		t.Run(map[bigqueryio.DataFormat]string{bigqueryio.Avro: "avro", bigqueryio.Arrow: "arrow"}[format], func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			opts := []bigqueryio.ReadOption{bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(), bigqueryio.WithDataFormat(format)}
			rows := bigqueryio.Read(s.Scope("rows"), "p.d.types", reflect.TypeOf(bigqueryio.Row{}), opts...)
			passert.Equals(s, beam.ParDo(s, canonRow, beam.Reshuffle(s, rows)), canonRow(wantRow(0)), canonRow(wantRow(1)))

			typed := bigqueryio.Read(s.Scope("typed"), "p.d.types", reflect.TypeOf(Typed{}), append(opts, bigqueryio.WithRowRestriction("i = -4611686018427387904"))...)
			passert.Equals(s, beam.ParDo(s, canonTyped, beam.Reshuffle(s, typed)), canonTyped(wantTyped()))

			nulls := bigqueryio.Read(s.Scope("nulls"), "p.d.types", reflect.TypeOf(NullTyped{}), opts...)
			w := wantNullTyped()
			passert.Equals(s, beam.ParDo(s, canonNullTyped, beam.Reshuffle(s, nulls)), canonNullTyped(w[0]), canonNullTyped(w[1]))
			if err := ptest.Run(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}
