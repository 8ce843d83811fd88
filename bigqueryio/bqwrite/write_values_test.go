package bqwrite_test

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

// ClockRow holds a TIME, a DATETIME and a TIMESTAMP of one instant.
type ClockRow struct {
	ID int64          `bigquery:"id"`
	Tm civil.Time     `bigquery:"tm"`
	Dt civil.DateTime `bigquery:"dt"`
	Ts time.Time      `bigquery:"ts"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeFor[ClockRow]())
	register.Function1x1(clockText)
}

// clockText is an exact text of a ClockRow.
func clockText(r ClockRow) string {
	return fmt.Sprintf("%d %s %s %s", r.ID, r.Tm, r.Dt, r.Ts.UTC().Format(time.RFC3339Nano))
}

// clockBoundaries are instants at the boundary of a second, a minute, a
// day, a year (and the epoch's, and the last of year 9999's microseconds).
var clockBoundaries = []time.Time{
	time.Date(2026, 12, 3, 1, 2, 4, 0, time.UTC),
	time.Date(2026, 12, 3, 1, 3, 0, 0, time.UTC),
	time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC),
	time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), // only the instants before it
}

// nearBoundaries are the instants within 1 µs of each boundary, at the
// given nanosecond offsets, with what each reads back as: truncated to the
// microsecond (toward the past, so never into the next second, day or
// year).
func nearBoundaries(offsets []int) (in, want []ClockRow) {
	for _, b := range clockBoundaries {
		for _, off := range offsets {
			t := b.Add(time.Duration(off))
			if t.Year() > 9999 {
				continue
			}
			tr := t.Truncate(time.Microsecond)
			id := int64(len(in))
			in = append(in, ClockRow{ID: id, Tm: civil.TimeOf(t), Dt: civil.DateTimeOf(t), Ts: t})
			want = append(want, ClockRow{ID: id, Tm: civil.TimeOf(tr), Dt: civil.DateTimeOf(tr), Ts: tr})
		}
	}
	return in, want
}

// TestWriteClockValuesExact writes TIME, DATETIME and TIMESTAMP values
// within 1 µs of a second, minute, day and year boundary and reads them
// back, written as structs and as Rows: each is its value truncated to
// the microsecond, and no row is refused. (Before: 01:02:03.9999995 was sent as "01:02:03.1000000", a
// literal with seven fractional digits the service refuses, so the row
// went to FailedRows.)
func TestWriteClockValuesExact(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	in, want := nearBoundaries([]int{-1000, -999, -501, -500, -499, -1, 0, 1, 499, 500, 501, 999})
	var generic []any // the same values as Rows, encoded by the table's schema
	for _, r := range in {
		generic = append(generic, bqwrite.Row{"id": r.ID, "tm": r.Tm, "dt": r.Dt, "ts": r.Ts})
	}
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "tm", Type: bigquery.TimeFieldType},
		{Name: "dt", Type: bigquery.DateTimeFieldType}, {Name: "ts", Type: bigquery.TimestampFieldType}}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.clock", beam.Create(s, anys(in)...), writeOpts(srv)...)
	passert.Empty(s, res.FailedRows)
	passert.Equals(s, beam.ParDo(s, resultText, res.Results), fmt.Sprintf("p.d.clock %d rows", len(in)))
	s2 := s.Scope("rows")
	res = bqwrite.Write(s2, "p.d.clockrows", beam.Create(s2, generic...), writeOpts(srv, bqwrite.WithSchema(schema))...)
	passert.Empty(s2, res.FailedRows)
	run(t, p)

	p, s = beam.NewPipelineWithRoot()
	for _, c := range []struct {
		table string
		f     bigqueryio.DataFormat
	}{{"p.d.clock", bigqueryio.Avro}, {"p.d.clock", bigqueryio.Arrow}, {"p.d.clockrows", bigqueryio.Avro}} {
		s := s.Scope(fmt.Sprint(c))
		back := bigqueryio.Read(s, c.table, reflect.TypeFor[ClockRow](), bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(), bigqueryio.WithDataFormat(c.f))
		var wantText []any
		for _, w := range want {
			wantText = append(wantText, clockText(w))
		}
		passert.Equals(s, beam.ParDo(s, clockText, back), wantText...)
	}
	run(t, p)
}

// NumericPair has a NUMERIC and a BIGNUMERIC column.
type NumericPair struct {
	ID int64    `bigquery:"id"`
	N  *big.Rat `bigquery:"n"`
	BN *big.Rat `bigquery:"bn"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeFor[NumericPair]())
	register.Function1x1(failedError)
}

