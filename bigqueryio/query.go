package bigqueryio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/api/option"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
	"github.com/sdfio/sdfio/internal/beamreg"
)

// TempExpiration is how long the temporary table of a Query lives if the
// read never removes it (a worker or the pipeline died): the default table
// expiration of the temporary dataset Query creates, or the expiration time
// Query sets on its table in a dataset of yours. Beam Java uses the same day.
const TempExpiration = 24 * time.Hour

// queryConfig is what Query adds to a read's configuration.
type queryConfig struct {
	SQL         string
	LegacySQL   bool
	Priority    string // "", INTERACTIVE or BATCH
	Location    string // "": found by a dry run
	TempDataset string // "": Query creates and removes one
	REST        string // the BigQuery REST API's endpoint; "": Google's
}

// restOptions are the options of Query's REST client.
func (c readConfig) restOptions() ([]option.ClientOption, error) {
	return connOptions(c.Query.REST, c.Insecure, false, c.QuotaProject, c.ClientOptions)
}

func init() {
	beamreg.DoFn4x1[context.Context, []byte, func(StreamElement), func(queryTemp), error](&queryFn{})
	register.Emitter1[queryTemp]()
	beamreg.DoFn2x0[beam.X, func(int)](&readDoneFn{})
	register.Emitter1[int]()
	beamreg.DoFn3x1[context.Context, queryTemp, func(*int) bool, error](&cleanupFn{})
	register.Iter1[int]()
	beam.RegisterType(reflect.TypeOf((*queryTemp)(nil)).Elem())
}

// Query runs a query when the pipeline runs and reads its result through
// the Storage Read API, as Read reads a table, into a PCollection of t: a
// struct type or bigqueryio.Row, as for Read (see the package doc for how
// it runs). The query is standard SQL (WithLegacySQL for legacy SQL), with
// the parameters of WithQueryParameters. WithBillingProject is required:
// the query job runs in, and is billed to, that project, which also holds
// the temporary table. The SessionOptions apply as for Read; WithLegacySQL,
// WithQueryLocation, WithQueryPriority, WithQueryTempDataset,
// WithQueryParameters and WithRESTEndpoint are Query's own (QueryOption).
// Query panics, when the pipeline is built, where TryQuery returns an
// error: an empty SQL text, a missing billing project, a type it cannot
// fill or one not registered with Beam, options that contradict each other
// or hold values that cannot work.
func Query(s beam.Scope, sql string, t reflect.Type, opts ...QueryOption) beam.PCollection {
	return must(TryQuery(s, sql, t, opts...))
}

// TryQuery is Query returning the errors of construction instead of
// panicking.
func TryQuery(s beam.Scope, sql string, t reflect.Type, opts ...QueryOption) (beam.PCollection, error) {
	cfg, err := newQueryConfig(opts)
	if err != nil {
		return beam.PCollection{}, err
	}
	cfg.Query.SQL = strings.TrimSpace(sql)
	switch {
	case cfg.Query.SQL == "":
		return beam.PCollection{}, errors.New("bigqueryio.Query: an empty SQL text")
	case cfg.Billing == "":
		return beam.PCollection{}, errors.New("bigqueryio.Query: needs WithBillingProject (the project its job runs in, holding its temporary table)")
	case cfg.Query.LegacySQL && cfg.QueryParams != "":
		return beam.PCollection{}, fmt.Errorf("bigqueryio.Query: %s with WithLegacySQL(): legacy SQL takes no parameters", cfg.last("WithQueryParameters"))
	case cfg.Query.Priority != "" && cfg.Query.Priority != string(bigquery.InteractivePriority) && cfg.Query.Priority != string(bigquery.BatchPriority):
		return beam.PCollection{}, fmt.Errorf("bigqueryio.Query: %s: query priority %q is neither INTERACTIVE nor BATCH", cfg.last("WithQueryPriority"), cfg.Query.Priority)
	case cfg.Query.TempDataset != "" && strings.ContainsAny(cfg.Query.TempDataset, ".:/"):
		return beam.PCollection{}, fmt.Errorf("bigqueryio.Query: %s: the temporary dataset must be a dataset id of the billing project", cfg.last("WithQueryTempDataset"))
	}
	if err := checkOutputType(t, cfg, "Query"); err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("bigqueryio.Query")
	imp := beam.Impulse(s)
	streams, temps := beam.ParDo2(s, &queryFn{Cfg: cfg, Type: beam.EncodedType{T: t}}, imp)
	rows := readStreams(s, cfg, t, streams)
	// Remove the temporary table once every stream is read: the cleanup
	// takes, as a side input, a PCollection that is complete only when the
	// read is (as Beam Java's PassThroughThenCleanup does).
	done := beam.ParDo(s.Scope("done"), &readDoneFn{}, rows)
	beam.ParDo0(s.Scope("cleanup"), &cleanupFn{Cfg: cfg}, temps, beam.SideInput{Input: done})
	return rows, nil
}

