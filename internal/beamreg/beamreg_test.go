package beamreg_test

import (
	"context"
	"os"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/testtmp"
)

// Pair is a struct parameter: DoFn registers it too.
type Pair struct {
	K string
	V int
}

// lifeFn has every lifecycle method, which run by reflection.
type lifeFn struct {
	Add int
	set bool
}

var started, finished atomic.Int64

func (f *lifeFn) Setup()                                       { f.set = true }
func (f *lifeFn) StartBundle(ctx context.Context, _ func(int)) { started.Add(1) }
func (f *lifeFn) FinishBundle(ctx context.Context, _ func(int)) error {
	finished.Add(1)
	return nil
}
func (f *lifeFn) Teardown() {}
func (f *lifeFn) ProcessElement(p Pair, emit func(int)) error {
	if !f.set {
		panic("Setup was not called")
	}
	emit(p.V + f.Add)
	return nil
}

type twoFn struct{}

func (twoFn) ProcessElement(x string) (string, int) { return x, len(x) }

// anonFn takes an unnamed struct, which has no type key: register (v2.78)
// gives it to the schema registry only, and so does beamreg.
type anonFn struct{}

func (anonFn) ProcessElement(p struct{ N int }) int { return p.N }

func init() {
	beamreg.DoFn2x1[Pair, func(int), error](&lifeFn{})
	beamreg.DoFn1x2[string, string, int](&twoFn{})
	beamreg.DoFn1x1[struct{ N int }, int](&anonFn{})
	register.Emitter1[int]()
}

func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}

// TestWrapperIsReflectionFree: the struct wrapper's ProcessElement is a
// caller with its arity's call method (not Beam's reflection shim), and it
// calls the DoFn; the wrapper has the DoFn's lifecycle methods too, as
// register's does, and nothing else.
func TestWrapperIsReflectionFree(t *testing.T) {
	m, ok := reflectx.WrapMethods(&lifeFn{Add: 1, set: true})
	if !ok {
		t.Fatal("no struct wrapper registered")
	}
	pe, ok := m["ProcessElement"].(reflectx.Func2x1)
	if !ok {
		t.Fatalf("ProcessElement is a %T, want a reflectx.Func2x1", m["ProcessElement"])
	}
	var got int
	if err := pe.Call2x1(Pair{"a", 41}, func(v int) { got = v }); err != nil || got != 42 {
		t.Fatalf("Call2x1: %v, emitted %d", err, got)
	}
	var names []string
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"FinishBundle", "ProcessElement", "Setup", "StartBundle", "Teardown"}; !slices.Equal(names, want) {
		t.Errorf("wrapper methods %v, want %v", names, want)
	}
	m, _ = reflectx.WrapMethods(&twoFn{})
	if len(m) != 1 {
		t.Errorf("twoFn's wrapper has %d methods, want ProcessElement only", len(m))
	}
	if k, n := m["ProcessElement"].(reflectx.Func1x2).Call1x2("abc"); k != "abc" || n != 3 {
		t.Errorf("Call1x2: %v %v", k, n)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[lifeFn](), reflect.TypeFor[Pair](), reflect.TypeFor[twoFn]()} {
		if _, ok := beamTypeRegistered(typ); !ok {
			t.Errorf("%v is not registered with Beam", typ)
		}
	}
}

// TestPipeline: a DoFn registered here runs on Prism, its lifecycle methods
// called.
func TestPipeline(t *testing.T) {
	started.Store(0)
	finished.Store(0)
	p, s := beam.NewPipelineWithRoot()
	out := beam.ParDo(s, &lifeFn{Add: 10}, beam.Create(s, Pair{"a", 1}, Pair{"b", 2}))
	passert.Equals(s, out, 11, 12)
	ptest.RunAndValidate(t, p)
	if started.Load() == 0 || finished.Load() != started.Load() {
		t.Errorf("StartBundle %d times, FinishBundle %d", started.Load(), finished.Load())
	}
}

// TestUnnamedStructParameter: an unnamed struct parameter is registered
// as register (v2.78) registers it, with the schema registry only (Beam's
// type registry has no key for it and panicked at registration before),
// and the DoFn runs on it.
func TestUnnamedStructParameter(t *testing.T) {
	if _, ok := runtime.TypeKey(reflect.TypeFor[struct{ N int }]()); ok {
		t.Fatal("an unnamed struct has a type key: the test no longer tests anything")
	}
	p, s := beam.NewPipelineWithRoot()
	in := beam.Create(s, struct{ N int }{3}, struct{ N int }{4})
	passert.Equals(s, beam.ParDo(s, &anonFn{}, in), 3, 4)
	ptest.RunAndValidate(t, p)
}

// TestDoFnsListsRegistered: DoFns lists every DoFn registered here, in
// order.
func TestDoFnsListsRegistered(t *testing.T) {
	got := beamreg.DoFns()
	want := []reflect.Type{reflect.TypeFor[lifeFn](), reflect.TypeFor[twoFn](), reflect.TypeFor[anonFn]()}
	if !slices.Equal(got, want) {
		t.Errorf("DoFns() = %v, want %v", got, want)
	}
}

func beamTypeRegistered(t reflect.Type) (reflect.Type, bool) {
	k, ok := runtime.TypeKey(t)
	if !ok {
		return nil, false
	}
	return runtime.LookupType(k)
}
