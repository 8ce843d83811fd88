package filesource

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// MaxBraceListings is the number of alternatives up to which a brace
// pattern is expanded and each alternative listed by its filesystem, so
// that a pattern such as gs://b/logs/{2024-01-01,2024-01-02}/* lists those
// two prefixes and no other. A pattern with more alternatives is not
// expanded (eleven groups {a,b} stand for 2,048 patterns, twenty for a
// million): its files are listed under the part of the pattern before its
// first brace group, a directory level at a time, and matched against the
// whole pattern by this package (see the package documentation, Patterns).
const MaxBraceListings = 1024

// maxBraceListings is MaxBraceListings; the tests lower it to check that
// matching without expanding gives what expanding gives.
var maxBraceListings = MaxBraceListings

// braceSeq is a pattern parsed into its brace groups: a sequence of
// literal glob text (the escapes \{ \} \, already replaced by the
// characters they stand for; *, ?, [...] and other backslashes left for
// the filesystem) and groups, each a list of alternatives.
type braceSeq []braceItem

type braceItem struct {
	text string
	alts []braceSeq // a group's alternatives; nil for text
}

// parseBraces parses the brace groups of pattern, as a shell does: an
// unescaped { with its matching } is a group, its top-level commas
// separate alternatives, groups nest and follow each other. An unclosed {
// and the escapes \{ \} \, are literal characters (the escapes lose their
// backslash, so that no filesystem sees them).
func parseBraces(pattern string) braceSeq {
	open, depth := -1, 0
	var commas []int // top-level commas of the group
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\' && i+1 < len(pattern):
			i++
		case c == '{':
			if depth == 0 {
				open, commas = i, nil
			}
			depth++
		case c == ',' && depth == 1:
			commas = append(commas, i)
		case c == '}' && depth > 0:
			depth--
			if depth == 0 {
				var alts []braceSeq
				from := open + 1
				for _, c := range commas {
					alts = append(alts, parseBraces(pattern[from:c]))
					from = c + 1
				}
				alts = append(alts, parseBraces(pattern[from:i]))
				seq := braceSeq{}.text(unescapeBraces(pattern[:open]))
				seq = append(seq, braceItem{alts: alts})
				return seq.concat(parseBraces(pattern[i+1:]))
			}
		}
	}
	if depth > 0 && open >= 0 {
		// An unclosed {: literal, but what follows may hold groups.
		return braceSeq{}.text(unescapeBraces(pattern[:open]) + "{").concat(parseBraces(pattern[open+1:]))
	}
	return braceSeq{}.text(unescapeBraces(pattern))
}

// text appends literal text to s, joined to text that ends s.
func (s braceSeq) text(t string) braceSeq {
	if t == "" {
		return s
	}
	if n := len(s); n > 0 && s[n-1].alts == nil {
		s[n-1].text += t
		return s
	}
	return append(s, braceItem{text: t})
}

func (s braceSeq) concat(t braceSeq) braceSeq {
	for _, it := range t {
		if it.alts == nil {
			s = s.text(it.text)
		} else {
			s = append(s, it)
		}
	}
	return s
}

