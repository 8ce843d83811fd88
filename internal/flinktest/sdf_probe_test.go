package flinktest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"

	"github.com/sdfio/sdfio/internal/flinktest"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	register.DoFn1x1[int64, error]((*touchFn)(nil))
}

// touchFn makes a file named for each element in Dir.
type touchFn struct{ Dir string }

func (f *touchFn) ProcessElement(i int64) error {
	return os.WriteFile(filepath.Join(f.Dir, fmt.Sprint(i)), nil, 0o644)
}

// TestUnboundedSequence: periodic.Sequence, an unbounded splittable DoFn
// that checkpoints itself (ResumeProcessingIn), emits every element on
// Flink's streaming runner with checkpointing on. (Without
// finish_bundle_before_checkpointing, which WithCheckpointing sets, none
// came out in a minute: see WithCheckpointing.)
func TestUnboundedSequence(t *testing.T) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	start := time.Now().Add(2 * time.Second)
	const n = 50
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(n*20*time.Millisecond), 20*time.Millisecond)))
	beam.ParDo0(s, &touchFn{Dir: dir}, seq)
	files := func() int { es, _ := os.ReadDir(dir); return len(es) }
	res, err := flinktest.Run(t, p, flinktest.WithCheckpointing(time.Second),
		flinktest.WithStopWhen(func() bool { return files() >= n }), flinktest.WithWorkertest(workertest.WithTimeout(25*time.Second)),
	)
	t.Logf("%d of %d elements after %v (cancelled %v)", files(), n, res.Elapsed, res.Cancelled)
	if err != nil {
		t.Fatal(err)
	}
}
