// Package deps checks what the module's production packages link into a
// user's binary.
package deps

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestNoTestHarnessInProduction: no production package (every package of
// the module but internal ones, examples, and the *test packages that hold
// test servers and split subjects) links the testing package or
// sdf/sdftest into its users' binaries.
func TestNoTestHarnessInProduction(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goCmd, "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "github.com/sdfio/sdfio/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		if strings.Contains(pkg, "/internal/") || strings.Contains(pkg, "/examples/") || strings.HasSuffix(pkg, "test") {
			continue
		}
		checked++
		for _, dep := range fields[1:] {
			if dep == "testing" || dep == "github.com/sdfio/sdfio/sdf/sdftest" {
				t.Errorf("%s links %s into its users' binaries", pkg, dep)
			}
		}
	}
	if checked < 7 {
		t.Fatalf("checked %d production packages, want the module's (at least 7)", checked)
	}
}
