// Package beamtypes registers, once per process, the Beam schema logical
// types that sdfio's readers need for field types Beam's schema coder
// cannot keep on its own.
//
// math/big.Rat is a struct of unexported fields: without a logical type
// Beam's schema coder encodes nothing of it, and every decimal (Avro's
// decimal, BigQuery's NUMERIC and BIGNUMERIC) arrives as 0 in the next
// stage, with no error. RegisterBigRat stores it as its exact text
// ("num/den"); big.Rat, *big.Rat and slices and maps of them (nil stays
// nil, through Beam's pointer, slice and map handling) keep their values
// between stages.
package beamtypes

import (
	"fmt"
	"io"
	"math/big"
	"reflect"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
)

// BigRatLogicalTypeID identifies big.Rat's logical type in pipeline protos.
const BigRatLogicalTypeID = "sdfio.BigRat"

var (
	ratType        = reflect.TypeFor[big.Rat]()
	ratStorageType = reflect.TypeFor[struct{ RatText string }]()
	ratOnce        sync.Once
)

// RegisterBigRat registers big.Rat's schema logical type and its coder.
// It is safe to call more than once (from every package's init).
func RegisterBigRat() {
	ratOnce.Do(func() {
		schema.RegisterLogicalType(schema.ToLogicalType(BigRatLogicalTypeID, ratType, ratStorageType))
		coder.RegisterSchemaProviders(ratType, ratSchemaEnc, ratSchemaDec)
	})
}

func ratSchemaEnc(reflect.Type) (func(any, io.Writer) error, error) {
	return func(v any, w io.Writer) error {
		r := v.(big.Rat)
		if err := coder.WriteSimpleRowHeader(1, w); err != nil {
			return fmt.Errorf("encoding a big.Rat: %w", err)
		}
		return coder.EncodeStringUTF8(r.RatString(), w)
	}, nil
}

func ratSchemaDec(reflect.Type) (func(io.Reader) (any, error), error) {
	return func(rd io.Reader) (any, error) {
		if err := coder.ReadSimpleRowHeader(1, rd); err != nil {
			return nil, fmt.Errorf("decoding a big.Rat: %w", err)
		}
		s, err := coder.DecodeStringUTF8(rd)
		if err != nil {
			return nil, fmt.Errorf("decoding a big.Rat: %w", err)
		}
		var r big.Rat
		if _, ok := r.SetString(s); !ok {
			return nil, fmt.Errorf("decoding a big.Rat: bad text %q", s)
		}
		return r, nil
	}, nil
}
