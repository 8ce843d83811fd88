package bqquery_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/internal/readtest"
	"github.com/sdfio/sdfio/internal/testtmp"
)

// The events table, its restriction and fingerprint, shared with
// bqquery's tests (internal/readtest).
type (
	Event = readtest.Event
	sum   = readtest.Sum
)

const restriction = readtest.Restriction

var (
	eventsTable   = readtest.EventsTable
	expected      = readtest.Expected
	fingerprint   = readtest.Fingerprint
	fingerprintOf = readtest.FingerprintOf
	newServer     = readtest.NewServer
)

// The test glue of bqquery's pipeline tests, as bigqueryio's own
// (pipeline_test.go there): the events table, its restriction, an exact
// fingerprint of what a read returns.

func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}

// sessionOpts are the options of Read and Query of the tests: srv's
// endpoint, fast retries, the columns and rows of restriction.
func sessionOpts(srv *bqtest.Server) []bigqueryio.SessionOption {
	return []bigqueryio.SessionOption{bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure(),
		bigqueryio.WithRetries(8, 5*time.Millisecond), bigqueryio.WithSelectedFields("id", "score", "kind"),
		bigqueryio.WithRowRestriction(restriction)}
}

// counter sums a bigqueryio counter over all steps.
func counter(t *testing.T, res metrics.Results, name string) int64 {
	t.Helper()
	var n int64
	found := false
	for _, c := range res.AllMetrics().Counters() {
		if c.Namespace() == bigqueryio.Namespace && c.Name() == name {
			n += c.Result()
			found = true
		}
	}
	if !found {
		t.Fatalf("no counter %s/%s", bigqueryio.Namespace, name)
	}
	return n
}

func run(t *testing.T, p *beam.Pipeline) metrics.Results {
	t.Helper()
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	return res.Metrics()
}

// runFailing runs a pipeline that is meant to fail on Beam Go's direct
// runner, in this process. On Prism, Beam Go v2.77's harness closes its
// response channel when the control stream ends (harness.go,
// MainWithOptions) with no synchronisation the race detector can see
// against the last send of a bundle goroutine: a pipeline that fails at
// once is reported as a data race now and then under -race, in Beam's code
// (TestPipelineRowCountFails, 1 of 3 runs at load 7). What these tests
// prove is the reader's error, which is the same on every runner.
func runFailing(p *beam.Pipeline) error {
	_, err := direct.Execute(context.Background(), p)
	return err
}
