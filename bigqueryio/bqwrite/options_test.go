package bqwrite

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

func routeA(struct{ ID int64 }) string { return "p.d.a" }
func routeB(struct{ ID int64 }) string { return "p.d.b" }

func mutationA(struct{ ID int64 }) RowMutation { return RowMutation{Type: Upsert} }
func mutationB(struct{ ID int64 }) RowMutation { return RowMutation{Type: Delete} }

func specA(string) TableSpec { return TableSpec{Description: "a"} }
func specB(string) TableSpec { return TableSpec{Description: "b"} }

// repeatCases holds, for every option of the package, two calls with
// different values (nil second for an option that takes none) and the
// calls' text as the errors must show them.
func repeatCases() map[string][4]any {
	s1 := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}}
	s2 := bigquery.Schema{{Name: "id", Type: bigquery.StringFieldType}}
	return map[string][4]any{
		"WithEndpoint":             {WithEndpoint("a:1"), WithEndpoint("b:2"), `WithEndpoint("a:1")`, `WithEndpoint("b:2")`},
		"WithInsecure":             {WithInsecure(), nil},
		"WithClientOptions":        {WithClientOptions("a"), WithClientOptions("b"), `WithClientOptions("a")`, `WithClientOptions("b")`},
		"WithQuotaProject":         {WithQuotaProject("q1"), WithQuotaProject("q2"), `WithQuotaProject("q1")`, `WithQuotaProject("q2")`},
		"WithRetries":              {WithRetries(3, time.Second), WithRetries(3, time.Millisecond), "WithRetries(3, 1s)", "WithRetries(3, 1ms)"},
		"WithMetricsNamespace":     {WithMetricsNamespace("a"), WithMetricsNamespace("b"), `WithMetricsNamespace("a")`, `WithMetricsNamespace("b")`},
		"WithRESTEndpoint":         {WithRESTEndpoint("http://a"), WithRESTEndpoint("http://b"), `WithRESTEndpoint("http://a")`, `WithRESTEndpoint("http://b")`},
		"WithAtLeastOnce":          {WithAtLeastOnce(), nil},
		"WithFailOnRowErrors":      {WithFailOnRowErrors(), nil},
		"WithCreateDisposition":    {WithCreateDisposition(CreateIfNeeded), WithCreateDisposition(CreateNever), "WithCreateDisposition(0)", "WithCreateDisposition(1)"},
		"WithWriteDisposition":     {WithWriteDisposition(WriteAppend), WithWriteDisposition(WriteEmpty), "WithWriteDisposition(0)", "WithWriteDisposition(1)"},
		"WithSchema":               {WithSchema(s1), WithSchema(s2), `WithSchema(id INTEGER)`, `WithSchema(id STRING)`},
		"WithTableFunc":            {WithTableFunc(routeA), WithTableFunc(routeB), "WithTableFunc(github.com/sdfio/sdfio/bigqueryio/bqwrite.routeA)", "WithTableFunc(github.com/sdfio/sdfio/bigqueryio/bqwrite.routeB)"},
		"WithMaxAppendBytes":       {WithMaxAppendBytes(1 << 20), WithMaxAppendBytes(1 << 10), "WithMaxAppendBytes(1048576)", "WithMaxAppendBytes(1024)"},
		"WithExactlyOnceStreaming": {WithExactlyOnceStreaming(), nil},
		"WithNumStreams":           {WithNumStreams(2), WithNumStreams(3), "WithNumStreams(2)", "WithNumStreams(3)"},
		"WithTriggeringFrequency":  {WithTriggeringFrequency(time.Second), WithTriggeringFrequency(time.Minute), "WithTriggeringFrequency(1s)", "WithTriggeringFrequency(1m0s)"},
		"WithStreamRotation":       {WithStreamRotation(10, time.Second), WithStreamRotation(20, time.Second), "WithStreamRotation(10, 1s)", "WithStreamRotation(20, 1s)"},
		"WithStreamRotationBytes":  {WithStreamRotationBytes(10), WithStreamRotationBytes(20), "WithStreamRotationBytes(10)", "WithStreamRotationBytes(20)"},
		"WithTimePartitioning": {WithTimePartitioning(TimePartitioning{Unit: PartitionByDay}), WithTimePartitioning(TimePartitioning{Unit: PartitionByHour}),
			"WithTimePartitioning({Unit:DAY Column: Expiration:0s})", "WithTimePartitioning({Unit:HOUR Column: Expiration:0s})"},
		"WithRangePartitioning": {WithRangePartitioning(RangePartitioning{Column: "ID", End: 10, Interval: 1}), WithRangePartitioning(RangePartitioning{Column: "ID", End: 20, Interval: 1}),
			"WithRangePartitioning({Column:ID Start:0 End:10 Interval:1})", "WithRangePartitioning({Column:ID Start:0 End:20 Interval:1})"},
		"WithClustering":          {WithClustering("ID"), WithClustering("ID", "ID2"), `WithClustering("ID")`, `WithClustering("ID", "ID2")`},
		"WithTableDescription":    {WithTableDescription("a"), WithTableDescription("b"), `WithTableDescription("a")`, `WithTableDescription("b")`},
		"WithTableLabels":         {WithTableLabels(map[string]string{"a": "1"}), WithTableLabels(map[string]string{"a": "2"}), `WithTableLabels("map[a:1]")`, `WithTableLabels("map[a:2]")`},
		"WithKMSKey":              {WithKMSKey("k1"), WithKMSKey("k2"), `WithKMSKey("k1")`, `WithKMSKey("k2")`},
		"WithPrimaryKey":          {WithPrimaryKey("ID"), WithPrimaryKey("ID", "ID2"), `WithPrimaryKey("ID")`, `WithPrimaryKey("ID", "ID2")`},
		"WithRowMutation":         {WithRowMutation(mutationA), WithRowMutation(mutationB), "WithRowMutation(github.com/sdfio/sdfio/bigqueryio/bqwrite.mutationA)", "WithRowMutation(github.com/sdfio/sdfio/bigqueryio/bqwrite.mutationB)"},
		"WithTableSpecFunc":       {WithTableSpecFunc(specA), WithTableSpecFunc(specB), "WithTableSpecFunc(github.com/sdfio/sdfio/bigqueryio/bqwrite.specA)", "WithTableSpecFunc(github.com/sdfio/sdfio/bigqueryio/bqwrite.specB)"},
		"WithSchemaUpdateOptions": {WithSchemaUpdateOptions(AllowFieldAddition), WithSchemaUpdateOptions(AllowFieldRelaxation), `WithSchemaUpdateOptions("ALLOW_FIELD_ADDITION")`, `WithSchemaUpdateOptions("ALLOW_FIELD_RELAXATION")`},
		// These two have rules of their own (TestOptionConflicts,
		// TestQueryParameterErrors).
		// Refused for struct input, which this test writes; given twice
		// with Rows it is accepted (TestWriteIgnoreUnknownValues).
		"WithIgnoreUnknownValues": {nil},
		// Refused without WithRowMutation, which this test does not give
		// (TestCDCUnorderedChanges).
		"WithUnorderedChanges": {nil},
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
	for _, f := range pkgs["bqwrite"].Files {
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
	for name, tc := range cases {
		if tc[0] == nil {
			continue
		}
		table := "p.d.t"
		if name == "WithTableFunc" {
			table = ""
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
		if o, ok := tc[0].(WriteOption); ok {
			_, s := beam.NewPipelineWithRoot()
			opts := []WriteOption{o, second.(WriteOption)}
			if name == "WithTableSpecFunc" {
				table, opts = "", append(opts, WithTableFunc(routeA))
			}
			_, err := TryWrite(s, table, beam.Create(s, row{1}), opts...)
			check("bqwrite.Write", err)
		}
		if transforms == 0 {
			t.Errorf("%s: no transform takes it", name)
		}
	}
}

// TestNilOption: a nil option is refused naming the transform and its
// position, by every transform, instead of panicking with a nil pointer.
func TestNilOption(t *testing.T) {
	for _, tc := range []struct {
		name string
		try  func() error
		want string
	}{
		{"nil WriteOption", func() error {
			_, s := beam.NewPipelineWithRoot()
			_, err := TryWrite(s, "p.d.t", beam.Create(s, struct{ ID int64 }{1}), nil, WithAtLeastOnce())
			return err
		}, "bqwrite.Write: option 1 of 2 is nil (a nil bqwrite.WriteOption)"},
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
