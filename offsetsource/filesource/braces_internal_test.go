package filesource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/memfs"
)

// bracePatterns are patterns (relative to a tree of bracesTree) whose
// matches, brace groups expanded and listed one by one, are the reference
// for matching them without expanding.
var bracePatterns = []string{
	"x-{a,b}.txt",
	"{x,y}-{a,b,c}.txt",
	"x-{a,a{b,}}.txt",
	"x-{*,a}.txt",
	"x-{a.txt",
	`x-\{a.txt`,
	`x-\{a,b\}.txt`,
	"x-{a,b}\\.txt",
	"x-{[ab],c}.txt",
	"x-{[^a],zz}.txt",
	"[x-y]-{a,b}.txt",
	"?-{a,c}.txt",
	"{d1,d2/sub}/*.txt",
	"{,d1/}x-a.txt",
	"d?/{a,b}[0-9].txt",
	"*/{a,b}*",
	"*/*/{a,b}*.txt",
	"d1/{a1,b2,c3}.txt",
	"{d1/a1,d2/sub/q,x-a}.txt",
	"d2/{sub,nope}/{q,r}.txt",
	"{d1,d2}/{,sub/}{a1,q}.txt",
	"x-{a,b}{,}.txt",
	"{x,y}-{a{,b},c}.txt",
	"{x}-a.txt",
	"x-{}.txt",
	"x-{a,b}*",
	"d1/{a,b}?.txt",
}

var bracesTree = []string{
	"x-a.txt", "x-b.txt", "x-ab.txt", "x-{a.txt", "x-{a,b}.txt", "x-c.txt", "x-zz.txt", "x-.txt",
	"y-c.txt", "y-a.txt", "y-ab.txt", "z-a.txt", "x-a.txtx",
	"d1/a1.txt", "d1/b2.txt", "d1/c3.txt", "d1/x-a.txt", "d1/ab.txt",
	"d2/sub/q.txt", "d2/sub/r.txt", "d2/q.txt", "d2/a1.txt",
	"d3/d4/a5.txt", "d3/d4/b.txt",
}

