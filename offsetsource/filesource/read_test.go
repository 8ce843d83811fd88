package filesource_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/internal/logtest"
	"github.com/sdfio/sdfio/internal/workertest"
	"github.com/sdfio/sdfio/offsetsource/filesource"
	"github.com/sdfio/sdfio/offsetsource/sourcetest"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// linesOf is n lines of varied lengths (some empty), named by prefix.
func linesOf(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d%s", prefix, i, strings.Repeat("x", (i*7)%13))
		if i%9 == 4 && i != n-1 { // a last empty line without its newline would not be there
			out[i] = ""
		}
	}
	return out
}

// writeLines writes lines to dir/name, newline-terminated unless
// noFinalNewline, and returns the path.
func writeLines(t testing.TB, dir, name string, lines []string, noFinalNewline bool) string {
	t.Helper()
	text := strings.Join(lines, "\n")
	if !noFinalNewline {
		text += "\n"
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLinesSplitContract runs sdftest's exhaustive check (with its
// concurrent stage) on the Lines format over a real file, through
// sourcetest.FileSubject: the real matching, opening and change checks.
func TestLinesSplitContract(t *testing.T) {
	dir := t.TempDir()
	for _, final := range []bool{false, true} {
		lines := linesOf("l", 30)
		path := writeLines(t, dir, fmt.Sprintf("lines-%v.txt", final), lines, final)
		s, err := sourcetest.FileSubject[string](t.Context(), path, Lines{})
		if err != nil {
			t.Fatal(err)
		}
		if got := sdftest.AssertReadAll(t, s); !slices.Equal(got, lines) {
			t.Fatalf("read %q, want %q", got, lines)
		}
		rep := sdftest.AssertSplitAtFractionExhaustive(t, s)
		t.Logf("no final newline %v: %+v", final, rep)
	}
}

// TestLinesSplitPositions: a reader opened at any byte starts at the first
// line that starts at or after it.
func TestLinesSplitPositions(t *testing.T) {
	lines := []string{"ab", "", "cde", "f"}
	path := writeLines(t, t.TempDir(), "p.txt", lines, true) // "ab\n\ncde\nf"
	m, err := filesource.Stat(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	starts := []int64{0, 3, 4, 8} // line offsets
	for a := int64(0); a <= m.Size; a++ {
		src := filesource.NewSource[string](m, Lines{}).Subrange(a, m.Size)
		r, err := src.Open(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for {
			_, off, sp, err := r.Next()
			if err != nil {
				break
			}
			if !sp {
				t.Fatal("not a split point")
			}
			got = append(got, off)
		}
		r.Close()
		var want []int64
		for _, s := range starts {
			if s >= a {
				want = append(want, s)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("opened at %d: lines at %v, want %v", a, got, want)
		}
	}
}

func counterSum(t *testing.T, res beam.PipelineResult, ns, name string) int64 {
	t.Helper()
	var sum int64
	for _, c := range res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == ns && r.Name() == name
	}).Counters() {
		sum += c.Result()
	}
	return sum
}

func anys(l []string) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

// TestLinesPipeline reads Lines files on Prism with Read (several initial
// bundles), ReadAll (a brace pattern) and ReadFiles, and checks records
// and metrics.
func TestLinesPipeline(t *testing.T) {
	dir := t.TempDir()
	a, b := linesOf("a", 400), linesOf("b", 50)
	writeLines(t, dir, "x-a.txt", a, false)
	writeLines(t, dir, "x-b.txt", b, true)
	writeLines(t, dir, "x-c.txt", []string{"not matched by the braces"}, false)
	all := append(slices.Clone(a), b...)

	p, s := beam.NewPipelineWithRoot()
	read := filesource.Read[string](s, filepath.Join(dir, "x-[ab].txt"), Lines{}, filesource.WithDesiredBundleSize(1000), filesource.WithMetricsNamespace("lines"))
	passert.Equals(s, read, anys(all)...)
	braces := filesource.ReadAll[string](s, beam.Create(s, filepath.Join(dir, "x-{a,b}.txt")), Lines{})
	passert.Equals(s, braces, anys(all)...)
	files := fileio.ReadMatches(s, fileio.MatchFiles(s, filepath.Join(dir, "x-b.txt")), fileio.ReadUncompressed())
	passert.Equals(s, filesource.ReadFiles[string](s, files, Lines{}), anys(b)...)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := counterSum(t, res, "lines", "records"); n != int64(len(all)) {
		t.Errorf("records metric %d, want %d", n, len(all))
	}
	if n := counterSum(t, res, "lines", "ranges_read"); n < 5 {
		t.Errorf("ranges_read %d: want several initial bundles of 1000 bytes", n)
	}
	if n := counterSum(t, res, filesource.Namespace, "files_matched"); n != 3 {
		t.Errorf("files_matched %d, want 3 (ReadAll's 2 and ReadFiles's 1)", n)
	}
}

// TestBraces: brace groups are expanded on every filesystem; a { that is
// not a group is literal and no wildcard. On the code before this package
// (avroio's match), `x-{a,b}.txt` matched nothing and counted as a
// wildcard, so EmptyMatchAllowIfWildcard read nothing and succeeded.
func TestBraces(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"x-a.txt", "x-b.txt", "x-ab.txt", "x-{a.txt", "y-c.txt"} {
		writeLines(t, dir, n, []string{n}, false)
	}
	ctx := context.Background()
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"x-{a,b}.txt", []string{"x-a.txt", "x-b.txt"}},
		{"{x,y}-{a,b,c}.txt", []string{"x-a.txt", "x-b.txt", "y-c.txt"}},
		{"x-{a,a{b,}}.txt", []string{"x-a.txt", "x-ab.txt"}},
		{"x-{*,a}.txt", []string{"x-a.txt", "x-ab.txt", "x-b.txt", "x-{a.txt"}},
		{"x-{a.txt", []string{"x-{a.txt"}},
		{`x-\{a.txt`, []string{"x-{a.txt"}},
	} {
		files, err := filesource.Match(ctx, filepath.Join(dir, c.pattern), filesource.EmptyMatchDisallow)
		if err != nil {
			t.Errorf("%s: %v", c.pattern, err)
			continue
		}
		var got []string
		for _, f := range files {
			got = append(got, filepath.Base(f.Path))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s matched %v, want %v", c.pattern, got, c.want)
		}
	}
	for pattern, want := range map[string]bool{
		"a/b.txt": false, "a/*.txt": true, "a/b?.txt": true, "a/[ab].txt": true,
		"a/{x,y}": true, "a/{x}": true, "a/{x": false, `a/\{x,y}`: false, "a/x}": false, "a/{x{y,z}": true,
	} {
		if filesource.HasWildcard(pattern) != want {
			t.Errorf("HasWildcard(%q) = %v", pattern, !want)
		}
	}
	// Not a wildcard Beam understands: an empty match is not allowed.
	_, err := filesource.Match(ctx, filepath.Join(dir, "z-{a.txt"), filesource.EmptyMatchAllowIfWildcard)
	if !errors.Is(err, filesource.ErrNoMatch) {
		t.Errorf("unclosed brace matching nothing under AllowIfWildcard: %v, want ErrNoMatch", err)
	}
	if files, err := filesource.Match(ctx, filepath.Join(dir, "z-{a,b}.txt"), filesource.EmptyMatchAllowIfWildcard); err != nil || len(files) != 0 {
		t.Errorf("brace group matching nothing under AllowIfWildcard: %v, %v", files, err)
	}
	// The regression, in a pipeline: ReadAll's default treatment.
	p, s := beam.NewPipelineWithRoot()
	got := filesource.ReadAll[string](s, beam.Create(s, filepath.Join(dir, "x-{a,b}.txt")), Lines{})
	passert.Equals(s, got, "x-a.txt", "x-b.txt")
	ptest.RunAndValidate(t, p)
}

