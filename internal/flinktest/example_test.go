package flinktest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sdfio/sdfio/internal/flinktest"
	"github.com/sdfio/sdfio/internal/workertest"
)

// TestExampleScript runs example.sh, which README.md's "Running on Flink"
// quotes: examples/blockfile on the Flink job server with its workers
// started by Beam Go's boot loader as an EXTERNAL worker pool. The example
// must read all 10,000 records of testdata/readings.blk. Under -race the
// script builds with -race too (GOFLAGS), reusing the packages the tests
// built.
func TestExampleScript(t *testing.T) {
	flinktest.Start(t) // skips, or fails under CI=true, without the job server
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "example.sh", t.TempDir())
	cmd.Env = os.Environ()
	if workertest.RaceEnabled {
		cmd.Env = append(cmd.Env, "GOFLAGS=-race")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "records               10000") {
		t.Fatalf("example.sh did not read the 10000 records:\n%s", out)
	}
}
