package runnerfix_test

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
)

func init() {
	register.DoFn2x0[beam.BundleFinalization, []byte]((*finalizeProbeFn)(nil))
}

// registered and finalized count the bundle finalization callbacks that
// finalizeProbeFn registers and that the SDK harness runs (LOOPBACK: the
// harness runs in this process).
var registered, finalized atomic.Int64

// finalizeProbeFn registers one finalization callback per element.
type finalizeProbeFn struct{}

func (*finalizeProbeFn) ProcessElement(bf beam.BundleFinalization, _ []byte) {
	registered.Add(1)
	bf.RegisterCallback(time.Hour, func() error {
		finalized.Add(1)
		return nil
	})
}

// TestBundleFinalizationRunsOncePerPlan: Beam Go's harness (v2.78) runs the
// finalization callbacks of a plan's first bundle only. exec.NewPlan
// attaches one bundleFinalizer to the plan's ParDos; Plan.Finalize then
// replaces the plan's finalizer with a new one (exec/plan.go, Finalize:
// p.bf = &newFinalizer), while the ParDos keep registering on the old one,
// which nothing reads again: once a plan is reused, its bundles report no
// callbacks (GetExpirationTime reads the new, empty finalizer), and the
// runner's FinalizeBundle finds no plan ("couldn't find plan in finalizing
// map"). So bigqueryio's streaming write cannot defer its flushes to
// bundle finalization (docs/DESIGN.md). The probe fails when the bug is
// gone: every callback then runs.
func TestBundleFinalizationRunsOncePerPlan(t *testing.T) {
	if os.Getenv("SDFIO_PRISM_PROBES") == "" {
		t.Skip("a probe of Beam's harness; SDFIO_PRISM_PROBES=1 runs it")
	}
	registered.Store(0)
	finalized.Store(0)
	p, s := beam.NewPipelineWithRoot()
	// 20 impulses 100 ms apart: one bundle each, one after the other, on a
	// plan that the harness reuses.
	start := time.Now()
	beam.ParDo0(s, &finalizeProbeFn{}, periodic.Impulse(s, start, start.Add(2*time.Second), 100*time.Millisecond, false))
	ptest.RunAndValidate(t, p)
	t.Logf("%d callbacks registered, %d run", registered.Load(), finalized.Load())
	if finalized.Load() == registered.Load() {
		t.Fatalf("every one of %d bundle finalization callbacks ran: Beam's harness no longer loses them; bigqueryio's streaming write can defer its flushes to bundle finalization", registered.Load())
	}
}
