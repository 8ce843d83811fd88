package bqwrite

import (
	"math/big"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
)

type inferInner struct {
	Blob []byte
	N    *big.Rat
}

type inferOuter struct {
	ID      int64
	Blob    []byte
	Kept    []byte `bigquery:",nullable"`
	N       *big.Rat
	BN      *big.Rat `bigquery:"bn" bigqueryio:"bignumeric"`
	Name    bigquery.NullString
	Day     civil.Date
	Tags    []int64
	Inner   inferInner
	Ptr     *inferInner
	Items   []inferInner
	Doc     map[string]any
	Skipped string `bigquery:"-"`
}

// TestInferSchemaTakesEveryValue: the schema inferred for a struct type
// takes every value of it: a []byte, a *big.Rat, a nested struct pointer
// and a map are NULLABLE at every depth, a *big.Rat tagged
// bigqueryio:"bignumeric" is BIGNUMERIC; fields holding values no column
// can are refused naming the field; the official client's cached schema is
// left as it was. (Before: []byte, *big.Rat and *struct were REQUIRED, so
// their nil was refused, and every *big.Rat was NUMERIC.)
func TestInferSchemaTakesEveryValue(t *testing.T) {
	got, err := inferSchema(reflect.TypeFor[inferOuter]())
	if err != nil {
		t.Fatal(err)
	}
	inner := "(Blob BYTES NULLABLE, N NUMERIC NULLABLE)"
	want := "ID INTEGER REQUIRED, Blob BYTES NULLABLE, Kept BYTES NULLABLE, N NUMERIC NULLABLE, bn BIGNUMERIC NULLABLE, Name STRING NULLABLE, " +
		"Day DATE REQUIRED, Tags INTEGER REPEATED, Inner RECORD REQUIRED " + inner + ", Ptr RECORD NULLABLE " + inner +
		", Items RECORD REPEATED " + inner + ", Doc JSON NULLABLE"
	if s := schemaText(got); s != want {
		t.Errorf("schema\n%s\nwant\n%s", s, want)
	}
	// bigquery.InferSchema's own (cached) answer is unchanged.
	if again, _ := bigquery.InferSchema(inferOuter{}); !again[1].Required || again[4].Type != bigquery.NumericFieldType || !again[9].Schema[0].Required {
		t.Errorf("the client's cached schema was changed: %s", schemaText(again))
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{struct{ P []*inferInner }{}, "field P: its items (*bqwrite.inferInner) can be nil, which a REPEATED column cannot hold"},
		{struct{ R []*big.Rat }{}, "field R: its items (*big.Rat) can be nil"},
		{struct{ B [][]byte }{}, "field B: its items ([]uint8) can be nil"},
		{struct {
			S string `bigqueryio:"bignumeric"`
		}{}, `field S: tag bigqueryio:"bignumeric" is for a *big.Rat (or []*big.Rat), not a string`},
		{struct {
			N *big.Rat `bigqueryio:"bigdecimal"`
		}{}, `field N: tag bigqueryio:"bigdecimal": the one option is bignumeric`},
		{struct{ In struct{ X []*big.Rat } }{}, "field In.X: its items (*big.Rat) can be nil"},
		{struct{ R big.Rat }{}, "field R: a RECORD of no columns (big.Rat has no exported fields)"},
	} {
		if _, err := inferSchema(reflect.TypeOf(tc.v)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%T: %v, want %s", tc.v, err, tc.want)
		}
	}
}

// schemaText is schema as name TYPE MODE, nested in parentheses.
func schemaText(schema bigquery.Schema) string {
	parts := make([]string, len(schema))
	for i, f := range schema {
		mode := "NULLABLE"
		switch {
		case f.Repeated:
			mode = "REPEATED"
		case f.Required:
			mode = "REQUIRED"
		}
		parts[i] = f.Name + " " + string(f.Type) + " " + mode
		if len(f.Schema) > 0 {
			parts[i] += " (" + schemaText(f.Schema) + ")"
		}
	}
	return strings.Join(parts, ", ")
}
