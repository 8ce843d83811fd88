package bqtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	bq "google.golang.org/api/bigquery/v2"
)

// QueryResult is what a query job gives: the table its rows are written
// into, or the error the service fails it with.
type QueryResult struct {
	// Table is the query's result, its schema and rows. A job writes it
	// into its destination table, which the Storage Read server then serves
	// like any table.
	Table
	// Location is where the query's source tables are ("US" when empty). A
	// dry run reports it as the job's location; a job, or a destination
	// dataset, in another location fails with notFound, as the service fails
	// a query that reads tables in another region.
	Location string
	// Err, when not empty, fails the query with this message (reason
	// invalidQuery): a dry run answers HTTP 400, a job ends DONE with it as
	// its error result.
	Err string
	// DryRunWithoutLocation makes a dry run answer with no location in its
	// job reference, as for a query the service cannot place by itself.
	DryRunWithoutLocation bool
	// ReferencedTables are the tables (project.dataset.table) a dry run
	// reports the query reads (statistics.query.referencedTables).
	ReferencedTables []string
}

// QueryJob is a query job the REST server received.
type QueryJob struct {
	Project, JobID string
	// Location is where the job ran: the location the request named, or
	// else the query's (QueryResult.Location).
	Location string
	// RequestLocation is the location the jobs.insert request named in its
	// job reference, "" for none.
	RequestLocation string
	SQL             string
	LegacySQL       bool
	Priority        string // INTERACTIVE, BATCH, or "" (the service's default, INTERACTIVE)
	DryRun          bool
	Destination     string // projects/p/datasets/d/tables/t, or "" for none
	Err             string // the error the job failed with, "" if it succeeded
	// Parameters are the query's parameters as the job received them, in
	// order; ParameterMode is NAMED (all named), POSITIONAL (none named)
	// or "" (no parameters). A job whose text refers to a parameter it was
	// not given (@name, or more or fewer ? marks than positional
	// parameters), or whose parameters mix the two kinds, or that has
	// parameters in legacy SQL, fails as the service fails it. Use them in
	// SetQueryFunc to give a result that depends on them.
	Parameters    []QueryParameter
	ParameterMode string
}

// Dataset is a dataset created through the REST server (datasets.insert).
type Dataset struct {
	Project, ID     string
	Location        string
	TableExpiration time.Duration // defaultTableExpirationMs
	Description     string
	Labels          map[string]string
}

// queryState is the REST server's state for query jobs, under Server.mu.
type queryState struct {
	results  map[string]QueryResult // by SQL text
	fn       func(QueryJob) QueryResult
	datasets map[string]*Dataset // by projects/p/datasets/d
	jobs     map[string]*job     // by projects/p/jobs/id
	order    []*job
}

type job struct {
	QueryJob
	copy       bool // a copy job (copy.go); QueryJob holds its project, id, location and error
	schema     bq.TableSchema
	rows       int
	noLocation bool                 // a dry run answering without a location
	referenced []*bq.TableReference // a dry run's referenced tables
}

// AddQuery makes query jobs whose SQL text is sql (compared after trimming
// white space) give r.
func (s *Server) AddQuery(sql string, r QueryResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.results == nil {
		s.q.results = map[string]QueryResult{}
	}
	s.q.results[strings.TrimSpace(sql)] = r
}

// SetQueryFunc answers the query jobs whose SQL text AddQuery did not
// define: f gets the job (its SQL, dialect, location, priority) and returns
// its result. Without it, such a job fails with invalidQuery.
func (s *Server) SetQueryFunc(f func(QueryJob) QueryResult) {
	s.mu.Lock()
	s.q.fn = f
	s.mu.Unlock()
}

// AddDataset defines an empty dataset, as one a user made for
// bigqueryio.WithQueryTempDataset (location "US" when empty).
func (s *Server) AddDataset(project, id, location string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.datasets == nil {
		s.q.datasets = map[string]*Dataset{}
	}
	s.q.datasets["projects/"+project+"/datasets/"+id] = &Dataset{Project: project, ID: id, Location: locationOr(location)}
}

