package container

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sdfio/sdfio/internal/ioerr"
)

// Kinds of malformed input. Every error that the package returns for bad
// input is an *Error whose Kind is one of these, so callers can test it with
// errors.Is(err, container.ErrSyncMismatch) and still read where it happened.
var (
	// ErrBadMagic: the file does not start with "Obj\x01".
	ErrBadMagic = errors.New("not an Avro object container file (bad magic)")
	// ErrTruncated: the input ended inside the header or a block.
	ErrTruncated = errors.New("truncated")
	// ErrBadHeader: the header metadata is malformed (negative lengths,
	// missing or unparsable schema, duplicate keys).
	ErrBadHeader = errors.New("malformed header")
	// ErrBadBlock: a block header is malformed (negative record count or size).
	ErrBadBlock = errors.New("malformed block")
	// ErrSyncMismatch: the 16 bytes after a block are not the file's sync marker.
	ErrSyncMismatch = errors.New("sync marker mismatch")
	// ErrRecordCount: the records a block declares do not match its bytes.
	ErrRecordCount = errors.New("record count does not match block bytes")
	// ErrChecksum: a codec's checksum (snappy's CRC32, xz's check) failed.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrCorruptData: compressed data or a datum cannot be decoded.
	ErrCorruptData = errors.New("corrupt data")
	// ErrLimit: a length field asks for more memory than Limits allow.
	ErrLimit = errors.New("length exceeds limit")
	// ErrUnknownCodec: the file uses a codec this package cannot read.
	ErrUnknownCodec = errors.New("unsupported codec")
	// ErrSchema: the writer schema cannot be parsed, or the reader schema
	// cannot be resolved against it.
	ErrSchema = errors.New("schema error")
	// ErrRange: a value in the file is valid Avro but outside what the Go
	// type it is read into can hold (a time-micros beyond the ±292 years of
	// a time.Duration): the error names the field rather than letting the
	// value change.
	ErrRange = errors.New("value out of range")
)

// Error describes a problem with one container file: which file, at which
// byte offset, in which block and record, and what was wrong. It has the
// module's one error shape (File, Kind, Msg, Err, as filesource.Error;
// see internal/ioerr), with the place in the file added.
type Error struct {
	File   string // the name the reader was given
	Offset int64  // byte offset in the file where the problem was seen; -1 if unknown
	Block  int64  // offset of the block being read; -1 when not in a block (header, sync search)
	Record int64  // index of the record inside the block; -1 when not decoding a record
	Kind   error  // one of the Err* kinds above
	Msg    string // what was wrong, in words
	Err    error  // the underlying cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("avro container ")
	b.WriteString(e.File)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " at byte %d", e.Offset)
	}
	if e.Block >= 0 {
		fmt.Fprintf(&b, " (block at byte %d", e.Block)
		if e.Record >= 0 {
			fmt.Fprintf(&b, ", record %d", e.Record)
		}
		b.WriteString(")")
	}
	return ioerr.Text(b.String(), e.Kind, e.Msg, e.Err)
}

// Unwrap returns the kind and the cause, so errors.Is and errors.As see both.
func (e *Error) Unwrap() []error { return ioerr.Unwrap(e.Kind, e.Err) }

func headerErr(file string, off int64, kind error, cause error, format string, args ...any) *Error {
	return &Error{File: file, Offset: off, Block: -1, Record: -1, Kind: kind, Msg: fmt.Sprintf(format, args...), Err: cause}
}

func blockErr(file string, off, block int64, kind error, cause error, format string, args ...any) *Error {
	return &Error{File: file, Offset: off, Block: block, Record: -1, Kind: kind, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// kindError is an error of a kind (errors.Is finds the kind) whose message
// does not repeat the kind's, for causes inside an *Error that names it.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// RangeError is the cause of an ErrRange error: a decoder that meets a
// value its Go type cannot hold reports it (through avro.Reader's Error,
// in a FieldError naming the field) rather than changing the value.
func RangeError(format string, args ...any) error {
	return &kindError{kind: ErrRange, msg: fmt.Sprintf(format, args...)}
}

// LimitError is the cause of an ErrLimit error raised by a decoder.
func LimitError(format string, args ...any) error {
	return &kindError{kind: ErrLimit, msg: fmt.Sprintf(format, args...)}
}
