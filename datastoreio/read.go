package datastoreio

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/sdf"
)

// Namespace is the namespace of the package's Beam metrics.
const Namespace = "sdfio/datastoreio"

var (
	entitiesCounter       = beam.NewCounter(Namespace, "entities")
	bytesCounter          = beam.NewCounter(Namespace, "bytes")
	queriesCounter        = beam.NewCounter(Namespace, "queries")
	pagesCounter          = beam.NewCounter(Namespace, "pages")
	retriesCounter        = beam.NewCounter(Namespace, "retries")
	splitsAcceptedCounter = beam.NewCounter(Namespace, "splits_accepted")
	splitsRefusedCounter  = beam.NewCounter(Namespace, "splits_refused")
	rangesCounter         = beam.NewCounter(Namespace, "initial_splits")
	subRangesCounter      = beam.NewCounter(Namespace, "sub_ranges")
)

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
// read into anything but *datastore.Key, or t cannot hold entities.
func Read(s beam.Scope, project string, q Query, t reflect.Type, opts ...Option) beam.PCollection {
	s = s.Scope("datastoreio.Read")
	plan, err := planOf(project, q, opts)
	if err == nil {
		err = checkType(t)
	}
	if err == nil {
		err = checkKeysOnly(q, t)
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
	register.DoFn3x1[context.Context, []byte, func(Range), error](&planFn{})
	register.Emitter1[Range]()
	register.DoFn4x1[context.Context, *sdf.Tracker, Range, func(beam.X), error](&readFn{})
	register.Emitter1[beam.X]()
}
