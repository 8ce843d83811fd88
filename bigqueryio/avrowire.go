package bigqueryio

import (
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"

	"github.com/sdfio/sdfio/internal/wire"
)

// avroReader reads the Avro binary encoding of the rows of AvroRows (the
// concatenated datums of the session's record schema) with internal/wire's
// reader: longs and ints are zig-zag varints, doubles 8 little-endian
// bytes, booleans one byte, bytes and strings a long length and the bytes.
// Its error is sticky, as wire's: a decoder reads a whole row and checks
// once. A length is checked against the bytes left before anything of its
// size is allocated, so a hostile length fails at the end of the payload.
type avroReader struct {
	wire.Reader
	// buf is the payload wire.Reader reads, for the fast path of long.
	buf []byte
	// slab holds the bytes of short strings (one allocation for many, not
	// one each; a row kept downstream keeps at most a slab per string
	// alive, not the response). Its bytes are never written again once a
	// string points at them.
	slab []byte
}

// slabBytes is the size of a string slab; longer strings (over
// slabString) get their own allocation.
const (
	slabBytes  = 1024
	slabString = 256
)

// reset points r at payload, with no error left from an earlier use.
func (r *avroReader) reset(payload []byte) {
	r.Reader = *wire.NewReader(payload)
	r.buf = payload
	r.slab = nil
}

// more reports whether r has bytes left to decode and no error.
func (r *avroReader) more() bool { return r.Err() == nil && r.Left() > 0 }

// err is r's first failure; a read past the end of the payload wraps
// io.ErrUnexpectedEOF as well as wire.ErrShort.
func (r *avroReader) err() error {
	err := r.Err()
	if err != nil && errors.Is(err, wire.ErrShort) {
		return fmt.Errorf("%w (%w)", err, io.ErrUnexpectedEOF)
	}
	return err
}

// long reads an Avro long. A long of one byte (-64 to 63: union branches,
// most string lengths, small numbers) is read inline, the others by
// wire.Reader's Varint.
func (r *avroReader) long() int64 {
	if off := r.Offset(); off < len(r.buf) {
		if b := r.buf[off]; b < 0x80 && r.Err() == nil {
			r.Byte()
			return int64(b>>1) ^ -int64(b&1)
		}
	}
	return r.Varint()
}

// int reads an Avro int (what names the value in the error when it does
// not fit 32 bits).
func (r *avroReader) int(what string) int32 { return int32(r.Int32(what)) }

// double reads an Avro double.
func (r *avroReader) double() float64 { return math.Float64frombits(r.Uint64()) }

// boolean reads an Avro boolean: a byte 0 or 1.
func (r *avroReader) boolean() bool {
	off := r.Offset()
	b := r.Byte()
	if b > 1 {
		r.FailAt(off, "boolean: byte %d is neither 0 nor 1", b)
	}
	return b == 1
}

// bytes reads Avro bytes; they alias the payload.
func (r *avroReader) bytes() []byte {
	off := r.Offset()
	n := r.long()
	if r.Err() != nil {
		return nil
	}
	if n < 0 {
		r.FailAt(off, "a length of %d", n)
		return nil
	}
	if n > int64(r.Left()) {
		r.FailAt(off, "a length of %d with %d bytes left: %w", n, r.Left(), wire.ErrShort)
		return nil
	}
	return r.Fixed(int(n))
}

// str reads an Avro string: a copy, in the current slab when short.
func (r *avroReader) str() string { return r.copyStr(r.bytes()) }

// copyStr is a copy of b, in the current slab when short.
func (r *avroReader) copyStr(b []byte) string {
	n := len(b)
	switch {
	case n == 0:
		return ""
	case n > slabString:
		return string(b)
	}
	if cap(r.slab)-len(r.slab) < n {
		r.slab = make([]byte, 0, slabBytes)
	}
	at := len(r.slab)
	r.slab = append(r.slab, b...)
	return unsafe.String(&r.slab[at], n)
}

// blockCount reads the count of an array block: a negative count is
// followed by the block's size in bytes, which is skipped. Zero ends the
// array.
func (r *avroReader) blockCount(column string) int64 {
	off := r.Offset()
	n := r.long()
	if n < 0 {
		r.long() // the block's size in bytes
		if n == math.MinInt64 {
			r.FailAt(off, "array: a block of %d items for column %s", n, column)
			return 0
		}
		n = -n
	}
	if r.Err() != nil {
		return 0
	}
	return n
}
