package filesource_test

// Lines is a second splittable format built with nothing but filesource
// and offsetsource: newline-delimited records, every line a split point at
// its first byte. It shows what a format must write (a Format and its
// Reader) and is checked like avroio: sdftest's exhaustive and concurrent
// checks on a real file, and pipelines on Prism.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/offsetsource/filesource"
)

func init() { filesource.Register[string, Lines]() }

// Lines reads text files of newline-terminated lines (the last line may lack
// its newline). A record is a line without its newline; its offset is its
// first byte. MaxLine bounds a line's length (1 MiB when 0).
type Lines struct {
	MaxLine int
}

// Name names the format in errors and in the sources' String.
func (Lines) Name() string { return "text" }

// MinBundleSize: lines are small; bundles of any size will do.
func (Lines) MinBundleSize() int64 { return 1 }

// Open returns a reader of the lines that start at or after start: a line
// starts at start when start is 0 or the byte before it is a newline, so
// the reader opens one byte early and skips to the end of that line.
func (l Lines) Open(ctx context.Context, f *filesource.File, start, end int64) (offsetsource.Reader[string], error) {
	from := max(start-1, 0)
	rc, err := f.OpenAt(from)
	if err != nil {
		return nil, err
	}
	maxLine := l.MaxLine
	if maxLine <= 0 {
		maxLine = 1 << 20
	}
	r := &linesReader{rc: rc, br: bufio.NewReaderSize(rc, 64<<10), pos: from, path: f.Path, max: maxLine}
	if start > 0 {
		// Skip the rest of the line that holds byte start-1.
		for {
			b, err := r.br.ReadSlice('\n')
			r.pos += int64(len(b))
			if err == nil || err == io.EOF {
				break
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				rc.Close()
				return nil, fmt.Errorf("text file %s: skipping to a line start after byte %d: %w", f.Path, from, err)
			}
		}
	}
	r.first = r.pos
	return r, nil
}

type linesReader struct {
	rc    io.ReadCloser
	br    *bufio.Reader
	pos   int64 // offset of the next line
	first int64 // offset of the first line
	path  string
	max   int
}

func (r *linesReader) Next() (string, int64, bool, error) {
	var line []byte
	for {
		b, err := r.br.ReadSlice('\n')
		line = append(line, b...)
		if len(line) > r.max {
			return "", 0, false, fmt.Errorf("text file %s: line at byte %d is longer than %d bytes", r.path, r.pos, r.max)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF && len(line) == 0 {
			return "", 0, false, io.EOF
		}
		if err != nil && err != io.EOF {
			return "", 0, false, fmt.Errorf("text file %s: reading the line at byte %d: %w", r.path, r.pos, err)
		}
		break
	}
	off := r.pos
	r.pos += int64(len(line))
	return strings.TrimSuffix(string(line), "\n"), off, true, nil
}

// BytesRead counts the bytes of the lines returned, so that the bytes_read
// metric sums to the file's size.
func (r *linesReader) BytesRead() int64 { return r.pos - r.first }

func (r *linesReader) Close() error { return r.rc.Close() }