// Jobs returns the query jobs received so far, dry runs included, in order.
func (s *Server) Jobs() []QueryJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]QueryJob, len(s.q.order))
	for i, j := range s.q.order {
		out[i] = j.QueryJob
	}
	return out
}

// Datasets returns the datasets created through datasets.insert that exist
// now (not deleted), sorted by project and id.
func (s *Server) Datasets() []Dataset {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Dataset, 0, len(s.q.datasets))
	for _, d := range s.q.datasets {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Project+"/"+out[i].ID < out[j].Project+"/"+out[j].ID })
	return out
}

// Tables returns the resource names (projects/p/datasets/d/tables/t) of the
// tables that exist now, sorted: those AddTable defined and those query jobs
// wrote, less those deleted.
func (s *Server) Tables() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tables))
	for name := range s.tables {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func locationOr(l string) string {
	if l == "" {
		return "US"
	}
	return l
}

// serveQueryREST answers the calls of a query job into a destination table:
// datasets insert, get and delete; jobs insert and get; getQueryResults;
// tables delete. p is the path after /bigquery/v2/, split at '/'.
func (s *Server) serveQueryREST(w http.ResponseWriter, r *http.Request, p []string) bool {
	if len(p) < 3 || p[0] != "projects" {
		return false
	}
	proj := p[1]
	switch {
	case len(p) == 3 && p[2] == "datasets" && r.Method == http.MethodPost:
		s.insertDataset(w, r, proj)
	case len(p) == 4 && p[2] == "datasets" && r.Method == http.MethodGet:
		s.getDataset(w, proj, p[3])
	case len(p) == 4 && p[2] == "datasets" && r.Method == http.MethodDelete:
		s.deleteDataset(w, proj, p[3], r.URL.Query().Get("deleteContents") == "true")
	case len(p) == 6 && p[2] == "datasets" && p[4] == "tables" && r.Method == http.MethodDelete:
		s.deleteTable(w, strings.Join(p, "/"), proj, p[3], p[5])
	case len(p) == 6 && p[2] == "datasets" && p[4] == "tables" && r.Method == http.MethodPatch:
		s.patchTable(w, r, strings.Join(p, "/"), proj, p[3], p[5])
	case len(p) == 3 && p[2] == "jobs" && r.Method == http.MethodPost:
		s.insertJob(w, r, proj)
	case len(p) == 4 && p[2] == "jobs" && r.Method == http.MethodGet:
		s.getJob(w, r, proj, p[3])
	case len(p) == 4 && p[2] == "queries" && r.Method == http.MethodGet:
		s.getQueryResults(w, r, proj, p[3])
	default:
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// restErrorReason writes an error response as the service does, with a
// reason (notFound, duplicate, invalidQuery, resourceInUse, invalid).
func restErrorReason(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": code, "message": msg,
		"errors": []map[string]string{{"reason": reason, "message": msg}},
	}})
}

func datasetJSON(d *Dataset) *bq.Dataset {
	out := &bq.Dataset{
		Id:               d.Project + ":" + d.ID,
		DatasetReference: &bq.DatasetReference{ProjectId: d.Project, DatasetId: d.ID},
		Location:         d.Location,
		Description:      d.Description,
		Labels:           d.Labels,
		Kind:             "bigquery#dataset",
	}
	if d.TableExpiration > 0 {
		out.DefaultTableExpirationMs = d.TableExpiration.Milliseconds()
	}
	return out
}

// readBody decodes the JSON body of a request to method into v; it
// answers the error and returns false when the body does not decode.
func readBody(w http.ResponseWriter, r *http.Request, method string, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		restErrorReason(w, http.StatusBadRequest, "invalid", "bqtest: "+method+" body: "+err.Error())
		return false
	}
	return true
}

