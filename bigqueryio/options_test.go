package bigqueryio

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
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
		{[]SessionOption{WithSplitWait(-time.Second)}, "WithSplitWait(-1s): a negative wait"},
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
		qopts := tc.opts
		if !strings.Contains(tc.want, "WithBillingProject") {
			qopts = append([]SessionOption{WithBillingProject("b")}, qopts...)
		}
		if _, err := tryQuery(s, "SELECT 1", reflect.TypeOf(struct{ ID int64 }{}), queryOptions(qopts...)...); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bqquery.Query: ") {
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
	for _, opts := range [][]ReadOption{{WithMaxStreams(4)}, {WithDesiredBundleSize(1 << 20)}, {WithSelectedFields("id", "score")}, {WithMaxStreams(3), WithMaxStreams(3)}} {
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

// repeatCases holds, for every option of the package, two calls with
// different values (nil second for an option that takes none) and the
// calls' text as the errors must show them.
func repeatCases() map[string][4]any {
	t0, t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	return map[string][4]any{
		"WithIgnoreUnknownFields": {WithIgnoreUnknownFields(), nil},
		"WithRowRestriction":      {WithRowRestriction("id >= 100"), WithRowRestriction("id < 10"), `WithRowRestriction("id >= 100")`, `WithRowRestriction("id < 10")`},
		"WithDataFormat":          {WithDataFormat(Avro), WithDataFormat(Arrow), "WithDataFormat(1)", "WithDataFormat(2)"},
		"WithBillingProject":      {WithBillingProject("b1"), WithBillingProject("b2"), `WithBillingProject("b1")`, `WithBillingProject("b2")`},
		"WithMaxStreams":          {WithMaxStreams(0), WithMaxStreams(3), "WithMaxStreams(0)", "WithMaxStreams(3)"},
		"WithDesiredBundleSize":   {WithDesiredBundleSize(1 << 20), WithDesiredBundleSize(1 << 30), "WithDesiredBundleSize(1048576)", "WithDesiredBundleSize(1073741824)"},
		"WithSnapshotTime":        {WithSnapshotTime(t0), WithSnapshotTime(t1), "WithSnapshotTime(2026-01-02T03:04:05Z)", "WithSnapshotTime(2026-01-02T03:04:06Z)"},
		"WithEndpoint":            {WithEndpoint("a:1"), WithEndpoint("b:2"), `WithEndpoint("a:1")`, `WithEndpoint("b:2")`},
		"WithInsecure":            {WithInsecure(), nil},
		"WithClientOptions":       {WithClientOptions("a"), WithClientOptions("b"), `WithClientOptions("a")`, `WithClientOptions("b")`},
		"WithQuotaProject":        {WithQuotaProject("q1"), WithQuotaProject("q2"), `WithQuotaProject("q1")`, `WithQuotaProject("q2")`},
		"WithSplitTimeout":        {WithSplitTimeout(time.Second), WithSplitTimeout(time.Minute), "WithSplitTimeout(1s)", "WithSplitTimeout(1m0s)"},
		"WithSplitWait":           {WithSplitWait(time.Second), WithSplitWait(time.Minute), "WithSplitWait(1s)", "WithSplitWait(1m0s)"},
		"WithRetries":             {WithRetries(3, time.Second), WithRetries(3, time.Millisecond), "WithRetries(3, 1s)", "WithRetries(3, 1ms)"},
		"WithMetricsNamespace":    {WithMetricsNamespace("a"), WithMetricsNamespace("b"), `WithMetricsNamespace("a")`, `WithMetricsNamespace("b")`},
		"WithLegacySQL":           {WithLegacySQL(), nil},
		"WithQueryPriority":       {WithQueryPriority(bigquery.BatchPriority), WithQueryPriority(bigquery.InteractivePriority), `WithQueryPriority("BATCH")`, `WithQueryPriority("INTERACTIVE")`},
		"WithQueryLocation":       {WithQueryLocation("EU"), WithQueryLocation("US"), `WithQueryLocation("EU")`, `WithQueryLocation("US")`},
		"WithQueryTempDataset":    {WithQueryTempDataset("t1"), WithQueryTempDataset("t2"), `WithQueryTempDataset("t1")`, `WithQueryTempDataset("t2")`},
		"WithRESTEndpoint":        {WithRESTEndpoint("http://a"), WithRESTEndpoint("http://b"), `WithRESTEndpoint("http://a")`, `WithRESTEndpoint("http://b")`},
		// These two have rules of their own (TestOptionConflicts,
		// TestQueryParameterErrors).
		"WithSelectedFields":  {nil},
		"WithQueryParameters": {nil},
		// Refused for struct input, which this test writes; given twice
		// with Rows it is accepted (TestWriteIgnoreUnknownValues).
		// Refused without WithRowMutation, which this test does not give
		// (TestCDCUnorderedChanges).
	}
}

// optionFuncs lists the exported functions of the package's sources that
// return an option, by parsing them: a new option is then covered by
// TestOptionsGivenTwice, or the test says it is missing.
func optionFuncs(t *testing.T) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range pkgs["bigqueryio"].Files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || fd.Type.Results == nil || len(fd.Type.Results.List) != 1 {
				continue
			}
			if id, ok := fd.Type.Results.List[0].Type.(*ast.Ident); ok && strings.HasSuffix(id.Name, "Option") {
				names = append(names, fd.Name.Name)
			}
		}
	}
	return names
}

