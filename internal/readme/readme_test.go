package readme

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// block is one fenced code block of README.md.
type block struct {
	lang  string
	line  int // line number of the opening fence
	from  string
	lines []string
}

var quotedFrom = regexp.MustCompile(`^<!--\s*quoted from\s+(\S+)\s*-->$`)

func readBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks []block
		cur    *block
		prev   string
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			b := block{lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), line: n}
			if m := quotedFrom.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				b.from = m[1]
			}
			cur = &b
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: code block is not closed", path, cur.line)
	}
	return blocks
}

// quoted reports whether want's lines appear in have in order, contiguous
// except where want has a "// ..." line; it returns the first line of want
// that could not be placed.
func quoted(want, have []string) (missing string, ok bool) {
	norm := func(s string) string { return strings.TrimSpace(s) }
	pos := 0
	gap := true // the first line may start anywhere
	for _, w := range want {
		w = norm(w)
		if w == "// ..." || w == "# ..." {
			gap = true
			continue
		}
		if w == "" {
			continue
		}
		found := -1
		for i := pos; i < len(have); i++ {
			h := norm(have[i])
			if h == "" && !gap {
				continue
			}
			if h == w {
				found = i
				break
			}
			if !gap {
				break
			}
		}
		if found < 0 {
			return w, false
		}
		pos = found + 1
		gap = false
	}
	return "", true
}

var goRun = regexp.MustCompile(`go run (\./[^\s]+)`)

func TestREADME(t *testing.T) { checkDoc(t, "README.md") }

// TestMIGRATING checks docs/MIGRATING.md as README.md is checked: its Go
// blocks are quoted from internal/migrating's compiled examples.
func TestMIGRATING(t *testing.T) { checkDoc(t, "docs/MIGRATING.md") }

func checkDoc(t *testing.T, name string) {
	root := filepath.Join("..", "..")
	blocks := readBlocks(t, filepath.Join(root, name))
	goBlocks := 0
	for _, b := range blocks {
		switch b.lang {
		case "go":
			goBlocks++
			if b.from == "" {
				t.Errorf("%s:%d: Go block has no <!-- quoted from FILE --> line before it", name, b.line)
				continue
			}
			data, err := os.ReadFile(filepath.Join(root, b.from))
			if err != nil {
				t.Errorf("%s:%d: %v", name, b.line, err)
				continue
			}
			if !strings.HasSuffix(b.from, ".go") {
				t.Errorf("%s:%d: quoted from %s, not a Go file", name, b.line, b.from)
			}
			if missing, ok := quoted(b.lines, strings.Split(string(data), "\n")); !ok {
				t.Errorf("%s:%d: block quoted from %s differs from it at %q", name, b.line, b.from, missing)
			}
		case "sh", "bash", "shell":
			if b.from != "" {
				data, err := os.ReadFile(filepath.Join(root, b.from))
				if err != nil {
					t.Errorf("%s:%d: %v", name, b.line, err)
				} else if missing, ok := quoted(b.lines, strings.Split(string(data), "\n")); !ok {
					t.Errorf("%s:%d: block quoted from %s differs from it at %q", name, b.line, b.from, missing)
				}
			}
			for _, l := range b.lines {
				for _, m := range goRun.FindAllStringSubmatch(l, -1) {
					if fi, err := os.Stat(filepath.Join(root, m[1])); err != nil || !fi.IsDir() {
						t.Errorf("%s:%d: %q runs %s, which is not a directory of the module", name, b.line, strings.TrimSpace(l), m[1])
					}
				}
			}
		}
	}
	if goBlocks == 0 {
		t.Errorf("%s has no Go code block: the check would check nothing", name)
	}
}

func TestQuoted(t *testing.T) {
	have := []string{"package x", "", "func A() {", "\treturn", "}", "", "func B() {}"}
	for _, c := range []struct {
		want []string
		ok   bool
	}{
		{[]string{"func A() {", "return", "}"}, true},
		{[]string{"func A() {", "// ...", "func B() {}"}, true},
		{[]string{"func A() {", "}"}, false},           // skips a line without "// ..."
		{[]string{"func B() {}", "func A() {"}, false}, // order
		{[]string{"func C() {}"}, false},
		{[]string{"}", "", "func B() {}"}, true}, // blank lines are free
	} {
		if _, ok := quoted(c.want, have); ok != c.ok {
			t.Errorf("quoted(%q) = %v, want %v", c.want, ok, c.ok)
		}
	}
}
