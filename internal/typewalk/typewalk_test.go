package typewalk

import (
	"reflect"
	"testing"
	"time"
)

type node struct {
	Next *node
	Kids []node
	At   map[string]time.Time
}

type plain struct {
	A int
	B []string
	C map[int]*float64
	D [2]struct{ E bool }
}

func TestHolds(t *testing.T) {
	isTime := func(t reflect.Type) bool { return t == reflect.TypeFor[time.Time]() }
	isIface := func(t reflect.Type) bool { return t.Kind() == reflect.Interface }
	for _, c := range []struct {
		t    reflect.Type
		pick func(reflect.Type) bool
		want bool
	}{
		{reflect.TypeFor[time.Time](), isTime, true},
		{reflect.TypeFor[node](), isTime, true},    // a map value of a recursive type
		{reflect.TypeFor[*node](), isIface, false}, // recursion ends
		{reflect.TypeFor[plain](), isTime, false},
		{reflect.TypeFor[map[any]int](), isIface, true}, // a map key
		{reflect.TypeFor[[]map[string]any](), isIface, true},
		{reflect.TypeFor[[3]*time.Time](), isTime, true},
	} {
		if got := Holds(c.t, c.pick); got != c.want {
			t.Errorf("Holds(%v) = %v, want %v", c.t, got, c.want)
		}
	}
}
