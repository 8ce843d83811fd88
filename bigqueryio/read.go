package bigqueryio

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
	"github.com/sdfio/sdfio/internal/beamreg"
)

// Namespace is the default Beam metrics namespace of Read and Query
// (WithMetricsNamespace sets another): rows (rows emitted), bytes
// (serialized rows received), streams (of the read sessions created),
// splits_accepted and splits_refused (dynamic splits of running stream
// reads), retries (ReadRows calls retried).
const Namespace = "sdfio/bigqueryio"

func init() {
	beamreg.DoFn3x1[context.Context, []byte, func(StreamElement), error](&sessionFn{})
	register.Emitter1[StreamElement]()
	beamreg.DoFn4x1[context.Context, *StreamTracker, StreamElement, func(beam.X), error](&readStreamFn{})
	register.Emitter1[beam.X]()
	beam.RegisterType(reflect.TypeOf((*StreamElement)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*StreamRestriction)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*StreamTracker)(nil)))
	beam.RegisterType(reflect.TypeOf((*sessionInfo)(nil)).Elem())
	// sessionInfo.Arrow is nil in Avro sessions: Beam's coder would not
	// carry it.
	bqcore.RegisterWire(reflect.TypeFor[StreamElement]())
}

// Read reads a BigQuery table through the Storage Read API into a
// PCollection of t: a struct type filled as the official client's
// RowIterator fills structs, or bigqueryio.Row (see docs/BIGQUERY.md,
// "Output").
// table is project.dataset.table or project:dataset.table. Read panics,
// when the pipeline is built, where TryRead returns an error: a bad table
// name, a type it cannot fill, one not registered with Beam
// (beam.RegisterType) or one Beam cannot encode, options that contradict
// each other or hold values that cannot work.
func Read(s beam.Scope, table string, t reflect.Type, opts ...ReadOption) beam.PCollection {
	return must(TryRead(s, table, t, opts...))
}

// TryRead is Read returning the errors of construction instead of
// panicking.
func TryRead(s beam.Scope, table string, t reflect.Type, opts ...ReadOption) (beam.PCollection, error) {
	cfg, err := newConfig("bigqueryio.Read", table, opts)
	if err != nil {
		return beam.PCollection{}, err
	}
	if err := checkOutputType(t, cfg, "bigqueryio: Read of "+table); err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("bigqueryio.Read")
	imp := beam.Impulse(s)
	streams := beam.ParDo(s, &sessionFn{Cfg: cfg, Type: beam.EncodedType{T: t}}, imp)
	return readStreams(s, cfg, t, streams), nil
}

// checkOutputType refuses an output type that a read could not fill or
// Beam could not carry, and struct fields that cannot match a column;
// what begins its errors.
func checkOutputType(t reflect.Type, cfg readConfig, what string) error {
	if t == nil || t.Kind() != reflect.Struct && t != typeOfRow {
		return fmt.Errorf("%s needs a struct type or bigqueryio.Row, got %v", what, t)
	}
	if err := checkType(t, cfg.fieldRules()); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := checkCoder(t); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// readStreams reads the rows of a PCollection of StreamElement into values
// of t.
func readStreams(s beam.Scope, cfg readConfig, t reflect.Type, streams beam.PCollection) beam.PCollection {
	// Streams are few and small: spread them over workers, rows never go
	// through a shuffle.
	streams = beam.Reshuffle(s, streams)
	return beam.ParDo(s, &readStreamFn{Cfg: cfg, Type: beam.EncodedType{T: t}}, streams, beam.TypeDefinition{Var: beam.XType, T: t})
}

// newConfig is the configuration of a read of table with opts, checked;
// transform names it in errors.
func newConfig(transform, table string, opts []ReadOption) (readConfig, error) {
	res, err := tableResource(table)
	if err != nil {
		return readConfig{}, err
	}
	return newReadConfig(transform, res, opts)
}
