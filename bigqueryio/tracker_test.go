package bigqueryio

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// numbersTable defines p.d.nums: id INTEGER (0..n-1), name STRING (NULL
// every 7th row), score FLOAT.
func numbersTable(t testing.TB, srv *bqtest.Server, n int) {
	t.Helper()
	rows := make([][]bigquery.Value, n)
	for i := range rows {
		var name bigquery.Value = fmt.Sprintf("name-%d", i)
		if i%7 == 3 {
			name = nil
		}
		rows[i] = []bigquery.Value{int64(i), name, float64(i) * 1.5}
	}
	err := srv.AddTable("p.d.nums", bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
	}, Rows: rows})
	if err != nil {
		t.Fatal(err)
	}
}

func newTestServer(t testing.TB, opts ...bqtest.Option) *bqtest.Server {
	t.Helper()
	srv, err := bqtest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func serverOpts(srv *bqtest.Server, more ...ReadOption) []ReadOption {
	return append([]ReadOption{WithEndpoint(srv.Addr()), WithInsecure(), WithRetries(5, time.Millisecond)}, more...)
}

func subject(t *testing.T, srv *bqtest.Server, opts ...ReadOption) sdftest.Subject[[]bigquery.Value] {
	t.Helper()
	s, closer, err := StreamSubject(context.Background(), "p.d.nums", serverOpts(srv, append([]ReadOption{WithMaxStreams(1)}, opts...)...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer() })
	return s
}

func ids(rows [][]bigquery.Value) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r[0].(int64)
	}
	return out
}

func TestStreamSplitExhaustive(t *testing.T) {
	for _, format := range []DataFormat{Avro, Arrow} {
		t.Run(fmt.Sprint(format), func(t *testing.T) {
			srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
			numbersTable(t, srv, 12)
			s := subject(t, srv, WithDataFormat(format))
			all := sdftest.AssertReadAll(t, s)
			if len(all) != 12 {
				t.Fatalf("%d rows", len(all))
			}
			sdftest.AssertSplitAtFraction(t, s, 4, 0.5, sdftest.MustSucceedAndBeConsistent)
			sdftest.AssertSplitAtFractionExhaustive(t, s)
			st := srv.Stats()
			if st.SplitsAccepted == 0 || st.SplitsRefused == 0 {
				t.Fatalf("server stats %+v: want splits accepted and refused", st)
			}
			t.Logf("server: %+v", st)
		})
	}
}
