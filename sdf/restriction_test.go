package sdf

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
)

func TestOffsetRangeCoder(t *testing.T) {
	for _, r := range []OffsetRange{{0, 0}, {0, 1}, {5, 100}, {-3, 7}, {1 << 40, Unbounded}, {math.MinInt64, math.MaxInt64}} {
		b := encodeOffsetRange(r)
		if len(b) != 16 {
			t.Errorf("encodeOffsetRange(%v) has %d bytes, want 16", r, len(b))
		}
		got, err := decodeOffsetRange(b)
		if err != nil || got != r {
			t.Errorf("decodeOffsetRange(encodeOffsetRange(%v)) = %v, %v", r, got, err)
		}
	}
	// Big-endian, Start then End.
	b := encodeOffsetRange(OffsetRange{1, 258})
	if want := []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 2}; string(b) != string(want) {
		t.Errorf("encodeOffsetRange([1, 258)) = %v, want %v", b, want)
	}
	for _, n := range []int{0, 1, 15, 17, 32} {
		if _, err := decodeOffsetRange(make([]byte, n)); err == nil || !strings.Contains(err.Error(), "want 16") {
			t.Errorf("decodeOffsetRange of %d bytes: err %v, want a length error", n, err)
		}
	}
	if c := coder.LookupCustomCoder(reflect.TypeOf(OffsetRange{})); c == nil {
		t.Error("no Beam coder registered for OffsetRange")
	}
}

func TestOffsetRangeMethods(t *testing.T) {
	cases := []struct {
		r       OffsetRange
		size    int64
		empty   bool
		bounded bool
		str     string
	}{
		{OffsetRange{0, 10}, 10, false, true, "[0, 10)"},
		{OffsetRange{5, 5}, 0, true, true, "[5, 5)"},
		{OffsetRange{9, 5}, 0, true, true, "[9, 5)"},
		{OffsetRange{7, Unbounded}, Unbounded - 7, false, false, "[7, unbounded)"},
	}
	for _, c := range cases {
		if c.r.Size() != c.size || c.r.IsEmpty() != c.empty || c.r.IsBounded() != c.bounded || c.r.String() != c.str {
			t.Errorf("%#v: Size %d IsEmpty %v IsBounded %v String %q; want %d %v %v %q",
				c.r, c.r.Size(), c.r.IsEmpty(), c.r.IsBounded(), c.r.String(), c.size, c.empty, c.bounded, c.str)
		}
	}
}
