package avroio

import (
	"context"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/beamtypes"
	"github.com/sdfio/sdfio/offsetsource/filesource"
)

// The package's one init: everything the workers must find registered.
func init() {
	// Reads: package filesource's DoFns and types for this format.
	filesource.Register[beam.X, format]()
	beam.RegisterType(reflect.TypeFor[sourceSettings]())

	// Generic records keep every value and type between stages.
	beam.RegisterCoder(RecordType, encodeRecord, decodeRecord)

	// Write's DoFns and types.
	beamreg.DoFn3x1[context.Context, beam.X, func(fileResult), error](&writeBundleFn{})
	beamreg.DoFn3x1[context.Context, []byte, func([]byte), error](&beginFn{})
	beamreg.DoFn3x1[context.Context, beam.X, func(int, []byte), error](&shardFn{})
	beamreg.DoFn2x0[[]byte, func(int, []byte)](&shardMarkersFn{})
	beamreg.DoFn4x1[context.Context, int, func(*[]byte) bool, func(fileResult), error](&writeShardFn{})
	beamreg.DoFn4x1[context.Context, []byte, func(*fileResult) bool, func(string), error](&finalizeFn{})
	beamreg.DoFn3x1[context.Context, beam.X, func(string, []byte), error](&windowShardFn{})
	beamreg.DoFn6x1[context.Context, typex.PaneInfo, typex.Window, string, func(*[]byte) bool, func(string), error](&writeWindowFn{})
	beamreg.DoFn4x1[context.Context, beam.X, func(string, []byte), func(string), error](&destShardFn{})
	beamreg.DoFn4x1[context.Context, string, func(*[]byte) bool, func(fileResult), error](&writeDestShardFn{})
	beamreg.DoFn5x1[context.Context, []byte, func(*fileResult) bool, func(*string) bool, func(string), error](&finalizeDestsFn{})
	register.Emitter2[string, []byte]()
	register.Emitter1[fileResult]()
	register.Emitter1[[]byte]()
	register.Emitter1[string]()
	register.Emitter2[int, []byte]()
	register.Iter1[[]byte]()
	register.Iter1[fileResult]()
	register.Iter1[string]()
	beam.RegisterType(reflect.TypeFor[fileResult]())
	beam.RegisterType(reflect.TypeFor[writeConfig]())
	beam.RegisterType(reflect.TypeFor[destFunc]())
}

// RegisterType registers t, a record type (a struct or a pointer to one),
// with Beam, as beam.RegisterType does, and gives t a coder of its own
// when it holds a field type that Beam's own coder cannot carry between
// stages: a decimal (*big.Rat, which Beam would encode as nothing, every
// decimal arriving as 0), a civil.Date, a Datastore key. The coder is
// Beam's schema row coder of t with big.Rat stored as its exact text
// ("num/den"), civil.Date as its three numbers, and time.Time exact in
// every year and zone offset (Avro's dates and timestamps reach far beyond
// the years 0-9999 of Beam's own coder of time.Time, which fails on them).
// It changes the encoding of t only: the program's other PCollections of
// time.Time, *big.Rat, civil types and structs holding them are encoded as
// Beam encodes them. Call it in an init function, in place of
// beam.RegisterType: Read and Write refuse a type holding such a field
// that has no coder of its own, naming the field. It is the same
// registration as bigqueryio's and datastoreio's RegisterType.
func RegisterType(t reflect.Type) { beamtypes.Register(t) }
