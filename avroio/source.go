package avroio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/offsetsource/filesource"
)

// format is the Avro object container format as package filesource reads
// it: a filesource.Format. Its fields travel to the workers in every
// source.
type format struct {
	// Type is the Go type records are decoded into.
	Type beam.EncodedType
	// Settings are the read's options.
	Settings sourceSettings
}

// fileSource is one Avro container file, or the byte range [Start, End) of
// it: the element of the read's splittable DoFn. Offsets are byte offsets
// in the file; a range holds the blocks whose first byte lies in it.
type fileSource = filesource.Source[beam.X, format]

// sourceSettings are the options every source of a read carries.
type sourceSettings struct {
	// ReaderSchema is the reader schema's JSON, or "" to read with each
	// file's writer schema.
	ReaderSchema string
	// MaxAlloc bounds one allocation driven by a length in the file.
	MaxAlloc int64
	// MaxDepth bounds the nesting of records, arrays and maps.
	MaxDepth int
	// MinBundleSize is the smallest initial bundle in bytes.
	MinBundleSize int64
}

// Name names the format in the sources' String and errors.
func (f format) Name() string { return "avro" }

// MinBundleSize is the smallest initial bundle in bytes.
func (f format) MinBundleSize() int64 {
	if f.Settings.MinBundleSize > 0 {
		return f.Settings.MinBundleSize
	}
	return DefaultMinBundleSize
}

// Open reads the file's header, then the blocks from the first one starting
// at or after start, without reading the bytes between the header and
// start: file.OpenAt seeks or makes ranged reads.
func (f format) Open(ctx context.Context, file *filesource.File, start, end int64) (offsetsource.Reader[beam.X], error) {
	if f.Type.T == nil {
		return nil, fmt.Errorf("avroio: avro file %s has no record type", file.Path)
	}
	// DecodeAhead: the next records are read, decompressed and decoded on
	// a second goroutine while this one claims and emits the ones before
	// them (claims stay here, record by record, so splits are unaffected).
	opts := container.Options{Limits: container.Limits{MaxAlloc: f.Settings.MaxAlloc, MaxDepth: f.Settings.MaxDepth}, DecodeAhead: true}
	if f.Settings.ReaderSchema != "" {
		rs, err := cachedReaderSchema(f.Settings.ReaderSchema)
		if err != nil {
			return nil, fmt.Errorf("avroio: reader schema: %w", err)
		}
		opts.ReaderSchema = rs
	}
	// The header comes from the process's cache: every range of the file
	// parses it once per worker, not once per range. The file's size and
	// modification time when it was opened identify its version.
	ver := container.FileVersion{Name: file.Path, Size: file.Current.Size}
	if file.Current.LastModified != 0 {
		ver.Version = strconv.FormatInt(file.Current.LastModified, 10)
	}
	br, err := container.Headers.Open(ver, file.OpenAt, start, opts.Limits)
	if err != nil {
		return nil, err
	}
	// Civil dates and times are decoded into a stand-in type and
	// converted (civil.go); the stand-in depends on the schema records are
	// read by: the reader schema's shape, or else the file's.
	decodeType := f.Type.T
	var conv *civilConv
	if f.Type.T != RecordType && holdsCivil(f.Type.T) {
		s := opts.ReaderSchema
		if s == nil {
			s, _ = cachedSchema(br.Header().Schema) // a schema that does not parse fails just below
		}
		if conv, err = civilStandIn(f.Type.T, s); err != nil {
			br.Close()
			return nil, &container.Error{File: file.Path, Offset: br.Header().Size, Block: -1, Record: -1, Kind: container.ErrSchema, Msg: err.Error()}
		}
		if conv != nil {
			decodeType = conv.m
		}
	}
	var r *container.Reader[any]
	if f.Type.T == RecordType {
		r, err = container.NewReaderWith(br, f.Type.T, newRecordDecoder, opts)
	} else {
		r, err = container.NewReaderOf(br, decodeType, opts)
	}
	if err != nil {
		br.Close()
		return nil, err
	}
	err = checkFields(f.Type.T, r.Schema())
	if err == nil && f.Type.T != RecordType {
		// Go types hamba/avro would fail every record of, or read
		// changed (fit.go), and nulls it cannot skip: refused before any
		// record is read.
		_, err = fitTypes(decodeType, r.Schema(), fitRead)
		if err == nil {
			err = checkSkippedNulls(f.Type.T, r.Schema())
		}
	}
	if err != nil {
		r.Close()
		return nil, &container.Error{File: file.Path, Offset: r.Header().Size, Block: -1, Record: -1, Kind: container.ErrSchema, Msg: err.Error()}
	}
	return &recordReader{r: r, conv: conv, file: file.Path}, nil
}

// BadInput says whether err, of Open or of a reader's Next, is the file's
// fault (a *container.Error: corrupt data, a bad block or sync marker, a
// length over WithMaxAlloc, a schema the record type or reader schema
// does not fit, a value out of range), and where in the file it was seen
// (the offset of the block it is in, else of the error):
// the reads with a dead-letter output (ReadWithBadFiles) report it and go
// on. A container error whose cause is the filesystem's (a read that
// failed, not a file that ended early) and a cancelled context are not:
// they fail the read, for the runner to retry it.
func (f format) BadInput(err error) (offset int64, bad bool) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return -1, false
	}
	var ce *container.Error
	if !errors.As(err, &ce) {
		return -1, false
	}
	if errors.Is(ce.Kind, container.ErrTruncated) && ce.Err != nil &&
		!errors.Is(ce.Err, io.EOF) && !errors.Is(ce.Err, io.ErrUnexpectedEOF) && !errors.Is(ce.Err, filesource.ErrChanged) {
		return -1, false // reading failed; the file may be whole
	}
	if ce.Block >= 0 {
		// The block the error is in: a read goes on from the first sync
		// marker after the block's start, whatever its header said.
		return ce.Block, true
	}
	return ce.Offset, true
}

// recordReader adapts the container's reader to offsetsource's: records
// as beam.X, and bytes counted as the blocks whose records were returned.
type recordReader struct {
	r     *container.Reader[any]
	bytes int64
	// conv converts records decoded as the stand-in of a type holding
	// civil dates and times (civil.go); nil for others.
	conv *civilConv
	file string
	nth  int64 // the index of the last record in its block
}

// Next returns the next record, the offset of its block, and whether it is
// the block's first record (a split point).
func (r *recordReader) Next() (beam.X, int64, bool, error) {
	rec, off, sp, err := r.r.Next()
	if sp {
		size, _ := r.r.BlockInfo()
		r.bytes += size
		r.nth = 0
	} else {
		r.nth++
	}
	if r.conv != nil && err == nil {
		if rec, err = r.conv.convertRead(rec); err != nil {
			return nil, off, sp, &container.Error{File: r.file, Offset: off, Block: off, Record: r.nth, Kind: container.ErrRange, Msg: err.Error()}
		}
	}
	return rec, off, sp, err
}

// BlockInfo is the size and record count of the block of the last record.
func (r *recordReader) BlockInfo() (size, records int64) { return r.r.BlockInfo() }

// BytesRead is the size of the blocks whose records Next returned.
func (r *recordReader) BytesRead() int64 { return r.bytes }

// Close closes the file.
func (r *recordReader) Close() error { return r.r.Close() }
