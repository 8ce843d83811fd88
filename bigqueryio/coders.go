package bigqueryio

import (
	"fmt"
	"io"
	"reflect"
	"time"

	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"

	"github.com/sdfio/sdfio/internal/beamtypes"
)

// Beam's schema coder, which encodes the structs Read emits, cannot keep
// two of the types the struct fields may have:
//
//   - big.Rat (NUMERIC, BIGNUMERIC as *big.Rat) is a struct of unexported
//     fields: it would be encoded as nothing and arrive as 0, with no error;
//   - civil.Date (DATE, and DATETIME, NullDate, NullDateTime through it)
//     has a time.Month field, a named integer type the schema coder refuses.
//
// Both are registered as schema logical types: big.Rat stored as its exact
// text ("num/den", package internal/beamtypes, shared with avroio),
// civil.Date as its three numbers. time.Time has a
// logical type in Beam itself (its binary marshalling, exact to the
// nanosecond); civil.Time, the bigquery.NullX types, nested structs, pointers
// and slices of them are structs of exported fields the schema coder keeps.
var (
	dateType        = reflect.TypeOf(civil.Date{})
	dateStorageType = reflect.TypeOf(struct{ Year, Month, Day int64 }{})
)

func init() {
	beamtypes.RegisterBigRat()
	schema.RegisterLogicalType(schema.ToLogicalType("sdfio.bigqueryio.CivilDate", dateType, dateStorageType))
	coder.RegisterSchemaProviders(dateType, dateSchemaEnc, dateSchemaDec)
}

func dateSchemaEnc(reflect.Type) (func(any, io.Writer) error, error) {
	return func(v any, w io.Writer) error {
		d := v.(civil.Date)
		if err := coder.WriteSimpleRowHeader(3, w); err != nil {
			return fmt.Errorf("bigqueryio: encoding a civil.Date: %w", err)
		}
		for _, n := range []int64{int64(d.Year), int64(d.Month), int64(d.Day)} {
			if err := coder.EncodeVarInt(n, w); err != nil {
				return fmt.Errorf("bigqueryio: encoding a civil.Date: %w", err)
			}
		}
		return nil
	}, nil
}

func dateSchemaDec(reflect.Type) (func(io.Reader) (any, error), error) {
	return func(rd io.Reader) (any, error) {
		if err := coder.ReadSimpleRowHeader(3, rd); err != nil {
			return nil, fmt.Errorf("bigqueryio: decoding a civil.Date: %w", err)
		}
		var p [3]int64
		for i := range p {
			n, err := coder.DecodeVarInt(rd)
			if err != nil {
				return nil, fmt.Errorf("bigqueryio: decoding a civil.Date: %w", err)
			}
			p[i] = n
		}
		return civil.Date{Year: int(p[0]), Month: time.Month(p[1]), Day: int(p[2])}, nil
	}, nil
}

// checkCoder refuses output types whose values Beam could not encode,
// naming the field: every field of a struct Read fills must survive the
// schema coder between stages.
func checkCoder(t reflect.Type) error {
	if t == typeOfRow {
		return nil
	}
	if _, err := schema.FromType(t); err != nil {
		return fmt.Errorf("Beam cannot encode %s, so its rows could not leave the read's stage: %w", t, err)
	}
	return nil
}
