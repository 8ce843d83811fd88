package bqtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

func apiCode(err error) int {
	var e *googleapi.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// TestQueryREST drives the REST server with the official client as a query
// reader does: a dataset, a query job into it (waited for), the result read
// back through the Storage Read API, the dataset's deletion rules; and a
// query the server rejects.
func TestQueryREST(t *testing.T) {
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	schema := bigquery.Schema{{Name: "n", Type: bigquery.IntegerFieldType}, {Name: "s", Type: bigquery.StringFieldType}}
	srv.AddQuery("SELECT n, s FROM d.t", bqtest.QueryResult{Table: bqtest.Table{Schema: schema,
		Rows: [][]bigquery.Value{{int64(1), "a"}, {int64(2), nil}}}, Location: "EU"})
	srv.AddQuery("SELECT nope", bqtest.QueryResult{Err: "Unrecognized name: nope at [1:8]"})

	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", srv.RESTClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.EnableStorageReadClient(ctx, srv.ClientOptions()...); err != nil {
		t.Fatal(err)
	}

	// Dry run: the location of the query's tables.
	dry := c.Query("SELECT n, s FROM d.t")
	dry.DryRun = true
	job, err := dry.Run(ctx)
	if err != nil || job.Location() != "EU" {
		t.Fatalf("dry run: location %q, %v", job.Location(), err)
	}

	ds := c.Dataset("tmp")
	if err := ds.Create(ctx, &bigquery.DatasetMetadata{Location: "EU", DefaultTableExpiration: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := ds.Create(ctx, &bigquery.DatasetMetadata{Location: "EU"}); apiCode(err) != http.StatusConflict {
		t.Errorf("second datasets.insert: %v, want 409", err)
	}
	md, err := ds.Metadata(ctx)
	if err != nil || md.Location != "EU" || md.DefaultTableExpiration != time.Hour {
		t.Errorf("datasets.get: %+v, %v", md, err)
	}

	q := c.Query("SELECT n, s FROM d.t")
	q.Location, q.Dst, q.WriteDisposition = "EU", ds.Table("out"), bigquery.WriteTruncate
	job, err = q.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := job.Wait(ctx)
	if err != nil || st.Err() != nil {
		t.Fatalf("job: %v, %v", err, st.Err())
	}
	it := ds.Table("out").Read(ctx) // through the Storage Read API
	var got [][]bigquery.Value
	for {
		var row []bigquery.Value
		if err := it.Next(&row); err == iterator.Done {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		got = append(got, row)
	}
	if len(got) != 2 || got[0][0] != int64(1) || got[1][1] != nil {
		t.Errorf("destination rows %v", got)
	}
	if js := srv.Jobs(); len(js) != 2 || js[1].Destination != "projects/p/datasets/tmp/tables/out" || js[1].Location != "EU" || js[1].LegacySQL {
		t.Errorf("jobs %+v", js)
	}

	// A job in another location than its tables fails; so does a rejected
	// query, with the message given.
	q.Location = "US"
	if job, err = q.Run(ctx); err == nil {
		_, err = job.Wait(ctx)
	}
	if err == nil || !strings.Contains(err.Error(), "not found in location US") {
		t.Errorf("job in US: %v", err)
	}
	bad := c.Query("SELECT nope")
	if job, err = bad.Run(ctx); err == nil {
		_, err = job.Wait(ctx)
	}
	if err == nil || !strings.Contains(err.Error(), "Unrecognized name: nope at [1:8]") {
		t.Errorf("bad query: %v", err)
	}

	// A dataset with a table is deleted only with its contents.
	if err := ds.Delete(ctx); err == nil {
		t.Error("deleting a dataset that holds a table succeeded")
	}
	if err := ds.DeleteWithContents(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds.DeleteWithContents(ctx); apiCode(err) != http.StatusNotFound {
		t.Errorf("second delete: %v, want 404", err)
	}
	if tabs, dss := srv.Tables(), srv.Datasets(); len(tabs) != 0 || len(dss) != 0 {
		t.Errorf("after deleting: tables %v, datasets %v", tabs, dss)
	}
}

// TestQueryParameters: the REST server records a job's parameters (named
// or positional, NULLs kept apart from empty strings), and fails, as the
// service does, a job whose SQL refers to a parameter it was not given or
// whose parameters mix names and positions.
func TestQueryParameters(t *testing.T) {
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.SetQueryFunc(func(j bqtest.QueryJob) bqtest.QueryResult {
		return bqtest.QueryResult{Table: bqtest.Table{Schema: bigquery.Schema{{Name: "n", Type: bigquery.IntegerFieldType}}}}
	})
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", srv.RESTClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dry := func(sql string, ps ...bigquery.QueryParameter) (bqtest.QueryJob, error) {
		q := c.Query(sql)
		q.Parameters, q.DryRun = ps, true
		_, err := q.Run(ctx)
		js := srv.Jobs()
		return js[len(js)-1], err
	}
	j, err := dry("SELECT @a, @B, '@not', `@no` -- @none\n, ?x", bigquery.QueryParameter{Name: "a", Value: bigquery.NullString{}},
		bigquery.QueryParameter{Name: "b", Value: ""}, bigquery.QueryParameter{Name: "c", Value: []int64{1, 2}})
	if err == nil {
		t.Error("named parameters and a ? mark accepted")
	}
	j, err = dry("SELECT @a, @B, '@not ?', `@no` -- @none ?\n", bigquery.QueryParameter{Name: "a", Value: bigquery.NullString{}},
		bigquery.QueryParameter{Name: "b", Value: ""}, bigquery.QueryParameter{Name: "c", Value: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := j.Param("A")
	b, _ := j.Param("b")
	cp, _ := j.Param("c")
	if av, ok := a.Scalar(); ok || av != "" || a.Type != "STRING" {
		t.Errorf("NULL parameter: %+v", a)
	}
	if bv, ok := b.Scalar(); !ok || bv != "" {
		t.Errorf("empty parameter: %+v", b)
	}
	if j.ParameterMode != "NAMED" || cp.Type != "ARRAY<INT64>" || string(cp.Value) != `{"arrayValues":[{"value":"1"},{"value":"2"}]}` {
		t.Errorf("job %+v", j)
	}
	for _, tc := range []struct {
		sql    string
		params []bigquery.QueryParameter
		want   string
	}{
		{"SELECT 1,\n  @missing", nil, "Query parameter 'missing' not found at [2:3]"},
		{"SELECT ?, ?", []bigquery.QueryParameter{{Value: 1}}, "the query has 2 positional parameters (?), the job 1"},
		{"SELECT @a, ?", []bigquery.QueryParameter{{Name: "a", Value: 1}, {Value: 2}}, "must be all named or all positional"},
	} {
		j, err := dry(tc.sql, tc.params...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || j.Err == "" {
			t.Errorf("%q: %v, want an error saying %q", tc.sql, err, tc.want)
		}
	}
	if j, err := dry("SELECT ? + ?", bigquery.QueryParameter{Value: 1}, bigquery.QueryParameter{Value: 2.5}); err != nil || j.ParameterMode != "POSITIONAL" ||
		j.Parameters[1].Type != "FLOAT64" {
		t.Errorf("positional: %+v, %v", j, err)
	}
}
