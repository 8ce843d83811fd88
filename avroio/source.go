package avroio

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

func init() {
	offsetsource.Register[beam.X, fileSource]()
	beam.RegisterType(reflect.TypeFor[sourceSettings]())
}

// fileSource is one Avro container file, or the byte range [Start, End) of
// it: the element of the read's splittable DoFn (an offsetsource.Source).
// Offsets are byte offsets in the file; a range holds the blocks whose
// first byte lies in it. Its fields travel to the workers.
type fileSource struct {
	// Path is the file's full path, with its filesystem's scheme.
	Path string
	// Start and End delimit the range; End may be sdf.Unbounded.
	Start, End int64
	// Size is the file's size when it was matched; -1 when unknown.
	Size int64
	// Type is the Go type records are decoded into.
	Type beam.EncodedType
	// Settings are the read's options.
	Settings sourceSettings
}

// sourceSettings are the options every source of a read carries.
type sourceSettings struct {
	// ReaderSchema is the reader schema's JSON, or "" to read with each
	// file's writer schema.
	ReaderSchema string
	// MaxAlloc bounds one allocation driven by a length in the file.
	MaxAlloc int64
	// MinBundleSize is the smallest initial bundle in bytes.
	MinBundleSize int64
}

func (s fileSource) String() string {
	if s.End == sdf.Unbounded {
		return fmt.Sprintf("avro file %s [%d, end)", s.Path, s.Start)
	}
	return fmt.Sprintf("avro file %s [%d, %d)", s.Path, s.Start, s.End)
}

// Range is the range of bytes the source reads.
func (s fileSource) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: s.Start, End: s.End} }

// Subrange is the same file narrowed to [start, end).
func (s fileSource) Subrange(start, end int64) offsetsource.Source[beam.X] {
	s.Start, s.End = start, end
	return s
}

// MaxEndOffset is the file's size: the size seen when the file was matched,
// so that every range of the file agrees on it, else asked of its
// filesystem.
func (s fileSource) MaxEndOffset(ctx context.Context) (int64, error) {
	if s.Size >= 0 {
		return s.Size, nil
	}
	return fileSize(ctx, s.Path)
}

// BytesPerOffset is 1: offsets are bytes.
func (s fileSource) BytesPerOffset() int64 { return 1 }

// MinBundleSize is the smallest initial bundle in bytes.
func (s fileSource) MinBundleSize() int64 {
	if s.Settings.MinBundleSize > 0 {
		return s.Settings.MinBundleSize
	}
	return DefaultMinBundleSize
}

// EstimatedSizeBytes is the size of the range, clamped to the file.
func (s fileSource) EstimatedSizeBytes(ctx context.Context) (int64, error) {
	end, err := s.MaxEndOffset(ctx)
	if err != nil {
		return 0, err
	}
	return max(min(end, s.End)-s.Start, 0), nil
}

// Open reads the file's header, then the blocks from the first one starting
// at or after Start, without reading the bytes between the header and
// Start (see opener.go).
func (s fileSource) Open(ctx context.Context) (offsetsource.Reader[beam.X], error) {
	if s.Type.T == nil {
		return nil, fmt.Errorf("avroio: %v has no record type", s)
	}
	// DecodeAhead: the next records are read, decompressed and decoded on
	// a second goroutine while this one claims and emits the ones before
	// them (claims stay here, record by record, so splits are unaffected).
	opts := container.Options{Limits: container.Limits{MaxAlloc: s.Settings.MaxAlloc}, DecodeAhead: true}
	if s.Settings.ReaderSchema != "" {
		rs, err := cachedReaderSchema(s.Settings.ReaderSchema)
		if err != nil {
			return nil, fmt.Errorf("avroio: reader schema: %w", err)
		}
		opts.ReaderSchema = rs
	}
	open, err := openerFor(ctx, s.Path, s.Size)
	if err != nil {
		return nil, err
	}
	var r *container.Reader[any]
	if s.Type.T == RecordType {
		r, err = container.OpenReaderWith(s.Path, open, s.Start, s.Type.T, newRecordDecoder, opts)
	} else {
		r, err = container.OpenReaderOf(s.Path, open, s.Start, s.Type.T, opts)
	}
	if err != nil {
		return nil, err
	}
	rangesRead.Inc(ctx, 1)
	if err := checkFields(s.Type.T, r.Schema()); err != nil {
		r.Close()
		return nil, &container.Error{File: s.Path, Offset: r.Header().Size, Block: -1, Record: -1, Kind: container.ErrSchema, Msg: err.Error()}
	}
	return &recordReader{r: r}, nil
}

// recordReader adapts the container's reader to offsetsource's: records
// as beam.X, and bytes counted as the blocks whose records were returned.
type recordReader struct {
	r     *container.Reader[any]
	bytes int64
}

// Next returns the next record, the offset of its block, and whether it is
// the block's first record (a split point).
func (r *recordReader) Next() (beam.X, int64, bool, error) {
	rec, off, sp, err := r.r.Next()
	if sp {
		size, _ := r.r.BlockInfo()
		r.bytes += size
	}
	return rec, off, sp, err
}

// BlockInfo is the size and record count of the block of the last record.
func (r *recordReader) BlockInfo() (size, records int64) { return r.r.BlockInfo() }

// BytesRead is the size of the blocks whose records Next returned.
func (r *recordReader) BytesRead() int64 { return r.bytes }

// Close closes the file.
func (r *recordReader) Close() error { return r.r.Close() }
