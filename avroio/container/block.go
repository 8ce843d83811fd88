package container

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Opener opens a file for sequential reading from byte offset off to its end.
// It is how a reader starts deep in a file without reading the bytes before
// it: a local file seeks, an object store makes a ranged read. Open calls it
// at most twice: at 0 for the header, then at the sync-search position when
// that is not already in the header's read-ahead.
type Opener func(off int64) (io.ReadCloser, error)

// ReaderAtOpener reads through ra, a file of size bytes.
func ReaderAtOpener(ra io.ReaderAt, size int64) Opener {
	return func(off int64) (io.ReadCloser, error) {
		if off > size {
			off = size
		}
		return &sectionReader{io.NewSectionReader(ra, off, size-off)}, nil
	}
}

// sectionReader is ReaderAtOpener's stream: it knows what it has left.
type sectionReader struct{ *io.SectionReader }

func (r *sectionReader) Close() error { return nil }

// Remain is the number of bytes left to read.
func (r *sectionReader) Remain() int64 {
	pos, _ := r.Seek(0, io.SeekCurrent)
	return r.Size() - pos
}

// FileOpener opens the local file path and seeks to the offset.
func FileOpener(path string) Opener {
	return func(off int64) (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if off > 0 {
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				f.Close()
				return nil, err
			}
		}
		return f, nil
	}
}

// DiscardOpener is for sources that can only be read from the start: it
// reads and discards the bytes before the offset.
func DiscardOpener(open func() (io.ReadCloser, error)) Opener {
	return func(off int64) (io.ReadCloser, error) {
		rc, err := open()
		if err != nil {
			return nil, err
		}
		if off > 0 {
			if _, err := io.CopyN(io.Discard, rc, off); err != nil && err != io.EOF {
				rc.Close()
				return nil, err
			}
		}
		return rc, nil
	}
}

// Block is one block of a container file.
type Block struct {
	// Offset is the file offset of the block's first byte (its record
	// count): the block's split point. The sync marker before it ends at Offset.
	Offset int64
	// Records is the number of records the block declares.
	Records int64
	// Size is the number of bytes the block occupies in the file, from Offset
	// through its trailing sync marker: the next block starts at Offset+Size.
	Size int64
	// DataSize is the length of the block's (compressed) data.
	DataSize int64
	// Data is the decompressed data: Records serialized datums. It is valid
	// until the next call to Next.
	Data []byte
}

// BlockReader reads the blocks of one container file, starting with the first
// block whose first byte lies at or after a given offset.
//
// It never skips a block it cannot read: a block header that is malformed, a
// block shorter than declared, a trailing sync marker that does not match the
// header's, data that does not decompress or fails its checksum, and lengths
// over the Limits are all errors (*Error), and the reader stays failed.
type BlockReader struct {
	name  string
	h     *Header
	lim   Limits
	s     *stream
	rc    io.Closer
	dec   Decompressor
	codec string

	search    bool  // a sync marker must be found before the first block
	prevBytes int64 // bytes read by streams already closed
	raw, out  []byte
	blk       Block
	err       error
	inflated  int64 // Decompress calls, for tests
}

// Open reads the header of the file name through open(0) and returns a
// BlockReader whose first block is the first one starting at or after start.
//
// The block at offset B is preceded by the sync marker at B-16 (the first
// block by the header's own marker), so the reader searches for the marker
// from max(start, header size) - 16 on. When that lies beyond the header's
// read-ahead it closes the first stream and calls open at that offset, so no
// byte between the header and start-16 is read.
func Open(name string, open Opener, start int64, lim Limits) (*BlockReader, error) {
	lim = lim.withDefaults()
	rc, err := open(0)
	if err != nil {
		return nil, headerErr(name, 0, ErrTruncated, err, "opening")
	}
	s := newStream(rc, 0)
	h, err := readHeader(name, s, lim)
	if err != nil {
		rc.Close()
		return nil, err
	}
	br, err := newBlockReader(name, h, lim)
	if err != nil {
		rc.Close()
		return nil, err
	}
	if err := br.positionAt(s, rc, open, start); err != nil {
		return nil, err
	}
	return br, nil
}

