package demo

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const examplesDir = "../../examples"

// examples returns the directories under examples/, each a main package.
func examples(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) < 5 {
		t.Fatalf("found %d examples in %s, want at least 5 (avrostats, bigquery, bigquerystream, blockfile, datastore): %v", len(dirs), examplesDir, dirs)
	}
	return dirs
}

// parseExample parses the Go files of an example, tests left out.
func parseExample(t *testing.T, name string) (*token.FileSet, []*ast.File) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(examplesDir, name, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("examples/%s has no Go file", name)
	}
	return fset, files
}

// TestExamplesImportNoInternal fails for an example that imports a package
// of the module that is internal: a copy of it outside the module could
// not be built.
func TestExamplesImportNoInternal(t *testing.T) {
	for _, name := range examples(t) {
		fset, files := parseExample(t, name)
		for _, f := range files {
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if path == "github.com/sdfio/sdfio/internal" || strings.HasPrefix(path, "github.com/sdfio/sdfio/internal/") {
					t.Errorf("%s imports %s: an example must use only public packages, to be copied out of the module", fset.Position(imp.Pos()), path)
				}
			}
		}
	}
}

// TestExampleCopiesBuildOutsideModule copies every example, as a newcomer
// would, into a module of its own (example.com/newcomer) that requires
// github.com/sdfio/sdfio, replaced by this module's directory, with the
// requirements and go.sum of this module, and builds it there.
func TestExampleCopiesBuildOutsideModule(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	const self = "module github.com/sdfio/sdfio\n"
	if !strings.HasPrefix(string(gomod), self) {
		t.Fatalf("go.mod does not start with %q", self)
	}
	dir := t.TempDir()
	mod := "module example.com/newcomer\n" + strings.TrimPrefix(string(gomod), self) +
		"\nrequire github.com/sdfio/sdfio v0.0.0-00010101000000-000000000000\n" +
		"\nreplace github.com/sdfio/sdfio => " + strconv.Quote(root) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	names := examples(t)
	for _, name := range names {
		paths, err := filepath.Glob(filepath.Join(examplesDir, name, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name, filepath.Base(p)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// Several packages at once: each is compiled (the packages it imports
	// come from the build cache) and linked, and the binaries are
	// discarded. Links are not cached: without a symbol table and DWARF
	// (-s -w) the five take about half the time.
	cmd := exec.Command(goCmd, "build", "-ldflags=-s -w", "./...")
	cmd.Dir = dir
	// The copy's own module, not a workspace; go.mod may be completed
	// (GOPROXY as the machine has it), as `go mod tidy` would.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./... of a copy of examples/{%s} in a module of its own failed: %v\n%s", strings.Join(names, ","), err, out)
	}
	// The go command listed every copy as a main package of the new module.
	list := exec.Command(goCmd, "list", "-f", "{{.ImportPath}} {{.Name}}", "./...")
	list.Dir, list.Env = dir, cmd.Env
	out, err = list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, name := range names {
		if want := "example.com/newcomer/" + name + " main\n"; !strings.Contains(string(out), want) {
			t.Errorf("go list of the copy has no %q:\n%s", want, out)
		}
	}
}

// TestExamplesExplainCountersAsTheReference reads the counterHelp map of
// each example that prints its IO's counters and fails for a name the
// module's IOs do not count (a renamed counter) or a line that differs
// from this package's reference, which `make demo` prints.
func TestExamplesExplainCountersAsTheReference(t *testing.T) {
	seen := 0
	for _, name := range examples(t) {
		fset, files := parseExample(t, name)
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "counterHelp" || len(vs.Values) != 1 {
					return true
				}
				lit, ok := vs.Values[0].(*ast.CompositeLit)
				if !ok {
					t.Errorf("%s: counterHelp is not a map literal", fset.Position(vs.Pos()))
					return false
				}
				seen++
				if len(lit.Elts) == 0 {
					t.Errorf("%s: counterHelp is empty", fset.Position(lit.Pos()))
				}
				for _, e := range lit.Elts {
					kv, _ := e.(*ast.KeyValueExpr)
					k, errK := stringLit(kv, true)
					v, errV := stringLit(kv, false)
					if errK != nil || errV != nil {
						t.Errorf("%s: counterHelp entry is not two string literals", fset.Position(e.Pos()))
						continue
					}
					switch ref := Explain(k); {
					case ref == "":
						t.Errorf("%s: counterHelp explains %q, which the reference (internal/demo) does not explain", fset.Position(kv.Pos()), k)
					case v != ref:
						t.Errorf("%s: counterHelp[%q] = %q, the reference (internal/demo) says %q", fset.Position(kv.Pos()), k, v, ref)
					}
				}
				return false
			})
		}
	}
	// blockfile, avrostats, datastore, bigquery and bigquerystream print
	// their IO's counters.
	if seen < 5 {
		t.Errorf("found %d counterHelp maps in the examples, want 5", seen)
	}
}

// stringLit returns the key (or value) of kv, a string literal.
func stringLit(kv *ast.KeyValueExpr, key bool) (string, error) {
	if kv == nil {
		return "", strconv.ErrSyntax
	}
	e := kv.Value
	if key {
		e = kv.Key
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", strconv.ErrSyntax
	}
	return strconv.Unquote(lit.Value)
}
