package bqquery

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// TestRunQueryExpiry: what a worker crash leaves behind expires. The
// temporary dataset Query creates is in the query's location with a default
// table expiration of TempExpiration; a table in the user's dataset gets an
// expiration time TempExpiration ahead. remove deletes either, and a second
// remove (a retried bundle) is no error.
func TestRunQueryExpiry(t *testing.T) {
	srv := newTestServer(t)
	eventsTable(t, srv, 10)
	srv.AddQuery("SELECT 1 AS x", bqtest.QueryResult{Table: bqtest.Table{Schema: bigquery.Schema{{Name: "x", Type: bigquery.IntegerFieldType}},
		Rows: [][]bigquery.Value{{int64(1)}}}, Location: "asia-northeast1"})
	srv.AddDataset("bill", "mine", "asia-northeast1")
	ctx := context.Background()
	for _, userDataset := range []string{"", "mine"} {
		cfg := bqcore.QueryJob{Billing: "bill", Insecure: true, SQL: "SELECT 1 AS x", REST: srv.RESTEndpoint(), TempDataset: userDataset}
		c, err := newBQClient(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tmp, err := runQuery(ctx, c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if tmp.Location != "asia-northeast1" || tmp.OwnDataset != (userDataset == "") || !strings.HasPrefix(tmp.Table, "sdfio_query_") {
			t.Errorf("dataset %q: temporary table %+v", userDataset, tmp)
		}
		name := tmp.Project + "." + tmp.Dataset + "." + tmp.Table
		exp, ok := srv.TableExpiration(name)
		if !ok {
			t.Fatalf("dataset %q: no table %s", userDataset, name)
		}
		if userDataset == "" {
			ds := srv.Datasets()
			if len(ds) != 2 || ds[1].ID != tmp.Dataset || ds[1].Location != "asia-northeast1" || ds[1].TableExpiration != TempExpiration {
				t.Errorf("temporary dataset: %+v", ds)
			}
		} else if d := time.Until(exp); d < TempExpiration-time.Minute || d > TempExpiration {
			t.Errorf("table %s in the user's dataset expires in %v, want %v", name, d, TempExpiration)
		}
		for i := 0; i < 2; i++ {
			if err := tmp.remove(ctx, c); err != nil {
				t.Errorf("dataset %q: remove #%d: %v", userDataset, i+1, err)
			}
		}
		if _, ok := srv.TableExpiration(name); ok {
			t.Errorf("table %s still there", name)
		}
		if ds := srv.Datasets(); len(ds) != 1 || ds[0].ID != "mine" {
			t.Errorf("datasets after remove: %+v, want the user's only", ds)
		}
	}
}

// TestRunQueryLocation asserts the location each query job is inserted
// with, and its temporary dataset created in: WithQueryLocation's, with no
// dry run, even when the query's tables are elsewhere (the job then fails
// as the service fails it); else the dry run's; else, when the dry run
// names none, the location of the first table it says the query reads;
// else none, the service's default (bqtest's US). A referenced table whose
// location cannot be read fails the query before any job runs, naming it.
func TestRunQueryLocation(t *testing.T) {
	const sql = "SELECT x FROM d.src"
	schema := bigquery.Schema{{Name: "x", Type: bigquery.IntegerFieldType}}
	for _, tc := range []struct {
		name    string
		option  string // WithQueryLocation
		result  bqtest.QueryResult
		dryRun  bool   // a dry run is the first job
		want    string // the location the job insert named
		wantDS  string // the temporary dataset's location ("US" when created without one)
		wantErr string
	}{
		{name: "dry run", result: bqtest.QueryResult{Location: "EU"}, dryRun: true, want: "EU", wantDS: "EU"},
		{name: "option", option: "asia-northeast1", result: bqtest.QueryResult{Location: "asia-northeast1"}, want: "asia-northeast1", wantDS: "asia-northeast1"},
		{name: "option over the tables' location", option: "US", result: bqtest.QueryResult{Location: "EU"}, want: "US",
			wantErr: "not found in location US"},
		{name: "first referenced table", dryRun: true, want: "EU", wantDS: "EU",
			result: bqtest.QueryResult{Location: "EU", DryRunWithoutLocation: true, ReferencedTables: []string{"p.d.src", "p.d.other"}}},
		{name: "no location at all", dryRun: true, want: "", wantDS: "US",
			result: bqtest.QueryResult{DryRunWithoutLocation: true}},
		{name: "referenced table missing", dryRun: true,
			result:  bqtest.QueryResult{Location: "EU", DryRunWithoutLocation: true, ReferencedTables: []string{"p.d.gone"}},
			wantErr: "the location of the query's table p:d.gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTestServer(t)
			for name, loc := range map[string]string{"p.d.src": "EU", "p.d.other": "asia-northeast1"} {
				if err := srv.AddTable(name, bqtest.Table{Schema: schema, Rows: [][]bigquery.Value{{int64(1)}}, Location: loc}); err != nil {
					t.Fatal(err)
				}
			}
			res := tc.result
			res.Table = bqtest.Table{Schema: schema, Rows: [][]bigquery.Value{{int64(1)}, {int64(2)}}}
			srv.AddQuery(sql, res)
			cfg := bqcore.QueryJob{Billing: "bill", Insecure: true, SQL: sql, REST: srv.RESTEndpoint(), Location: tc.option}
			ctx := context.Background()
			c, err := newBQClient(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tmp, err := runQuery(ctx, c, cfg)
			jobs := srv.Jobs()
			var inserts []bqtest.QueryJob
			for i, j := range jobs {
				if j.DryRun != (tc.dryRun && i == 0) {
					t.Fatalf("jobs %+v: want a dry run first: %v", jobs, tc.dryRun)
				}
				if !j.DryRun {
					inserts = append(inserts, j)
				}
			}
			if tc.dryRun && jobs[0].RequestLocation != "" {
				t.Errorf("the dry run named location %q, want none", jobs[0].RequestLocation)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("runQuery: %v, want an error saying %q", err, tc.wantErr)
				}
				if ds := srv.Datasets(); len(ds) != 0 {
					t.Errorf("datasets left after the failure: %+v", ds)
				}
				if strings.Contains(tc.name, "missing") {
					if len(inserts) != 0 {
						t.Errorf("jobs inserted after the failed dry run: %+v", inserts)
					}
					return
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(inserts) != 1 || inserts[0].RequestLocation != tc.want || inserts[0].Destination == "" {
				t.Fatalf("job inserts %+v, want one into a temporary table with location %q", inserts, tc.want)
			}
			if tc.wantErr != "" {
				return
			}
			if tmp.Location != tc.want {
				t.Errorf("temporary table %+v, want location %q", tmp, tc.want)
			}
			if ds := srv.Datasets(); len(ds) != 1 || ds[0].ID != tmp.Dataset || ds[0].Location != tc.wantDS {
				t.Errorf("datasets %+v, want the temporary dataset %s in %s", ds, tmp.Dataset, tc.wantDS)
			}
			if err := tmp.remove(ctx, c); err != nil {
				t.Error(err)
			}
		})
	}
}
