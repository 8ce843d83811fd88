package avroio

// How a reader gets at a file's bytes from an offset, on any Beam
// filesystem, without reading what lies before it:
//
//   - a scheme with a registered RangeReadFunc (gs:// out of the box) is
//     read in ranged requests of growing size, from the offset on;
//   - otherwise the file is opened through Beam's filesystem registry, and
//     if the stream it returns can seek (local files: *os.File), it seeks;
//   - otherwise (memfs://, and filesystems whose streams cannot seek) the
//     bytes before the offset are read and discarded.
//
// A reader of the range [A, B) of a file opens it twice: at 0 for the
// header, then at A-16 for the sync marker before its first block (when
// that is past what the header's read-ahead already holds).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"cloud.google.com/go/storage"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	// Local paths and gs:// work without further imports; other schemes
	// (memfs://, s3://) need their Beam filesystem package imported.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/gcsx"

	"github.com/sdfio/sdfio/avroio/container"
)

// RangeReadFunc reads up to length bytes of the file at path (the full
// path, scheme included) from byte offset on: fewer where the file ends.
// The stream it returns is closed after use.
type RangeReadFunc func(ctx context.Context, path string, offset, length int64) (io.ReadCloser, error)

var (
	rangeReadersMu sync.RWMutex
	rangeReaders   = map[string]RangeReadFunc{"gs": gcsRangeRead}
)

// RegisterRangeReader makes reads of files whose path starts with
// scheme:// use fn for ranged reads, so that a read starting deep in a file
// does not fetch the bytes before it. gs:// is registered by this package.
// Other schemes are read through Beam's filesystem registry, seeking where
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

// Ranged reads start small, so that reading a header costs little, and
// grow, so that a long range costs few requests and over-reads at most one
// chunk past where the reader stops.
const (
	firstChunk = 64 << 10
	maxChunk   = 8 << 20
)

// openerFor returns how the container reader reads path (of size bytes, or
// -1 if unknown) from an offset.
func openerFor(ctx context.Context, path string, size int64) (container.Opener, error) {
	if fn, ok := rangeReaderFor(path); ok {
		return func(off int64) (io.ReadCloser, error) {
			return &chunkedReader{read: func(off, n int64) (io.ReadCloser, error) { return fn(ctx, path, off, n) },
				off: off, size: size, chunk: firstChunk}, nil
		}, nil
	}
	fs, err := filesystemFor(ctx, path)
	if err != nil {
		return nil, err
	}
	return func(off int64) (io.ReadCloser, error) {
		rc, err := fs.OpenRead(ctx, path)
		if err != nil {
			return nil, err
		}
		if off == 0 {
			return rc, nil
		}
		if sk, ok := rc.(io.Seeker); ok {
			if _, err := sk.Seek(off, io.SeekStart); err != nil {
				rc.Close()
				return nil, fmt.Errorf("seeking to byte %d: %w", off, err)
			}
			return rc, nil
		}
		if _, err := io.CopyN(io.Discard, rc, off); err != nil && err != io.EOF {
			rc.Close()
			return nil, fmt.Errorf("skipping to byte %d: %w", off, err)
		}
		return rc, nil
	}, nil
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

// fileSize asks path's filesystem for its size.
func fileSize(ctx context.Context, path string) (int64, error) {
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return 0, err
	}
	defer fs.Close()
	return fs.Size(ctx, path)
}

func emulatorHost() string { return os.Getenv("STORAGE_EMULATOR_HOST") }

// The GCS client for ranged reads, one per process and emulator address
// (STORAGE_EMULATOR_HOST, which the client honours, may change between
// tests).
var (
	gcsMu      sync.Mutex
	gcsClients = map[string]*storage.Client{}
)

func gcsClient(ctx context.Context) (*storage.Client, error) {
	key := emulatorHost()
	gcsMu.Lock()
	defer gcsMu.Unlock()
	if c, ok := gcsClients[key]; ok {
		return c, nil
	}
	ctx = context.WithoutCancel(ctx)
	// As Beam's gcs filesystem: default credentials, else unauthenticated.
	c, err := gcsx.NewClient(ctx, storage.ScopeReadOnly)
	if err != nil {
		c, err = gcsx.NewUnauthenticatedClient(ctx)
		if err != nil {
			return nil, fmt.Errorf("making a GCS client: %w", err)
		}
	}
	gcsClients[key] = c
	return c, nil
}

// gcsRangeRead reads a range of a GCS object with
// ObjectHandle.NewRangeReader. It reads the object's stored bytes
// (ReadCompressed), whose length is the size matching reported, even when
// the object has a gzip content encoding.
func gcsRangeRead(ctx context.Context, path string, off, n int64) (io.ReadCloser, error) {
	bucket, object, err := gcsx.ParseObject(path)
	if err != nil {
		return nil, err
	}
	c, err := gcsClient(ctx)
	if err != nil {
		return nil, err
	}
	r, err := c.Bucket(bucket).Object(object).ReadCompressed(true).NewRangeReader(ctx, off, n)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, err
}
