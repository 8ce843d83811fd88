package bigqueryio_test

import (
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

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// wTypes is a row of wTypesSchema: every type Read fills.
type wTypes struct {
	I   int64                  `bigquery:"i"`
	N   *big.Rat               `bigquery:"n"`
	BN  *big.Rat               `bigquery:"bn"`
	D   bigquery.NullDate      `bigquery:"d"`
	Tm  bigquery.NullTime      `bigquery:"tm"`
	Dt  bigquery.NullDateTime  `bigquery:"dt"`
	Ts  bigquery.NullTimestamp `bigquery:"ts"`
	G   bigquery.NullGeography `bigquery:"g"`
	J   bigquery.NullJSON      `bigquery:"j"`
	B   []byte                 `bigquery:"b"`
	OK  bigquery.NullBool      `bigquery:"ok"`
	F   bigquery.NullFloat64   `bigquery:"f"`
	S   bigquery.NullString    `bigquery:"s"`
	Rec *wRec                  `bigquery:"rec"`
	RS  []wItem                `bigquery:"rs"`
}

type wRec struct {
	A    bigquery.NullString `bigquery:"a"`
	Tags []int64             `bigquery:"tags"`
}

type wItem struct {
	X float64 `bigquery:"x"`
}

var wTypesSchema = bigquery.Schema{
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
	{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}, {Name: "tags", Type: bigquery.IntegerFieldType, Repeated: true}}},
	{Name: "rs", Type: bigquery.RecordFieldType, Repeated: true, Schema: bigquery.Schema{{Name: "x", Type: bigquery.FloatFieldType}}},
}

// Simple is the row type of the exactly-once tests.
type Simple struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[wTypes]())
	beam.RegisterType(reflect.TypeFor[wRec]())
	beam.RegisterType(reflect.TypeFor[wItem]())
	beam.RegisterType(reflect.TypeFor[Simple]())
	register.Function1x1(canonTypes)
	register.Function1x1(canonWriteRow)
	register.Function1x1(simpleID)
	register.Function1x1(simpleTable)
	register.Function1x1(failedText)
	register.Function1x1(resultText)
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// writeTypesRows are the rows of the round trip: the extremes of NUMERIC and
// BIGNUMERIC, dates and timestamps of years 1 and 9999, NULLs, empty and
// full repeated columns, nested records.
func writeTypesRows() []wTypes {
	d := func(y int, m time.Month, day int) civil.Date { return civil.Date{Year: y, Month: m, Day: day} }
	return []wTypes{
		{I: -9223372036854775808, N: rat("99999999999999999999999999999.999999999"), BN: rat("578960446186580977117854925043439539266.34992332820282019728792003956564819967"),
			D: bigquery.NullDate{Date: d(1, 1, 1), Valid: true}, Tm: bigquery.NullTime{Time: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000}, Valid: true},
			Dt: bigquery.NullDateTime{DateTime: civil.DateTime{Date: d(9999, 12, 31), Time: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000}}, Valid: true},
			Ts: bigquery.NullTimestamp{Timestamp: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), Valid: true},
			G:  bigquery.NullGeography{GeographyVal: "POINT(1 2)", Valid: true}, J: bigquery.NullJSON{JSONVal: `{"a":[1,2]}`, Valid: true},
			B: []byte{0, 1, 255}, OK: bigquery.NullBool{Bool: true, Valid: true}, F: bigquery.NullFloat64{Float64: -2.5e300, Valid: true},
			S:   bigquery.NullString{StringVal: "héllo\x00", Valid: true},
			Rec: &wRec{A: bigquery.NullString{StringVal: "x", Valid: true}, Tags: []int64{1, -2, 3}}, RS: []wItem{{1.5}, {-0.25}}},
		{I: 9223372036854775807, N: rat("-99999999999999999999999999999.999999999"), BN: rat("-578960446186580977117854925043439539266.34992332820282019728792003956564819968"),
			D:  bigquery.NullDate{Date: d(9999, 12, 31), Valid: true},
			Dt: bigquery.NullDateTime{DateTime: civil.DateTime{Date: d(1, 1, 1)}, Valid: true},
			Ts: bigquery.NullTimestamp{Timestamp: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), Valid: true},
			B:  []byte{}, OK: bigquery.NullBool{Valid: true}, F: bigquery.NullFloat64{Valid: true},
			Rec: &wRec{Tags: nil}, RS: []wItem{}},
		{I: 0, N: rat("0.000000001"), BN: rat("-0.00000000000000000000000000000000000001"),
			Ts: bigquery.NullTimestamp{Timestamp: time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC), Valid: true}},
		{I: 7}, // every other column NULL
	}
}

