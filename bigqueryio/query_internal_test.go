package bigqueryio

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// TestRunQueryExpiry: what a worker crash leaves behind expires. The
// temporary dataset Query creates is in the query's location with a default
// table expiration of TempExpiration; a table in the user's dataset gets an
// expiration time TempExpiration ahead. remove deletes either, and a second
// remove (a retried bundle) is no error.
func TestRunQueryExpiry(t *testing.T) {
	srv := newTestServer(t)
	numbersTable(t, srv, 10)
	srv.AddQuery("SELECT 1 AS x", bqtest.QueryResult{Table: bqtest.Table{Schema: bigquery.Schema{{Name: "x", Type: bigquery.IntegerFieldType}},
		Rows: [][]bigquery.Value{{int64(1)}}}, Location: "asia-northeast1"})
	srv.AddDataset("bill", "mine", "asia-northeast1")
	ctx := context.Background()
	for _, userDataset := range []string{"", "mine"} {
		cfg := readConfig{Billing: "bill", Insecure: true, Query: queryConfig{SQL: "SELECT 1 AS x", REST: srv.RESTEndpoint(), TempDataset: userDataset}}
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