// queryTemp is the temporary table a query wrote its result into.
type queryTemp struct {
	Project, Dataset, Table, Location string
	OwnDataset                        bool // Query created the dataset: remove it with its contents
}

func (q queryTemp) String() string {
	return fmt.Sprintf("%s:%s.%s (location %s)", q.Project, q.Dataset, q.Table, q.Location)
}

func (q queryTemp) resource() string {
	return fmt.Sprintf("projects/%s/datasets/%s/tables/%s", q.Project, q.Dataset, q.Table)
}

// remove deletes the temporary table, or the temporary dataset with it. A
// table or dataset already gone (a retried bundle removed it) is no error.
func (q queryTemp) remove(ctx context.Context, c *restClient) error {
	var err error
	what := "table " + q.String()
	if q.OwnDataset {
		what = "dataset " + q.Project + ":" + q.Dataset + " and its table " + q.Table
		err = c.DatasetInProject(q.Project, q.Dataset).DeleteWithContents(ctx)
	} else {
		err = c.Table(q.resource()).Delete(ctx)
	}
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("bigqueryio: removing the temporary %s (it expires %v after it was written): %w", what, TempExpiration, err)
	}
	return nil
}

// newBQClient is the official client of the query's REST calls, billing
// cfg.Billing (see bqcore.Client for which calls it retries).
func newBQClient(ctx context.Context, cfg readConfig) (*restClient, error) {
	opts, err := cfg.restOptions()
	if err != nil {
		return nil, err
	}
	return newBQ(ctx, cfg.Billing, retryBackoff(cfg.MaxRetries, cfg.RetryBase), opts...)
}

func randomID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// queryFn runs the query into a temporary table when the pipeline runs,
// creates the read session of that table and emits its streams, and the
// temporary table for the cleanup.
type queryFn struct {
	Cfg  readConfig
	Type beam.EncodedType // the read's output type
}

func (fn *queryFn) ProcessElement(ctx context.Context, _ []byte, emit func(StreamElement), temp func(queryTemp)) error {
	c, err := newBQClient(ctx, fn.Cfg)
	if err != nil {
		return err
	}
	tmp, err := runQuery(ctx, c, fn.Cfg)
	if err != nil {
		return err
	}
	cfg := fn.Cfg
	cfg.Table = tmp.resource()
	if err := emitSession(ctx, cfg, fn.Type.T, emit); err != nil {
		if rerr := tmp.remove(ctx, c); rerr != nil {
			return fmt.Errorf("%w; and then %v", err, rerr)
		}
		return err
	}
	temp(tmp)
	return nil
}

