package filesource_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/offsetsource/filesource"
)

// binaryName is f-<i in digits binary digits>.txt.
func binaryName(i, digits int) string {
	b := make([]byte, digits)
	for k := range b {
		b[digits-1-k] = byte('0' + i>>k&1)
	}
	return "f-" + string(b) + ".txt"
}

// manyBraces writes one line files for every step-th of the 2^groups
// names f-{0,1}...{0,1}.txt stands for, and look-alikes the pattern must
// not take, and returns the pattern and the files it names.
func manyBraces(t *testing.T, groups, step int) (pattern string, want []string) {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i < 1<<groups; i += step {
		want = append(want, writeLines(t, dir, binaryName(i, groups), []string{binaryName(i, groups)}, false))
	}
	for _, n := range []string{binaryName(0, groups-1), binaryName(0, groups+1), "f-" + strings.Repeat("0", groups-1) + "x.txt", "f-2" + strings.Repeat("0", groups-1) + ".txt", "g" + binaryName(0, groups)[1:]} {
		writeLines(t, dir, n, []string{n}, false)
	}
	// A directory the pattern names: skipped.
	if err := os.Mkdir(filepath.Join(dir, binaryName(1, groups)), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "f-"+strings.Repeat("{0,1}", groups)+".txt"), want
}

// TestBracesPastTheLimit: eleven groups {0,1} stand for 2,048 patterns,
// more than MaxBraceListings; Match finds every file they name and no
// other. On the code before, which kept the first 1,024 expansions and
// dropped the rest with no error, it found the 32 of 64 whose first digit
// is 0.
func TestBracesPastTheLimit(t *testing.T) {
	pattern, want := manyBraces(t, 11, 32)
	files, err := filesource.Match(context.Background(), pattern, filesource.EmptyMatchDisallow)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("matched %d files, want %d: %v", len(got), len(want), got)
	}
}

// TestBracesPastTheLimitPipelines: the same pattern read by Read, by
// Read with MatchesManyFiles and by ReadAll, on Prism, reads every
// file's line once (64 of 64; 32 before).
func TestBracesPastTheLimitPipelines(t *testing.T) {
	pattern, files := manyBraces(t, 11, 32)
	var want []any
	for _, f := range files {
		want = append(want, filepath.Base(f))
	}
	p, s := beam.NewPipelineWithRoot()
	for _, col := range []beam.PCollection{
		filesource.Read[string](s, pattern, Lines{}),
		filesource.Read[string](s, pattern, Lines{}, filesource.WithMatchesManyFiles()),
		filesource.ReadAll[string](s, beam.Create(s, pattern), Lines{}),
	} {
		passert.Equals(s, col, want...)
	}
	ptest.RunAndValidate(t, p)
}

// TestBracesNoDoubles: a local pattern whose alternatives name one file
// twice, once without a wildcard (which the local filesystem returns as
// written) and once with one (whose names it cleans), matches the file
// once; before, ./d/{a.txt,a*.txt} matched ./d/a.txt and d/a.txt, and a
// read read it twice.
func TestBracesNoDoubles(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	writeLines(t, dir, "d/a.txt", []string{"a"}, false)
	t.Chdir(dir)
	files, err := filesource.Match(context.Background(), "./d/{a.txt,a*.txt}", filesource.EmptyMatchDisallow)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "d/a.txt" {
		t.Fatalf("matched %v, want d/a.txt once", files)
	}
}
