package datastoreio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// valueJSON is the serialised form of a Value: the fields of Value, with
// the floats in exactFloat form, so that NaN, +Inf, -Inf and -0, which JSON
// numbers cannot hold, travel with the query (encoding/json refuses them,
// and Beam serialises DoFns and Ranges with it).
type valueJSON struct {
	Type   string
	Int    int64       `json:",omitempty"`
	Float  *exactFloat `json:",omitempty"`
	Float2 *exactFloat `json:",omitempty"`
	Str    string      `json:",omitempty"`
	Bool   bool        `json:",omitempty"`
}

// exactFloat is a float64 in JSON: a number when JSON holds it exactly
// (every finite value but -0), otherwise a string of its IEEE 754 bits,
// "0x" and 16 hex digits (NaN payloads included).
type exactFloat float64

func (f exactFloat) MarshalJSON() ([]byte, error) {
	x := float64(f)
	if math.IsInf(x, 0) || math.IsNaN(x) || (x == 0 && math.Signbit(x)) {
		return []byte(fmt.Sprintf(`"0x%016x"`, math.Float64bits(x))), nil
	}
	return json.Marshal(x)
}

func (f *exactFloat) UnmarshalJSON(b []byte) error {
	if !bytes.HasPrefix(b, []byte(`"`)) {
		var x float64
		if err := json.Unmarshal(b, &x); err != nil {
			return err
		}
		*f = exactFloat(x)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	hex, ok := strings.CutPrefix(s, "0x")
	bits, err := strconv.ParseUint(hex, 16, 64)
	if !ok || len(hex) != 16 || err != nil {
		return fmt.Errorf("datastoreio: float value %q is neither a number nor 0x and 16 hex digits", s)
	}
	*f = exactFloat(math.Float64frombits(bits))
	return nil
}

func floatField(x float64) *exactFloat {
	if math.Float64bits(x) == 0 { // +0: omitted
		return nil
	}
	f := exactFloat(x)
	return &f
}

// MarshalJSON writes v with its floats exact (see valueJSON).
func (v Value) MarshalJSON() ([]byte, error) {
	return json.Marshal(valueJSON{Type: v.Type, Int: v.Int, Float: floatField(v.Float), Float2: floatField(v.Float2), Str: v.Str, Bool: v.Bool})
}

// UnmarshalJSON reads what MarshalJSON wrote (and plain JSON numbers).
func (v *Value) UnmarshalJSON(b []byte) error {
	var j valueJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*v = Value{Type: j.Type, Int: j.Int, Str: j.Str, Bool: j.Bool}
	if j.Float != nil {
		v.Float = float64(*j.Float)
	}
	if j.Float2 != nil {
		v.Float2 = float64(*j.Float2)
	}
	return nil
}
