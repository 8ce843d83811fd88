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
	c.br.Reset(src)
	if c.fr == nil {
		c.fr = flate.NewReader(&c.br)
	} else if err := c.fr.(flate.Resetter).Reset(&c.br, nil); err != nil {
		return dst[:0], corrupt("deflate", err)
	}
	out, err := readLimited(dst, c.fr, limit)
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

// zstdCodec: one or more Zstandard frames.
type zstdCodec struct {
	dec   *zstd.Decoder
	limit int
}

func (c *zstdCodec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	if c.dec == nil || c.limit != limit {
		if c.dec != nil {
			c.dec.Close()
		}
		window := uint64(max(limit, zstd.MinWindowSize))
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(max(limit, 1))),
			zstd.WithDecoderMaxWindow(window),
		)
		if err != nil {
			return dst[:0], corrupt("zstandard decoder", err)
		}
		c.dec, c.limit = d, limit
	}
	out, err := c.dec.DecodeAll(src, dst[:0])
	switch {
	case err == nil:
		if len(out) > limit {
			return out, limitErr(limit)
		}
		return out, nil
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return out, &codecError{kind: ErrLimit, msg: fmt.Sprintf("zstandard frame needs more than %d bytes", limit), err: err}
	case errors.Is(err, zstd.ErrCRCMismatch):
		return out, &codecError{kind: ErrChecksum, msg: "zstandard frame checksum", err: err}
	default:
		return out, corrupt("zstandard", err)
	}
}

func (c *zstdCodec) Close() error {
	if c.dec != nil {
		c.dec.Close()
		c.dec = nil
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
	out, err := readLimited(dst, bzip2.NewReader(bytes.NewReader(src)), limit)
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