// positionAt makes s, a stream of rc at the first block (file offset
// h.Size), the reader's stream for reading from the first block starting at
// or after start: as it is, after skipping what it has read ahead, or by
// closing it and opening the file again where the sync-marker search
// begins. On error rc is closed.
func (br *BlockReader) positionAt(s *stream, rc io.ReadCloser, open Opener, start int64) error {
	h, name := br.h, br.name
	from := max(start, h.Size) - SyncSize
	switch {
	case from == h.Size-SyncSize:
		// The first block follows the header: no search.
		br.s, br.rc = s, rc
	case from-s.pos <= int64(s.br.Buffered()):
		// The search starts inside what was already read ahead.
		if err := s.discard(int(max(from-s.pos, 0))); err != nil {
			rc.Close()
			return headerErr(name, s.pos, ErrTruncated, err, "skipping to byte %d", from)
		}
		br.s, br.rc, br.search = s, rc, true
	default:
		br.prevBytes = s.bytesRead()
		rc.Close()
		rc2, err := open(from)
		if err != nil {
			return headerErr(name, from, ErrTruncated, err, "opening at byte %d", from)
		}
		br.s, br.rc, br.search = newStream(rc2, from), rc2, true
	}
	return nil
}

// NewBlockReader reads blocks of a file whose header h was already read,
// from r, which is positioned at file offset pos. If pos is h.Size, the first
// block is read from there; otherwise pos must be at most start-16 and the
// reader searches from pos for the sync marker that precedes the first block
// starting at or after start. Closing the BlockReader closes r if it is an
// io.Closer.
func NewBlockReader(name string, h *Header, r io.Reader, pos, start int64, lim Limits) (*BlockReader, error) {
	lim = lim.withDefaults()
	br, err := newBlockReader(name, h, lim)
	if err != nil {
		return nil, err
	}
	br.s = newStream(r, pos)
	if c, ok := r.(io.Closer); ok {
		br.rc = c
	}
	from := max(start, h.Size) - SyncSize
	if pos != h.Size {
		if pos > from {
			return nil, fmt.Errorf("avro container %s: stream at byte %d is past %d, where the sync search for start %d begins", name, pos, from, start)
		}
		if err := br.s.discard(int(from - pos)); err != nil {
			return nil, headerErr(name, br.s.pos, ErrTruncated, err, "skipping to byte %d", from)
		}
		br.search = true
	}
	return br, nil
}

func newBlockReader(name string, h *Header, lim Limits) (*BlockReader, error) {
	dec, ok := newDecompressor(h.Codec)
	if !ok {
		return nil, headerErr(name, h.Size, ErrUnknownCodec, nil, "codec %q (readable: %v)", h.Codec, Codecs())
	}
	return &BlockReader{name: name, h: h, lim: lim, dec: dec, codec: h.Codec}, nil
}

// Header is the file's header.
func (br *BlockReader) Header() *Header { return br.h }

// Name is the file name the reader reports in errors.
func (br *BlockReader) Name() string { return br.name }

// BytesRead is the number of bytes read from the file so far, header and
// read-ahead included.
func (br *BlockReader) BytesRead() int64 {
	if br.s == nil {
		return br.prevBytes
	}
	return br.prevBytes + br.s.bytesRead()
}

// Pos is the file offset of the next byte the reader will consume: after a
// successful Next, the offset of the following block.
func (br *BlockReader) Pos() int64 { return br.s.pos }

