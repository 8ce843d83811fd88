package filesource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"cloud.google.com/go/storage"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// EmptyMatchTreatment says whether a file pattern that matches no file is
// an error, as Beam Java's EmptyMatchTreatment does.
type EmptyMatchTreatment int

const (
	// emptyMatchDefault means "the transform's default": EmptyMatchDisallow
	// for Read, EmptyMatchAllowIfWildcard for ReadAll.
	emptyMatchDefault EmptyMatchTreatment = iota
	// EmptyMatchAllow: a pattern that matches nothing reads no records.
	EmptyMatchAllow
	// EmptyMatchDisallow: a pattern that matches nothing is an error. The
	// default of Read.
	EmptyMatchDisallow
	// EmptyMatchAllowIfWildcard: a pattern that matches nothing is an
	// error unless it has a wildcard (see HasWildcard). The default of
	// ReadAll.
	EmptyMatchAllowIfWildcard
)

func (t EmptyMatchTreatment) String() string {
	switch t {
	case EmptyMatchAllow:
		return "Allow"
	case EmptyMatchDisallow:
		return "Disallow"
	case EmptyMatchAllowIfWildcard:
		return "AllowIfWildcard"
	}
	return fmt.Sprintf("EmptyMatchTreatment(%d)", int(t))
}

// allows reports whether an empty match of pattern is allowed.
func (t EmptyMatchTreatment) allows(pattern string) bool {
	switch t {
	case EmptyMatchAllow:
		return true
	case EmptyMatchAllowIfWildcard:
		return HasWildcard(pattern)
	}
	return false
}

func (t EmptyMatchTreatment) valid() bool {
	return t >= EmptyMatchAllow && t <= EmptyMatchAllowIfWildcard
}

// HasWildcard reports whether pattern has a wildcard that matching
// understands on every filesystem: *, ? or [ (which Beam's filesystems
// match), or a brace group {a,b} (which this package expands itself, see
// Match). A { without its closing }, or an escaped one (\{), is a literal
// character and no wildcard.
func HasWildcard(pattern string) bool {
	alts, braces := expandBraces(pattern)
	if braces {
		return true
	}
	return strings.ContainsAny(alts[0], "*?[")
}

// maxBraceExpansions bounds the patterns one brace pattern expands into, so
// that a pattern such as {a,b}{a,b}... cannot make millions of listings.
const maxBraceExpansions = 1024

// expandBraces expands the brace groups of pattern ({a,b,c}, nested, and
// several in a row, as a shell does) into the patterns they stand for, in
// order, and reports whether there was any group. An unclosed { and the
// escapes \{ \} \, are literal characters (the escapes lose their
// backslash, so that no filesystem sees them); other backslashes stay.
// Past maxBraceExpansions alternatives the rest of pattern is kept as is.
func expandBraces(pattern string) (alts []string, braces bool) {
	// Find the first group: an unescaped { with its matching }.
	open := -1
	depth := 0
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
				// pattern[open:i+1] is a group.
				prefix, suffix := pattern[:open], pattern[i+1:]
				var parts []string
				from := open + 1
				for _, c := range commas {
					parts = append(parts, pattern[from:c])
					from = c + 1
				}
				parts = append(parts, pattern[from:i])
				rest, _ := expandBraces(suffix)
				head := unescapeBraces(prefix)
				for _, p := range parts {
					sub, _ := expandBraces(p)
					for _, s := range sub {
						for _, r := range rest {
							if len(alts) == maxBraceExpansions {
								return alts, true
							}
							alts = append(alts, head+s+r)
						}
					}
				}
				return alts, true
			}
		}
	}
	if depth > 0 && open >= 0 {
		// An unclosed {: literal, but what follows may hold groups.
		rest, b := expandBraces(pattern[open+1:])
		for i, r := range rest {
			rest[i] = unescapeBraces(pattern[:open]) + "{" + r
		}
		return rest, b
	}
	return []string{unescapeBraces(pattern)}, false
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

// Match lists the files pattern matches, with their sizes and modification
// times, sorted by path and without duplicates: pattern is a path or glob
// on any Beam filesystem.
//
// Brace groups ({a,b}, nested) are expanded here, before the filesystem
// sees the pattern, because Beam's filesystems do not expand them (its
// local filesystem would take { literally and match nothing); the
// expansions are listed one by one and their files merged. Directories are
// skipped. A pattern with no wildcard that names a directory is an error
// of kind ErrIsDirectory; a pattern that matches no file is one of kind
// ErrNoMatch unless empty allows it. Errors name the pattern.
func Match(ctx context.Context, pattern string, empty EmptyMatchTreatment) ([]Metadata, error) {
	if strings.TrimSpace(pattern) == "" {
		return nil, errors.New("filesource: empty file pattern")
	}
	if empty == emptyMatchDefault {
		empty = EmptyMatchDisallow
	}
	fsys, err := filesystem.New(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("filesource: matching %q: %w", pattern, err)
	}
	defer fsys.Close()
	alts, _ := expandBraces(pattern)
	seen := map[string]bool{}
	var files []Metadata
	for _, alt := range alts {
		names, err := fsys.List(ctx, alt)
		if err != nil {
			return nil, fmt.Errorf("filesource: matching %q: %w", alt, err)
		}
		for _, name := range names {
			if seen[name] {
				continue
			}
			seen[name] = true
			m, err := statListed(ctx, fsys, name)
			if errors.Is(err, ErrIsDirectory) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("filesource: matching %q: %w", pattern, err)
			}
			files = append(files, m)
		}
	}
	slices.SortFunc(files, func(a, b Metadata) int { return strings.Compare(a.Path, b.Path) })
	if len(files) == 0 && !empty.allows(pattern) {
		if !HasWildcard(pattern) && isLocal(pattern) {
			if fi, err := os.Stat(pattern); err == nil && fi.IsDir() {
				return nil, dirErr(pattern)
			}
		}
		return nil, &Error{Path: pattern, Kind: ErrNoMatch, Msg: fmt.Sprintf("empty-match treatment %v", empty)}
	}
	return files, nil
}

// statListed returns the metadata of a file a listing of fsys returned.
// Local files are stat'ed once; gs:// objects cost one request; other
// filesystems are asked their size and, if they tell, modification time.
func statListed(ctx context.Context, fsys filesystem.Interface, name string) (Metadata, error) {
	if isLocal(name) || schemeOf(name) == "gs" {
		return Stat(ctx, name)
	}
	m := Metadata{Path: name}
	var err error
	if m.Size, err = fsys.Size(ctx, name); err != nil {
		return m, openErr(name, err)
	}
	if lm, ok := fsys.(filesystem.LastModifiedGetter); ok {
		if t, err := lm.LastModified(ctx, name); err == nil && !t.IsZero() {
			m.LastModified = t.UnixNano()
		}
	}
	return m, nil
}

// notExist reports whether err says a file is not there (any more).
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrObjectNotExist)
}
