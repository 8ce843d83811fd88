package bqcore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	"google.golang.org/api/option/internaloption"
	htransport "google.golang.org/api/transport/http"

	"github.com/sdfio/sdfio/internal/retry"
)

// The BigQuery REST API calls of Query (the query job, its temporary
// dataset and table) and of Write (a table's metadata, CreateIfNeeded,
// schema updates, WriteTruncate's staging table and copy job) go through
// RESTClient, a small client of the documented JSON API
// (https://cloud.google.com/bigquery/docs/reference/rest), not through the
// official client's bigquery.Client: a program that links bigquery.Client
// links the whole generated REST client and what it reaches (1.9 MB of a
// read-and-write program), where these eight calls need a few hundred
// lines. The official client's
// types (bigquery.Schema, bigquery.Value, the NullX types) are still the
// package's API, and its exported schema conversions (Schema.ToJSONFields,
// SchemaFromJSON) turn schemas into the API's JSON and back.
//
// Every call is retried by the module's rule (internal/retry) as an
// idempotent call, with the backoff of WithRetries: gets and deletes are;
// an insert of a table or dataset retried after a lost answer is answered
// 409 (already exists), which its caller takes as done (the names are the
// run's own or random); a job inserted with its own job id likewise, the
// job then read back; a patch sets the same fields again.

const (
	restBase         = "https://bigquery.googleapis.com/bigquery/v2/"
	restBaseTemplate = "https://bigquery.UNIVERSE_DOMAIN/bigquery/v2/"
	restBaseMTLS     = "https://bigquery.mtls.googleapis.com/bigquery/v2/"
)

// RESTClient calls the BigQuery REST API at base with an authorized
// HTTP client.
type RESTClient struct {
	hc      *http.Client
	base    string // ends with "/"
	backoff retry.Backoff
}

// NewREST is a REST client with the options given (an endpoint, no
// authentication) over the defaults the official client uses: Google's
// endpoint and the BigQuery and cloud-platform scopes.
func NewREST(ctx context.Context, b retry.Backoff, opts ...option.ClientOption) (*RESTClient, error) {
	all := append([]option.ClientOption{
		internaloption.WithDefaultScopes("https://www.googleapis.com/auth/bigquery", "https://www.googleapis.com/auth/cloud-platform"),
		internaloption.WithDefaultEndpoint(restBase),
		internaloption.WithDefaultEndpointTemplate(restBaseTemplate),
		internaloption.WithDefaultMTLSEndpoint(restBaseMTLS),
		internaloption.EnableNewAuthLibrary(),
	}, opts...)
	hc, endpoint, err := htransport.NewClient(ctx, all...)
	if err != nil {
		return nil, fmt.Errorf("bigqueryio: creating the BigQuery REST client: %w", err)
	}
	if endpoint == "" {
		endpoint = restBase
	}
	if !strings.HasSuffix(endpoint, "/") {
		endpoint += "/"
	}
	return &RESTClient{hc: hc, base: endpoint, backoff: b}, nil
}

// MaxRESTAnswer bounds what a REST answer may hold: table metadata and
// jobs are small; a larger answer is refused, not read into memory.
const MaxRESTAnswer = 64 << 20

