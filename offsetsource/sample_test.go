package offsetsource_test

// Two sample sources, the ones the tests and the example read.
//
// FixedSource reads a file of fixed-width records; every record is a split
// point and its offset is its byte offset. A reader opened at Start rounds
// Start up to the next record boundary.
//
// BlockSource reads a file of blocks of several records; only block starts are
// split points, and the later records of a block carry the block's offset.
// The file format:
//
//	file   = "SDFB" sync block*
//	block  = sync count:uint32be length:uint32be payload   (length = len(payload))
//	payload = (uvarint len, bytes)*count
//
// where sync is the file's 16 random bytes, repeated before every block (as an
// Avro file's sync marker). A block's offset is the offset of its sync marker.
// A reader opened at Start scans forward from max(Start, header) for the sync
// marker, so it finds the first block starting at or after Start. Record data
// is printable text, so the marker cannot occur inside a payload except by a
// 2^-128-scale accident in the binary count and length fields.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

func init() {
	offsetsource.Register[string, FixedSource]()
	offsetsource.Register[string, BlockSource]()
}

// ---- fixed-width records ----

// FixedSource reads records of Width bytes, the last of which is a newline,
// from the file at Path. Records are returned without the newline.
type FixedSource struct {
	Path       string
	Width      int64
	Start, End int64
}

func (s FixedSource) String() string {
	return fmt.Sprintf("fixed-width file %s [%d, %d)", s.Path, s.Start, s.End)
}

func (s FixedSource) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: s.Start, End: s.End} }

func (s FixedSource) Subrange(start, end int64) offsetsource.Source[string] {
	s.Start, s.End = start, end
	return s
}

