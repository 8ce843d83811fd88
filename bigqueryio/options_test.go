package bigqueryio

import (
	"context"
	"slices"
	"testing"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

func TestTableNames(t *testing.T) {
	for in, want := range map[string]string{
		"p.d.t":         "projects/p/datasets/d/tables/t",
		"my-proj:ds.tb": "projects/my-proj/datasets/ds/tables/tb",
		// Domain-scoped projects.
		"example.com:proj:ds.tb":     "projects/example.com:proj/datasets/ds/tables/tb",
		"example.com:proj.ds.tb":     "projects/example.com:proj/datasets/ds/tables/tb",
		"corp.example.com:p-1:d_2.t": "projects/corp.example.com:p-1/datasets/d_2/tables/t",
		"google.com:p.d.t":           "projects/google.com:p/datasets/d/tables/t",
	} {
		if got, err := tableResource(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "p.d", "p.d.t.x", ".d.t", "p:d", "p/d.t", "p:d.", "p.d.t:x",
		"example.com:proj", "example.com:proj:ds", "example.com:p:q:d.t", ":p:d.t", "example.com:p.q.d.t"} {
		if _, err := tableResource(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSessionOptions checks that every option reaches CreateReadSession.
func TestSessionOptions(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(10))
	numbersTable(t, srv, 1000)
	ctx := context.Background()
	snap := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	cfg, err := newConfig("p.d.nums", serverOpts(srv, WithSelectedFields("id", "score"), WithRowRestriction("id > 3"),
		WithDataFormat(Arrow), WithBillingProject("billing"), WithMaxStreams(7), WithSnapshotTime(snap)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := createSession(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	req := srv.LastSessionRequest()
	rs := req.GetReadSession()
	if req.GetParent() != "projects/billing" || req.GetMaxStreamCount() != 7 || len(s.GetStreams()) != 7 ||
		rs.GetDataFormat() != storagepb.DataFormat_ARROW || !slices.Equal(rs.GetReadOptions().GetSelectedFields(), []string{"id", "score"}) ||
		rs.GetReadOptions().GetRowRestriction() != "id > 3" || !rs.GetTableModifiers().GetSnapshotTime().AsTime().Equal(snap) ||
		rs.GetTable() != "projects/p/datasets/d/tables/nums" {
		t.Errorf("request %v", req)
	}

	// Desired bundle size: the estimated bytes / bundle size, in [10, 10000].
	for _, tc := range []struct {
		bundle int64
		want   int32
	}{{1 << 40, MinStreams}, {1, MaxStreams}} {
		cfg, _ := newConfig("p.d.nums", serverOpts(srv, WithDesiredBundleSize(tc.bundle)))
		if _, err := createSession(ctx, c, cfg); err != nil {
			t.Fatal(err)
		}
		if got := srv.LastSessionRequest().GetMaxStreamCount(); got != tc.want {
			t.Errorf("bundle size %d: %d streams asked, want %d", tc.bundle, got, tc.want)
		}
	}
	cfg, _ = newConfig("p.d.nums", serverOpts(srv))
	if _, err := createSession(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	if r := srv.LastSessionRequest(); r.GetMaxStreamCount() != 0 || r.GetParent() != "projects/p" || r.GetReadSession().GetDataFormat() != storagepb.DataFormat_AVRO {
		t.Errorf("defaults: %v", r)
	}
}
