package bqtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/option"
)

// RESTEndpoint starts (once) and returns the base URL of a small BigQuery
// REST API for the server's tables: tables.get, which the official client
// (cloud.google.com/go/bigquery) calls before reading a table through the
// Storage Read API, and the calls of a query job into a destination table
// (datasets insert, get and delete, jobs insert and get, getQueryResults,
// tables delete; see AddQuery). Pass it with RESTClientOptions to
// bigquery.NewClient, and the server's ClientOptions to
// Client.EnableStorageReadClient; bqquery.Query takes it with
// bigqueryio.WithRESTEndpoint.
func (s *Server) RESTEndpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rest == nil {
		s.rest = httptest.NewServer(http.HandlerFunc(s.serveREST))
	}
	return s.rest.URL + "/bigquery/v2/"
}

// RESTClientOptions are the options that point bigquery.NewClient at
// RESTEndpoint, without credentials.
func (s *Server) RESTClientOptions() []option.ClientOption {
	return RESTOptions(s.RESTEndpoint())
}

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	s.recordREST(r)
	p := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/bigquery/v2"), "/"), "/")
	if s.serveWriteREST(w, r, p) || s.serveQueryREST(w, r, p) {
		return
	}
	if r.Method != http.MethodGet || len(p) != 6 || p[0] != "projects" || p[2] != "datasets" || p[4] != "tables" {
		restError(w, http.StatusNotImplemented, "bqtest does not serve "+r.Method+" "+r.URL.Path)
		return
	}
	res := strings.Join(p, "/")
	s.mu.Lock()
	t := s.tables[res]
	s.mu.Unlock()
	if t == nil {
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: Table "+p[1]+":"+p[3]+"."+p[5])
		return
	}
	writeJSON(w, restTable(res, t))
}

func restFields(schema bigquery.Schema) []map[string]any {
	out := make([]map[string]any, 0, len(schema))
	for _, f := range schema {
		mode := "NULLABLE"
		switch {
		case f.Repeated:
			mode = "REPEATED"
		case f.Required:
			mode = "REQUIRED"
		}
		m := map[string]any{"name": f.Name, "type": string(f.Type), "mode": mode}
		if f.MaxLength > 0 {
			m["maxLength"] = strconv.FormatInt(f.MaxLength, 10)
		}
		if len(f.Schema) > 0 {
			m["fields"] = restFields(f.Schema)
		}
		out = append(out, m)
	}
	return out
}

func restError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

// RESTOptions are the options that point bigquery.NewClient at the REST
// endpoint url of a bqtest server (its RESTEndpoint), from any process.
func RESTOptions(url string) []option.ClientOption {
	return []option.ClientOption{option.WithEndpoint(url), option.WithoutAuthentication()}
}
