package bqquery

import (
	"context"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
	"github.com/sdfio/sdfio/internal/beamreg"
)

// TempExpiration is how long the temporary table of a Query lives if the
// read never removes it (a worker or the pipeline died): the default table
// expiration of the temporary dataset Query creates, or the expiration time
// Query sets on its table in a dataset of yours. Beam Java uses the same day.
const TempExpiration = 24 * time.Hour

func init() {
	beamreg.DoFn4x1[context.Context, []byte, func(bigqueryio.StreamElement), func(queryTemp), error](&queryFn{})
	register.Emitter1[queryTemp]()
	beamreg.DoFn2x0[beam.X, func(int)](&readDoneFn{})
	register.Emitter1[int]()
	beamreg.DoFn3x1[context.Context, queryTemp, func(*int) bool, error](&cleanupFn{})
	register.Iter1[int]()
	beam.RegisterType(reflect.TypeOf((*queryTemp)(nil)).Elem())
}

// Query runs a query when the pipeline runs and reads its result through
// the Storage Read API, as bigqueryio.Read reads a table, into a
// PCollection of t: a struct type or bigqueryio.Row, as for Read. The query
// is standard SQL (bigqueryio.WithLegacySQL for legacy SQL), with the
// parameters of bigqueryio.WithQueryParameters.
// bigqueryio.WithBillingProject is required: the query job runs in, and is
// billed to, that project, which also holds the temporary table. Query
// panics, when the pipeline is built, where TryQuery returns an error: an
// empty SQL text, a missing billing project, a type it cannot fill or one
// not registered with Beam, options that contradict each other or hold
// values that cannot work.
func Query(s beam.Scope, sql string, t reflect.Type, opts ...bigqueryio.QueryOption) beam.PCollection {
	return bqcore.Must(TryQuery(s, sql, t, opts...))
}

// TryQuery is Query returning the errors of construction instead of
// panicking.
func TryQuery(s beam.Scope, sql string, t reflect.Type, opts ...bigqueryio.QueryOption) (beam.PCollection, error) {
	plan, err := bqcore.QuerySide.Plan("bqquery.Query", sql, t, opts)
	if err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("bqquery.Query")
	imp := beam.Impulse(s)
	streams, temps := beam.ParDo2(s, &queryFn{Job: plan.Job, Read: plan.Read, Type: beam.EncodedType{T: t}}, imp)
	rows := plan.ReadStreams(s, streams)
	// Remove the temporary table once every stream is read: the cleanup
	// takes, as a side input, a PCollection that is complete only when the
	// read is (as Beam Java's PassThroughThenCleanup does).
	done := beam.ParDo(s.Scope("done"), &readDoneFn{}, rows)
	beam.ParDo0(s.Scope("cleanup"), &cleanupFn{Job: plan.Job}, temps, beam.SideInput{Input: done})
	return rows, nil
}
