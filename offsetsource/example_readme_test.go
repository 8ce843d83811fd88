package offsetsource_test

// The README's offsetsource pipeline, compiled and run. internal/readme
// checks that README.md quotes this file verbatim.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// Lines reads newline-terminated records of Width bytes; every record is a
// split point and its offset is its byte offset.
type Lines struct {
	Path       string
	Width      int64
	Start, End int64 // End may be sdf.Unbounded: up to the file's size
}

func init() { offsetsource.Register[string, Lines]() }

func (l Lines) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: l.Start, End: l.End} }

func (l Lines) Subrange(start, end int64) offsetsource.Source[string] {
	l.Start, l.End = start, end
	return l
}

func (l Lines) MaxEndOffset(context.Context) (int64, error) {
	fi, err := os.Stat(l.Path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (l Lines) BytesPerOffset() int64 { return 1 }
func (l Lines) MinBundleSize() int64  { return l.Width }

func (l Lines) EstimatedSizeBytes(ctx context.Context) (int64, error) {
	end, err := l.MaxEndOffset(ctx)
	return max(min(end, l.End)-l.Start, 0), err
}

// Open starts at the first record boundary at or after l.Start.
func (l Lines) Open(context.Context) (offsetsource.Reader[string], error) {
	f, err := os.Open(l.Path)
	if err != nil {
		return nil, err
	}
	pos := (l.Start + l.Width - 1) / l.Width * l.Width
	if _, err := f.Seek(pos, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &linesReader{f: f, r: bufio.NewReader(f), pos: pos, buf: make([]byte, l.Width)}, nil
}

type linesReader struct {
	f   *os.File
	r   *bufio.Reader
	pos int64
	buf []byte
}

// Next returns a record, its offset and whether it is a split point.
func (r *linesReader) Next() (string, int64, bool, error) {
	if _, err := io.ReadFull(r.r, r.buf); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%s: truncated record at offset %d", r.f.Name(), r.pos)
		}
		return "", 0, false, err // io.EOF at the end of the file
	}
	off := r.pos
	r.pos += int64(len(r.buf))
	return string(r.buf[:len(r.buf)-1]), off, true, nil
}

func (r *linesReader) Close() error { return r.f.Close() }

// Read a file of 12-byte records in bundles of 1200 bytes.
func Example_lines() {
	dir, err := os.MkdirTemp("", "readme-lines")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "records.dat")
	f, _ := os.Create(path)
	for i := range 500 {
		fmt.Fprintf(f, "rec%08d\n", i)
	}
	f.Close()

	p, s := beam.NewPipelineWithRoot()
	recs := offsetsource.Read(s, Lines{Path: path, Width: 12, End: sdf.Unbounded},
		offsetsource.WithDesiredBundleSize(1200))
	beam.ParDo0(s, printCount, beam.Combine(s, &countFn{}, recs))
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	// Output: 500 records
}