// TestMatchDirectory: a directory given as the pattern says so; one that a
// glob matches is skipped.
func TestMatchDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeLines(t, dir, "a.txt", []string{"a"}, false)
	_, err := filesource.Match(t.Context(), filepath.Join(dir, "sub.txt"), filesource.EmptyMatchDisallow)
	if !errors.Is(err, filesource.ErrIsDirectory) || !strings.Contains(err.Error(), "is a directory") || strings.Contains(err.Error(), "no file matches") {
		t.Errorf("matching a directory: %v", err)
	}
	files, err := filesource.Match(t.Context(), filepath.Join(dir, "*.txt"), filesource.EmptyMatchDisallow)
	if err != nil || len(files) != 1 || filepath.Base(files[0].Path) != "a.txt" {
		t.Errorf("glob over a directory and a file: %v, %v", files, err)
	}
	_, err = filesource.Match(t.Context(), filepath.Join(dir, "none.txt"), filesource.EmptyMatchDisallow)
	if !errors.Is(err, filesource.ErrNoMatch) || !strings.Contains(err.Error(), "none.txt") {
		t.Errorf("matching a missing file: %v", err)
	}
}

// readSource reads a whole source with the read's own loop.
func readSource(t *testing.T, src filesource.Source[string, Lines]) ([]string, error) {
	s, err := sourcetest.FileSubject[string](t.Context(), src.File.Path, Lines{})
	if err != nil {
		return nil, err
	}
	// Read the source as matched, not as FileSubject's fresh stat.
	s2, err := sourcetest.Subject[string](t.Context(), src)
	if err != nil {
		return nil, err
	}
	_ = s
	return sdftest.ReadAll(t.Context(), s2)
}