// readInsert decodes the body of a request to kind.insert (kind datasets
// or tables) into a T and the id of the resource it names (id: "" when it
// names none); it answers the error and returns false when the body does
// not decode or names no id (what: Dataset or Table).
func readInsert[T any](w http.ResponseWriter, r *http.Request, kind, what string, id func(*T) string) (*T, string, bool) {
	in := new(T)
	if !readBody(w, r, kind+".insert", in) {
		return nil, "", false
	}
	name := id(in)
	if name == "" {
		restErrorReason(w, http.StatusBadRequest, "invalid", what+" id is required")
		return nil, "", false
	}
	return in, name, true
}

// lookup is the entry of key in the map at m, read under s.mu; when there
// is none it answers "Not found: "+what and returns nil.
func lookup[T any](s *Server, w http.ResponseWriter, m *map[string]*T, key, what string) *T {
	s.mu.Lock()
	v := (*m)[key]
	s.mu.Unlock()
	if v == nil {
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: "+what)
	}
	return v
}

// datasetID is the id a datasets.insert body names ("" for none).
func datasetID(in *bq.Dataset) string {
	if in.DatasetReference == nil {
		return ""
	}
	return in.DatasetReference.DatasetId
}

func (s *Server) insertDataset(w http.ResponseWriter, r *http.Request, proj string) {
	in, id, ok := readInsert(w, r, "datasets", "Dataset", datasetID)
	if !ok {
		return
	}
	d := &Dataset{Project: proj, ID: id, Location: locationOr(in.Location), Description: in.Description, Labels: in.Labels,
		TableExpiration: time.Duration(in.DefaultTableExpirationMs) * time.Millisecond}
	key := "projects/" + proj + "/datasets/" + id
	s.mu.Lock()
	if s.q.datasets == nil {
		s.q.datasets = map[string]*Dataset{}
	}
	if s.q.datasets[key] != nil {
		s.mu.Unlock()
		restErrorReason(w, http.StatusConflict, "duplicate", "Already Exists: Dataset "+proj+":"+id)
		return
	}
	s.q.datasets[key] = d
	s.mu.Unlock()
	writeJSON(w, datasetJSON(d))
}

func (s *Server) getDataset(w http.ResponseWriter, proj, id string) {
	d := lookup(s, w, &s.q.datasets, "projects/"+proj+"/datasets/"+id, "Dataset "+proj+":"+id)
	if d == nil {
		return
	}
	writeJSON(w, datasetJSON(d))
}

func (s *Server) deleteDataset(w http.ResponseWriter, proj, id string, contents bool) {
	key := "projects/" + proj + "/datasets/" + id
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.datasets[key] == nil {
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: Dataset "+proj+":"+id)
		return
	}
	var in []string
	for name := range s.tables {
		if strings.HasPrefix(name, key+"/tables/") {
			in = append(in, name)
		}
	}
	if len(in) > 0 && !contents {
		restErrorReason(w, http.StatusBadRequest, "resourceInUse", "Dataset "+proj+":"+id+" is still in use")
		return
	}
	for _, name := range in {
		delete(s.tables, name)
	}
	delete(s.q.datasets, key)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) deleteTable(w http.ResponseWriter, res, proj, ds, tbl string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables[res] == nil {
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: Table "+proj+":"+ds+"."+tbl)
		return
	}
	delete(s.tables, res)
	w.WriteHeader(http.StatusNoContent)
}