// runQuery runs cfg's query into a new temporary table, as Beam Java's
// BigQueryQueryHelper does: the location is cfg's, or the one a dry run of
// the query reports (the location of its tables), or that of the first
// table the dry run lists as referenced, or none; the table is new, in a
// temporary dataset created in that location (its tables expiring after
// TempExpiration) or in the dataset WithQueryTempDataset named (the table's
// expiration set to TempExpiration once written). When the job fails, what
// runQuery created is removed and the error carries the service's message.
func runQuery(ctx context.Context, c *restClient, cfg readConfig) (queryTemp, error) {
	qc := cfg.Query
	qps, err := decodeParams(cfg.QueryParams)
	if err != nil {
		return queryTemp{}, err
	}
	params := clientParams(qps)
	newQuery := func() *bigquery.Query {
		q := c.Query(qc.SQL)
		q.UseLegacySQL, q.Parameters = qc.LegacySQL, params
		q.ProjectID = cfg.Billing
		return q
	}
	loc := qc.Location
	if loc == "" {
		dry := newQuery()
		dry.DryRun = true
		job, err := dry.Run(ctx)
		if err != nil {
			return queryTemp{}, fmt.Errorf("bigqueryio: dry run of the query (to find its location) in project %s: %w", cfg.Billing, err)
		}
		loc = job.Location()
		if st := job.LastStatus(); loc == "" && st != nil && st.Statistics != nil {
			if qs, ok := st.Statistics.Details.(*bigquery.QueryStatistics); ok && len(qs.ReferencedTables) > 0 {
				t := qs.ReferencedTables[0]
				ref := tableRef{ProjectID: t.ProjectID, DatasetID: t.DatasetID, TableID: t.TableID}
				md, err := c.Table(ref.Resource()).Metadata(ctx)
				if err != nil {
					return queryTemp{}, fmt.Errorf("bigqueryio: the location of the query's table %s: %w", ref, err)
				}
				loc = md.Location
			}
		}
	}

	id := randomID()
	tmp := queryTemp{Project: cfg.Billing, Dataset: qc.TempDataset, Table: "sdfio_query_" + id, Location: loc}
	if qc.TempDataset == "" {
		tmp.Dataset, tmp.OwnDataset = "sdfio_temp_"+id, true
		err := c.CreateDataset(ctx, tmp.Project, tmp.Dataset, &bigquery.DatasetMetadata{
			Location:               loc,
			DefaultTableExpiration: TempExpiration,
			Description:            "Temporary table of a bigqueryio.Query (sdfio); removed when the read ends, or expiring.",
			Labels:                 map[string]string{"sdfio": "query-temp"},
		})
		if isHTTP(err, http.StatusConflict) {
			err = nil // a retry's: the name is random, the dataset the first attempt's
		}
		if err != nil {
			return tmp, fmt.Errorf("bigqueryio: creating the temporary dataset %s:%s in location %q: %w", tmp.Project, tmp.Dataset, loc, err)
		}
	} else if _, err := c.Table(tmp.resource()).Metadata(ctx); err == nil {
		return tmp, fmt.Errorf("bigqueryio: refusing to write the query's result on the existing table %s", tmp)
	} else if !isNotFound(err) {
		return tmp, fmt.Errorf("bigqueryio: checking the temporary table %s: %w", tmp, err)
	}

	fail := func(err error) (queryTemp, error) {
		if rerr := tmp.remove(ctx, c); rerr != nil {
			return tmp, fmt.Errorf("%w; and then %v", err, rerr)
		}
		return tmp, err
	}
	q := newQuery()
	// The job's id is the table's name: easy to find; an insert retried
	// with it is idempotent.
	q.JobID, q.Location = "sdfio_query_"+id, loc
	q.Labels = map[string]string{"sdfio": "query"}
	q.Dst = c.DatasetInProject(tmp.Project, tmp.Dataset).Table(tmp.Table)
	q.CreateDisposition, q.WriteDisposition = bigquery.CreateIfNeeded, bigquery.WriteTruncate
	q.AllowLargeResults = qc.LegacySQL // legacy SQL writes a large result to a table only so
	q.Priority = bigquery.QueryPriority(qc.Priority)
	job, err := q.Run(ctx)
	if isHTTP(err, http.StatusConflict) {
		// The client retried the insert after a lost answer: the job is
		// the first attempt's.
		job, err = c.JobFromProject(ctx, cfg.Billing, q.JobID, loc)
	}
	if err != nil {
		return fail(fmt.Errorf("bigqueryio: starting the query job %s into %s: %w", q.JobID, tmp, err))
	}
	if _, err := bqcore.WaitJob(ctx, job); err != nil {
		if !tmp.OwnDataset && isNotFound(err) {
			// Nothing was written; the table is not there to remove.
			return tmp, fmt.Errorf("bigqueryio: query job %s into %s: %w", bqcore.JobName(job), tmp, err)
		}
		return fail(fmt.Errorf("bigqueryio: query job %s into %s: %w", bqcore.JobName(job), tmp, err))
	}
	if !tmp.OwnDataset {
		// A dataset of the user's may have no default expiration: give the
		// table one, so that it goes away if the read never removes it.
		exp := time.Now().Add(TempExpiration)
		if _, err := c.Table(tmp.resource()).Update(ctx, bigquery.TableMetadataToUpdate{ExpirationTime: exp}, ""); err != nil {
			return fail(fmt.Errorf("bigqueryio: setting the expiration of the temporary table %s: %w", tmp, err))
		}
	}
	return tmp, nil
}

// readDoneFn emits nothing: its output is complete when the read is, which
// is all the cleanup waits for.
type readDoneFn struct{}

func (readDoneFn) ProcessElement(_ beam.X, _ func(int)) {}

// cleanupFn removes the temporary table once the read is done.
type cleanupFn struct {
	Cfg readConfig
}

func (fn *cleanupFn) ProcessElement(ctx context.Context, tmp queryTemp, done func(*int) bool) error {
	var x int
	for done(&x) {
	}
	c, err := newBQClient(ctx, fn.Cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := tmp.remove(ctx, c); err != nil {
		return err
	}
	log.Infof(ctx, "bigqueryio: removed the temporary table %s of the query", tmp)
	return nil
}
