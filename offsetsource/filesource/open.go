package filesource

// How a reader gets at a file's bytes from an offset, on any Beam
// filesystem, without reading what lies before it:
//
//   - local files are opened once per range and read with ReadAt (pread),
//     from any offset;
//   - a scheme with a registered RangeReadFunc (gs:// once package
//     filesource/gcsrange is imported) is read in ranged requests of
//     growing size, from the offset on;
//   - otherwise the file is opened through Beam's filesystem registry, and
//     if the stream it returns can seek, it seeks;
//   - otherwise (memfs://, and filesystems whose streams cannot seek) the
//     bytes before the offset are read and discarded.
//
// Whatever the filesystem, a File never reads past the size it was matched
// with: a file that grew since is read as it was.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	// Local paths work without further imports; other schemes (gs://,
	// memfs://, s3://) need their Beam filesystem package imported, as
	// Beam's textio leaves them to the user: a program that reads no
	// gs:// links no Cloud Storage client.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local"
)

// RangeReadFunc reads up to length bytes of the file at path (the full
// path, scheme included) from byte offset on: fewer where the file ends.
// The stream it returns is closed after use.
type RangeReadFunc func(ctx context.Context, path string, offset, length int64) (io.ReadCloser, error)

var (
	rangeReadersMu sync.RWMutex
	rangeReaders   = map[string]RangeReadFunc{}
)

// RegisterRangeReader makes reads of files whose path starts with
// scheme:// use fn for ranged reads, so that a read starting deep in a file
// does not fetch the bytes before it. Package filesource/gcsrange registers
// gs:// (import it for its side effect). Other schemes are read through Beam's filesystem registry, seeking where
// its stream can seek and skipping bytes where it cannot. Call it from an
// init function, so that workers have it too.
func RegisterRangeReader(scheme string, fn RangeReadFunc) {
	rangeReadersMu.Lock()
	defer rangeReadersMu.Unlock()
	rangeReaders[scheme] = fn
}

func rangeReaderFor(path string) (RangeReadFunc, bool) {
	rangeReadersMu.RLock()
	defer rangeReadersMu.RUnlock()
	fn, ok := rangeReaders[schemeOf(path)]
	return fn, ok
}

// schemeOf is path's filesystem scheme as Beam names it ("default" for
// local paths).
func schemeOf(path string) string {
	if i := strings.Index(path, "://"); i > 0 {
		return path[:i]
	}
	return "default"
}

func isLocal(path string) bool { return schemeOf(path) == "default" }

// Ranged reads start small, so that reading a header costs little, and
// grow, so that a long range costs few requests and over-reads at most one
// chunk past where the reader stops.
const (
	firstChunk = 64 << 10
	maxChunk   = 8 << 20
)

// ChangeTreatment says what opening a file that changed since it was
// matched does: its size, or its modification time where its filesystem
// has one, differs from its Metadata.
type ChangeTreatment int

const (
	// ChangeFail fails the open with an error of kind ErrChanged naming the
	// file, the size and modification time it was matched with and those
	// it has now. The treatment of Read, ReadAll and ReadFiles.
	ChangeFail ChangeTreatment = iota
	// ChangeReadAsMatched reads the file as it was matched: its first
	// Metadata.Size bytes. Right for a file that was appended to (its first
	// bytes are what was matched); a file rewritten in place reads other
	// bytes, which a format usually rejects. The treatment of the watch,
	// which notices the change at its next poll (see MatchUpdatedFiles).
	ChangeReadAsMatched
)

func (c ChangeTreatment) String() string {
	switch c {
	case ChangeFail:
		return "Fail"
	case ChangeReadAsMatched:
		return "ReadAsMatched"
	}
	return fmt.Sprintf("ChangeTreatment(%d)", int(c))
}

