// Package typewalk answers whether a Go type holds, anywhere in its
// values, a type a predicate picks: through pointers, slices, arrays, map
// keys and values and struct fields, each type visited once (recursive
// types end).
package typewalk

import "reflect"

// Holds reports whether t, or a type its values hold, satisfies pick.
func Holds(t reflect.Type, pick func(reflect.Type) bool) bool {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type) bool
	walk = func(t reflect.Type) bool {
		if pick(t) {
			return true
		}
		if seen[t] {
			return false
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			return walk(t.Elem())
		case reflect.Map:
			return walk(t.Key()) || walk(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				if walk(t.Field(i).Type) {
					return true
				}
			}
		}
		return false
	}
	return walk(t)
}
