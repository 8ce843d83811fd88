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

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// scriptedREST is an HTTP server answering each request by the next
// answer of its script, recording the requests.
type scriptedREST struct {
	mu      sync.Mutex
	answers []func(w http.ResponseWriter, r *http.Request)
	seen    []string // method and path, the If-Match header
	queries []string // the query of each request
	bodies  []string
}

func (s *scriptedREST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	line := r.Method + " " + r.URL.Path
	if m := r.Header.Get("If-Match"); m != "" {
		line += " If-Match:" + m
	}
	s.seen = append(s.seen, line)
	s.queries = append(s.queries, r.URL.RawQuery)
	s.bodies = append(s.bodies, string(b))
	var a func(w http.ResponseWriter, r *http.Request)
	if len(s.answers) > 0 {
		a, s.answers = s.answers[0], s.answers[1:]
	}
	s.mu.Unlock()
	if a == nil {
		http.Error(w, `{"error":{"code":418,"message":"script ended"}}`, http.StatusTeapot)
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

// newScripted is a scripted server and the official client of project p
// made as a write makes it.
func newScripted(t *testing.T, answers ...func(w http.ResponseWriter, r *http.Request)) (*scriptedREST, *restClient) {
	t.Helper()
	s := &scriptedREST{answers: answers}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := newClient(context.Background(), "p", retryBackoff(3, 0), option.WithEndpoint(srv.URL+"/bigquery/v2/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, c
}

// TestRESTRetries: the official client retries a transient answer (503)
// itself; a permanent one (400, 404) is returned at once; a transient
// answer that never ends is retried until the caller's context ends
// (the client counts no attempts: WithRetries does not bound it).
func TestRESTRetries(t *testing.T) {
	ctx := context.Background()
	table := `{"id":"p:d.t","schema":{"fields":[{"name":"a","type":"INTEGER","mode":"REQUIRED"},{"name":"r","type":"RECORD","mode":"REPEATED","fields":[{"name":"s","type":"STRING"}]}]},"numRows":"12","etag":"e1","location":"EU","creationTime":"1700000000123"}`
	s, c := newScripted(t, apiError(503, "backendError", "try again"), answer(200, table))
	md, err := c.Table("projects/p/datasets/d/tables/t").Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	schema := md.Schema
	if md.NumRows != 12 || md.ETag != "e1" || md.Location != "EU" || !md.CreationTime.Equal(time.UnixMilli(1700000000123)) || len(schema) != 2 || !schema[0].Required || schema[1].Type != bigquery.RecordFieldType || !schema[1].Repeated || schema[1].Schema[0].Name != "s" {
		t.Fatalf("table %+v, schema %v", md, schema)
	}
	if len(s.seen) != 2 || s.seen[1] != "GET /bigquery/v2/projects/p/datasets/d/tables/t" {
		t.Fatalf("requests %q", s.seen)
	}

	s, c = newScripted(t, apiError(400, "invalid", "bad request"), answer(200, table))
	if _, err := c.Table("projects/p/datasets/d/tables/t").Metadata(ctx); err == nil || !strings.Contains(err.Error(), "bad request") || !isHTTP(err, 400) || len(s.seen) != 1 {
		t.Fatalf("a 400 was not returned at once: %v (%d requests)", err, len(s.seen))
	}
	_, c = newScripted(t, apiError(404, "notFound", "Not found: Table p:d.t"))
	if _, err := c.Table("projects/p/datasets/d/tables/t").Metadata(ctx); !bqcore.IsNotFound(err) {
		t.Fatalf("a 404 is not found: %v", err)
	}
	var always []func(w http.ResponseWriter, r *http.Request)
	for range 20 {
		always = append(always, apiError(503, "backendError", "down"))
	}
	s, c = newScripted(t, always...)
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if err := c.Table("projects/p/datasets/d/tables/t").Delete(short); err == nil || len(s.seen) < 2 {
		t.Fatalf("a lasting 503: %v after %d requests, want an error after retries", err, len(s.seen))
	}
}

// TestRESTJobs: a job is polled (jobs.get in its location) until DONE,
// and its end time read; a failed job's error names it, its reason and
// message, and a notFound one is not found.
func TestRESTJobs(t *testing.T) {
	ctx := context.Background()
	s, c := newScripted(t,
		answer(200, `{"jobReference":{"projectId":"p","jobId":"j1","location":"EU"},"status":{"state":"RUNNING"}}`),
		answer(200, `{"jobReference":{"projectId":"p","jobId":"j1","location":"EU"},"status":{"state":"RUNNING"}}`),
		answer(200, `{"jobReference":{"projectId":"p","jobId":"j1","location":"EU"},"status":{"state":"DONE"},"statistics":{"endTime":"1700000000123"}}`),
	)
	cp := c.Table("projects/p/datasets/d/tables/t").CopierFrom(c.Table("projects/p/datasets/d/tables/s"))
	cp.JobID, cp.Location, cp.WriteDisposition = "j1", "EU", bigquery.WriteTruncate
	j, err := cp.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st, err := bqcore.WaitJob(ctx, j)
	if err != nil || !st.Done() || !bqcore.EndTime(st).Equal(time.UnixMilli(1700000000123)) {
		t.Fatalf("job %+v, %v", st, err)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Errorf("polled without waiting")
	}
	want := []string{"POST /bigquery/v2/projects/p/jobs", "GET /bigquery/v2/projects/p/jobs/j1", "GET /bigquery/v2/projects/p/jobs/j1"}
	if strings.Join(s.seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(s.seen, "\n"), strings.Join(want, "\n"))
	}
	for _, q := range s.queries[1:] {
		if !strings.Contains(q, "location=EU") {
			t.Errorf("jobs.get %s without the job's location", q)
		}
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(s.bodies[0]), &body); err != nil {
		t.Fatal(err)
	}
	cpb := body["configuration"].(map[string]any)["copy"].(map[string]any)
	ref := body["jobReference"].(map[string]any)
	if cpb["writeDisposition"] != "WRITE_TRUNCATE" || cpb["destinationTable"].(map[string]any)["tableId"] != "t" || ref["jobId"] != "j1" || ref["location"] != "EU" {
		t.Fatalf("jobs.insert body %s", s.bodies[0])
	}

	_, c = newScripted(t, answer(200, `{"jobReference":{"projectId":"p","jobId":"j2"},"status":{"state":"DONE","errorResult":{"reason":"notFound","message":"Not found: Dataset p:gone","location":"x"}}}`))
	q := c.Query("SELECT 1")
	q.JobID = "j2"
	j, err = q.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bqcore.WaitJob(ctx, j)
	var je *bqcore.JobError
	if !errors.As(err, &je) || !bqcore.IsNotFound(err) || !strings.Contains(err.Error(), "job p:j2 failed: Not found: Dataset p:gone (notFound)") {
		t.Fatalf("failed job: %v", err)
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
	if err := c.Table("projects/p/datasets/d/tables/t").Create(ctx, md); err != nil {
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
	if _, err := c.Table("projects/p/datasets/d/tables/t").Update(ctx, bigquery.TableMetadataToUpdate{Schema: schema}, "etag-1"); err != nil {
		t.Fatal(err)
	}
	if s.seen[1] != "PATCH /bigquery/v2/projects/p/datasets/d/tables/t If-Match:etag-1" || !strings.Contains(s.bodies[1], `"mode":"REQUIRED"`) || strings.Contains(s.bodies[1], "description") {
		t.Errorf("tables.patch: %s %s", s.seen[1], s.bodies[1])
	}
}
