package bqflink_test

import (
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/internal/flinksuite/idcheck"
	"github.com/sdfio/sdfio/internal/flinktest"
)

// checkIDs is idcheck.IDs: the exactly-once check of a read, in the
// pipeline.
func checkIDs(s beam.Scope, what string, ids beam.PCollection, want []string) {
	idcheck.IDs(s, what, ids, want)
}

// checkCounters fails t unless checkFn's counters of what say that it ran
// once and saw want ids, each once: the check's error already failed the
// job otherwise; this catches a check that never ran.
func checkCounters(t *testing.T, res beam.PipelineResult, what string, want int) {
	t.Helper()
	if c, g, m, d, u := idcheck.Counts(res, what); c != 1 || g != int64(want) || m != 0 || d != 0 || u != 0 {
		t.Errorf("%s: check ran %d times, saw %d (want %d): %d missing, %d duplicated, %d unexpected", what, c, g, want, m, d, u)
	} else {
		t.Logf("%s: %d read, each exactly once (0 missing, 0 duplicated, 0 unexpected)", what, g)
	}
}

// TestCheckFailsOnFlink: a read that returns a duplicate and misses an
// entry fails its Flink job, with the counts, through checkFn.
func TestCheckFailsOnFlink(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	idcheck.IDs(s, "negative", beam.Create(s, "a", "b", "b"), []string{"a", "b", "c"})
	_, err := flinktest.Run(t, p, runOpts()...)
	const want = "negative: got 3, want 3: 1 missing, 1 duplicated, 0 unexpected"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the job's error is %v, want one saying %q", err, want)
	}
}