// File is a file opened for reading from any offset: what a Format reads.
// It reads the file as it was matched (Metadata), never past Size. It is
// not safe for concurrent use; close it once.
type File struct {
	// Metadata is the file as it was matched.
	Metadata
	// Current is the file's metadata when it was opened.
	Current Metadata

	ctx   context.Context
	local *os.File             // local files: read with ReadAt
	fs    filesystem.Interface // other schemes without a range reader
	rr    RangeReadFunc        // schemes with a range reader
}

// Open opens the file that m describes, checking first that it is there,
// is not a directory, and (with ChangeFail) did not change since it was
// matched. Errors are *Error of kind ErrOpen (missing, a directory, no
// access) or ErrChanged, naming the file.
func Open(ctx context.Context, m Metadata, change ChangeTreatment) (*File, error) {
	f := &File{Metadata: m, ctx: ctx}
	if isLocal(m.Path) {
		lf, err := os.Open(m.Path)
		if err != nil {
			return nil, openErr(m.Path, err)
		}
		fi, err := lf.Stat()
		if err != nil {
			lf.Close()
			return nil, openErr(m.Path, err)
		}
		if fi.IsDir() {
			lf.Close()
			return nil, dirErr(m.Path)
		}
		f.local, f.Current = lf, Metadata{Path: m.Path, Size: fi.Size(), LastModified: fi.ModTime().UnixNano()}
	} else {
		cur, err := Stat(ctx, m.Path)
		if err != nil {
			return nil, err
		}
		f.Current = cur
		if rr, ok := rangeReaderFor(m.Path); ok {
			f.rr = rr
		} else if f.fs, err = filesystemFor(ctx, m.Path); err != nil {
			return nil, openErr(m.Path, err)
		}
	}
	if f.Size < 0 {
		f.Size, f.LastModified = f.Current.Size, f.Current.LastModified
	}
	if change == ChangeFail && f.Current.differs(f.Metadata) {
		f.Close()
		return nil, &Error{File: m.Path, Kind: ErrChanged, Msg: fmt.Sprintf("matched with %s, now %s; a file must not change while it is read", f.Metadata.state(), f.Current.state())}
	}
	if f.Current.Size < f.Size {
		// Read as matched, but the file is shorter now: read what is left
		// and let the format see it end early.
		f.Size = f.Current.Size
	}
	return f, nil
}

// OpenAt returns a stream of the file's bytes from off to its matched size.
// Close it after use; it may be called any number of times.
func (f *File) OpenAt(off int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, fmt.Errorf("filesource: %s: negative offset %d", f.Path, off)
	}
	off = min(off, f.Size)
	switch {
	case f.local != nil:
		return sectionReader{io.NewSectionReader(f.local, off, f.Size-off)}, nil
	case f.rr != nil:
		return &chunkedReader{read: func(o, n int64) (io.ReadCloser, error) { return f.rr(f.ctx, f.Path, o, n) },
			off: off, size: f.Size, chunk: firstChunk}, nil
	}
	rc, err := f.fs.OpenRead(f.ctx, f.Path)
	if err != nil {
		return nil, openErr(f.Path, err)
	}
	if off > 0 {
		if sk, ok := rc.(io.Seeker); ok {
			if _, err := sk.Seek(off, io.SeekStart); err != nil {
				rc.Close()
				return nil, fmt.Errorf("filesource: %s: seeking to byte %d: %w", f.Path, off, err)
			}
		} else if _, err := io.CopyN(io.Discard, rc, off); err != nil && err != io.EOF {
			rc.Close()
			return nil, fmt.Errorf("filesource: %s: skipping to byte %d: %w", f.Path, off, err)
		}
	}
	return limitedReadCloser{io.LimitReader(rc, f.Size-off), rc}, nil
}

// Close releases the file.
func (f *File) Close() error {
	if f.local != nil {
		err := f.local.Close()
		f.local = nil
		return err
	}
	return nil
}

// sectionReader is a range of a local file. Its Remain says how much of
// the range is left, so that a reader sizes a buffer for a long read at
// once rather than by doubling it (avroio/container reads a block's
// declared bytes so).
type sectionReader struct{ *io.SectionReader }