// canonTypes is an exact text of a wTypes (rationals as fractions).
func canonTypes(r wTypes) string {
	rs := func(x *big.Rat) string {
		if x == nil {
			return "NULL"
		}
		return x.RatString()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "i=%d n=%s bn=%s d=%v tm=%v dt=%v ts=%v/%s g=%v j=%v b=%q ok=%v f=%v s=%q", r.I, rs(r.N), rs(r.BN), r.D, r.Tm, r.Dt,
		r.Ts.Valid, r.Ts.Timestamp.UTC().Format(time.RFC3339Nano), r.G, r.J, r.B, r.OK, r.F, r.S.StringVal+fmt.Sprint(r.S.Valid))
	if r.Rec != nil {
		fmt.Fprintf(&b, " rec={%v %v}", r.Rec.A, r.Rec.Tags)
	}
	fmt.Fprintf(&b, " rs=%v", r.RS)
	return b.String()
}

// canonWriteRow is canonTypes of a Row.
func canonWriteRow(r bigqueryio.Row) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := r[k]
		if x, ok := v.(*big.Rat); ok {
			v = x.RatString()
		}
		if x, ok := v.(time.Time); ok {
			v = x.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(&b, "%s=%v ", k, v)
	}
	return b.String()
}

func simpleID(r Simple) int64 { return r.ID }

func failedText(f bigqueryio.FailedRow) string { return f.Table + " " + f.Row }

func resultText(r bigqueryio.TableResult) string {
	return fmt.Sprintf("%s %d rows", r.Table, r.Rows)
}

// simpleTable routes rows over three tables by ID.
func simpleTable(r Simple) string { return fmt.Sprintf("p.d.dyn%d", r.ID%3) }

func writeOpts(srv *bqtest.Server, more ...bigqueryio.WriteOption) []bigqueryio.WriteOption {
	return append([]bigqueryio.WriteOption{bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(),
		bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()), bigqueryio.WithRetries(8, 5*time.Millisecond)}, more...)
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// TestWriteRoundTrip writes every type Read fills, as structs into one
// table (created from WithSchema) and as Rows into another (defined, read
// by its own schema), then reads both back with Read: exact.
func TestWriteRoundTrip(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	if err := srv.AddTable("p.d.rows", bqtest.Table{Schema: wTypesSchema}); err != nil {
		t.Fatal(err)
	}
	rows := writeTypesRows()
	var want []any
	for _, r := range rows {
		want = append(want, canonTypes(r))
	}
	p, s := beam.NewPipelineWithRoot()
	col := beam.Create(s, anys(rows)...)
	res := bigqueryio.Write(s, "p.d.types", col, writeOpts(srv, bigqueryio.WithSchema(wTypesSchema))...)
	passert.Empty(s, res.FailedRows)
	passert.Equals(s, beam.ParDo(s, resultText, res.Results), fmt.Sprintf("p.d.types %d rows", len(rows)))
	run(t, p)
	if got, err := srv.TableRows("p.d.types"); err != nil || len(got) != len(rows) {
		t.Fatalf("table holds %d rows (%v), want %d", len(got), err, len(rows))
	}

	// Rows: read the struct table as Rows, write them to the second table.
	p, s = beam.NewPipelineWithRoot()
	generic := bigqueryio.Read(s, "p.d.types", reflect.TypeFor[bigqueryio.Row](), bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
	res = bigqueryio.Write(s, "p.d.rows", generic, writeOpts(srv, bigqueryio.WithCreateDisposition(bigqueryio.CreateNever))...)
	passert.Empty(s, res.FailedRows)
	run(t, p)

	p, s = beam.NewPipelineWithRoot()
	for _, table := range []string{"p.d.types", "p.d.rows"} {
		s := s.Scope(table)
		back := bigqueryio.Read(s, table, reflect.TypeFor[wTypes](), bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
		passert.Equals(s, beam.ParDo(s, canonTypes, back), want...)
	}
	run(t, p)
}