// call sends method to path (segments escaped by the caller: see
// restPath) with query parameters q and the JSON of in (nil for no body),
// and decodes the answer's JSON into out (nil to drop it). An answer that
// is not 2xx is a *googleapi.Error with the service's code, message and
// reasons. Transient failures are retried (see above); what names the call
// for errors.
func (c *RESTClient) call(ctx context.Context, method, path string, q url.Values, header http.Header, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	what := fmt.Sprintf("BigQuery REST %s %s", method, path)
	return retry.Do(ctx, c.backoff, retry.Idempotent, what, func(ctx context.Context) error {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err != nil {
			return err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		res, err := c.hc.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if err := googleapi.CheckResponse(res); err != nil {
			return err
		}
		if out == nil {
			return nil
		}
		b, err := io.ReadAll(io.LimitReader(res.Body, MaxRESTAnswer+1))
		if err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		if len(b) > MaxRESTAnswer {
			return fmt.Errorf("an answer over %d bytes", MaxRESTAnswer)
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decoding the answer: %w", err)
		}
		return nil
	})
}

// restPath joins the path segments, each escaped.
func restPath(segs ...string) string {
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func tablePath(project, dataset, table string) string {
	return restPath("projects", project, "datasets", dataset, "tables", table)
}

// tableResPath is the REST path of a table resource name
// (projects/p/datasets/d/tables/t).
func tableResPath(res string) string {
	p := strings.Split(res, "/")
	if len(p) != 6 {
		return restPath(res)
	}
	return tablePath(p[1], p[3], p[5])
}

// TableRef is a TableReference.
type TableRef struct {
	ProjectID string `json:"projectId"`
	DatasetID string `json:"datasetId"`
	TableID   string `json:"tableId"`
}

func (r TableRef) String() string { return r.ProjectID + ":" + r.DatasetID + "." + r.TableID }

// resource is the table's resource name.
func (r TableRef) Resource() string {
	return "projects/" + r.ProjectID + "/datasets/" + r.DatasetID + "/tables/" + r.TableID
}

func TableRefOf(res string) TableRef {
	p := strings.Split(res, "/")
	if len(p) != 6 {
		return TableRef{TableID: res}
	}
	return TableRef{ProjectID: p[1], DatasetID: p[3], TableID: p[5]}
}

// RESTSchema is a TableSchema; its fields are the JSON of
// bigquery.Schema.ToJSONFields.
type RESTSchema struct {
	Fields json.RawMessage `json:"fields"`
}

// RESTTable is the part of a Table resource the IO reads and writes. The
// partitioning, clustering, encryption and constraints travel as the
// service's JSON: a staging table takes them from its destination as
// they are.
type RESTTable struct {
	ID                      string            `json:"id,omitempty"`
	TableReference          *TableRef         `json:"tableReference,omitempty"`
	Schema                  *RESTSchema       `json:"schema,omitempty"`
	Description             string            `json:"description,omitempty"`
	Labels                  map[string]string `json:"labels,omitempty"`
	NumRows                 string            `json:"numRows,omitempty"` // uint64 as text
	Location                string            `json:"location,omitempty"`
	ETag                    string            `json:"etag,omitempty"`
	ExpirationTime          string            `json:"expirationTime,omitempty"` // ms since the epoch, as text
	TimePartitioning        json.RawMessage   `json:"timePartitioning,omitempty"`
	RangePartitioning       json.RawMessage   `json:"rangePartitioning,omitempty"`
	Clustering              json.RawMessage   `json:"clustering,omitempty"`
	EncryptionConfiguration json.RawMessage   `json:"encryptionConfiguration,omitempty"`
	TableConstraints        json.RawMessage   `json:"tableConstraints,omitempty"`
	CreationTime            string            `json:"creationTime,omitempty"` // ms since the epoch, as text; tables.get's only
}

// schema is the table's schema.
func (t *RESTTable) BQSchema() (bigquery.Schema, error) {
	if t.Schema == nil || len(t.Schema.Fields) == 0 || string(t.Schema.Fields) == "null" {
		return nil, nil
	}
	s, err := bigquery.SchemaFromJSON(t.Schema.Fields)
	if err != nil {
		return nil, fmt.Errorf("the table's schema: %w", err)
	}
	return s, nil
}

// numRows is the table's row count (0 when the answer holds none).
func (t *RESTTable) RowCount() (uint64, error) {
	if t.NumRows == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(t.NumRows, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the table's numRows %q: %w", t.NumRows, err)
	}
	return n, nil
}

// setSchema sets the table's schema.
func (t *RESTTable) SetSchema(s bigquery.Schema) error {
	b, err := s.ToJSONFields()
	if err != nil {
		return fmt.Errorf("the schema in JSON: %w", err)
	}
	t.Schema = &RESTSchema{Fields: b}
	return nil
}

// getTable is tables.get of res.
func (c *RESTClient) GetTable(ctx context.Context, res string) (*RESTTable, error) {
	var t RESTTable
	if err := c.call(ctx, http.MethodGet, tableResPath(res), nil, nil, nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// insertTable is tables.insert of t as res.
func (c *RESTClient) InsertTable(ctx context.Context, res string, t *RESTTable) error {
	ref := TableRefOf(res)
	t.TableReference = &ref
	return c.call(ctx, http.MethodPost, restPath("projects", ref.ProjectID, "datasets", ref.DatasetID, "tables"), nil, nil, t, nil)
}

// patchTable is tables.patch of res with the fields set in t; with an
// etag, only if the table's is still that (HTTP 412 otherwise).
func (c *RESTClient) PatchTable(ctx context.Context, res string, t *RESTTable, etag string) error {
	var h http.Header
	if etag != "" {
		h = http.Header{"If-Match": {etag}}
	}
	return c.call(ctx, http.MethodPatch, tableResPath(res), nil, h, t, nil)
}

// deleteTable is tables.delete of res.
func (c *RESTClient) DeleteTable(ctx context.Context, res string) error {
	return c.call(ctx, http.MethodDelete, tableResPath(res), nil, nil, nil, nil)
}

// RESTDataset is the part of a Dataset resource Query creates.
type RESTDataset struct {
	DatasetReference         DatasetRef        `json:"datasetReference"`
	Location                 string            `json:"location,omitempty"`
	DefaultTableExpirationMs string            `json:"defaultTableExpirationMs,omitempty"`
	Description              string            `json:"description,omitempty"`
	Labels                   map[string]string `json:"labels,omitempty"`
}

type DatasetRef struct {
	ProjectID string `json:"projectId"`
	DatasetID string `json:"datasetId"`
}

// insertDataset is datasets.insert of d.
func (c *RESTClient) InsertDataset(ctx context.Context, d *RESTDataset) error {
	return c.call(ctx, http.MethodPost, restPath("projects", d.DatasetReference.ProjectID, "datasets"), nil, nil, d, nil)
}

// deleteDataset is datasets.delete, with the dataset's tables.
func (c *RESTClient) DeleteDataset(ctx context.Context, project, dataset string) error {
	return c.call(ctx, http.MethodDelete, restPath("projects", project, "datasets", dataset), url.Values{"deleteContents": {"true"}}, nil, nil, nil)
}

// RESTJob is the part of a Job resource the IO sends and reads.
type RESTJob struct {
	JobReference  *JobRef    `json:"jobReference,omitempty"`
	Configuration *JobConfig `json:"configuration,omitempty"`
	Status        *JobStatus `json:"status,omitempty"`
	Statistics    *JobStats  `json:"statistics,omitempty"`
}

type JobRef struct {
	ProjectID string `json:"projectId"`
	JobID     string `json:"jobId,omitempty"`
	Location  string `json:"location,omitempty"`
}

func (r *JobRef) String() string {
	if r == nil {
		return "(no job)"
	}
	if r.Location == "" {
		return r.ProjectID + ":" + r.JobID
	}
	return r.ProjectID + ":" + r.Location + "." + r.JobID
}

type JobConfig struct {
	DryRun bool              `json:"dryRun,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Query  *JobQuery         `json:"query,omitempty"`
	Copy   *JobCopy          `json:"copy,omitempty"`
}

type JobQuery struct {
	Query             string      `json:"query"`
	UseLegacySQL      bool        `json:"useLegacySql"` // always sent: the API's default is legacy SQL
	ParameterMode     string      `json:"parameterMode,omitempty"`
	QueryParameters   []RESTParam `json:"queryParameters,omitempty"`
	DestinationTable  *TableRef   `json:"destinationTable,omitempty"`
	CreateDisposition string      `json:"createDisposition,omitempty"`
	WriteDisposition  string      `json:"writeDisposition,omitempty"`
	AllowLargeResults bool        `json:"allowLargeResults,omitempty"`
	Priority          string      `json:"priority,omitempty"`
}

type JobCopy struct {
	SourceTables                       []TableRef      `json:"sourceTables"`
	DestinationTable                   TableRef        `json:"destinationTable"`
	CreateDisposition                  string          `json:"createDisposition,omitempty"`
	WriteDisposition                   string          `json:"writeDisposition,omitempty"`
	DestinationEncryptionConfiguration json.RawMessage `json:"destinationEncryptionConfiguration,omitempty"`
}

type JobStatus struct {
	State       string       `json:"state"`
	ErrorResult *JobErrItem  `json:"errorResult,omitempty"`
	Errors      []JobErrItem `json:"errors,omitempty"`
}

type JobErrItem struct {
	Reason   string `json:"reason,omitempty"`
	Location string `json:"location,omitempty"`
	Message  string `json:"message,omitempty"`
}

type JobStats struct {
	EndTime string `json:"endTime,omitempty"` // ms since the epoch, as text
	Query   *struct {
		ReferencedTables []TableRef `json:"referencedTables,omitempty"`
	} `json:"query,omitempty"`
}

// JobError is a job that ended failed: its id and the service's error
// result (reason, location, message).
type JobError struct {
	Job                       string
	Reason, Location, Message string
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

// endTime is when the job ended, or now when it says not.
func (j *RESTJob) EndTime() time.Time {
	if j.Statistics != nil && j.Statistics.EndTime != "" {
		if ms, err := strconv.ParseInt(j.Statistics.EndTime, 10, 64); err == nil && ms > 0 {
			return time.UnixMilli(ms)
		}
	}
	return time.Now()
}

// err is the job's failure, nil when it succeeded or has not ended.
func (j *RESTJob) Err() error {
	if j.Status == nil || j.Status.ErrorResult == nil {
		return nil
	}
	e := j.Status.ErrorResult
	return &JobError{Job: j.JobReference.String(), Reason: e.Reason, Location: e.Location, Message: e.Message}
}

func (j *RESTJob) Done() bool { return j.Status != nil && j.Status.State == "DONE" }

// insertJob is jobs.insert of j in project: the job as the service took
// it. A job with an id of its own that the service already has (a retry
// whose first answer was lost, or a retried bundle) answers 409, and is
// then read back.
func (c *RESTClient) InsertJob(ctx context.Context, project string, j *RESTJob) (*RESTJob, error) {
	var out RESTJob
	err := c.call(ctx, http.MethodPost, restPath("projects", project, "jobs"), nil, nil, j, &out)
	if IsHTTP(err, http.StatusConflict) && j.JobReference != nil && j.JobReference.JobID != "" {
		return c.GetJob(ctx, project, j.JobReference.JobID, j.JobReference.Location)
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// getJob is jobs.get of the job id in project (and location, when known).
func (c *RESTClient) GetJob(ctx context.Context, project, id, location string) (*RESTJob, error) {
	var q url.Values
	if location != "" {
		q = url.Values{"location": {location}}
	}
	var out RESTJob
	if err := c.call(ctx, http.MethodGet, restPath("projects", project, "jobs", id), q, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// waitJob polls the job j until it is done, from 200 ms between polls
// growing to 5 s, and returns it done, with its failure as the error.
func (c *RESTClient) WaitJob(ctx context.Context, j *RESTJob) (*RESTJob, error) {
	wait := 200 * time.Millisecond
	for !j.Done() {
		if err := retry.Sleep(ctx, wait); err != nil {
			return j, fmt.Errorf("waiting for job %s: %w", j.JobReference, err)
		}
		wait = min(wait*3/2, 5*time.Second)
		ref := j.JobReference
		if ref == nil {
			return j, errors.New("the service answered a job without its reference")
		}
		next, err := c.GetJob(ctx, ref.ProjectID, ref.JobID, ref.Location)
		if err != nil {
			return j, fmt.Errorf("waiting for job %s: %w", ref, err)
		}
		j = next
	}
	return j, j.Err()
}

// RESTParam is a QueryParameter.
type RESTParam struct {
	Name           string          `json:"name,omitempty"`
	ParameterType  *RESTParamType  `json:"parameterType"`
	ParameterValue *RESTParamValue `json:"parameterValue"`
}

type RESTParamType struct {
	Type        string            `json:"type"`
	ArrayType   *RESTParamType    `json:"arrayType,omitempty"`
	StructTypes []RESTStructField `json:"structTypes,omitempty"`
}

type RESTStructField struct {
	Name string         `json:"name,omitempty"`
	Type *RESTParamType `json:"type"`
}

// RESTParamValue is a QueryParameterValue; Value is JSON: a string, or
// null for NULL, or absent for an array or struct.
type RESTParamValue struct {
	Value        json.RawMessage            `json:"value,omitempty"`
	ArrayValues  []*RESTParamValue          `json:"arrayValues,omitempty"`
	StructValues map[string]*RESTParamValue `json:"structValues,omitempty"`
}

// MsText is d in milliseconds, as the API's int64 text.
func MsText(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// IsHTTP reports whether err is an HTTP error of status code.
func IsHTTP(err error, code int) bool {
	var e *googleapi.Error
	return errors.As(err, &e) && e.Code == code
}

// Close closes the client's idle connections.
func (c *RESTClient) Close() { c.hc.CloseIdleConnections() }