// Close releases the underlying stream and codec.
func (br *BlockReader) Close() error {
	var err error
	if br.rc != nil {
		err = br.rc.Close()
		br.rc = nil
	}
	if c, ok := br.dec.(DecompressorCloser); ok {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	if br.err == nil {
		br.err = errors.New("avro container " + br.name + ": reader closed")
	}
	return err
}

// findSync advances the stream to just past the next sync marker. It
// returns io.EOF when the file ends first.
func (br *BlockReader) findSync() error {
	s := br.s
	sync := br.h.Sync[:]
	for {
		b, err := s.br.Peek(s.br.Size())
		if i := bytes.Index(b, sync); i >= 0 {
			return s.discard(i + SyncSize)
		}
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				s.discard(len(b))
				return io.EOF
			}
			if err != bufio.ErrBufferFull {
				return headerErr(br.name, s.pos, ErrTruncated, err, "searching for a sync marker")
			}
		}
		// Keep the last SyncSize-1 bytes: a marker may straddle the boundary.
		if keep := SyncSize - 1; len(b) > keep {
			if err := s.discard(len(b) - keep); err != nil {
				return headerErr(br.name, s.pos, ErrTruncated, err, "searching for a sync marker")
			}
		}
	}
}

// Next reads the next block. It returns io.EOF after the last block. The
// returned Block and its Data are reused by the next call.
func (br *BlockReader) Next() (*Block, error) {
	if br.err != nil {
		return nil, br.err
	}
	blk, err := br.next()
	if err != nil {
		br.err = err
		return nil, err
	}
	return blk, nil
}

func (br *BlockReader) next() (*Block, error) {
	s := br.s
	if br.search {
		if err := br.findSync(); err != nil {
			return nil, err
		}
		br.search = false
	}
	off := s.pos
	trunc := func(what string, err error) error {
		switch err {
		case io.EOF, io.ErrUnexpectedEOF:
			return blockErr(br.name, s.pos, off, ErrTruncated, nil, "file ends inside the %s", what)
		case errVarint:
			return blockErr(br.name, s.pos, off, ErrBadBlock, err, "%s", what)
		}
		return blockErr(br.name, s.pos, off, ErrTruncated, err, "reading the %s", what)
	}
	count, err := s.readLong()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, trunc("block's record count", err)
	}
	if count < 0 {
		return nil, blockErr(br.name, off, off, ErrBadBlock, nil, "negative record count %d", count)
	}
	sat := s.pos
	size, err := s.readLong()
	if err != nil {
		return nil, trunc("block's size", err)
	}
	if size < 0 {
		return nil, blockErr(br.name, sat, off, ErrBadBlock, nil, "negative block size %d", size)
	}
	if size > br.lim.MaxAlloc {
		return nil, blockErr(br.name, sat, off, ErrLimit, nil, "block declares %d bytes of data, over the %d-byte limit", size, br.lim.MaxAlloc)
	}
	dat := s.pos
	br.raw, err = s.readN(br.raw, int(size))
	if err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, blockErr(br.name, s.pos, off, ErrTruncated, nil, "block declares %d bytes of data from byte %d but the file ends after %d", size, dat, s.pos-dat)
		}
		return nil, trunc("block data", err)
	}
	var sync [SyncSize]byte
	syncAt := s.pos
	if err := s.readFull(sync[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, blockErr(br.name, syncAt, off, ErrTruncated, nil, "file ends inside the sync marker after %d bytes of block data", size)
		}
		return nil, trunc("sync marker", err)
	}
	if sync != br.h.Sync {
		return nil, blockErr(br.name, syncAt, off, ErrSyncMismatch, nil, "found %x after %d bytes of block data, header says %x", sync[:], size, br.h.Sync[:])
	}
	data := br.raw
	if br.codec != "null" {
		br.inflated++
		br.out, err = br.dec.Decompress(br.out, br.raw, int(br.lim.MaxAlloc))
		if err != nil {
			kind, msg, cause := ErrCorruptData, "codec "+br.codec, err
			var ce *codecError
			switch {
			case errors.As(err, &ce):
				kind, msg, cause = ce.kind, "codec "+br.codec+": "+ce.msg, ce.err
			case errors.Is(err, ErrChecksum):
				kind = ErrChecksum
			case errors.Is(err, ErrLimit):
				kind = ErrLimit
			}
			return nil, blockErr(br.name, dat, off, kind, cause, "%s", msg)
		}
		data = br.out
	}
	br.blk = Block{Offset: off, Records: count, Size: s.pos - off, DataSize: size, Data: data}
	return &br.blk, nil
}