func (sectionReader) Close() error { return nil }

// Remain is the number of bytes of the range not read yet.
func (s sectionReader) Remain() int64 {
	pos, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1
	}
	return s.Size() - pos
}

type limitedReadCloser struct {
	io.Reader
	io.Closer
}

// chunkedReader reads a file from off on through ranged reads of doubling
// size.
type chunkedReader struct {
	read  func(off, n int64) (io.ReadCloser, error)
	off   int64 // file offset of the next byte
	size  int64 // file size, -1 if unknown
	chunk int64 // length of the next request
	cur   io.ReadCloser
	left  int64 // bytes the current request has yet to deliver
	eof   bool
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	for {
		if r.eof {
			return 0, io.EOF
		}
		if r.cur == nil {
			if r.size >= 0 && r.off >= r.size {
				r.eof = true
				return 0, io.EOF
			}
			n := r.chunk
			if r.size >= 0 {
				n = min(n, r.size-r.off)
			}
			rc, err := r.read(r.off, n)
			if err != nil {
				return 0, fmt.Errorf("reading %d bytes from byte %d: %w", n, r.off, err)
			}
			r.cur, r.left = rc, n
			r.chunk = min(2*r.chunk, maxChunk)
		}
		k, err := r.cur.Read(p[:min(int64(len(p)), r.left)])
		r.off += int64(k)
		r.left -= int64(k)
		if err == io.EOF || r.left == 0 {
			r.cur.Close()
			r.cur = nil
			if r.left > 0 {
				// The file ended inside the request.
				r.eof = true
			}
			err = nil
		}
		if k > 0 || err != nil {
			return k, err
		}
	}
}

func (r *chunkedReader) Close() error {
	if r.cur != nil {
		err := r.cur.Close()
		r.cur = nil
		return err
	}
	return nil
}

// Filesystems by scheme, made once per process: some (gs://, s3://) make a
// client, which is too costly to do per range.
var (
	filesystemsMu sync.Mutex
	filesystems   = map[string]filesystem.Interface{}
)

func filesystemFor(ctx context.Context, path string) (filesystem.Interface, error) {
	key := schemeOf(path)
	filesystemsMu.Lock()
	defer filesystemsMu.Unlock()
	if fs, ok := filesystems[key]; ok {
		return fs, nil
	}
	fs, err := filesystem.New(context.WithoutCancel(ctx), path)
	if err != nil {
		return nil, err
	}
	filesystems[key] = fs
	return fs, nil
}

// Stat returns the metadata of the file at path: its size, and its
// modification time where its filesystem has one. A missing file, a directory or any other failure is an *Error
// of kind ErrOpen naming the file.
func Stat(ctx context.Context, path string) (Metadata, error) {
	m := Metadata{Path: path}
	switch schemeOf(path) {
	case "default":
		fi, err := os.Stat(path)
		if err != nil {
			return m, openErr(path, err)
		}
		if fi.IsDir() {
			return m, dirErr(path)
		}
		m.Size, m.LastModified = fi.Size(), fi.ModTime().UnixNano()
		return m, nil
	}
	fsys, err := filesystemFor(ctx, path)
	if err != nil {
		return m, openErr(path, err)
	}
	if m.Size, err = fsys.Size(ctx, path); err != nil {
		return m, openErr(path, err)
	}
	if lm, ok := fsys.(filesystem.LastModifiedGetter); ok {
		if t, err := lm.LastModified(ctx, path); err == nil && !t.IsZero() {
			m.LastModified = t.UnixNano()
		}
	}
	return m, nil
}

// millis truncates Unix nanoseconds to milliseconds: modification times
// are compared at that resolution, which every filesystem and Beam's
// fileio.FileMetadata coder keep.
func millis(ns int64) int64 { return time.Unix(0, ns).UnixMilli() }