// unescapeBraces drops the backslash of \{ \} and \,.
func unescapeBraces(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("{},", s[i+1]) >= 0 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (s braceSeq) hasGroup() bool {
	for _, it := range s {
		if it.alts != nil {
			return true
		}
	}
	return false
}

// count is the number of patterns s stands for, or limit+1 if more.
func (s braceSeq) count(limit int) int {
	n := 1
	for _, it := range s {
		if it.alts == nil {
			continue
		}
		m := 0
		for _, a := range it.alts {
			m += a.count(limit)
			if m > limit {
				return limit + 1
			}
		}
		if n *= m; n > limit {
			return limit + 1
		}
	}
	return n
}

// expand returns the patterns s stands for, in order.
func (s braceSeq) expand() []string {
	out := []string{""}
	for _, it := range s {
		if it.alts == nil {
			for i := range out {
				out[i] += it.text
			}
			continue
		}
		var alts []string
		for _, a := range it.alts {
			alts = append(alts, a.expand()...)
		}
		next := make([]string, 0, len(out)*len(alts))
		for _, o := range out {
			for _, a := range alts {
				next = append(next, o+a)
			}
		}
		out = next
	}
	return out
}

// listBraces returns the names fsys lists for pattern, its brace groups
// matched, each name once, in the order found: expanded and each
// alternative listed when there are at most maxBraceListings of them,
// else listed under the pattern's fixed part and matched here.
//
// Local names are cleaned (filepath.Clean): the local filesystem returns
// a pattern without wildcards as it is and the names a glob matches
// cleaned, so ./d/a.txt and d/a.txt would otherwise be one file twice.
func listBraces(ctx context.Context, fsys filesystem.Interface, pattern string) ([]string, error) {
	seq := parseBraces(pattern)
	var names []string
	if seq.count(maxBraceListings) > maxBraceListings {
		var err error
		if names, err = listMatched(ctx, fsys, pattern, seq); err != nil {
			return nil, err
		}
	} else {
		for _, alt := range seq.expand() {
			n, err := fsys.List(ctx, alt)
			if err != nil {
				return nil, fmt.Errorf("listing %q: %w", alt, err)
			}
			names = append(names, n...)
		}
	}
	local := isLocal(pattern)
	seen := map[string]bool{}
	out := names[:0]
	for _, name := range names {
		if local {
			name = filepath.Clean(name)
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out, nil
}

// listMatched lists a brace pattern without expanding it. The pattern is
// cut after the last / before its first group: the head goes to the
// filesystem as it is (its own *, ? and [...] matched there), and the
// tail, groups and all, becomes a regular expression. Since no wildcard of
// the tail matches a / (see globRegexp), every name the tail matches has
// one of a few numbers of / in it, known from the pattern; for each, the
// filesystem lists head + "*/*/.../*" and the names whose last segments
// the expression matches are kept. So braces cost one listing per depth,
// however many alternatives they stand for, and nothing is dropped.
func listMatched(ctx context.Context, fsys filesystem.Interface, pattern string, seq braceSeq) ([]string, error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("brace pattern %q stands for more than %d patterns, and so is matched rather than expanded, but %s", pattern, maxBraceListings, fmt.Sprintf(format, args...))
	}
	var headText string
	tail := seq
	if len(seq) > 0 && seq[0].alts == nil {
		headText, tail = seq[0].text, seq[1:]
	}
	cut := strings.LastIndexByte(headText, '/') + 1
	head := headText[:cut]
	tail = braceSeq{}.text(headText[cut:]).concat(tail)
	if !isLocal(pattern) {
		// The head names the scheme and the bucket (or host): a group
		// there cannot be listed under one prefix.
		i := strings.Index(head, "://")
		if i < 0 || !strings.Contains(head[i+3:], "/") {
			return nil, refuse("a brace group comes before the first / after the scheme; give at most %d alternatives there", maxBraceListings)
		}
	}
	flavor := globFilepath
	if schemeOf(pattern) == "gs" {
		flavor = globGCS
	}
	c := &globCompiler{flavor: flavor, maxDepth: strings.Count(pattern, "/")}
	re, depths, err := c.seq(tail)
	if err != nil {
		return nil, refuse("%v", err)
	}
	if flavor == globGCS && c.starsMeet(tail) {
		return nil, refuse("two * meet across a brace (** on gs:// crosses directories); write ** inside one alternative's text, or give at most %d alternatives", maxBraceListings)
	}
	rx, err := regexp.Compile("^(?:" + re + ")$")
	if err != nil {
		return nil, refuse("%v", err)
	}
	var out []string
	for d, ok := range depths {
		if !ok {
			continue
		}
		glob := head + "*" + strings.Repeat("/*", d)
		names, err := fsys.List(ctx, glob)
		if err != nil {
			return nil, fmt.Errorf("listing %q (for %q): %w", glob, pattern, err)
		}
		for _, name := range names {
			t, ok := lastSegments(name, d+1)
			if ok && rx.MatchString(t) {
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// lastSegments returns the last n /-separated segments of name.
func lastSegments(name string, n int) (string, bool) {
	j := len(name)
	for k := 0; k < n; k++ {
		j = strings.LastIndexByte(name[:j], '/')
		if j < 0 {
			return name, k == n-1
		}
	}
	return name[j+1:], true
}

// globFlavor is the syntax of *, ? and [...] on a filesystem: Go's
// filepath.Match (local, memfs://, s3://, and by default), or the regular
// expression Beam's gcs filesystem makes of a glob (where \ is a literal
// character, [!...] negates, a class's body is regular-expression syntax,
// and ** crosses /).
type globFlavor int

const (
	globFilepath globFlavor = iota
	globGCS
)

var errBadGlob = errors.New("syntax error in pattern")

// globCompiler turns brace sequences into regular expressions of the
// names they match, and the numbers of / those names have.
type globCompiler struct {
	flavor   globFlavor
	maxDepth int
	// chunks caches each text's facts for starsMeet.
	chunks map[string]chunkFacts
}

type chunkFacts struct {
	re                  string
	slashes             int
	starFirst, starLast bool
	starStar            bool // ** inside the text (gcs)
	emptyText           bool
}

// seq compiles s: its expression and the set of numbers of / in the names
// it matches (depths[d] for d slashes).
func (c *globCompiler) seq(s braceSeq) (string, []bool, error) {
	var b strings.Builder
	depths := make([]bool, c.maxDepth+1)
	depths[0] = true
	for _, it := range s {
		var re string
		var ds []bool
		if it.alts == nil {
			f, err := c.chunk(it.text)
			if err != nil {
				return "", nil, err
			}
			re, ds = f.re, make([]bool, c.maxDepth+1)
			ds[f.slashes] = true
		} else {
			ds = make([]bool, c.maxDepth+1)
			res := make([]string, len(it.alts))
			for i, a := range it.alts {
				r, d, err := c.seq(a)
				if err != nil {
					return "", nil, err
				}
				res[i] = r
				for k, ok := range d {
					ds[k] = ds[k] || ok
				}
			}
			re = "(?:" + strings.Join(res, "|") + ")"
		}
		b.WriteString(re)
		sum := make([]bool, c.maxDepth+1)
		for i, ok := range depths {
			if !ok {
				continue
			}
			for j, ok2 := range ds {
				if ok2 && i+j <= c.maxDepth {
					sum[i+j] = true
				}
			}
		}
		depths = sum
	}
	return b.String(), depths, nil
}

// starsMeet reports whether a * at the end of one piece of s can meet a *
// at the start of the next in some expansion (through empty pieces), or
// whether a text holds **: on gs:// that makes a ** the pieces do not
// show. s was compiled before, so every text is in c.chunks.
func (c *globCompiler) starsMeet(s braceSeq) bool {
	var walk func(s braceSeq) (empty, first, last, meet bool)
	walk = func(s braceSeq) (empty, first, last, meet bool) {
		empty = true
		pending := false // a * may end what came before, through empties
		for _, it := range s {
			var e, f, l, m bool
			if it.alts == nil {
				cf := c.chunks[it.text]
				e, f, l, m = cf.emptyText, cf.starFirst, cf.starLast, cf.starStar
			} else {
				for _, a := range it.alts {
					ae, af, al, am := walk(a)
					e, f, l, m = e || ae, f || af, l || al, m || am
				}
			}
			meet = meet || m || pending && f
			if empty {
				first = first || f
			}
			pending = l || pending && e
			last = l || last && e
			empty = empty && e
		}
		return empty, first, last, meet
	}
	_, _, _, meet := walk(s)
	return meet
}

// chunk compiles literal glob text.
func (c *globCompiler) chunk(t string) (chunkFacts, error) {
	if f, ok := c.chunks[t]; ok {
		return f, nil
	}
	if !utf8.ValidString(t) {
		return chunkFacts{}, fmt.Errorf("%q is not UTF-8", t)
	}
	f := chunkFacts{emptyText: t == ""}
	var b strings.Builder
	rs := []rune(t)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '*':
			if c.flavor == globGCS && i+1 < len(rs) && rs[i+1] == '*' {
				f.starStar = true
			}
			b.WriteString("[^/]*")
		case r == '?':
			b.WriteString("[^/]")
		case r == '[':
			var ranges []rune
			var negated bool
			var err error
			if c.flavor == globGCS {
				ranges, negated, i, err = gcsClass(rs, i)
			} else {
				ranges, negated, i, err = filepathClass(rs, i)
			}
			if err != nil {
				return chunkFacts{}, fmt.Errorf("%q: %w", t, err)
			}
			b.WriteString(classRegexp(ranges, negated))
		case r == '\\' && c.flavor == globFilepath:
			i++
			if i == len(rs) {
				return chunkFacts{}, fmt.Errorf("%q: %w (a trailing \\)", t, errBadGlob)
			}
			if rs[i] == '/' {
				f.slashes++
			}
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		default:
			if r == '/' {
				f.slashes++
			}
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	if f.slashes > c.maxDepth {
		return chunkFacts{}, fmt.Errorf("%q: more / than the pattern has", t)
	}
	f.re = b.String()
	f.starFirst = len(rs) > 0 && rs[0] == '*'
	f.starLast = len(rs) > 0 && rs[len(rs)-1] == '*' // only asked on gs://, where \ is literal
	if c.chunks == nil {
		c.chunks = map[string]chunkFacts{}
	}
	c.chunks[t] = f
	return f, nil
}

// filepathClass parses the class at rs[i] ('[') as filepath.Match does,
// and returns its ranges (pairs), whether it is negated, and the index of
// its closing ].
func filepathClass(rs []rune, i int) (ranges []rune, negated bool, end int, err error) {
	i++
	if i < len(rs) && rs[i] == '^' {
		negated = true
		i++
	}
	esc := func() (rune, error) {
		if i >= len(rs) || rs[i] == '-' || rs[i] == ']' {
			return 0, errBadGlob
		}
		if rs[i] == '\\' {
			i++
			if i >= len(rs) {
				return 0, errBadGlob
			}
		}
		r := rs[i]
		i++
		if i >= len(rs) {
			return 0, errBadGlob // unclosed
		}
		return r, nil
	}
	for {
		if i < len(rs) && rs[i] == ']' && len(ranges) > 0 {
			return ranges, negated, i, nil
		}
		lo, err := esc()
		if err != nil {
			return nil, false, 0, fmt.Errorf("%w (a character class)", err)
		}
		hi := lo
		if rs[i] == '-' {
			i++
			if hi, err = esc(); err != nil {
				return nil, false, 0, fmt.Errorf("%w (a character class)", err)
			}
		}
		ranges = append(ranges, lo, hi)
	}
}

// gcsClass parses the class at rs[i] ('[') as Beam's gcs filesystem does
// (a ] right after [ or [! belongs to the class, [! negates, the body is
// regular-expression syntax), with regexp/syntax.
func gcsClass(rs []rune, i int) (ranges []rune, negated bool, end int, err error) {
	j := i + 1
	if j < len(rs) && rs[j] == '!' {
		j++
	}
	if j < len(rs) && rs[j] == ']' {
		j++
	}
	for j < len(rs) && rs[j] != ']' {
		j++
	}
	if j >= len(rs) {
		return nil, false, 0, fmt.Errorf("%w (an unclosed [)", errBadGlob)
	}
	body := string(rs[i+1 : j])
	if strings.HasPrefix(body, "!") {
		body = "^" + body[1:]
	}
	re, err := syntax.Parse("["+body+"]", syntax.Perl)
	if err != nil {
		return nil, false, 0, err
	}
	switch re.Op {
	case syntax.OpCharClass:
		ranges = append(ranges, re.Rune...)
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			ranges = append(ranges, r, r)
			if re.Flags&syntax.FoldCase != 0 {
				for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
					ranges = append(ranges, f, f)
				}
			}
		}
	case syntax.OpAnyChar:
		ranges = []rune{0, unicode.MaxRune}
	case syntax.OpAnyCharNotNL:
		ranges = []rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}
	case syntax.OpNoMatch:
	default:
		return nil, false, 0, fmt.Errorf("class [%s] is not a set of characters", body)
	}
	return ranges, false, j, nil
}

// classRegexp is a class of the given ranges (pairs), negated or not,
// that never matches a /.
func classRegexp(ranges []rune, negated bool) string {
	var b strings.Builder
	b.WriteString("[")
	if negated {
		b.WriteString("^/")
	}
	n := 0
	add := func(lo, hi rune) {
		if lo > hi {
			return
		}
		fmt.Fprintf(&b, `\x{%x}-\x{%x}`, lo, hi)
		n++
	}
	for k := 0; k+1 < len(ranges); k += 2 {
		lo, hi := ranges[k], ranges[k+1]
		if negated || hi < '/' || lo > '/' {
			add(lo, hi)
			continue
		}
		add(lo, '/'-1)
		add('/'+1, hi)
	}
	if !negated && n == 0 {
		return `[^\x00-\x{10ffff}]` // matches nothing
	}
	b.WriteString("]")
	return b.String()
}