func makeBracesTree(t *testing.T, root string) {
	t.Helper()
	for _, n := range bracesTree {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// listBoth lists pattern expanded and matched.
func listBoth(t *testing.T, fsys filesystem.Interface, pattern string) (expanded, matched []string) {
	t.Helper()
	ctx := context.Background()
	var err error
	if expanded, err = listBraces(ctx, fsys, pattern); err != nil {
		t.Fatalf("%s expanded: %v", pattern, err)
	}
	old := maxBraceListings
	maxBraceListings = 0
	defer func() { maxBraceListings = old }()
	if matched, err = listBraces(ctx, fsys, pattern); err != nil {
		t.Fatalf("%s matched: %v", pattern, err)
	}
	slices.Sort(expanded)
	slices.Sort(matched)
	return expanded, matched
}

// TestBracesMatchedAsExpanded: matching a brace pattern without expanding
// it (what patterns of more than MaxBraceListings alternatives get) finds
// exactly what expanding and listing each alternative finds, on the local
// filesystem and on memfs (filepath.Match's syntax on both), for nested,
// empty and escaped groups, groups holding / and classes, wildcards
// before and after them.
func TestBracesMatchedAsExpanded(t *testing.T) {
	root := t.TempDir()
	makeBracesTree(t, root)
	ctx := context.Background()
	local, _ := filesystem.New(ctx, root)
	mem, _ := filesystem.New(ctx, "memfs://")
	for _, n := range bracesTree {
		memfs.Write("memfs://braces/"+n, []byte(n))
	}
	nonEmpty := 0
	for _, p := range bracePatterns {
		for _, tc := range []struct {
			fsys filesystem.Interface
			base string
		}{{local, root + "/"}, {mem, "memfs://braces/"}} {
			exp, got := listBoth(t, tc.fsys, tc.base+p)
			if !slices.Equal(exp, got) {
				t.Errorf("%s: matched %v, expanded %v", tc.base+p, got, exp)
			}
			if len(exp) > 0 {
				nonEmpty++
			}
		}
	}
	if nonEmpty < 2*len(bracePatterns)-6 {
		t.Errorf("only %d of %d listings found files: the patterns test little", nonEmpty, 2*len(bracePatterns))
	}
	// Relative patterns too.
	t.Chdir(root)
	for _, p := range []string{"x-{a,b}.txt", "{d1,d2/sub}/*.txt", "./d1/{a1,b2}.txt"} {
		exp, got := listBoth(t, local, p)
		if len(exp) == 0 || !slices.Equal(exp, got) {
			t.Errorf("%s: matched %v, expanded %v", p, got, exp)
		}
	}
}

// TestBracesRefused: what matching without expanding cannot do is an
// error naming the pattern, the limit and the reason, never a silent
// partial match.
func TestBracesRefused(t *testing.T) {
	many := strings.Repeat("{0,1}", 11)
	for _, c := range []struct{ pattern, want string }{
		{"gs://{a,b}" + many + "/x", "before the first / after the scheme"},
		{"{gs,s3}://b/" + many, "before the first / after the scheme"},
		{"gs://b/x*{,a}*" + many, "two * meet across a brace"},
		{"gs://b/" + many + "x*{*,a}", "two * meet across a brace"},
		{"gs://b/" + many + "{x*,a}{,b}{*,c}", "two * meet across a brace"},
		{"gs://b/" + many + "x**", "two * meet across a brace"},
		{"/d/[a" + many + "]", "character class"},
		{"/d/" + many + `\`, "trailing"},
	} {
		err := refusal(c.pattern)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.pattern) || !strings.Contains(err.Error(), "1024") {
			t.Errorf("%s: %v, want an error naming it, the limit and %q", c.pattern, err, c.want)
		}
	}
	// Stars that cannot meet are fine on gs:// (the listing then fails
	// for want of credentials or a network, after the checks); ** meeting
	// across a brace is fine where * never crosses a /.
	for _, p := range []string{"gs://b/x*" + many + "*y", "gs://b/" + many + "{*,a}", "gs://b/" + many + "{x*,a}{b,c}{*,c}"} {
		if err := refusal(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := listBraces(context.Background(), localFS(t), t.TempDir()+"/x*{,a}*"+many); err != nil {
		t.Errorf("local: %v", err)
	}
}

func localFS(t *testing.T) filesystem.Interface {
	fs, err := filesystem.New(context.Background(), "/")
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestGlobRegexpGCS: the gs:// flavour follows Beam's gcs glob: \ is a
// literal character, [!...] and [^...] negate, a class's body is regular
// expression syntax; no wildcard and no class matches a /.
func TestGlobRegexpGCS(t *testing.T) {
	for _, c := range []struct {
		glob      string
		match, no []string
	}{
		{`a\b`, []string{`a\b`}, []string{"ab", `a\\b`}},
		{"[!a]x", []string{"bx", "cx"}, []string{"ax", "/x"}},
		{"[^a]x", []string{"bx"}, []string{"ax", "/x"}},
		{`[\d]x`, []string{"5x"}, []string{"ax"}},
		{"[]a]", []string{"]", "a"}, []string{"b"}},
		{"[.-0]", []string{".", "0"}, []string{"/"}},
		{"*.avro", []string{"x.avro", ".avro"}, []string{"d/x.avro"}},
		{"?", []string{"é"}, []string{"/", ""}},
	} {
		gc := &globCompiler{flavor: globGCS, maxDepth: 4}
		f, err := gc.chunk(c.glob)
		if err != nil {
			t.Errorf("%s: %v", c.glob, err)
			continue
		}
		rx := regexp.MustCompile("^(?:" + f.re + ")$")
		for _, m := range c.match {
			if !rx.MatchString(m) {
				t.Errorf("%s does not match %q (%s)", c.glob, m, f.re)
			}
		}
		for _, m := range c.no {
			if rx.MatchString(m) {
				t.Errorf("%s matches %q (%s)", c.glob, m, f.re)
			}
		}
	}
	if _, err := (&globCompiler{flavor: globGCS}).chunk("[ab"); err == nil {
		t.Error("unclosed class accepted")
	}
}

// TestHasWildcardLong: HasWildcard does not expand (a pattern of 40 groups
// stands for 2^40 patterns).
func TestHasWildcardLong(t *testing.T) {
	if !HasWildcard("/d/" + strings.Repeat("{a,b}", 40)) {
		t.Error("40 groups: no wildcard")
	}
	if c := parseBraces(strings.Repeat("{a,b}", 40)).count(maxBraceListings); c != maxBraceListings+1 {
		t.Errorf("count %d", c)
	}
}

// refusal is the error listMatched refuses pattern with, if any, without
// listing anything.
func refusal(pattern string) error {
	_, err := listMatched(context.Background(), refusingFS{}, pattern, parseBraces(pattern))
	if errors.Is(err, errListed) {
		return nil
	}
	return err
}

var errListed = errors.New("listed")

// refusingFS fails every listing.
type refusingFS struct{ filesystem.Interface }

func (refusingFS) List(context.Context, string) ([]string, error) { return nil, errListed }
