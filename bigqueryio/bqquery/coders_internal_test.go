package bqquery

import (
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/internal/codertest"
)

// crossingTypes are the types of this package that cross a PCollection
// between steps, with where (see bigqueryio's coders_test.go).
var crossingTypes = []codertest.Crossing{
	{T: reflect.TypeFor[queryTemp](), Where: "Query: queryFn's second output, cleanupFn's input"},
}

var pkgPath = reflect.TypeFor[queryTemp]().PkgPath()

// TestCrossingTypesCoded: every type crossing a PCollection that holds a
// field Beam's row coder may write as a null has the wire coder, and the
// wire coder is given to nothing else.
func TestCrossingTypesCoded(t *testing.T) { codertest.CrossingTypesCoded(t, crossingTypes, pkgPath) }

// TestWireCoderRoundTrip: every crossing type round-trips through the
// coder a worker has.
func TestWireCoderRoundTrip(t *testing.T) { codertest.WireCoderRoundTrip(t, crossingTypes) }

// coderRow is the rows of the pipeline TestPipelineCodersSafe builds.
type coderRow struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

func init() { bigqueryio.RegisterType(reflect.TypeFor[coderRow]()) }

// TestPipelineCodersSafe builds a Query and finds, in the coders of its
// proto, no row coder with a field Beam Go may write as a null its schema
// does not allow (bigqueryio's test has the negative control).
func TestPipelineCodersSafe(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	if _, err := TryQuery(s, "SELECT 1", reflect.TypeFor[coderRow](), bigqueryio.WithBillingProject("p")); err != nil {
		t.Fatal(err)
	}
	if bad := codertest.UnsafeRowCoders(t, p); len(bad) != 0 {
		t.Errorf("row coders whose nulls a runner would corrupt: %v", bad)
	}
}
