package bqwrite

import (
	"errors"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	register.Function1x1(keyedSpec)
}

// keyedSpec gives table p.d.keyed a primary key, the others none.
func keyedSpec(table string) TableSpec {
	if table == "p.d.keyed" {
		return TableSpec{PrimaryKey: []string{"ID"}}
	}
	return TableSpec{}
}

func cdcMutation(struct{ ID int64 }) RowMutation { return RowMutation{Type: Upsert} }

// TestCDCSpecFuncNeedsPrimaryKey: a WithTableSpecFunc write of CDC
// changes refuses, before creating it, a table its spec gives no primary
// key (the service would refuse every change to it); a write without
// WithRowMutation creates it.
func TestCDCSpecFuncNeedsPrimaryKey(t *testing.T) {
	schema := bigquery.Schema{{Name: "ID", Type: bigquery.IntegerFieldType}}
	for _, cdc := range []bool{true, false} {
		f := &appendFn{Cfg: writeConfig{Namespace: Namespace}, SpecFn: &beam.EncodedFunc{Fn: reflectx.MakeFunc(keyedSpec)}}
		if cdc {
			f.Mutation = &beam.EncodedFunc{Fn: reflectx.MakeFunc(cdcMutation)}
		}
		f.Setup()
		ts, err := f.tableSpec("p.d.keyed", "", schema)
		if err != nil || len(ts.PrimaryKey) != 1 {
			t.Errorf("cdc %v: keyed table: %+v %v", cdc, ts, err)
		}
		_, err = f.tableSpec("p.d.plain", "", schema)
		if cdc != errors.Is(err, errNoPrimaryKey) {
			t.Errorf("cdc %v: table without a key: %v", cdc, err)
		}
	}
}
