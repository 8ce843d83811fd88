package bqwrite

import (
	"math/big"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"google.golang.org/protobuf/encoding/protowire"
)

// clockCols is a row of TIME, DATETIME and TIMESTAMP.
type clockCols struct {
	Tm civil.Time
	Dt civil.DateTime
	Ts time.Time
}

// The literals the service takes: at most six fractional digits.
var (
	timeLiteral     = regexp.MustCompile(`^\d\d:\d\d:\d\d(\.\d{6})?$`)
	dateTimeLiteral = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{6})?$`)
)

// TestEncodeClockTruncates encodes every TIME, DATETIME and TIMESTAMP
// within 1 µs (every nanosecond) of a second, minute, day and year
// boundary, of the epoch and of the end of year 9999: each is sent as a
// literal the service takes, holding the value truncated to the
// microsecond. (Before: 01:02:03.9999995 was sent as "01:02:03.1000000".)
func TestEncodeClockTruncates(t *testing.T) {
	enc, err := newRowEncoder(bigquery.Schema{
		{Name: "Tm", Type: bigquery.TimeFieldType}, {Name: "Dt", Type: bigquery.DateTimeFieldType}, {Name: "Ts", Type: bigquery.TimestampFieldType},
	}, reflect.TypeFor[clockCols]())
	if err != nil {
		t.Fatal(err)
	}
	bounds := []time.Time{
		time.Date(2026, 12, 3, 1, 2, 4, 0, time.UTC), time.Date(2026, 12, 3, 1, 3, 0, 0, time.UTC),
		time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	var n int
	for _, b := range bounds {
		for off := -1000; off <= 1000; off++ {
			v := b.Add(time.Duration(off))
			if v.Year() > 9999 {
				continue
			}
			n++
			want := v.Truncate(time.Microsecond)
			row, err := enc.encode(nil, clockCols{Tm: civil.TimeOf(v), Dt: civil.DateTimeOf(v), Ts: v})
			if err != nil {
				t.Fatalf("%v: %v", v, err)
			}
			fields := map[protowire.Number][]byte{}
			var ts uint64
			for len(row) > 0 {
				num, typ, k := protowire.ConsumeTag(row)
				row = row[k:]
				if typ == protowire.VarintType {
					ts, k = protowire.ConsumeVarint(row)
				} else {
					fields[num], k = protowire.ConsumeBytes(row)
				}
				row = row[k:]
			}
			tm, dt := string(fields[1]), string(fields[2])
			if !timeLiteral.MatchString(tm) || !dateTimeLiteral.MatchString(dt) {
				t.Fatalf("%v: sent TIME %q, DATETIME %q", v.Format(time.RFC3339Nano), tm, dt)
			}
			gotTm, err1 := civil.ParseTime(tm)
			gotDt, err2 := civil.ParseDateTime(strings.Replace(dt, " ", "T", 1))
			if err1 != nil || err2 != nil || gotTm != civil.TimeOf(want) || gotDt != civil.DateTimeOf(want) || int64(ts) != want.UnixMicro() {
				t.Fatalf("%v: sent TIME %q, DATETIME %q, TIMESTAMP %d µs; want %v", v.Format(time.RFC3339Nano), tm, dt, int64(ts), want.Format(time.RFC3339Nano))
			}
		}
	}
	if n != 5*2001+1000 {
		t.Errorf("%d values checked", n)
	}
}

// TestEncodeRefusesInvalidCivil: a civil value that is no time of day, or
// a date outside years 1 to 9999, is refused naming the field.
func TestEncodeRefusesInvalidCivil(t *testing.T) {
	enc, err := newRowEncoder(bigquery.Schema{{Name: "Tm", Type: bigquery.TimeFieldType}, {Name: "Dt", Type: bigquery.DateTimeFieldType}, {Name: "Ts", Type: bigquery.TimestampFieldType}},
		reflect.TypeFor[clockCols]())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		row  clockCols
		want string
	}{
		{clockCols{Tm: civil.Time{Hour: 24}, Dt: civil.DateTime{Date: civil.Date{Year: 2000, Month: 1, Day: 1}}}, "Tm: 24:00:00 is not a valid time of day"},
		{clockCols{Tm: civil.Time{Nanosecond: -1}, Dt: civil.DateTime{Date: civil.Date{Year: 2000, Month: 1, Day: 1}}}, "Tm: "},
		{clockCols{Dt: civil.DateTime{Date: civil.Date{Year: 10000, Month: 1, Day: 1}}}, "Dt: 10000-01-01 is not a date of years 1 to 9999"},
		{clockCols{Dt: civil.DateTime{Date: civil.Date{Year: 2023, Month: 2, Day: 29}}}, "Dt: 2023-02-29 is not a date"},
	} {
		if _, err := enc.encode(nil, tc.row); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %s", tc.row, err, tc.want)
		}
	}
}

// TestDecimalText: values of the scale are sent exactly; more digits are
// refused, never rounded.
func TestDecimalText(t *testing.T) {
	for _, tc := range []struct {
		v, want string
		typ     bigquery.FieldType
	}{
		{"0.000000001", "0.000000001", bigquery.NumericFieldType},
		{"-1/8", "-0.125000000", bigquery.NumericFieldType},
		{"99999999999999999999999999999.999999999", "99999999999999999999999999999.999999999", bigquery.NumericFieldType},
		{"1e-38", "0.00000000000000000000000000000000000001", bigquery.BigNumericFieldType},
		{"0.0000000005", "", bigquery.NumericFieldType},
		{"-0.9999999999", "", bigquery.NumericFieldType},
		{"1/3", "", bigquery.BigNumericFieldType},
		{"1e-39", "", bigquery.BigNumericFieldType},
	} {
		r, _ := new(big.Rat).SetString(tc.v)
		got, err := decimalText(r, tc.typ)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "digits after the point") {
				t.Errorf("%s %s: %q, %v: want refused", tc.typ, tc.v, got, err)
			}
		} else if err != nil || got != tc.want {
			t.Errorf("%s %s: %q, %v: want %s", tc.typ, tc.v, got, err, tc.want)
		}
	}
}

// TestEncodeRefusesInvalidDate: the zero civil.Date and dates outside
// years 1 to 9999 are refused naming the field. (Before: sent as a day
// count the service refuses or reads as another date.)
func TestEncodeRefusesInvalidDate(t *testing.T) {
	type dated struct{ D civil.Date }
	enc, err := newRowEncoder(bigquery.Schema{{Name: "D", Type: bigquery.DateFieldType}}, reflect.TypeFor[dated]())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []civil.Date{{}, {Year: 10000, Month: 1, Day: 1}, {Year: 2023, Month: 2, Day: 29}} {
		if _, err := enc.encode(nil, dated{d}); err == nil || !strings.Contains(err.Error(), "D: "+d.String()+" is not a date of years 1 to 9999") {
			t.Errorf("%v: %v", d, err)
		}
	}
	if _, err := enc.encode(nil, dated{civil.Date{Year: 1, Month: 1, Day: 1}}); err != nil {
		t.Error(err)
	}
}
