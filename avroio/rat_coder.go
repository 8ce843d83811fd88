package avroio

import (
	"fmt"
	"io"
	"math/big"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
)

// Decimals (Avro's decimal logical type) decode into big.Rat or *big.Rat
// fields of a struct. Beam's schema coder sees big.Rat as a struct of
// unexported fields and would encode nothing of it: every decimal would
// arrive as 0 in the next stage, with no error. Registered here as a
// schema logical type stored as its exact text ("num/den"), a big.Rat field
// (and *big.Rat, []*big.Rat, map[string]*big.Rat, ... through Beam's
// pointer, slice and map handling; nil stays nil) keeps its value between
// stages. time.Time has such a logical type in Beam itself; the other
// types hamba/avro maps Avro types to are plain Go numbers, strings,
// slices, maps, arrays and structs of exported fields, which Beam's schema
// coder keeps as they are.
var (
	ratType        = reflect.TypeFor[big.Rat]()
	ratStorageType = reflect.TypeFor[struct{ RatText string }]()
)

// ratLogicalTypeID identifies the logical type in pipeline protos.
const ratLogicalTypeID = "sdfio.avroio.BigRat"

func registerRatCoder() {
	schema.RegisterLogicalType(schema.ToLogicalType(ratLogicalTypeID, ratType, ratStorageType))
	coder.RegisterSchemaProviders(ratType, ratSchemaEnc, ratSchemaDec)
}

func ratSchemaEnc(reflect.Type) (func(any, io.Writer) error, error) {
	return func(v any, w io.Writer) error {
		r := v.(big.Rat)
		if err := coder.WriteSimpleRowHeader(1, w); err != nil {
			return fmt.Errorf("avroio: encoding a big.Rat: %w", err)
		}
		return coder.EncodeStringUTF8(r.RatString(), w)
	}, nil
}

func ratSchemaDec(reflect.Type) (func(io.Reader) (any, error), error) {
	return func(rd io.Reader) (any, error) {
		if err := coder.ReadSimpleRowHeader(1, rd); err != nil {
			return nil, fmt.Errorf("avroio: decoding a big.Rat: %w", err)
		}
		s, err := coder.DecodeStringUTF8(rd)
		if err != nil {
			return nil, fmt.Errorf("avroio: decoding a big.Rat: %w", err)
		}
		var r big.Rat
		if _, ok := r.SetString(s); !ok {
			return nil, fmt.Errorf("avroio: decoding a big.Rat: bad text %q", s)
		}
		return r, nil
	}, nil
}
