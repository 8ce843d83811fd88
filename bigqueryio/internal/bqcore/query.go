package bqcore

import (
	"context"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/api/option"
)

// A query is read in two packages: bqquery runs its job and removes its
// temporary table through BigQuery's REST API (the official
// bigquery.Client), and bigqueryio reads the result as it reads a table.
// bigqueryio cannot import bqquery (a program that reads tables would link
// the REST client, issue 38), so bqquery reaches bigqueryio's unexported
// read through QuerySide, which bigqueryio's init sets: wherever bqquery is
// linked, bigqueryio (which it imports) is too, and its init has run before
// bqquery's code does, on workers as in the launching program.

// QueryJob is what the REST steps of a query need: its job and the
// connection of its REST client. It travels in bqquery's DoFns.
type QueryJob struct {
	SQL         string
	LegacySQL   bool
	Priority    string // "", INTERACTIVE or BATCH
	Location    string // "": found by a dry run
	TempDataset string // "": the query creates and removes one
	Params      string // the parameters, EncodeParams' JSON
	Billing     string // the project the job runs in, holding the temporary table

	REST          string // the REST API's endpoint; "": Google's
	Insecure      bool
	QuotaProject  string
	ClientOptions string // names registered with RegisterClientOptions
	MaxRetries    int
	RetryBase     time.Duration
}

// ConnOptions are the job's REST client options.
func (j QueryJob) ConnOptions() ([]option.ClientOption, error) {
	return ConnOptions(j.REST, j.Insecure, false, j.QuotaProject, j.ClientOptions)
}

// QueryPlan is a query as bigqueryio checked it when the pipeline is built.
type QueryPlan struct {
	Job QueryJob
	// Read is the configuration of the result's read, opaque to bqquery:
	// it hands it back to QuerySide.EmitSession on the workers.
	Read []byte
	// ReadStreams adds the read of the result's streams (a PCollection of
	// bigqueryio.StreamElement) to s and returns its rows.
	ReadStreams func(s beam.Scope, streams beam.PCollection) beam.PCollection
}

// QuerySide is bigqueryio's side of a query, set by bigqueryio's init.
var QuerySide struct {
	// Plan checks sql, the output type t and opts (a
	// []bigqueryio.QueryOption) for transform (bqquery.Query), as Read
	// checks its own.
	Plan func(transform, sql string, t reflect.Type, opts any) (QueryPlan, error)
	// EmitSession creates the read session of table (a resource name) with
	// the configuration read (QueryPlan.Read) and emits its streams, each a
	// bigqueryio.StreamElement.
	EmitSession func(ctx context.Context, read []byte, table string, t reflect.Type, emit func(any)) error
}
