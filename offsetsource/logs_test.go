package offsetsource_test

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"

	"github.com/sdfio/sdfio/internal/logtest"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// TestInfoLogs: planning a read logs its initial bundles, and a runner
// split accepted while a range is read is logged, so that a user sees
// the read was rebalanced.
func TestInfoLogs(t *testing.T) {
	l := logtest.Capture(t)
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "read")

	src := memSource{Items: memRecords(10), MaxEnd: 100, BPO: 1, End: 100}
	fn := offsetsource.NewReadFn[string, memSource](offsetsource.WithDesiredBundleSize(25))
	bundles, err := fn.SplitRestriction(ctx, src, sdf.OffsetRange{Start: 0, End: 100})
	if err != nil || len(bundles) != 4 {
		t.Fatalf("SplitRestriction: %v, %v; want 4 bundles", bundles, err)
	}
	l.Has(t, ": 100 bytes in 4 initial bundles of about 25 bytes")

	rt := fn.CreateTracker(sdf.OffsetRange{Start: 0, End: 100})
	n := 0
	err = fn.ProcessElement(ctx, rt, src, func(string) {
		if n++; n == 1 {
			if _, _, err := rt.TrySplit(0.5); err != nil {
				t.Errorf("TrySplit: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if acc, _ := rt.SplitStats(); acc != 1 {
		t.Fatalf("%d splits accepted, want 1", acc)
	}
	l.Has(t, "offsetsource: 1 runner splits accepted while reading ")
}

// TestErrorLogCauseFirst: a read that fails logs its error at ERROR, the
// cause first (Beam's harness logs the bundle's plan first and the cause
// last), once.
func TestErrorLogCauseFirst(t *testing.T) {
	l := logtest.Capture(t)
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "read")
	src, _, _, size := corruptBlocks(t)
	fn := offsetsource.NewReadFn[string, BlockSource]()
	rt := fn.CreateTracker(sdf.OffsetRange{Start: 0, End: size})
	err := fn.ProcessElement(ctx, rt, src.BlockSource, func(string) {})
	if err == nil {
		t.Fatal("the read of a corrupt file succeeded")
	}
	errs := l.Errors()
	if len(errs) != 1 || errs[0] != err.Error() {
		t.Fatalf("ERROR logs %q, want the error once: %v", errs, err)
	}
	if !strings.HasPrefix(errs[0], "block at offset ") || !strings.Contains(errs[0], "(offsetsource: reading block file ") {
		t.Errorf("the ERROR log does not put the cause first and the read after it: %s", errs[0])
	}
}
