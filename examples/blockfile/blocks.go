package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// The file format of this example: a sequence of blocks, each
//
//	marker   8 bytes "\xffSDFBLK\n"
//	records  uint32, big-endian
//	length   uint32, big-endian: bytes of the payload
//	payload  records as text lines "station;temperature\n"
//
// A block's offset is the offset of its marker; the first record of a block
// is a split point, the others are not. A reader opened at offset A finds the
// first block at or after A by looking for the marker, which cannot occur in
// the text payload (0xff is not ASCII).
var marker = []byte("\xffSDFBLK\n")

const blockHeaderSize = 16

// maxBlockPayload bounds the length field we trust before allocating.
const maxBlockPayload = 16 << 20

// Reading is one record: a station's temperature in tenths of a degree.
type Reading struct {
	Station string
	Tenths  int64
}

// BlockFile is an offsetsource.Source of Readings stored in a block file on
// any Beam filesystem.
type BlockFile struct {
	Path       string
	Start, End int64 // End may be sdf.Unbounded: up to the file's size
	// BlockDelay is slept before each block is returned, to make per-record
	// work slow enough for Prism to split the read while it runs.
	BlockDelay time.Duration
}

func (b BlockFile) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: b.Start, End: b.End} }

func (b BlockFile) Subrange(start, end int64) offsetsource.Source[Reading] {
	c := b
	c.Start, c.End = start, end
	return c
}

func (b BlockFile) size(ctx context.Context) (int64, error) {
	fs, err := filesystem.New(ctx, b.Path)
	if err != nil {
		return 0, err
	}
	defer fs.Close()
	return fs.Size(ctx, b.Path)
}

func (b BlockFile) MaxEndOffset(ctx context.Context) (int64, error) { return b.size(ctx) }
func (b BlockFile) BytesPerOffset() int64                           { return 1 }
func (b BlockFile) MinBundleSize() int64                            { return 4096 }

func (b BlockFile) EstimatedSizeBytes(ctx context.Context) (int64, error) {
	n, err := b.size(ctx)
	if err != nil {
		return 0, err
	}
	return min(n, b.End) - b.Start, nil
}

// Open opens the file at b.Start: it seeks when the filesystem's reader can,
// and skips the bytes before Start otherwise.
func (b BlockFile) Open(ctx context.Context) (offsetsource.Reader[Reading], error) {
	fs, err := filesystem.New(ctx, b.Path)
	if err != nil {
		return nil, err
	}
	rc, err := fs.OpenRead(ctx, b.Path)
	if err != nil {
		fs.Close()
		return nil, err
	}
	r := &blockReader{path: b.Path, fs: fs, rc: rc, pos: b.Start, delay: b.BlockDelay}
	if sk, ok := rc.(io.Seeker); ok {
		_, err = sk.Seek(b.Start, io.SeekStart)
	} else {
		_, err = io.CopyN(io.Discard, rc, b.Start)
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: positioning at offset %d: %w", b.Path, b.Start, err)
	}
	r.br = bufio.NewReaderSize(rc, 64<<10)
	return r, nil
}

type blockReader struct {
	path  string
	fs    filesystem.Interface
	rc    io.ReadCloser
	br    *bufio.Reader
	pos   int64 // offset of the next byte of br
	delay time.Duration

	block     int64    // offset of the current block
	lines     []string // records of the current block not yet returned
	count     int64    // records in the current block
	blockSize int64    // bytes of the current block
	first     bool     // the next record is the block's first
	bytes     int64    // bytes of the blocks returned so far
	payload   []byte
}

// seekMarker moves to the next block marker at or after pos.
func (r *blockReader) seekMarker() error {
	for {
		peek, err := r.br.Peek(len(marker))
		if len(peek) < len(marker) {
			if err == io.EOF || err == io.ErrUnexpectedEOF || errors.Is(err, io.EOF) {
				return io.EOF
			}
			return err
		}
		if string(peek) == string(marker) {
			return nil
		}
		// Skip to the next 0xff after the first byte.
		n := 1
		if i := strings.IndexByte(string(peek[1:]), 0xff); i >= 0 {
			n = i + 1
		} else {
			n = len(peek)
		}
		r.br.Discard(n)
		r.pos += int64(n)
	}
}