func (s FixedSource) MaxEndOffset(context.Context) (int64, error) {
	fi, err := os.Stat(s.Path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (s FixedSource) BytesPerOffset() int64 { return 1 }
func (s FixedSource) MinBundleSize() int64  { return s.Width }

func (s FixedSource) EstimatedSizeBytes(ctx context.Context) (int64, error) {
	end, err := s.MaxEndOffset(ctx)
	if err != nil {
		return 0, err
	}
	return max(min(end, s.End)-s.Start, 0), nil
}

func (s FixedSource) Open(context.Context) (offsetsource.Reader[string], error) {
	if s.Width <= 0 {
		return nil, fmt.Errorf("record width %d", s.Width)
	}
	f, err := os.Open(s.Path)
	if err != nil {
		return nil, err
	}
	pos := (s.Start + s.Width - 1) / s.Width * s.Width
	if _, err := f.Seek(pos, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &fixedReader{f: f, r: bufio.NewReaderSize(f, 64<<10), pos: pos, buf: make([]byte, s.Width)}, nil
}

type fixedReader struct {
	f    *os.File
	r    *bufio.Reader
	pos  int64
	buf  []byte
	read int64
}

func (r *fixedReader) Next() (string, int64, bool, error) {
	n, err := io.ReadFull(r.r, r.buf)
	switch {
	case err == io.EOF:
		return "", 0, false, io.EOF
	case err == io.ErrUnexpectedEOF:
		return "", 0, false, fmt.Errorf("truncated record at offset %d: %d of %d bytes", r.pos, n, len(r.buf))
	case err != nil:
		return "", 0, false, err
	}
	off := r.pos
	r.pos += int64(n)
	r.read += int64(n)
	return string(r.buf[:n-1]), off, true, nil
}

func (r *fixedReader) BytesRead() int64 { return r.read }
func (r *fixedReader) Close() error     { return r.f.Close() }

// fixedRecord is the i-th record of a fixed-width file of width 12.
func fixedRecord(i int) string { return fmt.Sprintf("rec%08d", i) }

const fixedWidth = 12

// writeFixedFile writes n records of fixedWidth bytes and returns the source
// of the whole file (End unbounded) and the records.
func writeFixedFile(tb testing.TB, dir string, n int) (FixedSource, []string) {
	tb.Helper()
	path := filepath.Join(dir, fmt.Sprintf("fixed-%d.txt", n))
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	recs := make([]string, n)
	for i := range recs {
		recs[i] = fixedRecord(i)
		w.WriteString(recs[i])
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return FixedSource{Path: path, Width: fixedWidth, End: sdf.Unbounded}, recs
}

// ---- blocks ----

const (
	blockMagic      = "SDFB"
	syncSize        = 16
	blockHeaderSize = syncSize + 8
	fileHeaderSize  = len(blockMagic) + syncSize
)

// BlockSource reads the block file at Path (format in the comment at the top
// of this file).
type BlockSource struct {
	Path       string
	Start, End int64
}

func (s BlockSource) String() string {
	return fmt.Sprintf("block file %s [%d, %d)", s.Path, s.Start, s.End)
}

func (s BlockSource) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: s.Start, End: s.End} }

func (s BlockSource) Subrange(start, end int64) offsetsource.Source[string] {
	s.Start, s.End = start, end
	return s
}

func (s BlockSource) MaxEndOffset(context.Context) (int64, error) {
	fi, err := os.Stat(s.Path)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (s BlockSource) BytesPerOffset() int64 { return 1 }
func (s BlockSource) MinBundleSize() int64  { return blockHeaderSize }

func (s BlockSource) EstimatedSizeBytes(ctx context.Context) (int64, error) {
	end, err := s.MaxEndOffset(ctx)
	if err != nil {
		return 0, err
	}
	return max(min(end, s.End)-s.Start, 0), nil
}

func (s BlockSource) Open(context.Context) (offsetsource.Reader[string], error) {
	f, err := os.Open(s.Path)
	if err != nil {
		return nil, err
	}
	r := &blockReader{f: f, r: bufio.NewReaderSize(f, 64<<10)}
	if err := r.seek(s.Start); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

type blockReader struct {
	f    *os.File
	r    *bufio.Reader
	sync [syncSize]byte
	pos  int64 // file offset of r's next byte
	read int64 // bytes of the blocks returned, for BytesRead

	blockOff   int64
	blockSize  int64
	blockCount int64
	left       int64 // records of the current block not returned yet
	payload    []byte
}

// seek reads the file header and positions the reader at the first block
// starting at or after start, or at the end of the file.
func (r *blockReader) seek(start int64) error {
	var hdr [fileHeaderSize]byte
	if _, err := io.ReadFull(r.r, hdr[:]); err != nil {
		return fmt.Errorf("file header: %w", err)
	}
	if string(hdr[:len(blockMagic)]) != blockMagic {
		return fmt.Errorf("not a block file: magic %q", hdr[:len(blockMagic)])
	}
	copy(r.sync[:], hdr[len(blockMagic):])
	r.pos = int64(fileHeaderSize)
	if start <= r.pos {
		return nil
	}
	if _, err := r.f.Seek(start, io.SeekStart); err != nil {
		return err
	}
	r.r.Reset(r.f)
	r.pos = start
	// Scan for the sync marker: peek a window, look for it, advance.
	for {
		win, err := r.r.Peek(r.r.Size())
		if i := bytes.Index(win, r.sync[:]); i >= 0 {
			r.discard(i)
			return nil
		}
		switch err {
		case nil:
		case io.EOF:
			r.discard(len(win))
			return nil // no block starts at or after start
		default:
			return fmt.Errorf("scanning for a sync marker after offset %d: %w", r.pos, err)
		}
		// Keep the last syncSize-1 bytes: a marker may straddle windows.
		r.discard(len(win) - (syncSize - 1))
	}
}

func (r *blockReader) discard(n int) {
	if n <= 0 {
		return
	}
	d, _ := r.r.Discard(n)
	r.pos += int64(d)
}

func (r *blockReader) Next() (string, int64, bool, error) {
	for r.left == 0 {
		var hdr [blockHeaderSize]byte
		n, err := io.ReadFull(r.r, hdr[:])
		if err == io.EOF {
			return "", 0, false, io.EOF
		}
		if err != nil {
			return "", 0, false, fmt.Errorf("block header at offset %d: %w", r.pos, err)
		}
		if !bytes.Equal(hdr[:syncSize], r.sync[:]) {
			return "", 0, false, fmt.Errorf("no sync marker at offset %d", r.pos)
		}
		count := int64(binary.BigEndian.Uint32(hdr[syncSize:]))
		length := int64(binary.BigEndian.Uint32(hdr[syncSize+4:]))
		if cap(r.payload) < int(length) {
			r.payload = make([]byte, length)
		}
		r.payload = r.payload[:length]
		m, err := io.ReadFull(r.r, r.payload)
		if err != nil {
			return "", 0, false, fmt.Errorf("block at offset %d: payload of %d bytes: %w", r.pos, length, err)
		}
		r.blockOff = r.pos
		r.blockSize = int64(n + m)
		r.blockCount = count
		r.left = count
		r.pos += r.blockSize
		r.read += r.blockSize
	}
	l, k := binary.Uvarint(r.payload)
	if k <= 0 || uint64(len(r.payload)-k) < l {
		return "", 0, false, fmt.Errorf("block at offset %d: bad record %d", r.blockOff, r.blockCount-r.left)
	}
	rec := string(r.payload[k : k+int(l)])
	r.payload = r.payload[k+int(l):]
	first := r.left == r.blockCount
	r.left--
	return rec, r.blockOff, first, nil
}

func (r *blockReader) BlockInfo() (size, records int64) { return r.blockSize, r.blockCount }
func (r *blockReader) BytesRead() int64                 { return r.read }
func (r *blockReader) Close() error                     { return r.f.Close() }

// writeBlockFile writes nblocks blocks whose record counts cycle through
// counts (0 gives an empty block) and returns the source of the whole file
// (End unbounded), the records in order, and the offset of each record's
// block.
func writeBlockFile(tb testing.TB, dir string, nblocks int, counts []int) (BlockSource, []string, []int64) {
	tb.Helper()
	path := filepath.Join(dir, fmt.Sprintf("blocks-%d.bin", nblocks))
	var sync [syncSize]byte
	rand.Read(sync[:])
	var buf bytes.Buffer
	buf.WriteString(blockMagic)
	buf.Write(sync[:])
	var recs []string
	var offs []int64
	for b := range nblocks {
		count := counts[b%len(counts)]
		off := int64(buf.Len())
		var payload []byte
		for i := range count {
			rec := fmt.Sprintf("b%04d-r%d-%s", b, i, "xxxxxxxxxxxxxxxxxxxx"[:(b*7+i*3)%20])
			recs = append(recs, rec)
			offs = append(offs, off)
			payload = binary.AppendUvarint(payload, uint64(len(rec)))
			payload = append(payload, rec...)
		}
		buf.Write(sync[:])
		buf.Write(binary.BigEndian.AppendUint32(nil, uint32(count)))
		buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(payload))))
		buf.Write(payload)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return BlockSource{Path: path, End: sdf.Unbounded}, recs, offs
}
