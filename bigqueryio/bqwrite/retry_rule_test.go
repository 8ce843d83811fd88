package bqwrite_test

import (
	"sync/atomic"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

// TestWriteAppendRetriesOneRule: an exactly-once write's appends failing
// with DEADLINE_EXCEEDED or UNKNOWN (codes the write's own rule did not
// retry while the read's did) are retried by internal/retry's rule, an
// append at an offset being idempotent: every row is committed exactly
// once and the retries are counted.
func TestWriteAppendRetriesOneRule(t *testing.T) {
	for _, code := range []codes.Code{codes.DeadlineExceeded, codes.Unknown} {
		t.Run(code.String(), func(t *testing.T) {
			var failed atomic.Int64
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			srv.SetWriteFaults(bqtest.WriteFaults{OnAppend: func(call int) error {
				if call%3 == 2 && call < 12 {
					failed.Add(1)
					return status.Errorf(code, "bqtest: %v on append %d", code, call)
				}
				return nil
			}})
			const n = 2000
			p, s := beam.NewPipelineWithRoot()
			res := bqwrite.Write(s, "p.d.rule", beam.Create(s, anys(simpleRows(n))...),
				writeOpts(srv, bqwrite.WithMaxAppendBytes(4000))...)
			passert.Empty(s, res.FailedRows)
			m := run(t, p)
			checkOnce(t, srv, "p.d.rule", n, nil)
			if failed.Load() == 0 {
				t.Fatal("no append failed")
			}
			if got := counter(t, m, "append_retries"); got == 0 {
				t.Errorf("append_retries %d, want the failed appends retried", got)
			}
			if st := srv.WriteStats(); st.Commits != 1 {
				t.Errorf("server %+v: want one commit", st)
			}
		})
	}
}
