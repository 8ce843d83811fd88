package datastoreio_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/internal/workertest"
)

// genericProps are the properties of generic entity i: every value type
// Datastore stores, as the client loads them back (times in UTC
// microseconds, NaN as Go's), nested entities and arrays, NoIndex flags.
func genericProps(ns string, i int) datastore.PropertyList {
	ref := datastore.NameKey("Ref\U0001f600", fmt.Sprintf("r%d", i), nil)
	ref.Namespace = ns
	return datastore.PropertyList{
		{Name: "N", Value: int64(i)},
		{Name: "b", Value: i%2 == 0},
		{Name: "s", Value: fmt.Sprintf("s\x00\ue000%d", i)},
		{Name: "long", Value: strings.Repeat("x", 2000), NoIndex: true},
		{Name: "nan", Value: math.NaN()},
		{Name: "inf", Value: math.Inf(-1)},
		{Name: "f", Value: float64(i) / 3},
		{Name: "blob", Value: []byte{0, byte(i), 255}, NoIndex: true},
		{Name: "t", Value: time.Date(2026, 11, 30, 1, 2, 3, i*1000, time.UTC)},
		{Name: "geo", Value: datastore.GeoPoint{Lat: -45.5, Lng: float64(i % 180)}},
		{Name: "ref", Value: ref},
		{Name: "null", Value: nil},
		{Name: "e", Value: &datastore.Entity{Properties: []datastore.Property{
			{Name: "inner", Value: int64(-i)},
			{Name: "deeper", Value: &datastore.Entity{Properties: []datastore.Property{{Name: "x", Value: "y", NoIndex: true}}}},
		}}},
		{Name: "arr", Value: []interface{}{int64(1), "two", 3.5}},
	}
}

