package bqwrite

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/option"
)

// scriptedREST is an HTTP server answering each request by the next
// answer of its script, recording the requests.
type scriptedREST struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter, r *http.Request)
	seen    []string // method, path and query, and the If-Match header
	bodies  []string
}

func (s *scriptedREST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	line := r.Method + " " + r.URL.Path
	if r.URL.RawQuery != "" {
		line += "?" + r.URL.RawQuery
	}
	if m := r.Header.Get("If-Match"); m != "" {
		line += " If-Match:" + m
	}
	s.seen = append(s.seen, line)
	s.bodies = append(s.bodies, string(b))
	var a func(w http.ResponseWriter, r *http.Request)
	if len(s.answers) > 0 {
		a, s.answers = s.answers[0], s.answers[1:]
	}
	s.mu.Unlock()
	if a == nil {
		http.Error(w, `{"error":{"code":500,"message":"script ended"}}`, http.StatusTeapot)
		return
	}
	a(w, r)
}

func answer(code int, body string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func apiError(code int, reason, msg string) func(w http.ResponseWriter, r *http.Request) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg,
		"errors": []map[string]string{{"reason": reason, "message": msg}}}})
	return answer(code, string(b))
}

func newScripted(t *testing.T, answers ...func(w http.ResponseWriter, r *http.Request)) (*scriptedREST, *restClient) {
	t.Helper()
	s := &scriptedREST{answers: answers}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := newREST(context.Background(), retryBackoff(3, 0), option.WithEndpoint(srv.URL+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// TestRESTRetries: a transient answer (503, 500, 429) is retried by the
// module's rule; a permanent one (400, 404) is not; the retries end after
// WithRetries' count, and the error names the call, the attempts and the
// service's message.
func TestRESTRetries(t *testing.T) {
	ctx := context.Background()
	table := `{"id":"p:d.t","schema":{"fields":[{"name":"a","type":"INTEGER","mode":"REQUIRED"},{"name":"r","type":"RECORD","mode":"REPEATED","fields":[{"name":"s","type":"STRING"}]}]},"numRows":"12","etag":"e1","location":"EU"}`
	s, c := newScripted(t, apiError(503, "backendError", "try again"), apiError(500, "internalError", "oops"), apiError(429, "rateLimitExceeded", "slow"), answer(200, table))
	md, err := c.GetTable(ctx, "projects/p/datasets/d/tables/t")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := md.BQSchema()
	if err != nil {
		t.Fatal(err)
	}
	n, err := md.RowCount()
	if err != nil || n != 12 || md.ETag != "e1" || md.Location != "EU" || len(schema) != 2 || !schema[0].Required || schema[1].Type != bigquery.RecordFieldType || !schema[1].Repeated || schema[1].Schema[0].Name != "s" {
		t.Fatalf("table %+v, schema %v, rows %d, %v", md, schema, n, err)
	}
	if len(s.seen) != 4 || s.seen[3] != "GET /bigquery/v2/projects/p/datasets/d/tables/t" {
		t.Fatalf("requests %q", s.seen)
	}

	_, c = newScripted(t, apiError(400, "invalid", "bad request"), answer(200, table))
	if _, err := c.GetTable(ctx, "projects/p/datasets/d/tables/t"); err == nil || !strings.Contains(err.Error(), "bad request") || !strings.Contains(err.Error(), "attempt 1") || !isHTTP(err, 400) {
		t.Fatalf("a 400 was not returned at once: %v", err)
	}
	_, c = newScripted(t, apiError(404, "notFound", "Not found: Table p:d.t"))
	if _, err := c.GetTable(ctx, "projects/p/datasets/d/tables/t"); !isNotFound(err) {
		t.Fatalf("a 404 is not found: %v", err)
	}
	s, c = newScripted(t, apiError(503, "x", "1"), apiError(503, "x", "2"), apiError(503, "x", "3"), apiError(503, "x", "4"), answer(200, table))
	if err := c.DeleteTable(ctx, "projects/p/datasets/d/tables/t"); err == nil || !strings.Contains(err.Error(), "4 attempts") || !strings.Contains(err.Error(), "DELETE projects/p/datasets/d/tables/t") {
		t.Fatalf("retries did not end after 3: %v", err)
	}
	if len(s.seen) != 4 {
		t.Fatalf("%d requests, want 4", len(s.seen))
	}
}

// TestRESTJobs: a job inserted with an id the service has (a lost answer's
// retry) is read back, not failed; a job is polled until DONE; a failed
// job's error names it, its reason and message, and a notFound one is
// not found.
func TestRESTJobs(t *testing.T) {
	ctx := context.Background()
	s, c := newScripted(t,
		apiError(409, "duplicate", "Already Exists: Job p:EU.j1"),
		answer(200, `{"jobReference":{"projectId":"p","jobId":"j1","location":"EU"},"status":{"state":"RUNNING"}}`),
		answer(200, `{"jobReference":{"projectId":"p","jobId":"j1","location":"EU"},"status":{"state":"RUNNING"}}`),
		answer(200, `{"jobReference":{"projectId":"p","jobId":"j1","location":"EU"},"status":{"state":"DONE"},"statistics":{"endTime":"1700000000123"}}`),
	)
	j, err := c.InsertJob(ctx, "p", &restJob{JobReference: &jobRef{ProjectID: "p", JobID: "j1", Location: "EU"},
		Configuration: &jobConfig{Copy: &jobCopy{SourceTables: []tableRef{{ProjectID: "p", DatasetID: "d", TableID: "s"}}, DestinationTable: tableRef{ProjectID: "p", DatasetID: "d", TableID: "t"}, WriteDisposition: "WRITE_TRUNCATE"}}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	j, err = c.WaitJob(ctx, j)
	if err != nil || !j.Done() || !j.EndTime().Equal(time.UnixMilli(1700000000123)) {
		t.Fatalf("job %+v, %v", j, err)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Errorf("polled without waiting")
	}
	want := []string{"POST /bigquery/v2/projects/p/jobs", "GET /bigquery/v2/projects/p/jobs/j1?location=EU", "GET /bigquery/v2/projects/p/jobs/j1?location=EU", "GET /bigquery/v2/projects/p/jobs/j1?location=EU"}
	if strings.Join(s.seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(s.seen, "\n"), strings.Join(want, "\n"))
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(s.bodies[0]), &body); err != nil {
		t.Fatal(err)
	}
	cp := body["configuration"].(map[string]any)["copy"].(map[string]any)
	if cp["writeDisposition"] != "WRITE_TRUNCATE" || cp["destinationTable"].(map[string]any)["tableId"] != "t" || body["jobReference"].(map[string]any)["jobId"] != "j1" {
		t.Fatalf("jobs.insert body %s", s.bodies[0])
	}

	_, c = newScripted(t, answer(200, `{"jobReference":{"projectId":"p","jobId":"j2"},"status":{"state":"DONE","errorResult":{"reason":"notFound","message":"Not found: Dataset p:gone","location":"x"}}}`))
	j, err = c.InsertJob(ctx, "p", &restJob{JobReference: &jobRef{ProjectID: "p", JobID: "j2"}, Configuration: &jobConfig{Query: &jobQuery{Query: "SELECT 1"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WaitJob(ctx, j)
	var je *jobError
	if !errors.As(err, &je) || !isNotFound(err) || !strings.Contains(err.Error(), "job p:j2 failed: Not found: Dataset p:gone (notFound)") {
		t.Fatalf("failed job: %v", err)
	}
}

// TestRESTRefusesHugeAnswer: an answer over maxRESTAnswer is refused, not
// read into memory; one that is not JSON fails naming the call.
func TestRESTRefusesHugeAnswer(t *testing.T) {
	ctx := context.Background()
	_, c := newScripted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"`)
		chunk := strings.Repeat("x", 1<<20)
		for i := 0; i < maxRESTAnswer>>20+2; i++ {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	if _, err := c.GetTable(ctx, "projects/p/datasets/d/tables/t"); err == nil || !strings.Contains(err.Error(), "an answer over") {
		t.Fatalf("huge answer: %v", err)
	}
	_, c = newScripted(t, answer(200, `{"id": 12`))
	if _, err := c.GetTable(ctx, "projects/p/datasets/d/tables/t"); err == nil || !strings.Contains(err.Error(), "decoding the answer") || !strings.Contains(err.Error(), "GET projects/p/datasets/d/tables/t") {
		t.Fatalf("bad JSON: %v", err)
	}
}

// TestRESTTableMetadata: the table a write creates carries the TableSpec as
// the API's JSON (partitioning, clustering, key, constraints), and a
// schema patch sends the ETag it read.
func TestRESTTableMetadata(t *testing.T) {
	ctx := context.Background()
	sp := TableSpec{Description: "d", Labels: map[string]string{"k": "v"},
		TimePartitioning: &TimePartitioning{Unit: PartitionByHour, Column: "ts", Expiration: 48 * time.Hour},
		Clustering:       []string{"a", "b"}, KMSKey: "kms/key", PrimaryKey: []string{"a"}}
	schema := bigquery.Schema{{Name: "a", Type: bigquery.IntegerFieldType, Required: true}, {Name: "ts", Type: bigquery.TimestampFieldType}}
	md, err := sp.metadata(schema)
	if err != nil {
		t.Fatal(err)
	}
	s, c := newScripted(t, answer(200, `{}`), answer(200, `{}`))
	if err := c.InsertTable(ctx, "projects/p/datasets/d/tables/t", md); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(s.bodies[0]), &body); err != nil {
		t.Fatal(err)
	}
	tp, _ := json.Marshal(body["timePartitioning"])
	cl, _ := json.Marshal(body["clustering"])
	tc, _ := json.Marshal(body["tableConstraints"])
	ec, _ := json.Marshal(body["encryptionConfiguration"])
	ref, _ := json.Marshal(body["tableReference"])
	for got, want := range map[string]string{
		string(tp): `{"expirationMs":"172800000","field":"ts","type":"HOUR"}`, string(cl): `{"fields":["a","b"]}`,
		string(tc): `{"primaryKey":{"columns":["a"]}}`, string(ec): `{"kmsKeyName":"kms/key"}`,
		string(ref): `{"datasetId":"d","projectId":"p","tableId":"t"}`,
	} {
		if got != want {
			t.Errorf("tables.insert: %s, want %s", got, want)
		}
	}
	if s.seen[0] != "POST /bigquery/v2/projects/p/datasets/d/tables" {
		t.Errorf("request %s", s.seen[0])
	}
	var patch restTable
	if err := patch.SetSchema(schema); err != nil {
		t.Fatal(err)
	}
	if err := c.PatchTable(ctx, "projects/p/datasets/d/tables/t", &patch, "etag-1"); err != nil {
		t.Fatal(err)
	}
	if s.seen[1] != "PATCH /bigquery/v2/projects/p/datasets/d/tables/t If-Match:etag-1" || !strings.Contains(s.bodies[1], `"mode":"REQUIRED"`) || strings.Contains(s.bodies[1], "description") {
		t.Errorf("tables.patch: %s %s", s.seen[1], s.bodies[1])
	}
}
