package beamtypes

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
)

// tm describes a time exactly, whatever its year.
func tm(t time.Time) string {
	_, off := t.Zone()
	return fmt.Sprintf("%d.%09d%+d", t.Unix(), t.Nanosecond(), off)
}

// TestTimeEveryTime: Time's encoding keeps times of any year and of
// offsets of seconds, and writes the times RFC 3339 holds exactly as
// Beam's own coder does.
func TestTimeEveryTime(t *testing.T) {
	lmt := time.FixedZone("LMT", -17762) // New York before 1883
	for _, in := range []time.Time{
		time.Unix(0, 0).UTC(),
		time.Date(2024, 3, 10, 2, 30, 0, 123456789, time.UTC),
		time.Date(2024, 3, 10, 2, 30, 0, 1, time.FixedZone("", 3600)),
		time.Date(1850, 1, 1, 0, 0, 0, 0, lmt),
		time.UnixMilli(math.MinInt64).UTC(),
		time.UnixMicro(math.MaxInt64).UTC(),
		time.Unix(math.MaxInt32*86400, 0).UTC(),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		var buf bytes.Buffer
		if err := encodeTime(Time(in), &buf); err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		encoded := append([]byte(nil), buf.Bytes()...)
		out, err := decodeTime(&buf)
		if err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		if tm(time.Time(out)) != tm(in) {
			t.Errorf("%v came back as %v", in, time.Time(out))
		}
		if textExact(in) {
			// What Beam's own coder writes: a row of one field, the text.
			var beams bytes.Buffer
			text, _ := in.MarshalText()
			coder.WriteSimpleRowHeader(1, &beams)
			coder.EncodeBytes(text, &beams)
			if !bytes.Equal(encoded, beams.Bytes()) {
				t.Errorf("%v: encoded %q, want Beam's %q", in, encoded, beams.Bytes())
			}
		}
	}
}

type inner struct {
	When civil.DateTime
	Amts []*big.Rat
}

type element struct {
	Name  string
	Value big.Rat
	Ptr   *big.Rat
	Nil   *big.Rat
	Day   civil.Date
	At    time.Time
	Clock civil.Time
	In    inner
	ByKey map[string]*big.Rat
	Arr   [2]civil.Date
	skip  int // unexported: not encoded, as by Beam's row coder
}

// roundTrip encodes and decodes v with the coder Beam infers for its type.
func roundTrip(t *testing.T, v any) any {
	t.Helper()
	typ := reflect.TypeOf(v)
	var buf bytes.Buffer
	if err := beam.NewElementEncoder(typ).Encode(v, &buf); err != nil {
		t.Fatalf("encoding %v: %v", v, err)
	}
	out, err := beam.NewElementDecoder(typ).Decode(&buf)
	if err != nil {
		t.Fatalf("decoding %v: %v", v, err)
	}
	if buf.Len() != 0 {
		t.Fatalf("decoding %v: %d bytes left", v, buf.Len())
	}
	return out
}

func describe(e element) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %v %v %v %s %v %v %v", e.Name, e.Value.RatString(), e.Ptr, e.Nil, e.Day, tm(e.At), e.Clock, e.In.When, e.skip)
	for _, r := range e.In.Amts {
		fmt.Fprintf(&b, " %v", r)
	}
	fmt.Fprintf(&b, " %v %v %v", e.ByKey["a"], e.ByKey["nil"], e.Arr)
	return b.String()
}

// TestRegisterKeepsEveryField: a struct holding big.Rat (by value,
// pointer, in slices and maps), civil dates and times and time.Time of
// any year is refused by Check until Register gives it a coder that keeps
// every value; the pointer to it too; and nothing else changes: time.Time,
// *big.Rat and civil.Date keep Beam's own coders.
func TestRegisterKeepsEveryField(t *testing.T) {
	elemType := reflect.TypeFor[element]()
	others := []reflect.Type{reflect.TypeFor[time.Time](), reflect.TypeFor[*big.Rat](), reflect.TypeFor[civil.Date](), reflect.TypeFor[inner]()}
	before := map[reflect.Type]string{}
	for _, o := range others {
		before[o] = beam.NewCoder(beam.FullType(typexNew(o))).String()
	}
	if got := beam.NewCoder(beam.FullType(typexNew(elemType))).String(); !strings.HasPrefix(got, "R[") {
		t.Fatalf("before Register: coder %s, want Beam's row coder", got)
	}
	beam.RegisterType(elemType) // as a program that does not know it needs more
	if err := Check(elemType, "X.RegisterType"); err == nil || !strings.Contains(err.Error(), "big.Rat (field Value)") || !strings.Contains(err.Error(), "X.RegisterType(reflect.TypeFor[beamtypes.element]())") {
		t.Errorf("Check before Register = %v, want an error naming the field and the call", err)
	}
	for _, typ := range []reflect.Type{elemType, reflect.PointerTo(elemType)} {
		Register(typ)
		if err := Check(typ, "X.RegisterType"); err != nil {
			t.Errorf("Check(%v) after Register: %v", typ, err)
		}
	}
	for _, o := range others {
		if got := beam.NewCoder(beam.FullType(typexNew(o))).String(); got != before[o] {
			t.Errorf("the coder of %v changed: %s, was %s", o, got, before[o])
		}
		if coder.LookupCustomCoder(o) != nil {
			t.Errorf("%v got a custom coder", o)
		}
	}
	in := element{
		Name:  "n",
		Value: *big.NewRat(-1234567890123456789, 1000),
		Ptr:   big.NewRat(1, 3),
		Day:   civil.Date{Year: 2024, Month: 2, Day: 29},
		At:    time.Date(12000, 1, 2, 3, 4, 5, 6, time.FixedZone("", 3601)),
		Clock: civil.Time{Hour: 23, Minute: 59, Second: 58, Nanosecond: 7},
		In:    inner{When: civil.DateTime{Date: civil.Date{Year: 1, Month: 1, Day: 1}, Time: civil.Time{Hour: 1}}, Amts: []*big.Rat{big.NewRat(7, 2), nil, big.NewRat(0, 1)}},
		ByKey: map[string]*big.Rat{"a": big.NewRat(5, 7), "nil": nil},
		Arr:   [2]civil.Date{{Year: 9999, Month: 12, Day: 31}, {}},
		skip:  9,
	}
	want := in
	want.skip = 0
	if got := describe(roundTrip(t, in).(element)); got != describe(want) {
		t.Errorf("round trip:\n got %s\nwant %s", got, describe(want))
	}
	if got := describe(*roundTrip(t, &in).(*element)); got != describe(want) {
		t.Errorf("round trip of a pointer:\n got %s\nwant %s", got, describe(want))
	}
}

