// Command binsize measures what a user's binary pays for sdfio, for `make
// bench`: it builds three pairs of programs, each program beside the same
// program on Beam Go's own IO, all the same plain way (one go build): a
// program that reads Avro files with avroio (testdata/sdfio, testdata/beam),
// one that only reads a BigQuery table (testdata/bqreadsdfio,
// testdata/bqreadbeam) and one that reads a table and writes its rows to
// another with bigqueryio and bqwrite (testdata/bqsdfio, testdata/bqbeam). It prints their sizes,
// their non-standard package counts (go list -deps), the packages only
// ours links, and the ratio against the issue's target, as "note:" lines
// that internal/cmd/benchreport copies into docs/BENCHMARKS.md. Run it
// from the module's root. It was a test; a build of two Beam programs took
// 8 minutes of a loaded 2-core machine, and a size is a figure to report,
// as the benchmarks are. What must stay out of each BigQuery program (a
// read-only program links no Write code, a write-only one no Read code) is
// a test, TestBigQueryProgramLinks.
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

// pair is a program on sdfio and the same program on Beam Go's IO.
type pair struct {
	what       string  // what the programs do
	ours, beam string  // their directories under testdata
	maxRatio   float64 // the issue's target for ours over Beam Go's
	issue      string
	// floor, when set, is the directory of what both programs share
	// whatever their IO does; each IO's own cost over it is reported.
	floor string
}

var pairs = []pair{
	{"an avroio-only read program", "sdfio", "beam", 1.1, "issue 16", ""},
	{"a BigQuery read-only program", "bqreadsdfio", "bqreadbeam", 1.0, "issue 38", "bqfloor"},
	{"a BigQuery read-and-write program", "bqsdfio", "bqbeam", 1.1, "issue 38", "bqfloor"},
}

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
	var pkgs []string
	for _, p := range pairs {
		pkgs = append(pkgs, "./internal/cmd/binsize/testdata/"+p.ours, "./internal/cmd/binsize/testdata/"+p.beam)
		if p.floor != "" {
			pkgs = append(pkgs, "./internal/cmd/binsize/testdata/"+p.floor)
		}
	}
	build := exec.Command("go", append([]string{"build", "-o", out + string(filepath.Separator)}, pkgs...)...)
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", pkgs, err, b)
	}
	for _, p := range pairs {
		if err := measure(out, p); err != nil {
			return err
		}
	}
	return nil
}

// measure prints the note lines of pair p, built into out.
func measure(out string, p pair) error {
	size := func(name string) (int64, error) {
		fi, err := os.Stat(filepath.Join(out, name))
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	ours, err := size(p.ours)
	if err != nil {
		return err
	}
	beams, err := size(p.beam)
	if err != nil {
		return err
	}
	oursDeps, err := deps("./internal/cmd/binsize/testdata/" + p.ours)
	if err != nil {
		return err
	}
	beamDeps, err := deps("./internal/cmd/binsize/testdata/" + p.beam)
	if err != nil {
		return err
	}
	var only []string
	for d := range oursDeps {
		if !beamDeps[d] && !strings.HasPrefix(d, "github.com/sdfio/sdfio/") {
			only = append(only, d)
		}
	}
	slices.Sort(only)
	ratio := float64(ours) / float64(beams)
	verdict := "met"
	if ratio > p.maxRatio {
		verdict = "not met"
	}
	fmt.Printf("note: binsize: %s is %.1f MB with %d non-standard packages; the same program on Beam Go's IO (v%s) %.1f MB with %d: %.2fx (%s's target <= %.1fx: %s)\n",
		p.what, float64(ours)/1e6, len(oursDeps), core.SdkVersion, float64(beams)/1e6, len(beamDeps), ratio, p.issue, p.maxRatio, verdict)
	fmt.Printf("note: binsize: %d packages outside sdfio only %s links: %s\n", len(only), p.what, strings.Join(only, " "))
	if p.floor != "" {
		floor, err := size(p.floor)
		if err != nil {
			return err
		}
		fmt.Printf("note: binsize: what both share (Beam with beamx, and the bigquery package's types, no client) is %.1f MB; over it sdfio's IO costs %.2f MB, Beam Go's %.2f MB (%.2fx)\n",
			float64(floor)/1e6, float64(ours-floor)/1e6, float64(beams-floor)/1e6, float64(ours-floor)/float64(beams-floor))
	}
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
