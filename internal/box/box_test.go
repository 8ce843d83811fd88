package box

import (
	"fmt"
	"math/big"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

type (
	onePtr     struct{ p *int }
	ptrAndZero struct {
		p *int
		_ struct{}
	}
	nested   struct{ in onePtr }
	twoWords struct{ a, b int64 }
	wide     struct {
		S    string
		N    int64
		F    float64
		T    time.Time
		B    []byte
		Tags []string
		M    map[string]int
		P    *big.Rat
	}
	empty struct{}
)

// samples gives, for each kind of type, a value whose words are not zero.
func samples() []any {
	n := 7
	return []any{
		int(300), int8(-3), int64(1 << 40), uint16(9), float32(1.5), float64(-2.25), true,
		"a string", []byte("bytes"), []any{1, "x"}, [3]int{1, 2, 3}, [1]*int{&n}, [1]int{4},
		&n, map[string]int{"a": 1}, make(chan int), func() int { return n }, unsafe.Pointer(&n),
		onePtr{&n}, ptrAndZero{p: &n}, nested{onePtr{&n}}, twoWords{1, 2}, empty{}, [0]int{},
		time.Date(2026, 12, 2, 10, 0, 0, 5, time.UTC), time.Duration(12345),
		wide{S: "s", N: 1 << 50, F: 3.5, T: time.Unix(1e9, 7), B: []byte{1}, Tags: []string{"t"}, M: map[string]int{"k": 2}, P: big.NewRat(1, 3)},
		big.NewRat(2, 7), struct{ x [2]*int }{[2]*int{&n, &n}}, struct{ f func() }{func() {}},
	}
}

// TestDirectMatchesRuntime checks Direct against the interface values Go
// makes: for a pointer-shaped type Go stores the value's own word in the
// interface; for any other type a pointer to a copy, which cannot equal
// the value's first word.
func TestDirectMatchesRuntime(t *testing.T) {
	for _, v := range samples() {
		typ := reflect.TypeOf(v)
		if typ.Size() < unsafe.Sizeof(uintptr(0)) || typ.Size() == 0 {
			if Direct(typ) {
				t.Errorf("%v: smaller than a word, but Direct", typ)
			}
			continue
		}
		// the value's first word, through a copy of our own
		cp := reflect.New(typ)
		cp.Elem().Set(reflect.ValueOf(v))
		first := *(*unsafe.Pointer)(cp.UnsafePointer())
		data := (*eface)(unsafe.Pointer(&v)).data
		if got, want := Direct(typ), data == first; got != want {
			t.Errorf("%v: Direct %v, but the runtime stores it directly: %v", typ, got, want)
		}
	}
}

// TestBox boxes each sample from a slot of its own and checks the value,
// its type and, for types that are not pointer-shaped, that the interface
// points at the slot (no copy).
func TestBox(t *testing.T) {
	for _, v := range samples() {
		typ := reflect.TypeOf(v)
		slot := reflect.New(typ)
		slot.Elem().Set(reflect.ValueOf(v))
		b := For(typ)
		got := b.Box(slot.UnsafePointer())
		if reflect.TypeOf(got) != typ {
			t.Errorf("%v: boxed as %T", typ, got)
			continue
		}
		if !hasFunc(typ) && !reflect.DeepEqual(got, v) {
			t.Errorf("%v: boxed %#v, want %#v", typ, got, v)
		}
		if !Direct(typ) && typ.Size() > 0 {
			if data := (*eface)(unsafe.Pointer(&got)).data; data != slot.UnsafePointer() {
				t.Errorf("%v: interface points at %p, not at the slot %p (a copy)", typ, data, slot.UnsafePointer())
			}
		}
	}
}

// TestBoxInterfaceTypes boxes values held in variables of interface types:
// the result is the dynamic value, as Go's conversion to any gives it.
func TestBoxInterfaceTypes(t *testing.T) {
	var e any = map[string]any{"id": int64(3)}
	var s fmt.Stringer = big.NewInt(9)
	var nilE any
	if got := For(reflect.TypeFor[any]()).Box(unsafe.Pointer(&e)); !reflect.DeepEqual(got, e) {
		t.Errorf("any: boxed %#v, want %#v", got, e)
	}
	if got := For(reflect.TypeFor[fmt.Stringer]()).Box(unsafe.Pointer(&s)); got != any(s) {
		t.Errorf("fmt.Stringer: boxed %#v, want %#v", got, s)
	}
	if got := For(reflect.TypeFor[any]()).Box(unsafe.Pointer(&nilE)); got != nil {
		t.Errorf("nil any: boxed %#v", got)
	}
	if Direct(reflect.TypeFor[any]()) {
		t.Error("an interface type is not pointer-shaped")
	}
}

// hasFunc reports whether t holds a func, which DeepEqual cannot compare.
func hasFunc(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Func:
		return true
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if hasFunc(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// TestBoxSurvivesGC boxes the elements of slices nothing else keeps, forces
// collections between boxing and use, and checks every value: the
// interfaces alone must keep the slices and what they point at alive.
func TestBoxSurvivesGC(t *testing.T) {
	const n = 2000
	b := For(reflect.TypeFor[wide]())
	bp := For(reflect.TypeFor[onePtr]())
	boxed := make([]any, 0, n)
	ptrs := make([]any, 0, n)
	for round := 0; round < n/100; round++ {
		rows := make([]wide, 100)
		ones := make([]onePtr, 100)
		for i := range rows {
			k := round*100 + i
			rows[i] = wide{S: string(rune('a' + k%26)), N: int64(k), Tags: []string{big.NewInt(int64(k)).String()}, P: big.NewRat(int64(k), 1)}
			v := k
			ones[i] = onePtr{&v}
			boxed = append(boxed, b.Box(unsafe.Pointer(&rows[i])))
			ptrs = append(ptrs, bp.Box(unsafe.Pointer(&ones[i])))
		}
		runtime.GC()
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
		// churn: reuse freed memory if anything was freed too early
		junk := make([][]byte, 0, 1000)
		for j := 0; j < 1000; j++ {
			junk = append(junk, make([]byte, 256))
		}
		_ = junk
	}
	for k := 0; k < n; k++ {
		w := boxed[k].(wide)
		if w.N != int64(k) || w.S != string(rune('a'+k%26)) || w.Tags[0] != big.NewInt(int64(k)).String() || w.P.Cmp(big.NewRat(int64(k), 1)) != 0 {
			t.Fatalf("value %d after GC: %+v", k, w)
		}
		if p := ptrs[k].(onePtr); *p.p != k {
			t.Fatalf("pointer value %d after GC: %d", k, *p.p)
		}
	}
}

// TestPack packs the module's fixed types (the avroio generic decoder's)
// from slots of their own.
func TestPack(t *testing.T) {
	i, s, tm := int64(1<<40), "text", time.Unix(5, 6).UTC()
	for _, c := range []struct{ got, want any }{
		{Pack(TypeWord(int64(0)), unsafe.Pointer(&i)), i},
		{Pack(TypeWord(""), unsafe.Pointer(&s)), s},
		{Pack(TypeWord(time.Time{}), unsafe.Pointer(&tm)), tm},
	} {
		if c.got != c.want {
			t.Errorf("packed %v, want %v", c.got, c.want)
		}
	}
}

// TestTypeWordOf: the type word read off a reflect.Type is the one Go
// puts in interfaces holding values of the type, for every kind of type,
// and making it allocates nothing, even for a large array type (For
// allocated the array's size before: 60 MB for a [60_000_000]byte).
func TestTypeWordOf(t *testing.T) {
	type big [1 << 20]byte
	for _, v := range []any{int64(0), "", time.Time{}, wide{}, &wide{}, [3]byte{}, big{}, map[string]any{}, []any{}, struct{ p *int }{}} {
		if got, want := TypeWordOf(reflect.TypeOf(v)), TypeWord(v); got != want {
			t.Errorf("%T: TypeWordOf %p, TypeWord %p", v, got, want)
		}
	}
	typ := reflect.TypeFor[big]()
	if n := testing.AllocsPerRun(10, func() { _ = For(typ) }); n != 0 {
		t.Errorf("For(%v) allocated %v times", typ, n)
	}
	var a big
	a[7] = 9
	if v := Pack(TypeWordOf(typ), unsafe.Pointer(&a)).(big); v[7] != 9 {
		t.Errorf("packed a %v, read %d", typ, v[7])
	}
}

func BenchmarkBox(b *testing.B) {
	rows := make([]wide, 1024)
	for i := range rows {
		rows[i].N = int64(i)
	}
	typ := reflect.TypeFor[wide]()
	var sink any
	b.Run("box", func(b *testing.B) {
		bx := For(typ)
		for i := 0; b.Loop(); i++ {
			sink = bx.Box(unsafe.Pointer(&rows[i&1023]))
		}
	})
	b.Run("reflect_copy", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			sink = reflect.NewAt(typ, unsafe.Pointer(&rows[i&1023])).Elem().Interface()
		}
	})
	b.Run("go_boxing", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			sink = any(rows[i&1023])
		}
	})
	_ = sink
}