func (r *blockReader) readBlock() error {
	if err := r.seekMarker(); err != nil {
		return err
	}
	var hdr [blockHeaderSize]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		return fmt.Errorf("%s: block at offset %d: truncated header: %w", r.path, r.pos, err)
	}
	count := int64(binary.BigEndian.Uint32(hdr[8:12]))
	length := int64(binary.BigEndian.Uint32(hdr[12:16]))
	if length > maxBlockPayload {
		return fmt.Errorf("%s: block at offset %d: payload of %d bytes is over the limit of %d", r.path, r.pos, length, maxBlockPayload)
	}
	if cap(r.payload) < int(length) {
		r.payload = make([]byte, length)
	}
	r.payload = r.payload[:length]
	if _, err := io.ReadFull(r.br, r.payload); err != nil {
		return fmt.Errorf("%s: block at offset %d: payload shorter than its %d bytes: %w", r.path, r.pos, length, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(r.payload), "\n"), "\n")
	if length == 0 {
		lines = nil
	}
	if int64(len(lines)) != count {
		return fmt.Errorf("%s: block at offset %d: header says %d records, payload holds %d", r.path, r.pos, count, len(lines))
	}
	r.block, r.lines, r.count, r.first = r.pos, lines, count, true
	r.blockSize = blockHeaderSize + length
	r.pos += r.blockSize
	return nil
}

func (r *blockReader) Next() (Reading, int64, bool, error) {
	for len(r.lines) == 0 {
		if err := r.readBlock(); err != nil {
			return Reading{}, 0, false, err
		}
		if r.delay > 0 && len(r.lines) > 0 {
			time.Sleep(r.delay)
		}
	}
	line := r.lines[0]
	r.lines = r.lines[1:]
	station, temp, ok := strings.Cut(line, ";")
	if !ok {
		return Reading{}, 0, false, fmt.Errorf("%s: block at offset %d: record %q has no ';'", r.path, r.block, line)
	}
	tenths, err := parseTenths(temp)
	if err != nil {
		return Reading{}, 0, false, fmt.Errorf("%s: block at offset %d: record %q: %w", r.path, r.block, line, err)
	}
	first := r.first
	if first {
		r.bytes += r.blockSize
	}
	r.first = false
	return Reading{Station: station, Tenths: tenths}, r.block, first, nil
}

// parseTenths parses "-12.3" into -123.
func parseTenths(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) != 1 {
		return 0, fmt.Errorf("temperature %q does not have one decimal", s)
	}
	v, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("temperature %q: %w", s, err)
	}
	return v, nil
}

func (r *blockReader) BlockInfo() (size, records int64) { return r.blockSize, r.count }
func (r *blockReader) BytesRead() int64                 { return r.bytes }

func (r *blockReader) Close() error {
	err := r.rc.Close()
	if ferr := r.fs.Close(); err == nil {
		err = ferr
	}
	return err
}

// writeBlocks writes readings as blocks of perBlock records.
func writeBlocks(w io.Writer, readings []Reading, perBlock int) error {
	for i := 0; i < len(readings); i += perBlock {
		var sb strings.Builder
		n := 0
		for _, rd := range readings[i:min(i+perBlock, len(readings))] {
			fmt.Fprintf(&sb, "%s;%s\n", rd.Station, formatTenths(rd.Tenths))
			n++
		}
		var hdr [blockHeaderSize]byte
		copy(hdr[:], marker)
		binary.BigEndian.PutUint32(hdr[8:12], uint32(n))
		binary.BigEndian.PutUint32(hdr[12:16], uint32(sb.Len()))
		if _, err := w.Write(hdr[:]); err != nil {
			return err
		}
		if _, err := io.WriteString(w, sb.String()); err != nil {
			return err
		}
	}
	return nil
}

func formatTenths(t int64) string {
	sign := ""
	if t < 0 {
		sign, t = "-", -t
	}
	return fmt.Sprintf("%s%d.%d", sign, t/10, t%10)
}
