package bqtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	bq "google.golang.org/api/bigquery/v2"
)

// The service's limits on tabledata.insertAll.
const (
	maxInsertAllBytes = 10 << 20
	maxInsertAllRows  = 50000
)

// RESTHandler serves the REST API of RESTEndpoint (paths /bigquery/v2/…)
// on a server of the caller's, for a client that cannot be given an
// endpoint: Beam Go's bigqueryio.Write makes its client with
// bigquery.NewClient(ctx, project) and no options, so a test or benchmark
// serves this handler over TLS and routes the process's connections to
// it, as RouteGoogleAPIs does.
func (s *Server) RESTHandler() http.Handler { return http.HandlerFunc(s.serveREST) }

// serveWriteREST answers the REST calls a writer makes: tables.insert (as
// for CREATE_IF_NEEDED), datasets.get of a dataset that holds tables
// AddTable defined, and tabledata.insertAll. p is the path after
// /bigquery/v2/, split at '/'.
func (s *Server) serveWriteREST(w http.ResponseWriter, r *http.Request, p []string) bool {
	if len(p) < 4 || p[0] != "projects" || p[2] != "datasets" {
		return false
	}
	switch {
	case len(p) == 4 && r.Method == http.MethodGet:
		return s.getImplicitDataset(w, p[1], p[3])
	case len(p) == 5 && p[4] == "tables" && r.Method == http.MethodPost:
		s.insertTable(w, r, p[1], p[3])
	case len(p) == 7 && p[4] == "tables" && p[6] == "insertAll" && r.Method == http.MethodPost:
		s.insertAll(w, r, p[1], p[3], p[5])
	default:
		return false
	}
	return true
}

// getImplicitDataset answers datasets.get for a dataset that was not
// created through datasets.insert but holds tables (AddTable's), so that
// it exists as far as a writer can tell.
func (s *Server) getImplicitDataset(w http.ResponseWriter, proj, id string) bool {
	s.mu.Lock()
	d := s.q.datasets["projects/"+proj+"/datasets/"+id]
	loc, ok := s.datasetLocationLocked(proj, id)
	s.mu.Unlock()
	if d != nil || !ok {
		return false
	}
	writeJSON(w, datasetJSON(&Dataset{Project: proj, ID: id, Location: loc}))
	return true
}

// typeAliases are the standard SQL names of types the API also takes.
var typeAliases = map[bigquery.FieldType]bigquery.FieldType{
	"INT64": bigquery.IntegerFieldType, "FLOAT64": bigquery.FloatFieldType, "BOOL": bigquery.BooleanFieldType,
	"STRUCT": bigquery.RecordFieldType, "DECIMAL": bigquery.NumericFieldType, "BIGDECIMAL": bigquery.BigNumericFieldType,
}

func normalizeTypes(schema bigquery.Schema) {
	for _, f := range schema {
		if t, ok := typeAliases[bigquery.FieldType(strings.ToUpper(string(f.Type)))]; ok {
			f.Type = t
		}
		f.Type = bigquery.FieldType(strings.ToUpper(string(f.Type)))
		normalizeTypes(f.Schema)
	}
}

// schemaOfREST is the schema of a REST request, its types normalized.
func schemaOfREST(in *bq.TableSchema) (bigquery.Schema, error) {
	fields, err := json.Marshal(in.Fields)
	if err != nil {
		return nil, err
	}
	schema, err := bigquery.SchemaFromJSON(fields)
	if err != nil {
		return nil, err
	}
	normalizeTypes(schema)
	return schema, nil
}

// tableID is the id a tables.insert body names ("" for none).
func tableID(in *bq.Table) string {
	if in.TableReference == nil {
		return ""
	}
	return in.TableReference.TableId
}

