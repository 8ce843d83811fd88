package datastoreio

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/jsonx"
)

// TestFilterFloatsTravel: NaN (with its payload), +Inf, -Inf and -0 as filter
// values survive the JSON that Beam serialises DoFns and Ranges with, bit
// for bit; so do ordinary floats and geo points.
func TestFilterFloatsTravel(t *testing.T) {
	nanPayload := math.Float64frombits(0x7ff8000000000123)
	for _, f := range []float64{math.NaN(), nanPayload, math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 1.5, -math.MaxFloat64, math.SmallestNonzeroFloat64} {
		q := NewQuery("K").Filter("F", "=", f).Filter("G", "=", -f)
		if err := q.Validate(); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		// The DoFn of the read's first step, as Beam serialises it.
		b, err := jsonx.Marshal(&planFn{Project: "p", Query: q})
		if err != nil {
			t.Fatalf("%v: serialising the DoFn: %v", f, err)
		}
		var fn planFn
		if err := jsonx.Unmarshal(&fn, b); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		// A Range, through its coder.
		rb, err := encodeRange(Range{Project: "p", Query: fn.Query})
		if err != nil {
			t.Fatalf("%v: encoding a Range: %v", f, err)
		}
		r, err := decodeRange(rb)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []float64{f, -f} {
			got := r.Query.Filters[i].Value.Float
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("%v: filter %d came back as %v (bits %x, want %x)", f, i, got, math.Float64bits(got), math.Float64bits(want))
			}
			if g, err := r.Query.Filters[i].Value.goValue(); err != nil || math.Float64bits(g.(float64)) != math.Float64bits(want) {
				t.Errorf("%v: client value %v, %v", f, g, err)
			}
		}
	}
	// Plain numbers, as older Ranges hold them, still decode.
	var v Value
	if err := json.Unmarshal([]byte(`{"Type":"geo","Float":1.25,"Float2":-3}`), &v); err != nil || v.Float != 1.25 || v.Float2 != -3 {
		t.Fatalf("plain numbers: %+v, %v", v, err)
	}
	if err := json.Unmarshal([]byte(`{"Type":"float","Float":"0x12"}`), &v); err == nil {
		t.Fatal("a malformed float string was accepted")
	}
}
