package binsize

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// MaxRatio is the largest size of the avroio program over Beam Go's that
// the test accepts (issue 16).
const MaxRatio = 1.1

// TestAvroioBinarySize builds testdata/sdfio and testdata/beam (in one go
// build, so that they share the work) and compares their sizes.
func TestAvroioBinarySize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two Beam programs")
	}
	const goBin = "go" // go test puts its own first in PATH
	out := t.TempDir() + string(filepath.Separator)
	pkgs := []string{"./testdata/sdfio", "./testdata/beam"}
	build := exec.Command(goBin, append([]string{"build", "-o", out}, pkgs...)...)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", pkgs, err, b)
	}
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	ours, beams := size("sdfio"), size("beam")
	oursDeps, beamDeps := deps(t, goBin, pkgs[0]), deps(t, goBin, pkgs[1])
	var only []string
	for p := range oursDeps {
		if !beamDeps[p] && !strings.HasPrefix(p, "github.com/sdfio/sdfio/") {
			only = append(only, p)
		}
	}
	slices.Sort(only)
	ratio := float64(ours) / float64(beams)
	t.Logf("avroio program: %.1f MB, %d non-standard packages; Beam Go's avroio program: %.1f MB, %d; ratio %.3f (at most %.1f)",
		float64(ours)/1e6, len(oursDeps), float64(beams)/1e6, len(beamDeps), ratio, MaxRatio)
	t.Logf("%d non-standard packages outside sdfio that only the avroio program links: %s", len(only), strings.Join(only, " "))
	if ratio > MaxRatio {
		t.Errorf("the avroio program is %d bytes, %.3f times Beam Go's avroio program's %d: more than %.1f", ours, ratio, beams, MaxRatio)
	}
}

// deps is the set of non-standard packages pkg links.
func deps(t *testing.T, goBin, pkg string) map[string]bool {
	t.Helper()
	b, err := exec.Command(goBin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	set := map[string]bool{}
	for _, p := range strings.Fields(string(b)) {
		set[p] = true
	}
	return set
}