type keyed struct {
	ByDay map[civil.Date]int
}

// TestRegisterRefuses: types the shadow cannot be built for are refused,
// naming the type and why, and get no coder.
func TestRegisterRefuses(t *testing.T) {
	for typ, want := range map[reflect.Type]string{
		reflect.TypeFor[keyed](): "map key type civil.Date",
	} {
		func() {
			defer func() {
				p := recover()
				if p == nil || !strings.Contains(fmt.Sprint(p), want) || !strings.Contains(fmt.Sprint(p), typ.String()) {
					t.Errorf("Register(%v) panicked with %v, want a message naming it and %q", typ, p, want)
				}
			}()
			Register(typ)
		}()
		if coder.LookupCustomCoder(typ) != nil {
			t.Errorf("%v got a coder", typ)
		}
	}
}

// TestRegisterKeepsTheProgramsCoder: a coder the program registered for an
// element type is kept.
func TestRegisterKeepsTheProgramsCoder(t *testing.T) {
	type own struct{ At *big.Rat }
	typ := reflect.TypeFor[own]()
	coder.RegisterCoder(typ, func(own) []byte { return []byte("x") }, func([]byte) own { return own{} })
	Register(typ)
	if got := coder.LookupCustomCoder(typ).Enc.Fn.Name(); strings.Contains(got, "encodeElement") {
		t.Errorf("the program's coder was replaced by %s", got)
	}
	if err := Check(typ, "X.RegisterType"); err != nil {
		t.Errorf("Check: %v", err)
	}
}

// TestCheckTimesOnly: a type whose only special field is a time.Time needs
// no registration (Beam keeps the times of years 0-9999); an unregistered
// named type is refused, naming the call that registers it.
func TestCheckTimesOnly(t *testing.T) {
	type times struct{ At []time.Time }
	if err := Check(reflect.TypeFor[times](), "X.RegisterType"); err == nil || !strings.Contains(err.Error(), "X.RegisterType(reflect.TypeFor[beamtypes.times]())") {
		t.Errorf("Check of an unregistered type = %v", err)
	}
	beam.RegisterType(reflect.TypeFor[times]())
	if err := Check(reflect.TypeFor[times](), "X.RegisterType"); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func typexNew(t reflect.Type) typex.FullType { return typex.New(t) }

type embeddedBase struct{ Tenant string }

type embeddingOrder struct {
	embeddedBase
	ID    int64
	Price *big.Rat
}

// TestRegisterKeepsUnexportedEmbedded: a type embedding an unexported
// struct (which reflect.StructOf cannot build) keeps the embedded fields
// through its coder, as Beam's own coder of such a type does.
func TestRegisterKeepsUnexportedEmbedded(t *testing.T) {
	rt := reflect.TypeFor[embeddingOrder]()
	Register(rt)
	v := embeddingOrder{embeddedBase: embeddedBase{Tenant: "t1"}, ID: 7, Price: big.NewRat(3, 2)}
	var b bytes.Buffer
	if err := beam.NewElementEncoder(rt).Encode(v, &b); err != nil {
		t.Fatal(err)
	}
	got, err := beam.NewElementDecoder(rt).Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	g := got.(embeddingOrder)
	if g.Tenant != "t1" || g.ID != 7 || g.Price == nil || g.Price.Cmp(v.Price) != 0 {
		t.Errorf("decoded %+v (price %v), want %+v (price %v)", g, g.Price, v, v.Price)
	}
}
