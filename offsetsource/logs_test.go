package offsetsource_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// infoLog keeps the INFO messages logged through Beam's log package.
type infoLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *infoLog) Log(_ context.Context, sev log.Severity, _ int, msg string) {
	if sev == log.SevInfo {
		l.mu.Lock()
		l.msgs = append(l.msgs, msg)
		l.mu.Unlock()
	}
}

func (l *infoLog) has(t *testing.T, want string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.Contains(m, want) {
			return
		}
	}
	t.Errorf("no INFO log saying %q in %q", want, l.msgs)
}

// TestInfoLogs: planning a read logs its initial bundles, and a runner
// split accepted while a range is read is logged, so that a user sees
// the read was rebalanced.
func TestInfoLogs(t *testing.T) {
	l := &infoLog{}
	log.SetLogger(l)
	t.Cleanup(func() { log.SetLogger(&log.Structural{}) })
	ctx := metrics.SetPTransformID(metrics.SetBundleID(context.Background(), "bundle"), "read")

	src := memSource{Items: memRecords(10), MaxEnd: 100, BPO: 1, End: 100}
	fn := offsetsource.NewReadFn[string, memSource](offsetsource.WithDesiredBundleSize(25))
	bundles, err := fn.SplitRestriction(ctx, src, sdf.OffsetRange{Start: 0, End: 100})
	if err != nil || len(bundles) != 4 {
		t.Fatalf("SplitRestriction: %v, %v; want 4 bundles", bundles, err)
	}
	l.has(t, ": 100 bytes in 4 initial bundles of about 25 bytes")

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
	l.has(t, "offsetsource: 1 runner splits accepted while reading ")
}
