package bigqueryio_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

// The rows of the tests here that write with bqwrite (client options, the
// README's example): bqwrite's own tests have more.

// Simple is the row type of the writes.
type Simple struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeFor[Simple]())
	register.Function1x1(seqSimple)
}

func seqSimple(i int64) Simple { return Simple{ID: i, Name: fmt.Sprintf("name-%d", i)} }

// simpleRows are n rows of Simple.
func simpleRows(n int) []Simple {
	rows := make([]Simple, n)
	for i := range rows {
		rows[i] = seqSimple(int64(i))
	}
	return rows
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// checkOnce fails unless the table holds ids 0..n-1 exactly once each.
func checkOnce(t *testing.T, srv *bqtest.Server, table string, n int) {
	t.Helper()
	got, err := srv.TableRows(table)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, r := range got {
		seen[r[0].(int64)]++
	}
	for i := range int64(n) {
		if seen[i] != 1 {
			t.Errorf("%s: row %d written %d times", table, i, seen[i])
		}
	}
	if len(got) != n {
		t.Errorf("%s: %d rows, want %d", table, len(got), n)
	}
}