func failedError(f bqwrite.FailedRow) string {
	return f.Row + " " + f.Error
}

// TestWriteDecimalDigits: a NUMERIC or BIGNUMERIC value with more digits
// after the point than the type holds (9, 38) is refused, to FailedRows
// with a message naming the field, not rounded; values of the scale read
// back exactly. (Before: NUMERIC 0.0000000005 was written as 0.000000001.)
func TestWriteDecimalDigits(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "n", Type: bigquery.NumericFieldType}, {Name: "bn", Type: bigquery.BigNumericFieldType}}
	ok := []NumericPair{
		{ID: 1, N: rat("0.000000001"), BN: rat("0.00000000000000000000000000000000000001")},
		{ID: 2, N: rat("-99999999999999999999999999999.999999999"), BN: rat("1/4")},
	}
	bad := []NumericPair{
		{ID: 3, N: rat("0.0000000005"), BN: rat("1")},
		{ID: 4, N: rat("1/3"), BN: rat("1")},
		{ID: 5, N: rat("1"), BN: rat("0.000000000000000000000000000000000000015")},
	}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.dec", beam.Create(s, anys(append(append([]NumericPair{}, ok...), bad...))...), writeOpts(srv, bqwrite.WithSchema(schema))...)
	passert.Equals(s, beam.ParDo(s, failedError, res.FailedRows),
		`{"ID":3,"N":"1/2000000000","BN":"1"} field N: NUMERIC value 1/2000000000 (0.000000000500...) has more than 9 digits after the point, which NUMERIC holds: round it first (a big.Rat set from x.FloatString(9) rounds half away from zero)`,
		`{"ID":4,"N":"1/3","BN":"1"} field N: NUMERIC value 1/3 (0.333333333333...) has more than 9 digits after the point, which NUMERIC holds: round it first (a big.Rat set from x.FloatString(9) rounds half away from zero)`,
		`{"ID":5,"N":"1","BN":"3/200000000000000000000000000000000000000"} field BN: BIGNUMERIC value 3/200000000000000000000000000000000000000 (0.00000000000000000000000000000000000001500...) has more than 38 digits after the point, which BIGNUMERIC holds: round it first (a big.Rat set from x.FloatString(38) rounds half away from zero)`)
	run(t, p)
	rows, err := srv.TableRows("p.d.dec")
	if err != nil || len(rows) != len(ok) {
		t.Fatalf("%d rows (%v), want %d", len(rows), err, len(ok))
	}
	for _, r := range rows {
		i := r[0].(int64) - 1
		if r[1].(*big.Rat).Cmp(ok[i].N) != 0 || r[2].(*big.Rat).Cmp(ok[i].BN) != 0 {
			t.Errorf("row %v, want %v %v", r, ok[i].N, ok[i].BN)
		}
	}
	if !strings.Contains(fmt.Sprint(rows), "1/4") {
		t.Errorf("rows %v: BIGNUMERIC 1/4 not exact", rows)
	}
}

// NullableRow has fields whose nil bigquery.InferSchema made REQUIRED, and
// a BIGNUMERIC *big.Rat.
type NullableRow struct {
	ID    int64          `bigquery:"id"`
	Blob  []byte         `bigquery:"blob"`
	N     *big.Rat       `bigquery:"n"`
	BN    *big.Rat       `bigquery:"bn" bigqueryio:"bignumeric"`
	Inner *NullableInner `bigquery:"inner"`
}

