package bqwrite_test

import (
	"context"
	"os"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/testtmp"
)

func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}

func newServer(t testing.TB, opts ...bqtest.Option) *bqtest.Server {
	t.Helper()
	srv, err := bqtest.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func run(t *testing.T, p *beam.Pipeline) metrics.Results {
	t.Helper()
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	return res.Metrics()
}

// counter is the write's counter name, summed over its steps.
func counter(t *testing.T, res metrics.Results, name string) int64 {
	t.Helper()
	var n int64
	found := false
	for _, c := range res.AllMetrics().Counters() {
		if c.Namespace() == bqwrite.Namespace && c.Name() == name {
			n += c.Result()
			found = true
		}
	}
	if !found {
		t.Fatalf("no counter %s/%s", bqwrite.Namespace, name)
	}
	return n
}

// runFailing runs a pipeline that is meant to fail on Beam Go's direct
// runner, in this process (see bigqueryio's pipeline_test.go for why not
// on Prism).
func runFailing(p *beam.Pipeline) error {
	_, err := direct.Execute(context.Background(), p)
	return err
}
