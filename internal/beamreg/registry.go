package beamreg

import (
	"reflect"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
)

const unreachable = "beamreg: the function registered for its caller is never called"

// lifecycleMethods are the methods of a DoFn, other than ProcessElement,
// that the struct wrapper gives Beam, as register's does.
var lifecycleMethods = [...]string{"Setup", "StartBundle", "FinishBundle", "Teardown"}

// LifecycleMethods returns the names of the lifecycle methods that the
// struct wrapper of a DoFn registered here gives Beam when the DoFn has
// them: Setup, StartBundle, FinishBundle and Teardown.
func LifecycleMethods() []string { return append([]string(nil), lifecycleMethods[:]...) }

var (
	mu         sync.Mutex
	registered []reflect.Type
	seen       = map[reflect.Type]bool{}
	hook       func(doFn reflect.Type, method string)
)

// DoFns returns the struct types of the DoFns registered through this
// package so far (by the init functions of the packages linked), in the
// order of registration.
func DoFns() []reflect.Type {
	mu.Lock()
	defer mu.Unlock()
	return append([]reflect.Type(nil), registered...)
}

// SetLifecycleHook makes Beam's calls of the lifecycle methods of the
// DoFns registered here call h first, with the DoFn's struct type and the
// method's name. It is for tests: call it from an init function of the
// test binary, so that worker processes started from the same binary call
// it too, before any pipeline runs. nil removes it.
func SetLifecycleHook(h func(doFn reflect.Type, method string)) {
	mu.Lock()
	defer mu.Unlock()
	hook = h
}

// wrap registers doFn's type, the struct types of its ProcessElement's
// parameters and results, and a struct wrapper whose ProcessElement is
// the method value that method returns, called through the caller
// registered for its function type, and whose lifecycle entries are the
// DoFn's lifecycle methods.
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
		m := map[string]reflectx.Func{"ProcessElement": reflectx.MakeFunc(method(fn))}
		v := reflect.ValueOf(fn)
		for _, name := range lifecycleMethods {
			if mv := v.MethodByName(name); mv.IsValid() {
				m[name] = reflectx.MakeFunc(lifecycleCall(t, name, mv))
			}
		}
		return m
	})
	mu.Lock()
	defer mu.Unlock()
	if !seen[t] {
		seen[t] = true
		registered = append(registered, t)
	}
}

// lifecycleCall is the method value mv, through the hook when one is set.
func lifecycleCall(t reflect.Type, name string, mv reflect.Value) any {
	mu.Lock()
	h := hook
	mu.Unlock()
	if h == nil {
		return mv.Interface()
	}
	return reflect.MakeFunc(mv.Type(), func(args []reflect.Value) []reflect.Value {
		h(t, name)
		return mv.Call(args)
	}).Interface()
}

// registerStruct registers a struct parameter or result type as register
// does (v2.78): with the schema registry, and with the type registry only
// when it is named.
func registerStruct(t reflect.Type) {
	t = reflectx.SkipPtr(t)
	if t.Kind() != reflect.Struct {
		return
	}
	if _, ok := runtime.TypeKey(t); ok {
		runtime.RegisterType(t)
	}
	schema.RegisterType(t)
}
