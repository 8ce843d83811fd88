package bigqueryio

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"

	"github.com/sdfio/sdfio/internal/beamtypes"
)

// RegisterType registers t, a struct type of rows (or a pointer to one),
// with Beam, as beam.RegisterType does, and gives t a coder of its own
// when it holds a field type Beam's own coder cannot carry between stages:
// big.Rat (NUMERIC, BIGNUMERIC as *big.Rat), a struct of unexported fields
// that Beam would encode as nothing, every decimal arriving as 0; and
// civil.Date (DATE, and DATETIME, NullDate, NullDateTime through it). The
// coder is Beam's schema row coder of t with those fields stored as their
// exact text (big.Rat, "num/den") or numbers (civil.Date), and time.Time
// exact to the nanosecond and in every year. It changes the encoding of t
// only: the program's other PCollections of time.Time, *big.Rat, civil
// types and structs holding them are encoded as Beam encodes them. Call it
// in an init function, in place of beam.RegisterType: Read, Query and
// Write refuse a type holding such a field that has no coder of its own.
// It is the same registration as avroio's and datastoreio's RegisterType.
func RegisterType(t reflect.Type) { beamtypes.Register(t) }

// checkCoder refuses output types whose values Beam could not encode,
// naming the field: every field of a struct Read fills must survive the
// coder between stages.
func checkCoder(t reflect.Type) error {
	if t == typeOfRow {
		return nil
	}
	if coder.LookupCustomCoder(t) == nil {
		if _, err := schema.FromType(t); err != nil {
			return fmt.Errorf("Beam cannot encode %s, so its rows could not leave the read's stage: %w", t, err)
		}
	}
	return beamtypes.Check(t, "bigqueryio.RegisterType")
}