type NullableInner struct {
	S string `bigquery:"s"`
	B []byte `bigquery:"b"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeFor[NullableRow]())
	bqwrite.RegisterType(reflect.TypeFor[NullableInner]())
	register.Function1x1(nullableText)
}

func nullableText(r NullableRow) string {
	inner := "NULL"
	if r.Inner != nil {
		inner = fmt.Sprintf("{%q %v}", r.Inner.S, r.Inner.B)
	}
	return fmt.Sprintf("%d blob=%v/%v n=%s bn=%s inner=%s", r.ID, r.Blob == nil, r.Blob, ratText(r.N), ratText(r.BN), inner)
}

// TestWriteInferredSchemaTakesNils writes, into a table CreateIfNeeded
// makes from the inferred schema, rows whose []byte, *big.Rat and nested
// struct pointer are nil, and BIGNUMERIC values NUMERIC cannot hold, then
// reads them back: every row, exact, none refused. (Before: the inferred
// columns were REQUIRED and NUMERIC, so those rows went to FailedRows.)
func TestWriteInferredSchemaTakesNils(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	rows := []NullableRow{
		{ID: 1},
		{ID: 2, Blob: []byte{0, 1}, N: rat("1.5"), BN: rat("0.00000000000000000000000000000000000001"), Inner: &NullableInner{S: "x"}},
		{ID: 3, Blob: []byte{}, BN: rat("-123456789012345678901234567890123456.5"), Inner: &NullableInner{B: []byte{7}}},
	}
	var want []any
	for _, r := range rows {
		want = append(want, nullableText(r))
	}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.nulls", beam.Create(s, anys(rows)...), writeOpts(srv)...)
	passert.Empty(s, res.FailedRows)
	run(t, p)

	p, s = beam.NewPipelineWithRoot()
	back := bigqueryio.Read(s, "p.d.nulls", reflect.TypeFor[NullableRow](), bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
	passert.Equals(s, beam.ParDo(s, nullableText, back), want...)
	run(t, p)
}

// ClockLists holds REPEATED TIME, DATETIME, TIMESTAMP and INTEGER columns.
type ClockLists struct {
	ID  int64            `bigquery:"id"`
	Tms []civil.Time     `bigquery:"tms"`
	Dts []civil.DateTime `bigquery:"dts"`
	Tss []time.Time      `bigquery:"tss"`
	Ns  []int64          `bigquery:"ns"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeFor[ClockLists]())
	register.Function1x1(clockListsText)
}

func clockListsText(r ClockLists) string {
	var ts []string
	for _, t := range r.Tss {
		ts = append(ts, t.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("%d %v %v %v %v", r.ID, r.Tms, r.Dts, ts, r.Ns)
}

// TestWriteRepeatedClockValues writes REPEATED TIME and DATETIME columns
// (sent as strings) beside packed REPEATED numbers, and reads them back.
// (Before: their string fields carried the packed option of adapt's INT64
// fields, which the service's descriptor builder refuses, as bqtest now
// does: every append to such a table failed.)
func TestWriteRepeatedClockValues(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	var in, want []any
	for i := range 5 {
		b := time.Date(2026, 12, 4, 10, i, 3, 123456000, time.UTC)
		r := ClockLists{ID: int64(i), Ns: []int64{int64(i), -int64(i)}}
		for k := range i {
			t := b.Add(time.Duration(k) * time.Hour)
			r.Tms, r.Dts, r.Tss = append(r.Tms, civil.TimeOf(t)), append(r.Dts, civil.DateTimeOf(t)), append(r.Tss, t)
		}
		in, want = append(in, r), append(want, clockListsText(r))
	}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.lists", beam.Create(s, in...), writeOpts(srv)...)
	passert.Empty(s, res.FailedRows)
	run(t, p)
	p, s = beam.NewPipelineWithRoot()
	back := bigqueryio.Read(s, "p.d.lists", reflect.TypeFor[ClockLists](), bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
	passert.Equals(s, beam.ParDo(s, clockListsText, back), want...)
	run(t, p)
}
