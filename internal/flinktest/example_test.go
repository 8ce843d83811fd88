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
// must read all 10,000 records of testdata/readings.blk and leave no
// process running in its directory. Under -race the
// script builds with -race too (GOFLAGS), reusing the packages the tests
// built.
func TestExampleScript(t *testing.T) {
	flinktest.Start(t) // skips, or fails under CI=true, without the job server
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, "bash", "example.sh", dir)
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
	// The boot loader's workers outlive the job unless the script kills
	// their process group; a killed process may take a moment to go.
	var left []string
	for range 50 {
		if left = workertest.ProcessesIn(dir); len(left) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("example.sh left processes running in %s: %v", dir, left)
	}
}