// TestOptionsGivenTwice: every option of every transform given twice with
// different values is refused at construction naming both calls, by Read,
// NewStreamCheck, Query and Write alike; the same call repeated is
// accepted. (Before: the last value won silently, WithRowRestriction("id
// >= 100") then WithRowRestriction("id < 10") read the rows under 10.)
func TestOptionsGivenTwice(t *testing.T) {
	cases := repeatCases()
	for _, name := range optionFuncs(t) {
		if _, ok := cases[name]; !ok {
			t.Errorf("option %s has no case in repeatCases: add two calls of it with different values", name)
		}
	}
	type row = struct{ ID int64 }
	typ := reflect.TypeFor[row]()
	for name, tc := range cases {
		if tc[0] == nil {
			continue
		}
		var transforms int
		check := func(transform string, err error) {
			transforms++
			if tc[1] == nil {
				if err != nil {
					t.Errorf("%s: %s given twice: %v", transform, name, err)
				}
				return
			}
			want := fmt.Sprintf("%s: %s and %s are both given: give %s once", transform, tc[2], tc[3], name)
			if err == nil || err.Error() != want {
				t.Errorf("%s: %v\nwant %s", transform, err, want)
			}
		}
		second := tc[1]
		if second == nil {
			second = tc[0] // the same call repeated
		}
		if o, ok := tc[0].(ReadOption); ok {
			_, s := beam.NewPipelineWithRoot()
			_, err := TryRead(s, "p.d.t", typ, o, second.(ReadOption))
			check("bigqueryio.Read", err)
			if tc[1] != nil { // NewStreamCheck would connect once the options pass
				_, err = NewStreamCheck(context.Background(), "p.d.t", o, second.(ReadOption))
				check("bigqueryio.NewStreamCheck", err)
			}
		}
		if o, ok := tc[0].(QueryOption); ok {
			opts := []QueryOption{o, second.(QueryOption)}
			if name != "WithBillingProject" {
				opts = append(opts, WithBillingProject("b"))
			}
			_, s := beam.NewPipelineWithRoot()
			_, err := tryQuery(s, "SELECT 1", typ, opts...)
			check("bqquery.Query", err)
		}
		if transforms == 0 {
			t.Errorf("%s: no transform takes it", name)
		}
	}
}

// TestNilOption: a nil option is refused naming the transform and its
// position, by every transform, instead of panicking with a nil pointer.
func TestNilOption(t *testing.T) {
	typ := reflect.TypeFor[struct{ ID int64 }]()
	for _, tc := range []struct {
		name string
		try  func() error
		want string
	}{
		{"nil ReadOption", func() error {
			_, s := beam.NewPipelineWithRoot()
			_, err := TryRead(s, "p.d.t", typ, WithMaxStreams(2), nil)
			return err
		}, "bigqueryio.Read: option 2 of 2 is nil (a nil bigqueryio.ReadOption)"},
		{"nil function", func() error {
			_, s := beam.NewPipelineWithRoot()
			_, err := TryRead(s, "p.d.t", typ, sessionOption(nil), WithMaxStreams(2))
			return err
		}, "bigqueryio.Read: option 1 of 2 is nil"},
		{"nil SessionOption function", func() error {
			_, err := NewStreamCheck(context.Background(), "p.d.t", sessionOption(nil))
			return err
		}, "bigqueryio.NewStreamCheck: option 1 of 1 is nil (a nil bigqueryio.ReadOption)"},
		{"nil QueryOption", func() error {
			_, s := beam.NewPipelineWithRoot()
			_, err := tryQuery(s, "SELECT 1", typ, WithBillingProject("b"), WithLegacySQL(), queryOnlyOption(nil))
			return err
		}, "bqquery.Query: option 3 of 3 is nil (a nil bigqueryio.QueryOption)"},
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			err = tc.try()
		}()
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
}

// tryQuery is what bqquery.TryQuery checks when the pipeline is built
// (bqquery imports this package: its tests cannot call it here).
func tryQuery(_ beam.Scope, sql string, t reflect.Type, opts ...QueryOption) (beam.PCollection, error) {
	_, err := planQuery("bqquery.Query", sql, t, opts)
	return beam.PCollection{}, err
}
