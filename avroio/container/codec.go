package container

import (
	"bytes"
	"compress/bzip2"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// A Decompressor decodes the data of one block. Each reader owns its
// Decompressors, so an implementation may keep state between calls and need
// not be safe for concurrent use.
type Decompressor interface {
	// Decompress decodes src and appends the result to dst[:0], reusing
	// dst's storage when it can. It must fail rather than produce (or
	// allocate for) more than limit bytes; such failures should wrap
	// ErrLimit, checksum failures ErrChecksum.
	Decompress(dst, src []byte, limit int) ([]byte, error)
}

// DecompressorCloser is a Decompressor holding resources to release.
type DecompressorCloser interface {
	Decompressor
	Close() error
}

var (
	codecsMu sync.RWMutex
	codecs   = map[string]func() Decompressor{
		"null":      func() Decompressor { return nullCodec{} },
		"deflate":   func() Decompressor { return &deflateCodec{} },
		"snappy":    func() Decompressor { return snappyCodec{} },
		"zstandard": func() Decompressor { return &zstdCodec{} },
		"bzip2":     func() Decompressor { return bzip2Codec{} },
		"xz":        func() Decompressor { return xzCodec{} },
		// "lzma" is what Avro C (avromod, avroappend) writes: a raw LZMA2
		// stream without the xz container.
		"lzma": func() Decompressor { return lzmaCodec{} },
	}
)

// RegisterCodec makes the codec name readable with decompressors made by
// newDecompressor, replacing any earlier registration of name.
func RegisterCodec(name string, newDecompressor func() Decompressor) {
	codecsMu.Lock()
	defer codecsMu.Unlock()
	codecs[name] = newDecompressor
}

// Codecs lists the names of the codecs that can be read, sorted.
func Codecs() []string {
	codecsMu.RLock()
	defer codecsMu.RUnlock()
	names := make([]string, 0, len(codecs))
	for n := range codecs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func newDecompressor(name string) (Decompressor, bool) {
	codecsMu.RLock()
	defer codecsMu.RUnlock()
	f, ok := codecs[name]
	if !ok {
		return nil, false
	}
	return f(), true
}

// codecError carries a kind (ErrChecksum, ErrLimit, ErrCorruptData) and words.
type codecError struct {
	kind error
	msg  string
	err  error
}

func (e *codecError) Error() string {
	s := e.kind.Error() + ": " + e.msg
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *codecError) Unwrap() []error { return []error{e.kind, e.err} }

func limitErr(limit int) error {
	return &codecError{kind: ErrLimit, msg: fmt.Sprintf("decompressed block exceeds %d bytes", limit)}
}

func corrupt(msg string, err error) error {
	return &codecError{kind: ErrCorruptData, msg: msg, err: err}
}

// growLimit is how far a streaming decoder's output is grown by doubling.
// A block whose output goes past it is decoded twice: once counting its
// size, refusing it past the limit, then into storage of exactly that size.
// So a decompression bomb is refused having taken about growLimit bytes,
// and a block of n bytes under the limit takes about n, not the 2n-3n
// that growing by doubling (and the garbage it leaves) would. Avro writers
// cut blocks far below it, so real blocks decode once.
const growLimit = 1 << 20

// inflate decodes the stream that newReader returns (a fresh decoder over
// the same data each call) into dst[:0], failing once more than limit bytes
// come out. Storage grows with the data actually produced, up to growLimit;
// past it see growLimit.
func inflate(dst []byte, newReader func() (io.Reader, error), limit int) ([]byte, error) {
	r, err := newReader()
	if err != nil {
		return dst[:0], err
	}
	first := min(limit, max(growLimit, cap(dst)))
	out, err := readLimited(dst, r, first)
	if err == nil || first == limit || !errors.Is(err, ErrLimit) {
		return out, err
	}
	// More than first bytes: count the rest in out's storage, which is
	// then dropped for an exact one unless it is large enough.
	n := int64(len(out))
	scratch := out[:cap(out)]
	for empty := 0; ; {
		k, err := r.Read(scratch)
		n += int64(k)
		if n > int64(limit) {
			return out[:0], limitErr(limit)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return out[:0], err
		}
		if k > 0 {
			empty = 0
		} else if empty++; empty >= 100 {
			return out[:0], io.ErrNoProgress
		}
	}
	if int64(cap(out)) < n {
		out = nil // let the collector have it before the exact allocation
		out = make([]byte, n)
	}
	out = out[:n]
	if r, err = newReader(); err != nil {
		return out[:0], err
	}
	if _, err := io.ReadFull(r, out); err != nil {
		return out[:0], err
	}
	// The stream must end where it did the first time.
	var one [1]byte
	if k, err := io.ReadFull(r, one[:]); k != 0 || err != io.EOF {
		return out[:0], fmt.Errorf("decoding again gave more than the %d bytes of the first pass", n)
	}
	return out, nil
}

// readLimited reads r to its end into dst[:0], failing once more than limit
// bytes come out. Storage grows with the data actually produced.
func readLimited(dst []byte, r io.Reader, limit int) ([]byte, error) {
	dst = dst[:0]
	empty := 0
	for {
		if len(dst) == cap(dst) {
			if len(dst) > limit {
				return dst, limitErr(limit)
			}
			// Grow, but never to more than limit+1 bytes: one byte past the
			// limit is enough to know it was exceeded.
			n := min(max(2*cap(dst), 64<<10), limit+1)
			nb := make([]byte, len(dst), n)
			copy(nb, dst)
			dst = nb
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		if n == 0 && err == nil {
			// Some decoders (compress/bzip2 on corrupt input) can return
			// nothing forever; give up as bufio does.
			if empty++; empty >= 100 {
				return dst, io.ErrNoProgress
			}
			continue
		}
		empty = 0
		dst = dst[:len(dst)+n]
		if len(dst) > limit {
			return dst, limitErr(limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

type nullCodec struct{}

func (nullCodec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	// The block reader hands the null codec's data through without a copy;
	// this is only used when called directly.
	if len(src) > limit {
		return dst[:0], limitErr(limit)
	}
	return append(dst[:0], src...), nil
}

// deflateCodec: raw DEFLATE (RFC 1951) without zlib or gzip framing.
type deflateCodec struct {
	br bytes.Reader
	fr io.ReadCloser
}

func (c *deflateCodec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	out, err := inflate(dst, func() (io.Reader, error) {
		c.br.Reset(src)
		if c.fr == nil {
			c.fr = flate.NewReader(&c.br)
		} else if err := c.fr.(flate.Resetter).Reset(&c.br, nil); err != nil {
			return nil, err
		}
		return c.fr, nil
	}, limit)
	if err != nil {
		var ce *codecError
		if errors.As(err, &ce) {
			return out, err
		}
		return out, corrupt("deflate", err)
	}
	return out, nil
}

// snappyCodec: a snappy block followed by the big-endian CRC32 (IEEE) of the
// uncompressed data.
type snappyCodec struct{}

func (snappyCodec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	if len(src) < 4 {
		return dst[:0], corrupt(fmt.Sprintf("snappy block of %d bytes has no room for its CRC32", len(src)), nil)
	}
	body, sum := src[:len(src)-4], binary.BigEndian.Uint32(src[len(src)-4:])
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return dst[:0], corrupt("snappy", err)
	}
	if n > limit {
		return dst[:0], limitErr(limit)
	}
	if cap(dst) < n {
		dst = nil // let the collector have it before the allocation
		dst = make([]byte, n)
	}
	out, err := snappy.Decode(dst[:cap(dst)], body)
	if err != nil {
		return dst[:0], corrupt("snappy", err)
	}
	if got := crc32.ChecksumIEEE(out); got != sum {
		return out, &codecError{kind: ErrChecksum, msg: fmt.Sprintf("snappy CRC32 of the uncompressed data is %08x, block says %08x", got, sum)}
	}
	return out, nil
}

// zstdCodec: one or more Zstandard frames. Blocks decode in one call
// (DecodeAll) with a decoder that refuses more than growLimit bytes of
// output; a block past that (Java's writer does not record the frame's
// size, so the output's size is not known up front) is counted with a
// streaming decoder, refused past the limit, and decoded again into storage
// of exactly its size, as inflate does.
type zstdCodec struct {
	small, big *zstd.Decoder
	limit      int
}

// newZstdDecoder makes a decoder refusing more than maxOut bytes of output
// and windows over limit bytes.
func newZstdDecoder(maxOut, limit int) (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxMemory(uint64(max(maxOut, 1))),
		zstd.WithDecoderMaxWindow(uint64(max(limit, zstd.MinWindowSize))),
	)
}

func zstdErr(err error, limit int) error {
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return &codecError{kind: ErrLimit, msg: fmt.Sprintf("zstandard frame needs more than %d bytes", limit), err: err}
	case errors.Is(err, zstd.ErrCRCMismatch):
		return &codecError{kind: ErrChecksum, msg: "zstandard frame checksum", err: err}
	default:
		return corrupt("zstandard", err)
	}
}

func (c *zstdCodec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	if c.small == nil || c.limit != limit {
		c.Close()
		d, err := newZstdDecoder(min(limit, growLimit), limit)
		if err != nil {
			return dst[:0], corrupt("zstandard decoder", err)
		}
		c.small, c.limit = d, limit
	}
	out, err := c.small.DecodeAll(src, dst[:0])
	if err == nil {
		if len(out) > limit {
			return out, limitErr(limit)
		}
		return out, nil
	}
	// A frame's window over the small decoder's output bound is refused
	// as well (ErrWindowSizeExceeded): the big decoder decides.
	if limit <= growLimit || !errors.Is(err, zstd.ErrDecoderSizeExceeded) && !errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return out, zstdErr(err, limit)
	}
	if c.big == nil {
		if c.big, err = newZstdDecoder(limit, limit); err != nil {
			return dst[:0], corrupt("zstandard decoder", err)
		}
	}
	// The size of the output: the frame's, when its header says it (as
	// Go writers do), else counted by decoding.
	var fh zstd.Header
	var n int64
	if fh.Decode(src) == nil && fh.HasFCS {
		n = int64(min(fh.FrameContentSize, uint64(limit)+1))
	} else {
		if err := c.big.Reset(bytes.NewReader(src)); err != nil {
			return out[:0], zstdErr(err, limit)
		}
		if n, err = io.Copy(io.Discard, io.LimitReader(c.big, int64(limit)+1)); err != nil {
			return out[:0], zstdErr(err, limit)
		}
	}
	if n > int64(limit) {
		return out[:0], limitErr(limit)
	}
	if int64(cap(out)) < n {
		out = nil // let the collector have it before the exact allocation
		out = make([]byte, 0, n)
	}
	out, err = c.big.DecodeAll(src, out[:0])
	if err != nil {
		return out[:0], zstdErr(err, limit)
	}
	return out, nil
}

func (c *zstdCodec) Close() error {
	for _, d := range []**zstd.Decoder{&c.small, &c.big} {
		if *d != nil {
			(*d).Close()
			*d = nil
		}
	}
	return nil
}

// bzip2Codec: a bzip2 stream. The format bounds its own memory (900 kB blocks).
type bzip2Codec struct{}

func (bzip2Codec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	// The decoder takes 4 bytes per byte of the block size the stream
	// header names ("BZh1".."BZh9": 100k..900k) before decoding anything.
	if len(src) >= 4 && src[0] == 'B' && src[1] == 'Z' && src[2] == 'h' && src[3] >= '1' && src[3] <= '9' {
		if need := int(src[3]-'0') * 100_000 * 4; need > limit {
			return dst[:0], &codecError{kind: ErrLimit, msg: fmt.Sprintf("bzip2 block size %c00k needs %d bytes of decoder memory, over the %d-byte limit", src[3], need, limit)}
		}
	}
	out, err := inflate(dst, func() (io.Reader, error) { return bzip2.NewReader(bytes.NewReader(src)), nil }, limit)
	if err != nil {
		var ce *codecError
		if errors.As(err, &ce) {
			return out, err
		}
		var se bzip2.StructuralError
		if errors.As(err, &se) && bytes.Contains([]byte(se), []byte("checksum")) {
			return out, &codecError{kind: ErrChecksum, msg: "bzip2", err: err}
		}
		return out, corrupt("bzip2", err)
	}
	return out, nil
}
