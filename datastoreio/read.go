package datastoreio

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/beamtypes"
)

// Namespace is the default namespace of the package's Beam metrics, reads'
// and writes' (WithMetricsNamespace sets another).
const Namespace = "sdfio/datastoreio"

// readMetrics are the Beam counters of a read, in its metrics namespace.
type readMetrics struct {
	entities, bytes, queries, pages, retries beam.Counter
	splitsAccepted, splitsRefused            beam.Counter
	initialSplits, subRanges                 beam.Counter
}

// newReadMetrics is the counters of namespace ns (Namespace when empty).
func newReadMetrics(ns string) *readMetrics {
	if ns == "" {
		ns = Namespace
	}
	c := func(name string) beam.Counter { return beam.NewCounter(ns, name) }
	return &readMetrics{
		entities: c("entities"), bytes: c("bytes"), queries: c("queries"), pages: c("pages"), retries: c("retries"),
		splitsAccepted: c("splits_accepted"), splitsRefused: c("splits_refused"),
		initialSplits: c("initial_splits"), subRanges: c("sub_ranges"),
	}
}

// Read reads the entities of q in project and returns them as a PCollection
// of t: a struct type (or a type whose pointer is a
// datastore.PropertyLoadSaver, such as datastore.PropertyList), loaded as
// the client's Get loads them; *datastore.Entity, the key and properties of
// each entity; or *datastore.Key, which reads q keys-only and emits the
// keys. A field of type *datastore.Key tagged `datastore:"__key__"`
// receives the entity's key. The package registers Beam coders for
// *datastore.Key, *datastore.Entity and datastore.PropertyList (see the
// package doc, "Generic entities"). See the package doc for how the read
// splits and which snapshot it reads. Read panics at pipeline construction
// when the project is empty, the query is invalid (Query.Validate), its
// ancestor is in another namespace than the read's, a keys-only query is
// read into anything but *datastore.Key, t cannot hold entities or is a
// named type not registered with Beam (beam.RegisterType), or the options
// cannot work (see ReadOption).
func Read(s beam.Scope, project string, q Query, t reflect.Type, opts ...ReadOption) beam.PCollection {
	s = s.Scope("datastoreio.Read")
	plan, err := planOf("datastoreio.Read", project, q, opts)
	if err != nil {
		panic(err)
	}
	if err = checkType(t); err == nil {
		err = checkKeysOnly(q, t)
	}
	if err == nil {
		err = beamtypes.Check(t, "datastoreio.RegisterType")
	}
	if err != nil {
		panic(fmt.Errorf("datastoreio.Read: %w", err))
	}
	ranges := beam.ParDo(s, plan, beam.Impulse(s))
	ranges = beam.Reshuffle(s, ranges)
	return beam.ParDo(s, &readFn{Type: beam.EncodedType{T: t}}, ranges, beam.TypeDefinition{Var: typex.XType, T: t})
}

func init() {
	rt := reflect.TypeFor[Range]()
	beam.RegisterType(rt)
	beam.RegisterCoder(rt, encodeRange, decodeRange)
	beamreg.DoFn3x1[context.Context, []byte, func(Range), error](&planFn{})
	register.Emitter1[Range]()
	beamreg.DoFn4x1[context.Context, *KeyRangeTracker, Range, func(beam.X), error](&readFn{})
	beam.RegisterType(reflect.TypeFor[*KeyRangeTracker]())
	register.Emitter1[beam.X]()
}