// TestChangedFile: a file that changed between matching and reading fails
// the read naming the file (ErrChanged), appended to or replaced by a
// smaller one. On the code before this package, the append read part of
// the file and the replacement read the smaller file, with no error.
func TestChangedFile(t *testing.T) {
	dir := t.TempDir()
	lines := linesOf("c", 100)
	for _, change := range []string{"append", "replace smaller", "touch"} {
		t.Run(change, func(t *testing.T) {
			path := writeLines(t, dir, strings.ReplaceAll(change, " ", "-")+".txt", lines, false)
			files, err := filesource.Match(t.Context(), path, filesource.EmptyMatchDisallow)
			if err != nil {
				t.Fatal(err)
			}
			src := filesource.NewSource[string](files[0], Lines{})
			switch change {
			case "append":
				f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString("more\n")
				f.Close()
			case "replace smaller":
				writeLines(t, dir, "tmp", lines[:10], false)
				if err := os.Rename(filepath.Join(dir, "tmp"), path); err != nil {
					t.Fatal(err)
				}
			case "touch":
				later := time.Unix(0, files[0].LastModified).Add(time.Hour)
				if err := os.Chtimes(path, later, later); err != nil {
					t.Fatal(err)
				}
			}
			_, err = readSource(t, src)
			if !errors.Is(err, filesource.ErrChanged) || !strings.Contains(err.Error(), path) {
				t.Fatalf("reading a file that changed (%s): %v, want ErrChanged naming it", change, err)
			}
			t.Log(err)
			// Read as matched (the watch's treatment): the first bytes.
			src.OnChange = int(filesource.ChangeReadAsMatched)
			got, err := readSource(t, src)
			if change != "replace smaller" && (err != nil || !slices.Equal(got, lines)) {
				t.Errorf("read as matched: %d lines, %v", len(got), err)
			}
		})
	}

	// In a pipeline: the file grows after the pipeline was built.
	path := writeLines(t, dir, "pipeline.txt", lines, false)
	p, s := beam.NewPipelineWithRoot()
	filesource.Read[string](s, path, Lines{})
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("appended after construction\n")
	f.Close()
	if err := workertest.RunFailing(t, p); err == nil || !strings.Contains(err.Error(), "changed since it was matched") || !strings.Contains(err.Error(), path) {
		t.Errorf("pipeline over a file appended after construction: %v", err)
	}
}

// TestOpenErrors: a file deleted after matching, or a directory given to
// ReadFiles, fails with an error of kind ErrOpen naming it.
func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	path := writeLines(t, dir, "gone.txt", []string{"a"}, false)
	files, err := filesource.Match(t.Context(), path, filesource.EmptyMatchDisallow)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	_, err = readSource(t, filesource.NewSource[string](files[0], Lines{}))
	if !errors.Is(err, filesource.ErrOpen) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Errorf("reading a deleted file: %v", err)
	}
	_, err = filesource.Open(t.Context(), filesource.Metadata{Path: dir, Size: -1}, filesource.ChangeFail)
	if !errors.Is(err, filesource.ErrIsDirectory) || !errors.Is(err, filesource.ErrOpen) {
		t.Errorf("opening a directory: %v", err)
	}

	p, s := beam.NewPipelineWithRoot()
	filesource.ReadFiles[string](s, beam.Create(s, fileio.ReadableFile{Metadata: fileio.FileMetadata{Path: dir}}), Lines{})
	if err := workertest.RunFailing(t, p); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("ReadFiles of a directory: %v", err)
	}
}

// TestInfoLogMatched: Read logs, when the pipeline is built, the files
// and bytes its pattern matched: the read's plan.
func TestInfoLogMatched(t *testing.T) {
	l := logtest.Capture(t)
	dir := t.TempDir()
	a := writeLines(t, dir, "a.txt", linesOf("a", 10), false)
	b := writeLines(t, dir, "b.txt", linesOf("b", 20), false)
	var size int64
	for _, p := range []string{a, b} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	_, s := beam.NewPipelineWithRoot()
	pattern := filepath.Join(dir, "*.txt")
	filesource.Read[string](s, pattern, Lines{})
	want := fmt.Sprintf("filesource: pattern %q matched 2 files, %d bytes", pattern, size)
	l.Has(t, want)
}
