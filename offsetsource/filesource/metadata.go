package filesource

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"

	"github.com/sdfio/sdfio/internal/ioerr"
)

// Metadata describes a file as a match saw it. It travels to the workers
// in every Source, so that every range of a file agrees on its size and a
// read can tell when the file changed.
type Metadata struct {
	// Path is the file's full path, with its filesystem's scheme.
	Path string
	// Size is its size in bytes; -1 when unknown (it is then asked of the
	// filesystem when the file is opened).
	Size int64
	// LastModified is its modification time in Unix nanoseconds; 0 when
	// its filesystem does not tell.
	LastModified int64
}

// MetadataOf converts Beam's fileio.FileMetadata. A size of 0 or less
// counts as unknown, as fileio leaves it 0 when it did not ask.
func MetadataOf(m fileio.FileMetadata) Metadata {
	md := Metadata{Path: m.Path, Size: m.Size}
	if md.Size <= 0 {
		md.Size = -1
	}
	if !m.LastModified.IsZero() {
		md.LastModified = m.LastModified.UnixNano()
	}
	return md
}

// FileMetadata converts m to Beam's fileio.FileMetadata.
func (m Metadata) FileMetadata() fileio.FileMetadata {
	fm := fileio.FileMetadata{Path: m.Path, Size: m.Size}
	if m.LastModified != 0 {
		fm.LastModified = time.Unix(0, m.LastModified).UTC()
	}
	return fm
}

// differs reports whether the file now (m) differs from the file as it was
// matched: another size, or another modification time (to the
// millisecond) where both are known.
func (m Metadata) differs(matched Metadata) bool {
	if matched.Size >= 0 && m.Size != matched.Size {
		return true
	}
	return m.LastModified != 0 && matched.LastModified != 0 && millis(m.LastModified) != millis(matched.LastModified)
}

// state describes m's size and modification time, for errors.
func (m Metadata) state() string {
	s := fmt.Sprintf("%d bytes", m.Size)
	if m.LastModified != 0 {
		s += ", modified " + time.Unix(0, m.LastModified).UTC().Format(time.RFC3339Nano)
	}
	return s
}

// Kinds of file errors: every error this package returns about one file
// is an *Error whose Kind is one of these, so that callers can test it
// with errors.Is and still read which file it was.
var (
	// ErrOpen: the file could not be opened or asked for its size: it does
	// not exist (any more), is a directory, or cannot be accessed. The
	// cause (fs.ErrNotExist, say) is wrapped too.
	ErrOpen = errors.New("cannot open file")
	// ErrIsDirectory: the path is a directory; also of kind ErrOpen.
	ErrIsDirectory = errors.New("is a directory")
	// ErrChanged: the file's size or modification time is not what it was
	// when it was matched.
	ErrChanged = errors.New("file changed since it was matched")
	// ErrNoMatch: a pattern matched no file, and the empty-match treatment
	// does not allow that.
	ErrNoMatch = errors.New("no file matches")
)

// Error is a problem with one file or pattern. It has the module's one
// error shape (File, Kind, Msg, Err, as avroio/container's Error; see
// internal/ioerr): its text is "<file>: <kind>[: <msg>][: <cause>]", and
// errors.Is finds the kind and the cause.
type Error struct {
	File string // the file or pattern
	Kind error  // one of the Err* kinds above
	Msg  string // what was wrong, in words; may be empty
	Err  error  // the cause, if any
}

func (e *Error) Error() string { return ioerr.Text(e.File, e.Kind, e.Msg, e.Err) }

// Unwrap returns the kind (and ErrOpen for ErrIsDirectory) and the cause.
func (e *Error) Unwrap() []error {
	if e.Kind == ErrIsDirectory {
		return ioerr.Unwrap(e.Kind, e.Err, ErrOpen)
	}
	return ioerr.Unwrap(e.Kind, e.Err)
}

func openErr(path string, err error) error {
	var fe *Error
	if errors.As(err, &fe) {
		return err
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		// Do not name the path twice.
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return &Error{File: path, Kind: ErrOpen, Err: err}
}

func dirErr(path string) error {
	return &Error{File: path, Kind: ErrIsDirectory, Msg: "give a pattern such as " + strings.TrimSuffix(path, "/") + "/* to read the files in it"}
}