// insertTable answers tables.insert: an empty table with the request's
// schema, partitioning, clustering, description, labels, encryption and
// expiration time, in its dataset's location.
func (s *Server) insertTable(w http.ResponseWriter, r *http.Request, proj, ds string) {
	in, id, ok := readInsert(w, r, "tables", "Table", tableID)
	if !ok {
		return
	}
	if in.View != nil || in.MaterializedView != nil || in.ExternalDataConfiguration != nil {
		restErrorReason(w, http.StatusNotImplemented, "invalid", "bqtest creates plain tables only")
		return
	}
	if in.Schema == nil || len(in.Schema.Fields) == 0 {
		restErrorReason(w, http.StatusBadRequest, "invalid", "bqtest: table "+proj+":"+ds+"."+id+" needs a schema")
		return
	}
	schema, err := schemaOfREST(in.Schema)
	if err != nil {
		restErrorReason(w, http.StatusBadRequest, "invalid", "Invalid schema: "+err.Error())
		return
	}
	res := "projects/" + proj + "/datasets/" + ds + "/tables/" + id
	s.mu.Lock()
	defer s.mu.Unlock()
	loc, ok := s.datasetLocationLocked(proj, ds)
	if !ok {
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: Dataset "+proj+":"+ds)
		return
	}
	if s.tables[res] != nil {
		restErrorReason(w, http.StatusConflict, "duplicate", "Already Exists: Table "+proj+":"+ds+"."+id)
		return
	}
	if strings.Contains(id, "$") {
		restErrorReason(w, http.StatusBadRequest, "invalid", "Invalid table ID \""+id+"\": a partition decorator names a partition of a table, not a table to create")
		return
	}
	spec := Table{Schema: schema, Location: loc}
	if ago := s.w.faults.CreatedAgo; ago != 0 {
		spec.Created = time.Now().Add(-ago)
	}
	tableMetaFromREST(in, &spec)
	if err := checkTableMeta(&spec); err != nil {
		restErrorReason(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	tb, err := newTable(res, spec)
	if err != nil {
		restErrorReason(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	if in.ExpirationTime != 0 {
		tb.expires = time.UnixMilli(in.ExpirationTime)
	}
	s.tables[res] = tb
	s.w.stats.TablesCreated++
	writeJSON(w, restTable(res, tb))
}

type insertAllRequest struct {
	Rows []struct {
		InsertID string         `json:"insertId"`
		JSON     map[string]any `json:"json"`
	} `json:"rows"`
	SkipInvalidRows     bool   `json:"skipInvalidRows"`
	IgnoreUnknownValues bool   `json:"ignoreUnknownValues"`
	TemplateSuffix      string `json:"templateSuffix"`
}

// insertAll answers tabledata.insertAll, the legacy streaming insert:
// rows are visible at once. A row that does not fit the schema is reported
// in insertErrors; then, unless skipInvalidRows, no row of the request is
// written and the others are reported "stopped". insertId is not used to
// drop duplicates (the service's de-duplication is best effort).
func (s *Server) insertAll(w http.ResponseWriter, r *http.Request, proj, ds, tbl string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxInsertAllBytes+1))
	if err != nil {
		restErrorReason(w, http.StatusBadRequest, "invalid", "bqtest: insertAll body: "+err.Error())
		return
	}
	if len(body) > maxInsertAllBytes {
		restErrorReason(w, http.StatusBadRequest, "invalid", fmt.Sprintf("Request payload size exceeds the limit: %d bytes.", maxInsertAllBytes))
		return
	}
	var in insertAllRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		restErrorReason(w, http.StatusBadRequest, "invalid", "bqtest: insertAll body: "+err.Error())
		return
	}
	if in.TemplateSuffix != "" {
		restErrorReason(w, http.StatusNotImplemented, "invalid", "bqtest does not serve templateSuffix")
		return
	}
	if len(in.Rows) > maxInsertAllRows {
		restErrorReason(w, http.StatusBadRequest, "invalid", fmt.Sprintf("too many rows present in the request, limit: %d", maxInsertAllRows))
		return
	}
	if len(in.Rows) == 0 {
		restErrorReason(w, http.StatusBadRequest, "invalid", "No rows present in the request.")
		return
	}
	res := "projects/" + proj + "/datasets/" + ds + "/tables/" + tbl
	s.mu.Lock()
	t := s.tables[res]
	s.w.stats.InsertAllRequests++
	s.mu.Unlock()
	if t == nil {
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: Table "+proj+":"+ds+"."+tbl)
		return
	}
	if t.Denied {
		restErrorReason(w, http.StatusForbidden, "accessDenied", "Access Denied: Table "+proj+":"+ds+"."+tbl+": Permission bigquery.tables.updateData denied")
		return
	}
	rows := make([][]bigquery.Value, 0, len(in.Rows))
	var insertErrs []*bq.TableDataInsertAllResponseInsertErrors
	bad := map[int]bool{}
	for i, row := range in.Rows {
		v, errs := jsonRow(t.Schema, row.JSON, "", in.IgnoreUnknownValues)
		if len(errs) > 0 {
			bad[i] = true
			insertErrs = append(insertErrs, &bq.TableDataInsertAllResponseInsertErrors{Index: int64(i), Errors: errs})
			continue
		}
		rows = append(rows, v)
	}
	if len(bad) > 0 && !in.SkipInvalidRows {
		rows = nil
		for i := range in.Rows {
			if !bad[i] {
				insertErrs = append(insertErrs, &bq.TableDataInsertAllResponseInsertErrors{Index: int64(i),
					Errors: []*bq.ErrorProto{{Reason: "stopped"}}})
			}
		}
	}
	s.mu.Lock()
	cur := s.tables[res]
	if !sameTable(cur, t) {
		s.mu.Unlock()
		restErrorReason(w, http.StatusNotFound, "notFound", "Not found: Table "+proj+":"+ds+"."+tbl)
		return
	}
	s.appendTableLocked(cur, rows, "")
	s.w.stats.InsertAllRows += int64(len(rows))
	s.mu.Unlock()
	writeJSON(w, &bq.TableDataInsertAllResponse{Kind: "bigquery#tableDataInsertAllResponse", InsertErrors: insertErrs})
}

// jsonRow converts a JSON row of insertAll to the schema's values, or
// returns its errors.
func jsonRow(schema bigquery.Schema, obj map[string]any, prefix string, ignoreUnknown bool) ([]bigquery.Value, []*bq.ErrorProto) {
	var errs []*bq.ErrorProto
	fail := func(loc, msg string) {
		errs = append(errs, &bq.ErrorProto{Reason: "invalid", Location: loc, Message: msg})
	}
	byName := map[string]int{}
	for i, f := range schema {
		byName[strings.ToLower(f.Name)] = i
	}
	row := make([]bigquery.Value, len(schema))
	seen := make([]bool, len(schema))
	for k, v := range obj {
		i, ok := byName[strings.ToLower(k)]
		if !ok {
			if !ignoreUnknown {
				fail(prefix+k, "no such field: "+prefix+k+".")
			}
			continue
		}
		f := schema[i]
		path := prefix + f.Name
		seen[i] = true
		if v == nil {
			continue
		}
		items, isArray := v.([]any)
		if isArray != f.Repeated {
			fail(path, "Array specified for non-repeated field: "+path+".")
			continue
		}
		if f.Repeated {
			out := make([]bigquery.Value, 0, len(items))
			for _, it := range items {
				if it == nil {
					fail(path, "Null value in repeated field: "+path+".")
					break
				}
				x, err := jsonValue(f, it, path, ignoreUnknown)
				if err != nil {
					errs = append(errs, err...)
					break
				}
				out = append(out, x)
			}
			if len(out) > 0 {
				row[i] = out
			}
			continue
		}
		x, err := jsonValue(f, v, path, ignoreUnknown)
		if err != nil {
			errs = append(errs, err...)
			continue
		}
		row[i] = x
	}
	if errs != nil {
		return nil, errs // a value that did not convert is not also "missing"
	}
	for i, f := range schema {
		if f.Required && (!seen[i] || row[i] == nil) {
			fail(prefix+f.Name, "Missing required field: "+prefix+f.Name+".")
		}
	}
	if errs != nil {
		return nil, errs
	}
	return row, nil
}

// jsonValue converts one JSON value (numbers as json.Number) to a value of
// the column f.
func jsonValue(f *bigquery.FieldSchema, v any, path string, ignoreUnknown bool) (bigquery.Value, []*bq.ErrorProto) {
	bad := func(msg string) []*bq.ErrorProto {
		return []*bq.ErrorProto{{Reason: "invalid", Location: path, Message: msg}}
	}
	cannot := func() []*bq.ErrorProto {
		return bad(fmt.Sprintf("Cannot convert value to %s: %v in field %s.", f.Type, v, path))
	}
	str, isStr := v.(string)
	num, isNum := v.(json.Number)
	text := str
	if isNum {
		text = num.String()
	}
	var out bigquery.Value
	var err error
	switch f.Type {
	case bigquery.RecordFieldType:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, cannot()
		}
		row, errs := jsonRow(f.Schema, obj, path+".", ignoreUnknown)
		if errs != nil {
			return nil, errs
		}
		return row, nil
	case bigquery.IntegerFieldType:
		if !isStr && !isNum {
			return nil, cannot()
		}
		n, perr := strconv.ParseInt(text, 10, 64)
		if perr != nil {
			return nil, cannot()
		}
		return n, nil
	case bigquery.FloatFieldType:
		if !isStr && !isNum {
			return nil, cannot()
		}
		x, perr := strconv.ParseFloat(text, 64)
		if perr != nil {
			return nil, cannot()
		}
		return x, nil
	case bigquery.BooleanFieldType:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		switch strings.ToLower(str) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, cannot()
	case bigquery.StringFieldType:
		if !isStr && !isNum {
			return nil, cannot()
		}
		out, err = checkString(f, path, text)
	case bigquery.BytesFieldType:
		if !isStr {
			return nil, cannot()
		}
		b, derr := base64.StdEncoding.DecodeString(str)
		if derr != nil {
			if b, derr = base64.URLEncoding.DecodeString(str); derr != nil {
				return nil, bad(fmt.Sprintf("Could not decode base64 BYTES value in field %s.", path))
			}
		}
		out, err = checkBytes(f, path, b)
	case bigquery.NumericFieldType, bigquery.BigNumericFieldType:
		if !isStr && !isNum {
			return nil, cannot()
		}
		out, err = decimalString(text, f.Type == bigquery.BigNumericFieldType)
	case bigquery.DateFieldType:
		d, ok := parseDate(str)
		if !isStr || !ok {
			return nil, cannot()
		}
		return d, nil
	case bigquery.TimeFieldType:
		t, ok := parseClock(strings.TrimSpace(str), true)
		if !isStr || !ok {
			return nil, cannot()
		}
		return t, nil
	case bigquery.DateTimeFieldType:
		dt, ok := parseDateTimeFrac(strings.TrimSpace(str), true)
		if !isStr || !ok {
			return nil, cannot()
		}
		return dt, nil
	case bigquery.TimestampFieldType:
		if !isStr && !isNum {
			return nil, cannot()
		}
		t, ok := parseTimestamp(text)
		if !ok {
			return nil, cannot()
		}
		return t, nil
	case bigquery.GeographyFieldType:
		if !isStr {
			return nil, cannot()
		}
		out, err = checkGeography(str)
	case bigquery.JSONFieldType:
		if !isStr {
			b, merr := json.Marshal(v)
			if merr != nil {
				return nil, cannot()
			}
			str = string(b)
		}
		out, err = checkJSON(str)
	default:
		return nil, bad(fmt.Sprintf("bqtest does not serve columns of type %s (field %s).", f.Type, path))
	}
	if err != nil {
		return nil, bad(fmt.Sprintf("%v in field %s.", err, path))
	}
	return out, nil
}
