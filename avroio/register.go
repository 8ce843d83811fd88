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

	// Decimals (Avro's decimal logical type) decode into *big.Rat fields,
	// which Beam's schema coder would encode as nothing: every decimal would
	// arrive as 0 in the next stage. big.Rat's logical type keeps them.
	beamtypes.RegisterBigRat()

	// Times of every year (Avro's dates and timestamps reach far beyond
	// 0-9999, where Beam's own coder for time.Time stops) keep their exact
	// value between stages.
	registerTimeCoder()

	// Write's DoFns and types.
	beamreg.DoFn4x1[context.Context, beam.X, func(*string) bool, func(fileResult), error](&writeBundleFn{})
	beamreg.DoFn3x1[context.Context, []byte, func(string), error](&beginFn{})
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
	register.Emitter1[string]()
	register.Emitter2[int, []byte]()
	register.Iter1[[]byte]()
	register.Iter1[fileResult]()
	register.Iter1[string]()
	beam.RegisterType(reflect.TypeFor[fileResult]())
	beam.RegisterType(reflect.TypeFor[writeConfig]())
	beam.RegisterType(reflect.TypeFor[destFunc]())
}
