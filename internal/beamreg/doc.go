// Package beamreg registers the module's DoFns with Beam as Beam's
// register package does, for a fraction of the binary size.
//
// register.DoFnNxM registers a DoFn's type (and the struct types of its
// ProcessElement's parameters) with Beam's type registry and schema
// registry, a reflection-free caller for ProcessElement, and callers for
// StartBundle, FinishBundle, Setup and Teardown. The last are built by a
// type switch over every signature those methods may have, instantiated
// for each DoFn registered: with Beam's reflection-driven linking (graph.NewFn
// calls reflect.Value.Method, so every exported method of those generic
// types stays), each register.DoFnNxM call costs about 1 MB of machine code
// and 5 MB of binary. A program that only reads Avro files linked 17 of
// them (avroio's writes and watches among them), against the 9 of the same
// program on Beam Go's own avroio.
//
// DoFnNxM here registers the same types and ProcessElement's caller (the
// same caller: register.FunctionNxM's for ProcessElement's function type,
// found by reflectx.MakeFunc), and leaves the lifecycle methods to Beam's
// reflection fallback (graph.NewFn calls them through reflect.Value.Method
// when a DoFn's struct wrapper has no caller for them): they run once per
// bundle or per DoFn instance, where a reflective call costs nothing that
// shows. Workers find every DoFn registered, as with register: the
// registration is in the same init functions.
package beamreg

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
)

const unreachable = "beamreg: the function registered for its caller is never called"

// wrap registers doFn's type, the struct types of its ProcessElement's
// parameters and results, and a struct wrapper whose ProcessElement is
// the method value that method returns, called through the caller
// registered for its function type.
func wrap(doFn any, method func(fn any) any) {
	t := reflect.TypeOf(doFn).Elem()
	runtime.RegisterType(t)
	schema.RegisterType(t)
	pe := reflect.ValueOf(doFn).MethodByName("ProcessElement").Type()
	for i := 0; i < pe.NumIn(); i++ {
		registerStruct(pe.In(i))
	}
	for i := 0; i < pe.NumOut(); i++ {
		registerStruct(pe.Out(i))
	}
	reflectx.RegisterStructWrapper(t, func(fn any) map[string]reflectx.Func {
		return map[string]reflectx.Func{"ProcessElement": reflectx.MakeFunc(method(fn))}
	})
}

func registerStruct(t reflect.Type) {
	t = reflectx.SkipPtr(t)
	if t.Kind() == reflect.Struct {
		runtime.RegisterType(t)
		schema.RegisterType(t)
	}
}
