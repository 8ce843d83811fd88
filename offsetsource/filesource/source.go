package filesource

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// Format is a splittable file format: what a format adds to this package
// to read its files (Java's FileBasedSource.createSingleFileReader and
// getMinBundleSize). A value of a Format type travels to the workers in
// every Source, so it must be a struct whose configuration lives in
// exported fields that Beam can encode, and it must be registered with
// Register.
type Format[T any] interface {
	// Open returns a Reader of the records of f whose split points lie at
	// or after start, in offset order (see offsetsource.Reader: it may
	// read past end, the tracker stops it). Offsets are byte offsets in
	// the file. The Reader is closed after use; f is closed after the
	// Reader, by this package.
	Open(ctx context.Context, f *File, start, end int64) (offsetsource.Reader[T], error)
	// MinBundleSize is the smallest initial bundle in bytes (a file
	// smaller than it is one bundle).
	MinBundleSize() int64
}

// Source is the byte range [Start, End) of one file, read by a Format: an
// offsetsource.Source, the element of the read's splittable DoFn. A range
// holds the records whose split points lie in it. Its fields travel to the
// workers.
type Source[T any, F Format[T]] struct {
	// File is the file as it was matched.
	File Metadata
	// Start and End delimit the range; End may be sdf.Unbounded (the
	// file's end).
	Start, End int64
	// Format reads the file.
	Format F
	// OnChange is what a file that changed since it was matched does
	// (a ChangeTreatment).
	OnChange int
	// Namespace is the Beam metrics namespace of ranges_read; Namespace
	// when empty.
	Namespace string
}

// NewSource returns the source of the whole file m, read by format.
func NewSource[T any, F Format[T]](m Metadata, format F) Source[T, F] {
	return Source[T, F]{File: m, End: sdf.Unbounded, Format: format}
}

func (s Source[T, F]) String() string {
	end := "end"
	if s.End != sdf.Unbounded {
		end = fmt.Sprint(s.End)
	}
	name := "file"
	if n, ok := any(s.Format).(interface{ Name() string }); ok {
		name = n.Name() + " file"
	}
	return fmt.Sprintf("%s %s [%d, %s)", name, s.File.Path, s.Start, end)
}

// Range is the range of bytes the source reads.
func (s Source[T, F]) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: s.Start, End: s.End} }

// Subrange is the same file narrowed to [start, end).
func (s Source[T, F]) Subrange(start, end int64) offsetsource.Source[T] {
	s.Start, s.End = start, end
	return s
}

// MaxEndOffset is the file's size as it was matched, so that every range
// of the file agrees on it (each range checks, when it opens the file,
// that the file did not change); asked of its filesystem when unknown.
func (s Source[T, F]) MaxEndOffset(ctx context.Context) (int64, error) {
	if s.File.Size >= 0 {
		return s.File.Size, nil
	}
	m, err := Stat(ctx, s.File.Path)
	return m.Size, err
}

// BytesPerOffset is 1: offsets are bytes.
func (s Source[T, F]) BytesPerOffset() int64 { return 1 }

// MinBundleSize is the format's.
func (s Source[T, F]) MinBundleSize() int64 { return s.Format.MinBundleSize() }

// EstimatedSizeBytes is the size of the range, clamped to the file.
func (s Source[T, F]) EstimatedSizeBytes(ctx context.Context) (int64, error) {
	end, err := s.MaxEndOffset(ctx)
	if err != nil {
		return 0, err
	}
	return max(min(end, s.End)-s.Start, 0), nil
}

// Open opens the file (an error of kind ErrOpen when it is missing or a
// directory, ErrChanged when it changed since it was matched and OnChange
// is ChangeFail), then has the format read it from Start.
func (s Source[T, F]) Open(ctx context.Context) (offsetsource.Reader[T], error) {
	f, err := Open(ctx, s.File, ChangeTreatment(s.OnChange))
	if err != nil {
		return nil, err
	}
	r, err := s.Format.Open(ctx, f, s.Start, s.End)
	if err != nil {
		f.Close()
		return nil, err
	}
	if r == nil {
		f.Close()
		return nil, fmt.Errorf("filesource: format %T returned no reader and no error for %v", s.Format, s)
	}
	counter(s.Namespace, "ranges_read").Inc(ctx, 1)
	return wrapReader(r, f), nil
}

// BadFormat is implemented by a Format that tells bad input (a corrupt
// block, a schema that does not fit) from other errors of its readers, for
// reads with a dead-letter output (WithBadInput; see
// offsetsource.BadInputSource, whose BadInput it is).
type BadFormat interface {
	BadInput(err error) (offset int64, bad bool)
}

// BadInput reports whether err, of Open or of a reader's Next, is bad input
// for the dead-letter output of WithBadInput: what the format says
// (BadFormat), and a file that changed since it was matched (ErrChanged),
// is a directory, or is gone. Other errors (the filesystem failed) are not:
// they fail the read, for the runner to retry it.
func (s Source[T, F]) BadInput(err error) (offset int64, bad bool) {
	if bf, ok := any(s.Format).(BadFormat); ok {
		if off, bad := bf.BadInput(err); bad {
			return off, true
		}
	}
	if errors.Is(err, ErrChanged) || errors.Is(err, ErrIsDirectory) || errors.Is(err, ErrOpen) && notExist(err) {
		return -1, true
	}
	return -1, false
}

// InputName is the file's path, for offsetsource.BadInput.
func (s Source[T, F]) InputName() string { return s.File.Path }

// fileReader closes the file after the format's reader. It passes on the
// optional interfaces offsetsource looks for.
type fileReader[T any] struct {
	offsetsource.Reader[T]
	f *File
}

func (r *fileReader[T]) Close() error {
	err := r.Reader.Close()
	if cerr := r.f.Close(); err == nil {
		err = cerr
	}
	return err
}

type blockFileReader[T any] struct {
	*fileReader[T]
	offsetsource.BlockReader
}

type countingFileReader[T any] struct {
	*fileReader[T]
	offsetsource.ByteCounter
}

type blockCountingFileReader[T any] struct {
	*fileReader[T]
	offsetsource.BlockReader
	offsetsource.ByteCounter
}

func wrapReader[T any](r offsetsource.Reader[T], f *File) offsetsource.Reader[T] {
	fr := &fileReader[T]{Reader: r, f: f}
	br, isBlock := r.(offsetsource.BlockReader)
	bc, counts := r.(offsetsource.ByteCounter)
	switch {
	case isBlock && counts:
		return blockCountingFileReader[T]{fr, br, bc}
	case isBlock:
		return blockFileReader[T]{fr, br}
	case counts:
		return countingFileReader[T]{fr, bc}
	}
	return fr
}

// Register registers, for records T read by format F, the read's DoFns
// (the offsetsource read of Source[T, F], the matching of patterns, the
// conversion of fileio.ReadableFile and of watched files to sources),
// their emitters, and the types. Call it from an init function of the
// package that defines F, once per pair.
func Register[T any, F Format[T]]() {
	if ft := reflect.TypeFor[F](); ft.Kind() != reflect.Struct {
		panic(fmt.Sprintf("filesource.Register: format type %v is a %v; it must be a struct with exported fields", ft, ft.Kind()))
	}
	offsetsource.Register[T, Source[T, F]]()
	registerReadFns[T, F]()
	beam.RegisterType(reflect.TypeFor[F]())
}
