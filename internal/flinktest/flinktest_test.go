package flinktest_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/sdfio/sdfio/internal/flinktest"
)

func TestMain(m *testing.M) { flinktest.Main(m) }

func init() {
	register.DoFn2x0[[]byte, func(int64)]((*genFn)(nil))
	register.DoFn2x2[int64, int64, int64, error]((*checkSumFn)(nil))
	register.Emitter1[int64]()
}

type genFn struct{ N int64 }

func (f *genFn) ProcessElement(_ []byte, emit func(int64)) {
	for i := int64(1); i <= f.N; i++ {
		emit(i)
	}
}

type checkSumFn struct{ Want int64 }

func (f *checkSumFn) ProcessElement(_ int64, got int64) (int64, error) {
	if got != f.Want {
		return 0, errSum{got, f.Want}
	}
	return got, nil
}

type errSum struct{ got, want int64 }

func (e errSum) Error() string { return "sum mismatch" }

// TestVersionsAgree: the versions flinktest looks for are the ones make
// deps installs (internal/setup/flink/pom.xml).
func TestVersionsAgree(t *testing.T) {
	pom, err := os.ReadFile("../setup/flink/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"beam.version": flinktest.BeamVersion, "flink.version": flinktest.FlinkVersion} {
		m := regexp.MustCompile(`<` + name + `>([^<]+)</`).FindSubmatch(pom)
		if m == nil || string(m[1]) != want {
			t.Errorf("pom.xml's %s is %q, flinktest looks for %q", name, m, want)
		}
	}
}

// TestRunsOnFlink: a pipeline runs on the Flink job server with its SDK
// workers in processes of their own, and its result and metrics come back.
func TestRunsOnFlink(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	nums := beam.ParDo(s, &genFn{N: 1000}, beam.Impulse(s))
	sum := stats.Sum(s, nums)
	beam.ParDo(s, &checkSumFn{Want: 500500}, beam.Create(s, int64(0)), beam.SideInput{Input: sum})
	res := flinktest.MustRun(t, p)
	if len(res.Workers) == 0 {
		t.Fatal("no SDK worker process was started")
	}
	for _, w := range res.Workers {
		if w.PID == 0 || w.PID == os.Getpid() {
			t.Errorf("worker %s ran in pid %d (test process %d)", w.ID, w.PID, os.Getpid())
		}
	}
	t.Logf("%d workers, %v", len(res.Workers), res.Elapsed)
}
