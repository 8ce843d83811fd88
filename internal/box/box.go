// Package box makes Go interface values that point at values the caller
// already holds, without the copy and allocation Go makes when it boxes a
// value itself. It is the module's one place that builds interface values
// by hand: the decoders of bigqueryio and avroio decode rows into a slice
// (or into chunks) of their own and hand out each element as an `any`
// whose data word is the element's address.
//
// # The rule
//
// An interface value is two words: the type word, and either the value
// itself (a type the runtime stores directly: pointer-shaped types) or a
// pointer to it (every other type). For pointer-shaped types, Box loads
// the value at p into the interface, as Go does; for all others the data
// word is p itself. A type is pointer-shaped, following the compiler, when
// it is a pointer, map, channel, function or unsafe pointer, or a struct or
// array of exactly one element that is pointer-shaped. TestDirectMatchesRuntime
// checks that rule against the interface values Go itself makes.
//
// The caller's contract: the value at p must never be written again once it
// was boxed (a downstream DoFn may keep the interface value long after it
// was emitted), and p must point into memory the garbage collector knows
// (a Go allocation), which keeps it alive while the interface value lives.
//
// # What it saves
//
// Go boxes a value by copying it into a new allocation; Box neither
// copies nor allocates. BenchmarkBox, a 120-byte struct, 2 cores,
// 2026-12-02 (medians of 3, beside other work): Box 2.6 ns/op and 0 B;
// reflect.NewAt(t, p).Elem().Interface() 257 ns/op and 128 B; Go's own
// any(v) 413 ns/op and 128 B. A decoder emitting a million rows saves a
// million allocations and the copies.
package box

import (
	"reflect"
	"unsafe"
)

// eface is the layout of an empty interface.
type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// Boxer boxes values of one type.
type Boxer struct {
	t      reflect.Type
	typ    unsafe.Pointer // the type word of an interface holding a t
	direct bool
	iface  bool // t is an interface type: the value at p is an interface value
}

// For returns the Boxer of values of type t.
func For(t reflect.Type) Boxer {
	if t.Kind() == reflect.Interface {
		return Boxer{t: t, iface: true}
	}
	return Boxer{t: t, typ: TypeWordOf(t), direct: Direct(t)}
}

// Type is the type Boxer boxes.
func (b Boxer) Type() reflect.Type { return b.t }

// Box returns the value of b's type at p as an interface value. For a type
// that is not pointer-shaped the interface points at p itself: the value
// at p must not change afterwards. For an interface type the result is the
// interface value at p (its dynamic value, as Go converts it to any).
func (b Boxer) Box(p unsafe.Pointer) any {
	if b.iface {
		return reflect.NewAt(b.t, p).Elem().Interface()
	}
	if b.direct {
		return Pack(b.typ, *(*unsafe.Pointer)(p))
	}
	return Pack(b.typ, p)
}

// TypeWord returns the type word of v: the Pack argument for values of v's
// dynamic type.
func TypeWord(v any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&v)).typ }

// TypeWordOf returns the type word of interfaces holding values of type t,
// as TypeWord does for such a value, without making one: a value of a
// large array type costs its size (reflect.Zero(t).Interface() of a
// [60_000_000]byte allocates 60 MB). A reflect.Type's data word is the
// runtime's type descriptor, which is what an interface's type word points
// at (TestTypeWordOf checks it against TypeWord).
func TypeWordOf(t reflect.Type) unsafe.Pointer {
	type iface struct{ tab, data unsafe.Pointer }
	return (*iface)(unsafe.Pointer(&t)).data
}

// Pack returns the interface value of type word typ and data word data:
// for a type that is not pointer-shaped, data is a pointer to the value
// (which must not change afterwards); for a pointer-shaped one, data is
// the value. Callers that know their type is not pointer-shaped (an int64,
// a string, a time.Time) use it directly; others use a Boxer.
func Pack(typ, data unsafe.Pointer) any {
	var v any
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = typ, data
	return v
}

// Direct reports whether the runtime stores values of t in an interface's
// data word itself (pointer-shaped types).
func Direct(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Array:
		return t.Len() == 1 && Direct(t.Elem())
	case reflect.Struct:
		return t.NumField() == 1 && Direct(t.Field(0).Type)
	}
	return false
}
