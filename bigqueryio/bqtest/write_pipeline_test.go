package bqtest_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/bigqueryio"
)

// simpleRecord is a row of simpleSchema as bigqueryio.Read fills it.
type simpleRecord struct {
	Name  string             `bigquery:"name"`
	Value bigquery.NullInt64 `bigquery:"value"`
}

func formatSimple(r simpleRecord) string { return fmt.Sprintf("%s=%v", r.Name, r.Value) }

func init() {
	beam.RegisterType(reflect.TypeOf((*simpleRecord)(nil)).Elem())
	register.Function1x1(formatSimple)
}

// TestWriteThenBigqueryioRead: rows committed through the Write API are
// read by sdfio's bigqueryio.Read from the same server, as rows AddTable
// defined are.
func TestWriteThenBigqueryioRead(t *testing.T) {
	e := newWriteEnv(t)
	res := e.table(t, "piped", simpleSchema)
	md, dp := schemaDescriptor(t, simpleSchema)
	var streams []string
	var want []any
	for s := 0; s < 3; s++ {
		ms := pendingStream(t, e, res, md, dp, s*100, 100, true)
		streams = append(streams, ms.StreamName())
		for i := s * 100; i < s*100+100; i++ {
			want = append(want, fmt.Sprintf("r%d=%d", i, i))
		}
	}
	resp, err := e.mw.BatchCommitWriteStreams(e.ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: streams})
	if err != nil || resp.GetCommitTime() == nil {
		t.Fatal(resp, err)
	}
	p, s := beam.NewPipelineWithRoot()
	rows := bigqueryio.Read(s, "proj.ds.piped", reflect.TypeOf(simpleRecord{}),
		bigqueryio.WithEndpoint(e.srv.Addr()), bigqueryio.WithInsecure())
	passert.Equals(s, beam.ParDo(s, formatSimple, rows), want...)
	if _, err := direct.Execute(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}
