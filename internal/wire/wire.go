// Package wire reads and writes the byte encodings of the module's own Beam
// coders (bigqueryio.Row, avroio.Record, datastoreio's entities, the watch
// restriction of filesource): varints, fixed-width little-endian numbers,
// length-prefixed bytes. It is the one place that reads them, so that every
// coder refuses bad input the same way: an error naming the byte offset and
// what was wrong, never a panic, and no count that makes it allocate more
// than the remaining bytes could hold.
//
// A Reader's error is sticky: after the first failure every read returns a
// zero value and Err reports that first failure, so a decoder reads a whole
// structure and checks once.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrShort is the cause of a read past the end of the encoding.
var ErrShort = errors.New("the encoding ends early")

// Reader reads an encoding from its first byte.
type Reader struct {
	b   []byte
	src string // the encoding as a string, when strings are to share it
	off int
	err error
}

// NewReader reads b. Strings it returns are copies.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// NewSharingReader reads b, whose strings are returned as substrings of
// one copy of b made here (one allocation for all strings of a record).
func NewSharingReader(b []byte) *Reader { return &Reader{b: b, src: string(b)} }

// Err is the first failure, with the byte offset where it happened.
func (r *Reader) Err() error { return r.err }

// Offset is the offset of the next byte to read.
func (r *Reader) Offset() int { return r.off }

// Left is the number of bytes not read yet.
func (r *Reader) Left() int { return len(r.b) - r.off }

// Fail records a failure at the current offset (when there was none): the
// decoder's own checks fail through it.
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %w", r.off, fmt.Errorf(format, args...))
	}
}

// FailAt records a failure at byte off (when there was none): for a
// value found bad after it was read, named by where it began.
func (r *Reader) FailAt(off int, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %w", off, fmt.Errorf(format, args...))
	}
}

func (r *Reader) short(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s: %w", r.off, what, ErrShort)
	}
}

// Done fails when bytes are left after what was decoded, and returns Err.
func (r *Reader) Done(what string) error {
	if r.err == nil && r.off != len(r.b) {
		r.Fail("%d bytes after the %s", len(r.b)-r.off, what)
	}
	return r.err
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		if n < 0 {
			r.Fail("a varint overflows 64 bits")
		} else {
			r.short("a varint")
		}
		return 0
	}
	r.off += n
	return v
}

// Varint reads a zig-zag signed varint: an Uvarint whose lowest bit is the
// sign (as binary.Varint decodes it).
func (r *Reader) Varint() int64 {
	u := r.Uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// Int32 reads a Varint that must fit an int32 (what names it in the error).
func (r *Reader) Int32(what string) int {
	v := r.Varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.Fail("%s %d out of range", what, v)
		return 0
	}
	return int(v)
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.short("a byte")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// Fixed reads the next n bytes; they alias the encoding.
func (r *Reader) Fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.Left() {
		r.short(fmt.Sprintf("%d bytes", n))
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

// Uint32 and Uint64 read little-endian fixed-width numbers.
func (r *Reader) Uint32() uint32 {
	if p := r.Fixed(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (r *Reader) Uint64() uint64 {
	if p := r.Fixed(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// Count reads a count of items each at least minSize bytes long: a count
// the remaining bytes cannot hold fails (a hostile count never makes a
// decoder allocate for it).
func (r *Reader) Count(minSize int) int {
	n := r.Uvarint()
	if r.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if n > uint64(r.Left()/minSize) {
		r.Fail("a count of %d with %d bytes left", n, r.Left())
		return 0
	}
	return int(n)
}

// Bytes reads a length-prefixed byte string; it aliases the encoding.
func (r *Reader) Bytes() []byte { return r.Fixed(r.Count(1)) }

// Str reads a length-prefixed string: a substring of the shared copy
// for a NewSharingReader, else a copy.
func (r *Reader) Str() string {
	p := r.Bytes()
	if r.err != nil {
		return ""
	}
	if r.src != "" {
		return r.src[r.off-len(p) : r.off]
	}
	return string(p)
}

// AppendBytes appends p with its length.
func AppendBytes(b, p []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(p))), p...) }

// AppendString appends s with its length.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// AppendUvarint, AppendVarint, AppendUint32 and AppendUint64 append
// numbers as the Reader reads them.
func AppendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func AppendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }
func AppendUint32(b []byte, v uint32) []byte  { return binary.LittleEndian.AppendUint32(b, v) }
func AppendUint64(b []byte, v uint64) []byte  { return binary.LittleEndian.AppendUint64(b, v) }
