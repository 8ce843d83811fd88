package container

import (
	"bufio"
	"errors"
	"io"
	"os"
)

// streamBufSize is the read-ahead buffer of a stream: large enough that the
// sync-marker search and block headers rarely call the underlying reader,
// small enough to cost nothing per file.
const streamBufSize = 64 << 10

// errVarint is returned for a varint longer than 10 bytes or overflowing int64.
var errVarint = errors.New("varint overflows 64 bits")

// countingReader counts the bytes its underlying reader delivered.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// stream is a buffered reader that knows the file offset of the next byte it
// returns.
type stream struct {
	cr  countingReader
	br  *bufio.Reader
	pos int64
}

func newStream(r io.Reader, pos int64) *stream {
	s := &stream{pos: pos}
	s.cr.r = r
	size := streamBufSize
	if left, ok := s.sourceRemaining(); ok {
		// No larger than the input: small files cost little.
		size = int(min(max(left+1, 4096), streamBufSize))
	}
	s.br = bufio.NewReaderSize(&s.cr, size)
	return s
}

// bytesRead is how many bytes the stream pulled from its source.
func (s *stream) bytesRead() int64 { return s.cr.n }

func (s *stream) readByte() (byte, error) {
	b, err := s.br.ReadByte()
	if err == nil {
		s.pos++
	}
	return b, err
}

// readLong reads a zig-zag varint. It returns io.EOF only when the stream
// ended before the first byte, io.ErrUnexpectedEOF when it ended inside.
func (s *stream) readLong() (int64, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		b, err := s.readByte()
		if err != nil {
			if shift > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if shift == 63 && b > 1 {
			return 0, errVarint
		}
		u |= uint64(b&0x7f) << shift
		if b < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

// readFull fills p, returning io.ErrUnexpectedEOF when the stream ends first
// (io.EOF only if it ended before the first byte).
func (s *stream) readFull(p []byte) error {
	n, err := io.ReadFull(s.br, p)
	s.pos += int64(n)
	return err
}

// readN reads n bytes into buf's storage, growing it as data actually arrives
// so that a length field larger than the input costs no more memory than the
// input (at most twice the bytes read, never more than n).
func (s *stream) readN(buf []byte, n int) ([]byte, error) {
	if n <= cap(buf) {
		buf = buf[:n]
		if err := s.readFull(buf); err != nil {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
		return buf, nil
	}
	if rem, ok := s.remaining(); ok && n > 64<<10 {
		// The input's size is known: no growing.
		if rem < int64(n) {
			s.discard(int(rem))
			return buf[:0], io.ErrUnexpectedEOF
		}
		buf = nil // let the collector have it before the allocation
		buf = make([]byte, n)
		if err := s.readFull(buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
		return buf, nil
	}
	buf = buf[:0]
	for len(buf) < n {
		want := max(2*cap(buf), 64<<10)
		want = min(want, n)
		if want > cap(buf) {
			nb := make([]byte, len(buf), want)
			copy(nb, buf)
			buf = nb
		}
		chunk := buf[len(buf):want]
		err := s.readFull(chunk)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
		buf = buf[:want]
	}
	return buf, nil
}

// remainder is implemented by readers that know how many bytes they have
// left: the Google Cloud Storage client's Reader (-1 when it does not know),
// ReaderAtOpener's.
type remainder interface{ Remain() int64 }

// remaining is the number of bytes left in the stream, when its source can
// tell: a local file, or a reader with a Remain method.
func (s *stream) remaining() (int64, bool) {
	left, ok := s.sourceRemaining()
	if !ok {
		return 0, false
	}
	return left + int64(s.br.Buffered()), true
}

// sourceRemaining is what the stream's source has left to deliver.
func (s *stream) sourceRemaining() (int64, bool) {
	var left int64
	switch r := s.cr.r.(type) {
	case *os.File:
		fi, err := r.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return 0, false
		}
		pos, err := r.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, false
		}
		left = max(fi.Size()-pos, 0)
	case remainder:
		if left = r.Remain(); left < 0 {
			return 0, false
		}
	default:
		return 0, false
	}
	return left, true
}

// discard skips n bytes.
func (s *stream) discard(n int) error {
	d, err := s.br.Discard(n)
	s.pos += int64(d)
	return err
}

// zigzag varint decoding from a byte slice, used by the datum validator.
// It returns the value and the number of bytes used; n == 0 means the slice
// ended inside the varint, n < 0 means the varint overflows.
func uvarintLong(b []byte) (int64, int) {
	var u uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, -1
		}
		u |= uint64(c&0x7f) << (7 * uint(i))
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	if len(b) >= 10 {
		return 0, -1
	}
	return 0, 0
}