// describeProps shows properties in a canonical order, floats by their bits
// (NaN as NaN), so that two lists compare as strings.
func describeProps(props []datastore.Property) string {
	props = slices.Clone(props)
	slices.SortFunc(props, func(a, b datastore.Property) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	for _, p := range props {
		fmt.Fprintf(&b, "%s(noindex=%v)=%s;", p.Name, p.NoIndex, describeValue(p.Value))
	}
	return b.String()
}

func describeValue(v any) string {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) {
			return "float:NaN"
		}
		return fmt.Sprintf("float:%x", math.Float64bits(x))
	case *datastore.Entity:
		if x == nil {
			return "entity:nil"
		}
		return fmt.Sprintf("entity:%v{%s}", x.Key, describeProps(x.Properties))
	case []interface{}:
		var parts []string
		for _, e := range x {
			parts = append(parts, describeValue(e))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *datastore.Key:
		if x == nil {
			return "key:nil"
		}
		return "key:" + x.Namespace + "|" + x.String()
	case time.Time:
		return "time:" + x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// genericGenFn emits KV<*datastore.Key, *datastore.PropertyList>, the form
// the package doc names for generic entities.
type genericGenFn struct {
	NS   string
	Kind string
	N    int
}

func (fn *genericGenFn) ProcessElement(_ []byte, emit func(*datastore.Key, *datastore.PropertyList)) {
	for i := range fn.N {
		k := datastore.IDKey(fn.Kind, int64(i+1), nil)
		k.Namespace = fn.NS
		pl := genericProps(fn.NS, i)
		emit(k, &pl)
	}
}

// withEntity is a struct with generic parts: an entity-valued property
// into *datastore.Entity and one into datastore.PropertyList, which Beam
// codes as schema fields (logical types).
type withEntity struct {
	K *datastore.Key `datastore:"__key__"`
	N int64
	E *datastore.Entity
	L datastore.PropertyList
}

// withEntityGenFn emits withEntity values.
type withEntityGenFn struct {
	NS string
	N  int
}

func makeWithEntity(ns string, i int) withEntity {
	k := datastore.IDKey("GenS", int64(i+1), nil)
	k.Namespace = ns
	props := genericProps(ns, i)
	// The client saves these fields as structs (Properties, Name, Value,
	// NoIndex), not as entity values, so NoIndex does not apply: no long
	// string.
	return withEntity{K: k, N: int64(i), E: &datastore.Entity{Properties: props[:3]}, L: props[4:]}
}

func (fn *withEntityGenFn) ProcessElement(_ []byte, emit func(withEntity)) {
	for i := range fn.N {
		emit(makeWithEntity(fn.NS, i))
	}
}

func init() {
	register.DoFn2x0[[]byte, func(*datastore.Key, *datastore.PropertyList)](&genericGenFn{})
	register.Emitter2[*datastore.Key, *datastore.PropertyList]()
	register.Function1x1(entityDesc)
	register.Function1x1(propertyListDesc)
	register.Function1x1(withEntityDesc)
	register.DoFn2x0[[]byte, func(withEntity)](&withEntityGenFn{})
	register.Emitter1[withEntity]()
	datastoreio.RegisterType(reflect.TypeFor[withEntity]())
}

func entityDesc(e *datastore.Entity) string {
	return e.Key.Namespace + "|" + e.Key.String() + "|" + describeProps(e.Properties)
}

// propertyListDesc takes what a read into datastore.PropertyList emits:
// Beam Go makes the element type of a named slice the unnamed one.
func propertyListDesc(pl []datastore.Property) string { return describeProps(pl) }

func withEntityDesc(w withEntity) string {
	return fmt.Sprintf("%s|%d|%s|%s", w.K.String(), w.N, describeValue(w.E), describeProps(w.L))
}

// TestGenericEntitiesTravel writes KV<*datastore.Key,
// *datastore.PropertyList> and structs with *datastore.Entity and
// datastore.PropertyList fields, each through a Reshuffle (so that the
// values are encoded between stages), and reads them back as
// *datastore.Entity, as datastore.PropertyList and into the struct, each
// through a Reshuffle and passert's grouping (encoded again): every
// property arrives with its type, value and NoIndex flag.
func TestGenericEntitiesTravel(t *testing.T) {
	e, c := client(t)
	ns := dstest.Namespace(t)
	const n = 20
	p, s := beam.NewPipelineWithRoot()
	kvs := beam.Reshuffle(s, beam.ParDo(s, &genericGenFn{NS: ns, Kind: "Gen", N: n}, beam.Impulse(s)))
	datastoreio.Write(s, e.Project(), kvs, datastoreio.WithRampupThrottlingDisabled())
	structs := beam.Reshuffle(s, beam.ParDo(s, &withEntityGenFn{NS: ns, N: n}, beam.Impulse(s)))
	datastoreio.Write(s, e.Project(), structs, datastoreio.WithRampupThrottlingDisabled())
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	// What the official client reads back is what was written.
	var got []datastore.PropertyList
	keys, err := c.GetAll(context.Background(), datastore.NewQuery("Gen").Namespace(ns), &got)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d entities written, want %d", len(got), n)
	}
	var wantEnt, wantPL, wantStruct []any
	for i, k := range keys {
		want := genericProps(ns, int(k.ID-1))
		if g, w := describeProps(got[i]), describeProps(want); g != w {
			t.Fatalf("entity %v read back as\n%s\nwant\n%s", k, g, w)
		}
		wantEnt = append(wantEnt, ns+"|"+k.String()+"|"+describeProps(want))
		wantPL = append(wantPL, describeProps(want))
		wantStruct = append(wantStruct, withEntityDesc(makeWithEntity(ns, i)))
	}

	p, s = beam.NewPipelineWithRoot()
	opts := []datastoreio.ReadOption{datastoreio.WithNamespace(ns), datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(2)}
	ents := datastoreio.Read(s, e.Project(), datastoreio.NewQuery("Gen"), reflect.TypeFor[*datastore.Entity](), opts...)
	passert.Equals(s, beam.ParDo(s, entityDesc, beam.Reshuffle(s, ents)), wantEnt...)
	pls := datastoreio.Read(s, e.Project(), datastoreio.NewQuery("Gen"), reflect.TypeFor[datastore.PropertyList](), opts...)
	passert.Equals(s, beam.ParDo(s, propertyListDesc, beam.Reshuffle(s, pls)), wantPL...)
	back := datastoreio.Read(s, e.Project(), datastoreio.NewQuery("GenS"), reflect.TypeFor[withEntity](), opts...)
	passert.Equals(s, beam.ParDo(s, withEntityDesc, beam.Reshuffle(s, back)), wantStruct...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// refusedGenFn emits N generic entities of Kind, entity Bad with a
// property the service refuses (a reserved name).
type refusedGenFn struct {
	NS   string
	Kind string
	N    int
	Bad  int
}

func (fn *refusedGenFn) ProcessElement(_ []byte, emit func(*datastore.Key, *datastore.PropertyList)) {
	for i := range fn.N {
		k := datastore.IDKey(fn.Kind, int64(i+1), nil)
		k.Namespace = fn.NS
		pl := datastore.PropertyList{{Name: "N", Value: int64(i)}}
		if i == fn.Bad {
			pl = append(pl, datastore.Property{Name: "__reserved__", Value: int64(1)})
		}
		emit(k, &pl)
	}
}

func init() {
	register.DoFn2x0[[]byte, func(*datastore.Key, *datastore.PropertyList)](&refusedGenFn{})
}

// TestWriteRefusedEntityNamed: the emulator refuses a commit of 40
// entities for one entity's reserved property name, saying so without
// naming the entity; the pipeline fails naming that entity's key and the
// service's words on the property, not the batch's first keys, and the
// commit is not retried as it is.
func TestWriteRefusedEntityNamed(t *testing.T) {
	project, _ := wEmulator(t)
	ns := dstest.Namespace(t)
	wHook.reset(nil)
	p, s := beam.NewPipelineWithRoot()
	datastoreio.Write(s, project, beam.ParDo(s, &refusedGenFn{NS: ns, Kind: "WBad", N: 40, Bad: 26}, beam.Impulse(s)),
		datastoreio.WithRampupThrottlingDisabled(), datastoreio.WithClientOptions("wHook"), datastoreio.WithCommitRetries(5, time.Hour))
	err := workertest.RunFailing(t, p)
	if err == nil {
		t.Fatal("the pipeline succeeded")
	}
	for _, want := range []string{"namespace " + ns + ", kind WBad, key WBad,27 alone is refused", `"__reserved__"`, "InvalidArgument", "commit of 40 upsert mutations"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "WBad,1,") || strings.Contains(err.Error(), "WBad,1 ") {
		t.Errorf("error names the batch's first key: %v", err)
	}
	// One refused commit, then at most 2*log2(40) parts.
	if commits, _, _, _ := wHook.snapshot(); commits > 1+12 {
		t.Errorf("%d commits: retried?", commits)
	}
}
