package bigqueryio

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

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
	cfg, err := newConfig("bigqueryio.Read", "p.d.nums", serverOpts(srv, WithSelectedFields("id", "score"), WithRowRestriction("id > 3"),
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
		cfg, _ := newConfig("bigqueryio.Read", "p.d.nums", serverOpts(srv, WithDesiredBundleSize(tc.bundle)))
		if _, err := createSession(ctx, c, cfg); err != nil {
			t.Fatal(err)
		}
		if got := srv.LastSessionRequest().GetMaxStreamCount(); got != tc.want {
			t.Errorf("bundle size %d: %d streams asked, want %d", tc.bundle, got, tc.want)
		}
	}
	cfg, _ = newConfig("bigqueryio.Read", "p.d.nums", serverOpts(srv))
	if _, err := createSession(ctx, c, cfg); err != nil {
		t.Fatal(err)
	}
	if r := srv.LastSessionRequest(); r.GetMaxStreamCount() != 0 || r.GetParent() != "projects/p" || r.GetReadSession().GetDataFormat() != storagepb.DataFormat_AVRO {
		t.Errorf("defaults: %v", r)
	}
}

// TestOptionConflicts: options that contradict each other, or hold a value
// that cannot work, are refused when the pipeline is built, by Read and
// Query alike, naming the options. (Before: a second WithSelectedFields
// added to the first, the last of WithMaxStreams and WithDesiredBundleSize
// won, and a negative count was "negative stream count or bundle size".)
func TestOptionConflicts(t *testing.T) {
	for _, tc := range []struct {
		opts []SessionOption
		want string
	}{
		{[]SessionOption{WithSelectedFields("id"), WithSelectedFields("score", "kind")},
			`WithSelectedFields is given 2 times, WithSelectedFields("id") and WithSelectedFields("score", "kind")`},
		{[]SessionOption{WithSelectedFields()}, "WithSelectedFields() names no field"},
		{[]SessionOption{WithSelectedFields("id", "ID")}, `WithSelectedFields("id", "ID") names ID twice`},
		{[]SessionOption{WithSelectedFields("id", " ")}, "names an empty field"},
		{[]SessionOption{WithMaxStreams(4), WithDesiredBundleSize(1 << 20)}, "WithMaxStreams(4) and WithDesiredBundleSize(1048576) both size the read session"},
		{[]SessionOption{WithDesiredBundleSize(1 << 20), WithMaxStreams(4)}, "WithMaxStreams(4) and WithDesiredBundleSize(1048576) both size the read session"},
		{[]SessionOption{WithMaxStreams(-1)}, "WithMaxStreams(-1): a negative stream count"},
		{[]SessionOption{WithMaxStreams(1 << 40)}, "WithMaxStreams(1099511627776): more streams than the API can ask for"},
		{[]SessionOption{WithMaxStreams(-1<<32 + 5)}, "WithMaxStreams(-4294967291): a negative stream count"},
		{[]SessionOption{WithDesiredBundleSize(-5)}, "WithDesiredBundleSize(-5): a negative bundle size"},
		{[]SessionOption{WithRetries(-1, time.Second)}, "WithRetries(-1, 1s): a negative retry count or backoff"},
		{[]SessionOption{WithSplitTimeout(-time.Second)}, "WithSplitTimeout(-1s): a negative timeout"},
		{[]SessionOption{WithDataFormat(7)}, "WithDataFormat(7): data format 7"},
		{[]SessionOption{WithMetricsNamespace("")}, `WithMetricsNamespace(""): an empty metrics namespace`},
		{[]SessionOption{WithBillingProject("a/b")}, `WithBillingProject("a/b"): not a project id`},
	} {
		if _, err := newConfig("bigqueryio.Read", "p.d.t", readOptions(tc.opts...)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Read: %v, want an error saying %s", err, tc.want)
		}
		_, s := beam.NewPipelineWithRoot()
		if _, err := TryRead(s, "p.d.t", reflect.TypeOf(struct{ ID int64 }{}), readOptions(tc.opts...)...); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bigqueryio.Read: ") {
			t.Errorf("TryRead: %v, want an error saying %s", err, tc.want)
		}
		if _, err := TryQuery(s, "SELECT 1", reflect.TypeOf(struct{ ID int64 }{}), queryOptions(append([]SessionOption{WithBillingProject("b")}, tc.opts...)...)...); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bigqueryio.Query: ") {
			t.Errorf("TryQuery: %v, want an error saying %s", err, tc.want)
		}
	}
	// Read panics where TryRead returns the error.
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "both size the read session") {
				t.Errorf("Read did not panic with the error: %v", r)
			}
		}()
		_, s := beam.NewPipelineWithRoot()
		Read(s, "p.d.t", reflect.TypeOf(struct{ ID int64 }{}), WithMaxStreams(4), WithDesiredBundleSize(10))
	}()
	// Each alone, and a selection given once, are fine.
	for _, opts := range [][]ReadOption{{WithMaxStreams(4)}, {WithDesiredBundleSize(1 << 20)}, {WithSelectedFields("id", "score")}, {WithMaxStreams(0), WithMaxStreams(3)}} {
		if _, err := newConfig("bigqueryio.Read", "p.d.t", opts); err != nil {
			t.Error(err)
		}
	}
}

func readOptions(opts ...SessionOption) []ReadOption {
	out := make([]ReadOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

func queryOptions(opts ...SessionOption) []QueryOption {
	out := make([]QueryOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}
