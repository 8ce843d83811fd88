package bqcore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/sdfio/sdfio/internal/retry"
)

// The BigQuery REST API calls of Query (the query job, its temporary
// dataset and table) and of Write (a table's metadata, CreateIfNeeded,
// schema updates, WriteTruncate's staging table and copy job) go through
// the official client, cloud.google.com/go/bigquery's Client, made by
// NewClient with the transform's client options (ConnOptions without
// gRPC: the REST endpoint, the quota project, the registered options).
// The client sends its user agent and x-goog-api-client with every call.
// Nothing of the hand-written REST client that was here before remains:
// every call it made, the library makes.
//
// Retries. These calls rely on the client's own retries (its
// retryableError: the reasons backendError and rateLimitExceeded, HTTP
// 500, 502, 503 and 504, dropped and refused connections, timeouts; with
// its backoff from 1 s to 32 s, until the context ends):
//
//   - tables.get (Table.Metadata), tables.insert (Table.Create),
//     tables.patch (Table.Update), tables.delete (Table.Delete);
//   - datasets.delete (Dataset.DeleteWithContents);
//   - jobs.insert of a job with its id (Query.Run, Copier.Run: the client
//     always sends a job reference, so every insert is retried, with the
//     job reasons jobRateLimitExceeded and internalError too); jobs.get
//     (Client.JobFromProject, Job.Status).
//
// The one call the client does not retry, datasets.insert
// (Dataset.Create), is retried by the module's rule (internal/retry), as
// an idempotent call with the backoff of WithRetries (Client.CreateDataset):
// a create retried after a lost answer is answered 409 (already exists),
// which its caller takes as done (the name is random). Likewise a table
// create retried by the client, and a job inserted again with its own id,
// answer 409: the callers take the table, and read the job back
// (JobFromProject). Waiting for a job polls jobs.get (WaitJob), each poll
// retried by the client.

// Client is the official client of a transform's REST calls, with the
// backoff of the module's rule for the call the client does not retry.
type Client struct {
	*bigquery.Client
	backoff retry.Backoff
}

// NewClient is a client billing project (jobs run in it) with the options
// given (ConnOptions' with grpcConn false) over the official client's
// defaults.
func NewClient(ctx context.Context, project string, b retry.Backoff, opts ...option.ClientOption) (*Client, error) {
	c, err := bigquery.NewClient(ctx, project, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigqueryio: creating the BigQuery client of project %s: %w", project, err)
	}
	return &Client{Client: c, backoff: b}, nil
}

// Close closes the client.
func (c *Client) Close() { c.Client.Close() }

// Table is the table of the resource name res
// (projects/p/datasets/d/tables/t).
func (c *Client) Table(res string) *bigquery.Table {
	r := TableRefOf(res)
	return c.DatasetInProject(r.ProjectID, r.DatasetID).Table(r.TableID)
}

// CreateDataset is datasets.insert of the dataset project:id, retried by
// the module's rule (the client does not retry it); a 409 (already
// exists, a retry's whose first answer was lost, or another's) is
// returned for the caller to judge.
func (c *Client) CreateDataset(ctx context.Context, project, id string, md *bigquery.DatasetMetadata) error {
	what := "BigQuery datasets.insert of " + project + ":" + id
	return retry.Do(ctx, c.backoff, retry.Idempotent, what, func(ctx context.Context) error {
		return c.DatasetInProject(project, id).Create(ctx, md)
	})
}

// TableRef names a table.
type TableRef struct {
	ProjectID, DatasetID, TableID string
}

func (r TableRef) String() string { return r.ProjectID + ":" + r.DatasetID + "." + r.TableID }

// Resource is the table's resource name.
func (r TableRef) Resource() string {
	return "projects/" + r.ProjectID + "/datasets/" + r.DatasetID + "/tables/" + r.TableID
}

// TableRefOf is the table of a resource name (projects/p/datasets/d/tables/t).
func TableRefOf(res string) TableRef {
	p := strings.Split(res, "/")
	if len(p) != 6 {
		return TableRef{TableID: res}
	}
	return TableRef{ProjectID: p[1], DatasetID: p[3], TableID: p[5]}
}

// JobError is a job that ended failed: its id and the service's error
// result (reason, location, message). It unwraps to the client's
// *bigquery.Error.
type JobError struct {
	Job                       string
	Reason, Location, Message string
	err                       error
}

func (e *JobError) Error() string {
	s := fmt.Sprintf("job %s failed: %s", e.Job, e.Message)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	if e.Location != "" {
		s += " at " + e.Location
	}
	return s
}

func (e *JobError) Unwrap() error { return e.err }

// JobName names a job in messages: project:location.id.
func JobName(j *bigquery.Job) string {
	if j.Location() == "" {
		return j.ProjectID() + ":" + j.ID()
	}
	return j.ProjectID() + ":" + j.Location() + "." + j.ID()
}

// JobErr is the failure of a job that ended, as a *JobError naming it
// (nil when it succeeded or has not ended).
func JobErr(j *bigquery.Job, st *bigquery.JobStatus) error {
	if st == nil || st.Err() == nil {
		return nil
	}
	je := &JobError{Job: JobName(j), err: st.Err()}
	var be *bigquery.Error
	if errors.As(st.Err(), &be) {
		je.Reason, je.Location, je.Message = be.Reason, be.Location, be.Message
	} else {
		je.Message = st.Err().Error()
	}
	return je
}

// WaitJob polls the job j (jobs.get in its project and location, each
// call retried by the client) until it is done, from 200 ms between polls
// growing to 5 s, and returns its last status, with the job's failure as
// the error (a *JobError). An error reading the status is returned as it
// is, wrapped naming the job, with a nil status: the job's outcome is then
// unknown.
func WaitJob(ctx context.Context, j *bigquery.Job) (*bigquery.JobStatus, error) {
	st := j.LastStatus()
	wait := 200 * time.Millisecond
	for st == nil || !st.Done() {
		if st != nil {
			if err := retry.Sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("waiting for job %s: %w", JobName(j), err)
			}
			wait = min(wait*3/2, 5*time.Second)
		}
		var err error
		if st, err = j.Status(ctx); err != nil {
			return nil, fmt.Errorf("waiting for job %s: %w", JobName(j), err)
		}
	}
	return st, JobErr(j, st)
}

// EndTime is when the job of status st ended, or now when it says not.
func EndTime(st *bigquery.JobStatus) time.Time {
	if st != nil && st.Statistics != nil && !st.Statistics.EndTime.IsZero() {
		return st.Statistics.EndTime
	}
	return time.Now()
}

// IsHTTP reports whether err is an HTTP error of status code.
func IsHTTP(err error, code int) bool {
	var e *googleapi.Error
	return errors.As(err, &e) && e.Code == code
}

// IsNotFound reports a 404 answer, or a job that failed notFound.
func IsNotFound(err error) bool {
	var je *JobError
	return IsHTTP(err, http.StatusNotFound) || errors.As(err, &je) && je.Reason == "notFound"
}
