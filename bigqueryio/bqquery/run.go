package bqquery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// The steps of a Query that call BigQuery's REST API: the job into a
// temporary table, and the table's removal.

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
func (q queryTemp) remove(ctx context.Context, c *bqcore.Client) error {
	var err error
	what := "table " + q.String()
	if q.OwnDataset {
		what = "dataset " + q.Project + ":" + q.Dataset + " and its table " + q.Table
		err = c.DatasetInProject(q.Project, q.Dataset).DeleteWithContents(ctx)
	} else {
		err = c.Table(q.resource()).Delete(ctx)
	}
	if err != nil && !bqcore.IsNotFound(err) {
		return fmt.Errorf("bqquery: removing the temporary %s (it expires %v after it was written): %w", what, TempExpiration, err)
	}
	return nil
}

// newBQClient is the official client of the query's REST calls, billing
// job.Billing (see bqcore.Client for which calls it retries).
func newBQClient(ctx context.Context, job bqcore.QueryJob) (*bqcore.Client, error) {
	opts, err := job.ConnOptions()
	if err != nil {
		return nil, err
	}
	return bqcore.NewClient(ctx, job.Billing, bqcore.RetryBackoff(job.MaxRetries, job.RetryBase), opts...)
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
	Job  bqcore.QueryJob
	Read []byte           // the read's configuration (bqcore.QueryPlan.Read)
	Type beam.EncodedType // the read's output type
}

func (fn *queryFn) ProcessElement(ctx context.Context, _ []byte, emit func(bigqueryio.StreamElement), temp func(queryTemp)) error {
	c, err := newBQClient(ctx, fn.Job)
	if err != nil {
		return err
	}
	defer c.Close()
	tmp, err := runQuery(ctx, c, fn.Job)
	if err != nil {
		return err
	}
	err = bqcore.QuerySide.EmitSession(ctx, fn.Read, tmp.resource(), fn.Type.T, func(se any) { emit(se.(bigqueryio.StreamElement)) })
	if err != nil {
		if rerr := tmp.remove(ctx, c); rerr != nil {
			return fmt.Errorf("%w; and then %v", err, rerr)
		}
		return err
	}
	temp(tmp)
	return nil
}

// runQuery runs the query of qc into a new temporary table, as Beam Java's
// BigQueryQueryHelper does: the location is qc's, or the one a dry run of
// the query reports (the location of its tables), or that of the first
// table the dry run lists as referenced, or none; the table is new, in a
// temporary dataset created in that location (its tables expiring after
// TempExpiration) or in the dataset WithQueryTempDataset named (the table's
// expiration set to TempExpiration once written). When the job fails, what
// runQuery created is removed and the error carries the service's message.
func runQuery(ctx context.Context, c *bqcore.Client, qc bqcore.QueryJob) (queryTemp, error) {
	qps, err := bqcore.DecodeParams(qc.Params)
	if err != nil {
		return queryTemp{}, err
	}
	params := bqcore.ClientParams(qps)
	newQuery := func() *bigquery.Query {
		q := c.Query(qc.SQL)
		q.UseLegacySQL, q.Parameters = qc.LegacySQL, params
		q.ProjectID = qc.Billing
		return q
	}
	loc := qc.Location
	if loc == "" {
		dry := newQuery()
		dry.DryRun = true
		job, err := dry.Run(ctx)
		if err != nil {
			return queryTemp{}, fmt.Errorf("bqquery: dry run of the query (to find its location) in project %s: %w", qc.Billing, err)
		}
		loc = job.Location()
		if st := job.LastStatus(); loc == "" && st != nil && st.Statistics != nil {
			if qs, ok := st.Statistics.Details.(*bigquery.QueryStatistics); ok && len(qs.ReferencedTables) > 0 {
				t := qs.ReferencedTables[0]
				ref := bqcore.TableRef{ProjectID: t.ProjectID, DatasetID: t.DatasetID, TableID: t.TableID}
				md, err := c.Table(ref.Resource()).Metadata(ctx)
				if err != nil {
					return queryTemp{}, fmt.Errorf("bqquery: the location of the query's table %s: %w", ref, err)
				}
				loc = md.Location
			}
		}
	}

	id := randomID()
	tmp := queryTemp{Project: qc.Billing, Dataset: qc.TempDataset, Table: "sdfio_query_" + id, Location: loc}
	if qc.TempDataset == "" {
		tmp.Dataset, tmp.OwnDataset = "sdfio_temp_"+id, true
		err := c.CreateDataset(ctx, tmp.Project, tmp.Dataset, &bigquery.DatasetMetadata{
			Location:               loc,
			DefaultTableExpiration: TempExpiration,
			Description:            "Temporary table of a bqquery.Query (sdfio); removed when the read ends, or expiring.",
			Labels:                 map[string]string{"sdfio": "query-temp"},
		})
		if bqcore.IsHTTP(err, http.StatusConflict) {
			err = nil // a retry's: the name is random, the dataset the first attempt's
		}
		if err != nil {
			return tmp, fmt.Errorf("bqquery: creating the temporary dataset %s:%s in location %q: %w", tmp.Project, tmp.Dataset, loc, err)
		}
	} else if _, err := c.Table(tmp.resource()).Metadata(ctx); err == nil {
		return tmp, fmt.Errorf("bqquery: refusing to write the query's result on the existing table %s", tmp)
	} else if !bqcore.IsNotFound(err) {
		return tmp, fmt.Errorf("bqquery: checking the temporary table %s: %w", tmp, err)
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
	if bqcore.IsHTTP(err, http.StatusConflict) {
		// The client retried the insert after a lost answer: the job is
		// the first attempt's.
		job, err = c.JobFromProject(ctx, qc.Billing, q.JobID, loc)
	}
	if err != nil {
		return fail(fmt.Errorf("bqquery: starting the query job %s into %s: %w", q.JobID, tmp, err))
	}
	if _, err := bqcore.WaitJob(ctx, job); err != nil {
		if !tmp.OwnDataset && bqcore.IsNotFound(err) {
			// Nothing was written; the table is not there to remove.
			return tmp, fmt.Errorf("bqquery: query job %s into %s: %w", bqcore.JobName(job), tmp, err)
		}
		return fail(fmt.Errorf("bqquery: query job %s into %s: %w", bqcore.JobName(job), tmp, err))
	}
	if !tmp.OwnDataset {
		// A dataset of the user's may have no default expiration: give the
		// table one, so that it goes away if the read never removes it.
		exp := time.Now().Add(TempExpiration)
		if _, err := c.Table(tmp.resource()).Update(ctx, bigquery.TableMetadataToUpdate{ExpirationTime: exp}, ""); err != nil {
			return fail(fmt.Errorf("bqquery: setting the expiration of the temporary table %s: %w", tmp, err))
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
	Job bqcore.QueryJob
}

func (fn *cleanupFn) ProcessElement(ctx context.Context, tmp queryTemp, done func(*int) bool) error {
	var x int
	for done(&x) {
	}
	c, err := newBQClient(ctx, fn.Job)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := tmp.remove(ctx, c); err != nil {
		return err
	}
	log.Infof(ctx, "bqquery: removed the temporary table %s of the query", tmp)
	return nil
}
