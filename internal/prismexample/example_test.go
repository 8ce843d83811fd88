// Package prismexample holds example.sh, which README.md's "Workers as
// separate processes" quotes, and its test.
package prismexample

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sdfio/sdfio/internal/workertest"
)

// TestExampleScript runs example.sh in both modes: examples/blockfile on a
// standalone Prism, its workers started by Beam Go's boot loader as an
// EXTERNAL worker pool, and by Prism through the PROCESS wrapper. Each must
// read all 10,000 records of testdata/readings.blk and leave no process
// running in its directory (the boot loader's workers outlive the job
// unless the script kills their process group).
func TestExampleScript(t *testing.T) {
	for _, mode := range []string{"external", "process"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			dir := t.TempDir()
			cmd := exec.CommandContext(ctx, "bash", "example.sh", mode, dir)
			cmd.Env = os.Environ()
			if workertest.RaceEnabled {
				cmd.Env = append(cmd.Env, "GOFLAGS=-race")
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("example.sh %s: %v\n%s", mode, err, out)
			}
			if !strings.Contains(string(out), "records               10000") {
				t.Fatalf("example.sh %s did not read the 10000 records:\n%s", mode, out)
			}
			// A process killed with its group may take a moment to go.
			var left []string
			for range 50 {
				if left = workertest.ProcessesIn(dir); len(left) == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if len(left) > 0 {
				t.Errorf("example.sh %s left processes running in %s: %v", mode, dir, left)
			}
		})
	}
}
