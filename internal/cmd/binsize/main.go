// Command binsize measures what a user's binary pays for avroio, for `make
// bench`: it builds a program that reads Avro files with avroio
// (testdata/sdfio) and the same program on Beam Go's own io/avroio
// (testdata/beam), both the same plain way (one go build), and prints
// their sizes, their non-standard package counts (go list -deps), the
// packages only ours links, and the ratio against issue 16's target of
// at most 1.1, as "note:" lines that internal/cmd/benchreport copies into
// docs/BENCHMARKS.md. Run it from the module's root. It was a test; a
// build of two Beam programs took 8 minutes of a loaded 2-core machine,
// and a size is a figure to report, as the benchmarks are.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"
)

// maxRatio is issue 16's target for the avroio program over Beam Go's.
const maxRatio = 1.1

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "binsize: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	out, err := os.MkdirTemp("", "binsize")
	if err != nil {
		return err
	}
	defer os.RemoveAll(out)
	pkgs := []string{"./internal/cmd/binsize/testdata/sdfio", "./internal/cmd/binsize/testdata/beam"}
	build := exec.Command("go", append([]string{"build", "-o", out + string(filepath.Separator)}, pkgs...)...)
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", pkgs, err, b)
	}
	size := func(name string) (int64, error) {
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	ours, err := size("sdfio")
	if err != nil {
		return err
	}
	beams, err := size("beam")
	if err != nil {
		return err
	}
	oursDeps, err := deps(pkgs[0])
	if err != nil {
		return err
	}
	beamDeps, err := deps(pkgs[1])
	if err != nil {
		return err
	}
	var only []string
	for p := range oursDeps {
		if !beamDeps[p] && !strings.HasPrefix(p, "github.com/sdfio/sdfio/") {
			only = append(only, p)
		}
	}
	slices.Sort(only)
	ratio := float64(ours) / float64(beams)
	verdict := "met"
	if ratio > maxRatio {
		verdict = "not met"
	}
	fmt.Printf("note: binsize: an avroio-only read program is %.1f MB with %d non-standard packages; the same program on Beam Go's avroio (v%s) %.1f MB with %d: %.2fx (target <= %.1fx: %s)\n",
		float64(ours)/1e6, len(oursDeps), core.SdkVersion, float64(beams)/1e6, len(beamDeps), ratio, maxRatio, verdict)
	fmt.Printf("note: binsize: %d packages outside sdfio only the avroio program links: %s\n", len(only), strings.Join(only, " "))
	return nil
}

// deps is the set of non-standard packages pkg links.
func deps(pkg string) (map[string]bool, error) {
	b, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	set := map[string]bool{}
	for _, p := range strings.Fields(string(b)) {
		set[p] = true
	}
	return set, nil
}
