package bqquery

import (
	"context"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// TestQueryClientHeaders: every REST call of Query (the dry run, the
// temporary dataset, the query job and its reads, the removal) goes
// through the official client, and carries its User-Agent and
// x-goog-api-client; the job is read with its location. On the code
// before (a hand-written REST client) the calls carried Go's default
// User-Agent and no x-goog-api-client.
func TestQueryClientHeaders(t *testing.T) {
	srv, err := bqtest.NewServer(bqtest.WithHeaderLog("User-Agent", "X-Goog-Api-Client"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddQuery("SELECT 1 AS x", bqtest.QueryResult{Table: bqtest.Table{Schema: bigquery.Schema{{Name: "x", Type: bigquery.IntegerFieldType}},
		Rows: [][]bigquery.Value{{int64(1)}}}, Location: "europe-west1"})
	ctx := context.Background()
	cfg := bqcore.QueryJob{Billing: "bill", Insecure: true, SQL: "SELECT 1 AS x", REST: srv.RESTEndpoint()}
	c, err := newBQClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tmp, err := runQuery(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tmp.remove(ctx, c); err != nil {
		t.Fatal(err)
	}
	calls := srv.Calls()
	if len(calls) < 3 {
		t.Fatalf("%d REST calls recorded, want the dry run, the dataset, the job and more", len(calls))
	}
	for _, call := range calls {
		if ua := call.Header.Get("User-Agent"); !strings.Contains(ua, "gcloud-golang-bigquery/") {
			t.Errorf("%s: User-Agent %q, want the official client's", call.Method, ua)
		}
		if xg := call.Header.Get("X-Goog-Api-Client"); !strings.Contains(xg, "gccl/") {
			t.Errorf("%s: x-goog-api-client %q, want the official client's", call.Method, xg)
		}
		if strings.Contains(call.Method, "/jobs/sdfio_query_") || strings.Contains(call.Method, "/queries/") {
			if loc := call.Query.Get("location"); loc != "europe-west1" {
				t.Errorf("%s asked with location %q, want europe-west1", call.Method, loc)
			}
		}
	}
}
