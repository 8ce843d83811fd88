package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bigQueryDirs are the BigQuery packages whose options and doc references
// are checked.
var bigQueryDirs = []string{"bigqueryio", "bigqueryio/bqwrite"}

// TestBigQueryOptionFiles: every option function of bigqueryio and bqwrite
// (an exported func With...) is in an options file (options.go or
// options_*.go), as docs/DESIGN.md's "One shape for every IO" says.
func TestBigQueryOptionFiles(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range bigQueryDirs {
		files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			base := filepath.Base(f)
			for _, d := range af.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "With") || !fd.Name.IsExported() {
					continue
				}
				n++
				if base != "options.go" && !strings.HasPrefix(base, "options_") {
					t.Errorf("%s: %s is in %s, not in an options file (options.go, options_*.go)", dir, fd.Name.Name, base)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s has no option function: the check checks nothing", dir)
		}
	}
}

// bigQueryRef is a reference to a section of docs/BIGQUERY.md:
// docs/BIGQUERY.md, "Section" or docs/BIGQUERY.md ("Section", "Other").
var bigQueryRef = regexp.MustCompile(`docs/BIGQUERY\.md,? \(?((?:"[^"]+"(?:,| and)? ?)+)`)

var quotedName = regexp.MustCompile(`"([^"]+)"`)

// TestBigQueryDocRefs: every section of docs/BIGQUERY.md that a doc
// comment of bigqueryio or bqwrite, or a document, names is a heading of
// it.
func TestBigQueryDocRefs(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "BIGQUERY.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(l, "#"); ok {
			headings[strings.TrimSpace(strings.TrimLeft(h, "#"))] = true
		}
	}
	texts := map[string]string{}
	for _, dir := range bigQueryDirs {
		texts[dir] = joinLines(goComments(t, filepath.Join(root, dir)))
	}
	for _, name := range []string{"README.md", "docs/MIGRATING.md", "docs/DESIGN.md", "docs/BENCHMARKS.md"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		texts[name] = joinLines(strings.Split(string(b), "\n"))
	}
	refs := 0
	for name, text := range texts {
		for _, m := range bigQueryRef.FindAllStringSubmatch(text, -1) {
			for _, q := range quotedName.FindAllStringSubmatch(m[1], -1) {
				refs++
				if !headings[q[1]] {
					t.Errorf("%s names section %q of docs/BIGQUERY.md, which has no such heading", name, q[1])
				}
			}
		}
	}
	if refs == 0 {
		t.Error("no reference to a section of docs/BIGQUERY.md found: the check checks nothing")
	}
}