// patchTable answers tables.patch (and tables.update) for the expiration
// time and the schema. A schema may add NULLABLE or REPEATED columns after
// the others and relax REQUIRED columns to NULLABLE, as the service
// allows; rows already there read NULL in the new columns (see
// checkSchemaUpdate).
func (s *Server) patchTable(w http.ResponseWriter, r *http.Request, res, proj, ds, tbl string) {
	var in bq.Table
	if !readBody(w, r, "tables.patch", &in) {
		return
	}
	var schema bigquery.Schema
	if in.Schema != nil {
		var err error
		if schema, err = schemaOfREST(in.Schema); err != nil {
			restErrorReason(w, http.StatusBadRequest, "invalid", "Invalid schema: "+err.Error())
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[res]
	if t == nil {
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: Table "+proj+":"+ds+"."+tbl)
		return
	}
	if schema != nil {
		if err := checkSchemaUpdate(t.Schema, schema, ""); err != nil {
			restErrorReason(w, http.StatusBadRequest, "invalid", "Provided Schema does not match Table "+proj+":"+ds+"."+tbl+". "+err.Error())
			return
		}
		t = s.updateSchemaLocked(t, schema)
	}
	if in.ExpirationTime != 0 {
		t.expires = time.UnixMilli(in.ExpirationTime)
	}
	writeJSON(w, restTable(res, t))
}

// TableExpiration returns the expiration time set on a table through
// tables.patch (zero if none), and whether the table exists.
func (s *Server) TableExpiration(name string) (time.Time, bool) {
	res, err := TableResource(name)
	if err != nil {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[res]
	if t == nil {
		return time.Time{}, false
	}
	return t.expires, true
}

// datasetLocationLocked is the location of a dataset: the one it was created
// with, or US for the implicit datasets of AddTable's tables; ok is false
// when the dataset does not exist.
func (s *Server) datasetLocationLocked(proj, id string) (string, bool) {
	key := "projects/" + proj + "/datasets/" + id
	if d := s.q.datasets[key]; d != nil {
		return d.Location, true
	}
	for name, t := range s.tables {
		if strings.HasPrefix(name, key+"/tables/") {
			return locationOr(t.Location), true
		}
	}
	return "", false
}

func (s *Server) insertJob(w http.ResponseWriter, r *http.Request, proj string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		restErrorReason(w, http.StatusBadRequest, "invalid", "bqtest: jobs.insert body: "+err.Error())
		return
	}
	var in bq.Job
	if err := json.Unmarshal(body, &in); err != nil {
		restErrorReason(w, http.StatusBadRequest, "invalid", "bqtest: jobs.insert body: "+err.Error())
		return
	}
	params, mode, perr := parseParams(body)
	cfg := in.Configuration
	if cfg != nil && cfg.Copy != nil {
		s.insertCopyJob(w, proj, &in)
		return
	}
	if cfg == nil || cfg.Query == nil {
		restErrorReason(w, http.StatusNotImplemented, "invalid", "bqtest serves query and copy jobs only")
		return
	}
	q := cfg.Query
	ref := in.JobReference
	if ref == nil {
		ref = &bq.JobReference{}
	}
	if ref.JobId == "" {
		s.mu.Lock()
		ref.JobId = s.newID("job_")
		s.mu.Unlock()
	}
	ref.ProjectId = proj
	j := &job{QueryJob: QueryJob{
		Project: proj, JobID: ref.JobId, Location: ref.Location, RequestLocation: ref.Location, SQL: q.Query,
		// The API's default is legacy SQL.
		LegacySQL: q.UseLegacySql == nil || *q.UseLegacySql, Priority: q.Priority, DryRun: cfg.DryRun,
		Parameters: params, ParameterMode: mode,
	}}
	switch {
	case perr != nil:
	case j.LegacySQL && len(params) > 0:
		perr = fmt.Errorf("Query parameters cannot be used in legacy SQL queries")
	case !j.LegacySQL:
		perr = checkParamRefs(q.Query, params, mode)
	}
	if perr != nil {
		// The service refuses such a job at once, dry run or not.
		j.Err = perr.Error()
		s.mu.Lock()
		s.q.order = append(s.q.order, j)
		s.mu.Unlock()
		restErrorReason(w, http.StatusBadRequest, "invalidQuery", j.Err)
		return
	}
	if d := q.DestinationTable; d != nil {
		j.Destination = fmt.Sprintf("projects/%s/datasets/%s/tables/%s", d.ProjectId, d.DatasetId, d.TableId)
	}

	s.mu.Lock()
	res, ok := s.q.results[strings.TrimSpace(q.Query)]
	fn := s.q.fn
	s.mu.Unlock()
	if !ok && fn != nil {
		res, ok = fn(j.QueryJob), true
	}
	if !ok {
		res = QueryResult{Err: fmt.Sprintf("bqtest: no result defined for the query %q (AddQuery or SetQueryFunc)", q.Query)}
	}
	loc := locationOr(res.Location)
	if res.Err == "" && j.Location != "" && !strings.EqualFold(j.Location, loc) {
		res.Err = fmt.Sprintf("Not found: the query's tables were not found in location %s (they are in %s)", j.Location, loc)
	}
	if j.Location == "" {
		j.Location = loc
	}
	ref.Location = j.Location

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.jobs == nil {
		s.q.jobs = map[string]*job{}
	}
	key := "projects/" + proj + "/jobs/" + ref.JobId
	if s.q.jobs[key] != nil {
		restErrorReason(w, http.StatusConflict, "duplicate", "Already Exists: Job "+proj+":"+ref.JobId)
		return
	}
	if res.Err == "" && !cfg.DryRun {
		res.Err = s.writeDestinationLocked(j, q, res)
	}
	j.Err = res.Err
	s.q.order = append(s.q.order, j)
	if cfg.DryRun {
		if j.Err != "" {
			restErrorReason(w, http.StatusBadRequest, "invalidQuery", j.Err)
			return
		}
		j.noLocation = res.DryRunWithoutLocation
		for _, name := range res.ReferencedTables {
			rn, err := TableResource(name)
			if err != nil {
				restErrorReason(w, http.StatusInternalServerError, "internalError", fmt.Sprintf("bqtest: referenced table of the query %q: %v", q.Query, err))
				return
			}
			p := strings.Split(rn, "/")
			j.referenced = append(j.referenced, &bq.TableReference{ProjectId: p[1], DatasetId: p[3], TableId: p[5]})
		}
		writeJSON(w, s.jobJSON(j, cfg))
		return
	}
	j.schema = bq.TableSchema{}
	if j.Err == "" {
		j.rows = len(res.Rows)
		if fields, err := json.Marshal(restFields(res.Schema)); err == nil {
			json.Unmarshal(fields, &j.schema.Fields)
		}
	}
	s.q.jobs[key] = j
	writeJSON(w, s.jobJSON(j, cfg))
}

// writeDestinationLocked writes a successful query's rows into its
// destination table, as the job's dispositions say; it returns the job's
// error, or "".
func (s *Server) writeDestinationLocked(j *job, q *bq.JobConfigurationQuery, res QueryResult) string {
	if j.Destination == "" {
		return ""
	}
	d := q.DestinationTable
	dsLoc, ok := s.datasetLocationLocked(d.ProjectId, d.DatasetId)
	if !ok {
		return fmt.Sprintf("Not found: Dataset %s:%s", d.ProjectId, d.DatasetId)
	}
	if !strings.EqualFold(dsLoc, j.Location) {
		return fmt.Sprintf("Not found: Dataset %s:%s was not found in location %s", d.ProjectId, d.DatasetId, j.Location)
	}
	old := s.tables[j.Destination]
	switch {
	case old == nil && q.CreateDisposition == "CREATE_NEVER":
		return fmt.Sprintf("Not found: Table %s:%s.%s", d.ProjectId, d.DatasetId, d.TableId)
	case old != nil && (q.WriteDisposition == "" || q.WriteDisposition == "WRITE_EMPTY") && len(old.Rows) > 0:
		return fmt.Sprintf("Already Exists: Table %s:%s.%s", d.ProjectId, d.DatasetId, d.TableId)
	case old != nil && q.WriteDisposition == "WRITE_APPEND":
		return "bqtest: WRITE_APPEND is not supported"
	}
	t := res.Table
	t.Location = dsLoc
	tb, err := newTable(j.Destination, t)
	if err != nil {
		return err.Error()
	}
	s.tables[j.Destination] = tb
	return ""
}

func (s *Server) jobJSON(j *job, cfg *bq.JobConfiguration) *bq.Job {
	loc := j.Location
	if j.noLocation {
		loc = ""
	}
	out := &bq.Job{
		Kind:          "bigquery#job",
		Id:            j.Project + ":" + loc + "." + j.JobID,
		JobReference:  &bq.JobReference{ProjectId: j.Project, JobId: j.JobID, Location: loc},
		Configuration: cfg,
		Status:        &bq.JobStatus{State: "DONE"},
		Statistics: &bq.JobStatistics{
			Query: &bq.JobStatistics2{StatementType: "SELECT", ReferencedTables: j.referenced},
		},
	}
	reason := "invalidQuery"
	if j.copy {
		out.Statistics = &bq.JobStatistics{Copy: &bq.JobStatistics5{CopiedRows: int64(j.rows)}}
		reason = "invalid"
	}
	if j.Err != "" {
		e := &bq.ErrorProto{Reason: reason, Message: j.Err}
		out.Status.ErrorResult, out.Status.Errors = e, []*bq.ErrorProto{e}
	}
	return out
}

// multiRegion tells the multi-regions US and EU, where the service finds
// a job asked for without its location.
func multiRegion(loc string) bool {
	return strings.EqualFold(loc, "US") || strings.EqualFold(loc, "EU")
}

// lookupJob is the job id of proj that the request r asks for, as the
// service finds it: a job in a single region (europe-west1) only when r
// names its location (the "location" parameter), a job in the US or EU
// multi-region also when r names none; a location named that is not the
// job's finds nothing. When there is none it answers 404 notFound.
func (s *Server) lookupJob(w http.ResponseWriter, r *http.Request, proj, id string) *job {
	key := "projects/" + proj + "/jobs/" + id
	s.mu.Lock()
	j := s.q.jobs[key]
	s.mu.Unlock()
	loc := r.URL.Query().Get("location")
	if j != nil && (loc == "" && !multiRegion(j.Location) || loc != "" && !strings.EqualFold(loc, j.Location)) {
		j = nil
	}
	if j == nil {
		where := loc
		if where == "" {
			where = "US"
		}
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: Job "+proj+":"+where+"."+id)
	}
	return j
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, proj, id string) {
	j := s.lookupJob(w, r, proj, id)
	if j == nil {
		return
	}
	writeJSON(w, s.jobJSON(j, nil))
}

func (s *Server) getQueryResults(w http.ResponseWriter, r *http.Request, proj, id string) {
	j := s.lookupJob(w, r, proj, id)
	if j == nil {
		return
	}
	if j.Err != "" {
		restErrorReason(w, http.StatusBadRequest, "invalidQuery", j.Err)
		return
	}
	schema := j.schema
	writeJSON(w, &bq.GetQueryResultsResponse{
		Kind:         "bigquery#getQueryResultsResponse",
		JobReference: &bq.JobReference{ProjectId: j.Project, JobId: j.JobID, Location: j.Location},
		JobComplete:  true,
		Schema:       &schema,
		TotalRows:    uint64(j.rows),
	})
}

// restTable is the tables.get answer for t.
func restTable(res string, t *table) map[string]any {
	p := strings.Split(res, "/")
	out := map[string]any{
		"kind":           "bigquery#table",
		"id":             p[1] + ":" + p[3] + "." + p[5],
		"tableReference": map[string]string{"projectId": p[1], "datasetId": p[3], "tableId": p[5]},
		"schema":         map[string]any{"fields": restFields(t.Schema)},
		"numRows":        strconv.Itoa(len(t.Rows)),
		"numBytes":       strconv.FormatInt(int64(len(t.Rows))*t.rowBytes, 10),
		"type":           "TABLE",
		"location":       locationOr(t.Location),
		"creationTime":   strconv.FormatInt(t.Created.UnixMilli(), 10),
	}
	if !t.expires.IsZero() {
		out["expirationTime"] = strconv.FormatInt(t.expires.UnixMilli(), 10)
	}
	restTableMeta(out, &t.Table)
	return out
}
