package bqquery

import (
	"context"
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

type paramStruct struct {
	A int64
	B string `bigquery:"bee"`
	C []float64
	D civil.Date
}

// TestQueryParamsLikeClient: the parameters of WithQueryParameters reach
// the job, after the JSON a DoFn travels in, exactly as the official
// client sends the same bigquery.QueryParameters itself: every scalar
// type, NULLs, empty strings, arrays, structs, explicit
// *bigquery.QueryParameterValues; named and positional.
func TestQueryParamsLikeClient(t *testing.T) {
	rat, _ := new(big.Rat).SetString("-12345678901234567890.123456789")
	named := []bigquery.QueryParameter{
		{Name: "i", Value: 42}, {Name: "i8", Value: int8(-8)}, {Name: "u32", Value: uint32(1 << 31)}, {Name: "i64", Value: int64(-1) << 62},
		{Name: "f", Value: 0.1}, {Name: "f32", Value: float32(0.1)}, {Name: "ok", Value: true}, {Name: "s", Value: "héllo"}, {Name: "empty", Value: ""},
		{Name: "b", Value: []byte{0, 1, 255}}, {Name: "ts", Value: time.Date(2020, 5, 6, 7, 8, 9, 123456789, time.UTC)},
		{Name: "tsz", Value: time.Date(2020, 5, 6, 7, 8, 9, 0, time.FixedZone("x", 3600))},
		{Name: "d", Value: civil.Date{Year: 2024, Month: 2, Day: 29}}, {Name: "tm", Value: civil.Time{Hour: 23, Minute: 59, Second: 58, Nanosecond: 123456789}},
		{Name: "dt", Value: civil.DateTime{Date: civil.Date{Year: 1, Month: 1, Day: 1}, Time: civil.Time{Hour: 1}}},
		{Name: "n", Value: rat}, {Name: "iv", Value: &bigquery.IntervalValue{Years: 1, Days: -2, Hours: 3}},
		{Name: "nulli", Value: bigquery.NullInt64{}}, {Name: "nis", Value: bigquery.NullString{StringVal: "", Valid: true}},
		{Name: "nts", Value: bigquery.NullTimestamp{}}, {Name: "ng", Value: bigquery.NullGeography{GeographyVal: "POINT(1 2)", Valid: true}},
		{Name: "nj", Value: bigquery.NullJSON{JSONVal: `{"a":1}`, Valid: true}}, {Name: "nd", Value: bigquery.NullDate{}},
		{Name: "ndt", Value: bigquery.NullDateTime{DateTime: civil.DateTime{Date: civil.Date{Year: 2000, Month: 1, Day: 1}}, Valid: true}},
		{Name: "ntm", Value: bigquery.NullTime{}}, {Name: "nb", Value: bigquery.NullBool{Bool: false, Valid: true}}, {Name: "nf", Value: bigquery.NullFloat64{}},
		{Name: "arr", Value: []string{"a", "", "c"}}, {Name: "noarr", Value: []int64{}}, {Name: "nilarr", Value: []int64(nil)},
		{Name: "fixed", Value: [2]int{1, 2}}, {Name: "nullarr", Value: []bigquery.NullInt64{{Int64: 1, Valid: true}, {}}},
		{Name: "st", Value: paramStruct{A: 1, B: "x", C: []float64{1.5}, D: civil.Date{Year: 1999, Month: 12, Day: 31}}},
		{Name: "pst", Value: &paramStruct{A: 2}}, {Name: "nilpst", Value: (*paramStruct)(nil)},
		{Name: "sts", Value: []paramStruct{{A: 3}, {B: "y"}}},
		{Name: "bign", Value: &bigquery.QueryParameterValue{Type: bigquery.StandardSQLDataType{TypeKind: "BIGNUMERIC"}, Value: bigquery.BigNumericString(rat)}},
		{Name: "qarr", Value: &bigquery.QueryParameterValue{
			Type:       bigquery.StandardSQLDataType{ArrayElementType: &bigquery.StandardSQLDataType{TypeKind: "STRING"}},
			ArrayValue: []bigquery.QueryParameterValue{{Value: "a"}, {Value: "b"}}}},
		{Name: "qst", Value: &bigquery.QueryParameterValue{
			Type: bigquery.StandardSQLDataType{StructType: &bigquery.StandardSQLStructType{Fields: []*bigquery.StandardSQLField{
				{Name: "x", Type: &bigquery.StandardSQLDataType{TypeKind: "INT64"}}, {Name: "y", Type: &bigquery.StandardSQLDataType{TypeKind: "DATE"}}}}},
			StructValue: map[string]bigquery.QueryParameterValue{"x": {Value: int64(4)}, "y": {Value: civil.Date{Year: 2001, Month: 2, Day: 3}}}}},
		{Name: "qnull", Value: &bigquery.QueryParameterValue{Type: bigquery.StandardSQLDataType{TypeKind: "INT64"}, Value: bigquery.NullInt64{}}},
	}
	var refs []string
	for _, p := range named {
		refs = append(refs, "@"+p.Name)
	}
	positional := []bigquery.QueryParameter{{Value: "click"}, {Value: 10}, {Value: []string{"x"}}}
	srv := newTestServer(t)
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", srv.RESTClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	result := bqtest.QueryResult{Table: bqtest.Table{Schema: bigquery.Schema{{Name: "x", Type: bigquery.IntegerFieldType}}}}
	for _, tc := range []struct {
		sql    string
		params []bigquery.QueryParameter
		mode   string
	}{
		{"SELECT " + strings.Join(refs, ", "), named, "NAMED"},
		{"SELECT ? AS a, ? AS b, ? AS c", positional, "POSITIONAL"},
	} {
		srv.AddQuery(tc.sql, result)
		dryRun := func(ps []bigquery.QueryParameter) bqtest.QueryJob {
			t.Helper()
			q := c.Query(tc.sql)
			q.Parameters, q.DryRun = ps, true
			if _, err := q.Run(ctx); err != nil {
				t.Fatal(err)
			}
			jobs := srv.Jobs()
			return jobs[len(jobs)-1]
		}
		want := dryRun(tc.params)

		// What travels: the query's job as Beam carries a DoFn, in JSON.
		plan, err := bqcore.QuerySide.Plan("bqquery.Query", tc.sql, reflect.TypeOf(struct{ X int64 }{}),
			[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(tc.params...), bigqueryio.WithBillingProject("p")})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(plan.Job)
		if err != nil {
			t.Fatal(err)
		}
		var back bqcore.QueryJob
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		ps, err := bqcore.DecodeParams(back.Params)
		if err != nil {
			t.Fatal(err)
		}
		// Sent as the query job sends them, through the official client
		// made as the query's is.
		rc, err := newBQClient(ctx, bqcore.QueryJob{Billing: "p", Insecure: true, REST: srv.RESTEndpoint()})
		if err != nil {
			t.Fatal(err)
		}
		q := rc.Query(tc.sql)
		q.Parameters, q.DryRun = bqcore.ClientParams(ps), true
		if _, err := q.Run(ctx); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		jobs := srv.Jobs()
		got := jobs[len(jobs)-1]
		if want.ParameterMode != tc.mode || got.ParameterMode != tc.mode || len(got.Parameters) != len(tc.params) || len(want.Parameters) != len(tc.params) {
			t.Fatalf("%s: modes %s and %s, %d and %d parameters", tc.mode, want.ParameterMode, got.ParameterMode, len(want.Parameters), len(got.Parameters))
		}
		for i := range want.Parameters {
			w, g := want.Parameters[i], got.Parameters[i]
			if w.Name != g.Name || w.Type != g.Type || string(w.Value) != string(g.Value) {
				t.Errorf("%s parameter %d:\n got %s %s %s\nwant %s %s %s (the client's)", tc.mode, i, g.Name, g.Type, g.Value, w.Name, w.Type, w.Value)
			}
		}
	}
	// A few, spelled out: the job holds the values, not only the same as the client's.
	for name, want := range map[string]string{"i": "INT64 42", "f32": "FLOAT64 0.1", "ts": "TIMESTAMP 2020-05-06 07:08:09.123456+00:00", "tm": "TIME 23:59:58.123457",
		"nulli": "INT64 NULL", "empty": "STRING ", "bign": "BIGNUMERIC -12345678901234567890.12345678900000000000000000000000000000",
		"arr": `ARRAY<STRING> {"arrayValues":[{"value":"a"},{"value":""},{"value":"c"}]}`, "st": "STRUCT<A INT64, bee STRING, C ARRAY<FLOAT64>, D DATE> "} {
		p, ok := srv.Jobs()[0].Param(name)
		if !ok {
			t.Errorf("no parameter %s", name)
			continue
		}
		got := p.Type + " "
		if v, ok := p.Scalar(); ok {
			got += v
		} else if strings.Contains(string(p.Value), `"value":null`) {
			got += "NULL"
		} else if strings.HasPrefix(p.Type, "ARRAY") {
			got += string(p.Value)
		}
		if got != want {
			t.Errorf("parameter %s: %s, want %s", name, got, want)
		}
	}
}

// TestQueryParamsRefused: parameters that cannot work are refused when the
// pipeline is built, naming the parameter.
func TestQueryParamsRefused(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	typ := reflect.TypeOf(struct{ X int64 }{})
	for _, tc := range []struct {
		opts []bigqueryio.QueryOption
		want string
	}{
		{[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "a", Value: 1}, bigquery.QueryParameter{Value: 2})}, "1 of 2 parameters have names"},
		{[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "c", Value: make(chan int)})}, "parameter c (chan int): Go type chan int has no BigQuery parameter type"},
		{[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "m", Value: map[string]int{}})}, "parameter m (map[string]int)"},
		{[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(bigquery.QueryParameter{Value: nil})}, "parameter 1 (<nil>): a nil value"},
		{[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "u", Value: uint64(1)})}, "parameter u (uint64)"},
		{[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "x", Value: []any{1}})}, "parameter x ([]interface {})"},
		{[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "a", Value: 1}), bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "b", Value: 2})},
			`WithQueryParameters is given 2 times, WithQueryParameters("a=1") and WithQueryParameters("b=2")`},
		{[]bigqueryio.QueryOption{bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "a", Value: 1}), bigqueryio.WithLegacySQL()}, "legacy SQL takes no parameters"},
	} {
		if _, err := TryQuery(s, "SELECT @a", typ, append(tc.opts, bigqueryio.WithBillingProject("b"))...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want an error saying %q", err, tc.want)
		}
	}
}
