package bigqueryio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// The read side of bqquery.Query: the checks of its options when the
// pipeline is built, and the read session of its result, which bqquery
// reaches through bqcore.QuerySide. Its REST steps (the query job, the
// temporary table) are bqquery's: a program that only reads tables links
// none of them.

func init() {
	bqcore.QuerySide.Plan = planQuery
	bqcore.QuerySide.EmitSession = emitQuerySession
}

// queryConfig is what the options of a query add to a read's configuration.
type queryConfig struct {
	SQL         string
	LegacySQL   bool
	Priority    string // "", INTERACTIVE or BATCH
	Location    string // "": found by a dry run
	TempDataset string // "": the query creates and removes one
	REST        string // the BigQuery REST API's endpoint; "": Google's
}

// planQuery checks a query of sql into t with opts (a []QueryOption) for
// transform, when the pipeline is built.
func planQuery(transform, sql string, t reflect.Type, opts any) (bqcore.QueryPlan, error) {
	qopts, ok := opts.([]QueryOption)
	if !ok {
		return bqcore.QueryPlan{}, fmt.Errorf("%s: options of type %T, want []bigqueryio.QueryOption", transform, opts)
	}
	cfg, err := newQueryConfig(transform, qopts)
	if err != nil {
		return bqcore.QueryPlan{}, err
	}
	cfg.Query.SQL = strings.TrimSpace(sql)
	switch {
	case cfg.Query.SQL == "":
		return bqcore.QueryPlan{}, fmt.Errorf("%s: an empty SQL text", transform)
	case cfg.Billing == "":
		return bqcore.QueryPlan{}, fmt.Errorf("%s: needs WithBillingProject (the project its job runs in, holding its temporary table)", transform)
	case cfg.Query.LegacySQL && cfg.QueryParams != "":
		return bqcore.QueryPlan{}, fmt.Errorf("%s: %s with WithLegacySQL(): legacy SQL takes no parameters", transform, cfg.last("WithQueryParameters"))
	case cfg.Query.Priority != "" && cfg.Query.Priority != string(bigquery.InteractivePriority) && cfg.Query.Priority != string(bigquery.BatchPriority):
		return bqcore.QueryPlan{}, fmt.Errorf("%s: %s: query priority %q is neither INTERACTIVE nor BATCH", transform, cfg.last("WithQueryPriority"), cfg.Query.Priority)
	case cfg.Query.TempDataset != "" && strings.ContainsAny(cfg.Query.TempDataset, ".:/"):
		return bqcore.QueryPlan{}, fmt.Errorf("%s: %s: the temporary dataset must be a dataset id of the billing project", transform, cfg.last("WithQueryTempDataset"))
	}
	if err := checkOutputType(t, cfg, transform); err != nil {
		return bqcore.QueryPlan{}, err
	}
	read, err := json.Marshal(cfg)
	if err != nil {
		return bqcore.QueryPlan{}, fmt.Errorf("%s: encoding the read's configuration: %w", transform, err)
	}
	q := cfg.Query
	return bqcore.QueryPlan{
		Job: bqcore.QueryJob{
			SQL: q.SQL, LegacySQL: q.LegacySQL, Priority: q.Priority, Location: q.Location,
			TempDataset: q.TempDataset, Params: cfg.QueryParams, Billing: cfg.Billing,
			REST: q.REST, Insecure: cfg.Insecure, QuotaProject: cfg.QuotaProject,
			ClientOptions: cfg.ClientOptions, MaxRetries: cfg.MaxRetries, RetryBase: cfg.RetryBase,
		},
		Read: read,
		ReadStreams: func(s beam.Scope, streams beam.PCollection) beam.PCollection {
			return readStreams(s, cfg, t, streams)
		},
	}, nil
}

// emitQuerySession creates the read session of a query's result table with
// the configuration planQuery encoded, and emits its streams.
func emitQuerySession(ctx context.Context, read []byte, table string, t reflect.Type, emit func(any)) error {
	var cfg readConfig
	if err := json.Unmarshal(read, &cfg); err != nil {
		return fmt.Errorf("bigqueryio: decoding a query's read configuration: %w", err)
	}
	if table == "" {
		return errors.New("bigqueryio: a query's result table has no name")
	}
	cfg.Table = table
	return emitSession(ctx, cfg, t, func(se StreamElement) { emit(se) })
}
