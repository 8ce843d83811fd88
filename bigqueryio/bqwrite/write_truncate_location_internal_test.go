package bqwrite

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// TestTruncateCopyJobLocation: WriteTruncate into a table of a
// single-region dataset (europe-west1), whose jobs the service finds only
// when asked with their location, and its commit step run again with the
// same reports (a retried commit step, its answer lost). The copy job is
// inserted with the dataset's location and read back with it: the retry
// finds the first attempt's copy and succeeds, the table holding the
// write's rows once. On the code before, the job was inserted and read
// without a location: the retry read 404, took it that no copy had run,
// and failed committing the streams again (the first attempt had deleted
// their staging table) — a failed write whose copy had replaced the table;
// with the staging table still there, it would have got 409 for the job,
// 404 reading it back, and failed saying "the table left as it was" about
// the table. Every REST call of the write also carries the official
// client's User-Agent and x-goog-api-client.
func TestTruncateCopyJobLocation(t *testing.T) {
	ctx := context.Background()
	srv, err := bqtest.NewServer(bqtest.WithHeaderLog("User-Agent", "X-Goog-Api-Client"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.AddDataset("p", "eu1", "europe-west1")
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "name", Type: bigquery.StringFieldType}}
	if err := srv.AddTable("p.eu1.tr", bqtest.Table{Schema: schema, Location: "europe-west1",
		Rows: [][]bigquery.Value{{int64(1000), "old"}, {int64(1001), "old"}}}); err != nil {
		t.Fatal(err)
	}
	cfg := writeTestConfig(t, srv, "p.eu1.tr", WithWriteDisposition(WriteTruncate))
	fn := newAppendFn(cfg)
	defer fn.Teardown()
	fn.run = "00112233445566aa"
	outs, err := runAppendBundle(ctx, fn, onceRowsFrom(0, 120))
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, keyedDone{cfg.Table, streamDone{Key: true, Run: fn.run}})
	first, errs := runCommitStep(ctx, cfg, outs)
	if len(errs) != 0 || len(first) != 1 || first[0].Rows != 120 {
		t.Fatalf("commit step: results %+v, errors %v", first, errs)
	}
	again, errs := runCommitStep(ctx, cfg, outs)
	if len(errs) != 0 || len(again) != 1 || again[0].Rows != 120 {
		t.Fatalf("retried commit step: results %+v, errors %v; want success (the first attempt's copy found)", again, errs)
	}
	rows, err := srv.TableRows("p.eu1.tr")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, r := range rows {
		ids = append(ids, int(r[0].(int64)))
	}
	sort.Ints(ids)
	if len(ids) != 120 || ids[0] != 0 || ids[119] != 119 {
		t.Errorf("p.eu1.tr holds ids %v, want 0..119 once", ids)
	}
	if st := srv.WriteStats(); st.CopyJobs != 1 {
		t.Errorf("%d copy jobs, want 1", st.CopyJobs)
	}
	if tables := srv.Tables(); !slices.Equal(tables, []string{cfg.Table}) {
		t.Errorf("tables %v: want the destination alone (the staging table deleted)", tables)
	}
	var copies []bqtest.QueryJob
	for _, j := range srv.Jobs() {
		if strings.HasPrefix(j.JobID, "sdfio_truncate_") {
			copies = append(copies, j)
		}
	}
	if len(copies) != 1 || copies[0].RequestLocation != "europe-west1" {
		t.Errorf("copy jobs %+v: want one, inserted with location europe-west1", copies)
	}
	gets := 0
	for _, c := range srv.Calls() {
		if c.API != "rest" {
			continue
		}
		if ua := c.Header.Get("User-Agent"); !strings.Contains(ua, "gcloud-golang-bigquery/") {
			t.Errorf("%s: User-Agent %q, want the official client's", c.Method, ua)
		}
		if xg := c.Header.Get("X-Goog-Api-Client"); !strings.Contains(xg, "gccl/") {
			t.Errorf("%s: x-goog-api-client %q, want the official client's", c.Method, xg)
		}
		if strings.HasPrefix(c.Method, "GET /bigquery/v2/projects/p/jobs/sdfio_truncate_") {
			gets++
			if loc := c.Query.Get("location"); loc != "europe-west1" {
				t.Errorf("%s asked with location %q, want europe-west1", c.Method, loc)
			}
		}
	}
	if gets == 0 {
		t.Error("the retried commit step read no copy job")
	}
}
