package filesource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

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
// match), or a brace group {a,b} (which this package matches itself, see
// Match). A { without its closing }, or an escaped one (\{), is a literal
// character and no wildcard.
func HasWildcard(pattern string) bool {
	seq := parseBraces(pattern)
	if seq.hasGroup() {
		return true
	}
	return len(seq) > 0 && strings.ContainsAny(seq[0].text, "*?[")
}

// Match lists the files pattern matches, with their sizes and modification
// times, sorted by path and without duplicates: pattern is a path or glob
// on any Beam filesystem.
//
// Brace groups ({a,b}, nested) are matched here, because Beam's
// filesystems do not understand them (its local filesystem would take {
// literally and match nothing): up to MaxBraceListings alternatives are
// expanded, listed one by one and their files merged; a pattern with more
// is listed under its part before the first group and matched against the
// whole pattern, with no limit (see the package documentation). A pattern
// that cannot be matched so is an error naming it and why. Directories are
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
	names, err := listBraces(ctx, fsys, pattern)
	if err != nil {
		return nil, fmt.Errorf("filesource: matching %q: %w", pattern, err)
	}
	var files []Metadata
	for _, name := range names {
		m, err := statListed(ctx, fsys, name)
		if errors.Is(err, ErrIsDirectory) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("filesource: matching %q: %w", pattern, err)
		}
		files = append(files, m)
	}
	slices.SortFunc(files, func(a, b Metadata) int { return strings.Compare(a.Path, b.Path) })
	if len(files) == 0 && !empty.allows(pattern) {
		if !HasWildcard(pattern) && isLocal(pattern) {
			if fi, err := os.Stat(pattern); err == nil && fi.IsDir() {
				return nil, dirErr(pattern)
			}
		}
		return nil, &Error{File: pattern, Kind: ErrNoMatch, Msg: fmt.Sprintf("empty-match treatment %v", empty)}
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

// notExist reports whether err says a file is not there (any more). Beam's
// gcs filesystem returns the storage client's ErrObjectNotExist as it is;
// it is known by its text, so that this package links no Cloud Storage
// client (a test checks the text against the client's).
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || (err != nil && strings.Contains(err.Error(), gcsNotExist))
}

// gcsNotExist is the text of cloud.google.com/go/storage.ErrObjectNotExist.
const gcsNotExist = "storage: object doesn't exist"
