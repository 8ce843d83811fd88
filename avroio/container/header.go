package container

import (
	"bytes"
	"io"
)

// Magic is the first four bytes of every Avro object container file.
var Magic = [4]byte{'O', 'b', 'j', 1}

// SyncSize is the length of the sync marker that ends the header and every block.
const SyncSize = 16

// Metadata keys the Avro specification reserves.
const (
	MetaSchema = "avro.schema"
	MetaCodec  = "avro.codec"
)

// Header is the parsed header of an object container file. A Header may be
// shared by many readers (see HeaderCache): treat it as read-only.
type Header struct {
	// Meta holds every metadata entry, the reserved avro.* ones included.
	Meta map[string][]byte
	// Schema is the writer schema, the JSON text of avro.schema.
	Schema string
	// Codec is avro.codec, "null" when absent.
	Codec string
	// Sync is the file's 16-byte sync marker.
	Sync [SyncSize]byte
	// Size is the header's length in bytes: the offset of the first block.
	Size int64
}

// ReadHeader reads the header of the file name from r, which must be
// positioned at the file's first byte. It reads ahead of the header into an
// internal buffer; use Open to go on reading blocks from the same stream.
func ReadHeader(name string, r io.Reader, lim Limits) (*Header, error) {
	return readHeader(name, newStream(r, 0), lim.withDefaults())
}

func readHeader(name string, s *stream, lim Limits) (*Header, error) {
	truncated := func(what string, err error) error {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return headerErr(name, s.pos, ErrTruncated, nil, "file ends inside the header (%s)", what)
		}
		if err == errVarint {
			return headerErr(name, s.pos, ErrBadHeader, err, "reading %s", what)
		}
		return headerErr(name, s.pos, ErrTruncated, err, "reading %s", what)
	}
	var m [4]byte
	if err := s.readFull(m[:]); err != nil {
		if err == io.EOF {
			return nil, headerErr(name, 0, ErrTruncated, nil, "empty file")
		}
		return nil, truncated("magic", err)
	}
	if m != Magic {
		return nil, headerErr(name, 0, ErrBadMagic, nil, "first bytes are %q, want %q", m[:], Magic[:])
	}
	h := &Header{Meta: map[string][]byte{}}
	// readBytes reads one length-prefixed byte string of the metadata map,
	// refusing lengths that would take the header past lim.MaxAlloc.
	readBytes := func(what string, limit int64, limitName string) ([]byte, error) {
		at := s.pos
		n, err := s.readLong()
		if err != nil {
			return nil, truncated(what+" length", err)
		}
		if n < 0 {
			return nil, headerErr(name, at, ErrBadHeader, nil, "negative %s length %d", what, n)
		}
		if n > lim.MaxAlloc-s.pos {
			return nil, headerErr(name, at, ErrLimit, nil, "%s length %d takes the header past the %d-byte limit", what, n, lim.MaxAlloc)
		}
		if n > limit {
			return nil, headerErr(name, at, ErrLimit, nil, "%s of %d bytes is over the %d-byte limit (%s)", what, n, limit, limitName)
		}
		b, err := s.readN(nil, int(n))
		if err != nil {
			return nil, truncated(what, err)
		}
		return b, nil
	}
	for {
		at := s.pos
		count, err := s.readLong()
		if err != nil {
			return nil, truncated("metadata block count", err)
		}
		if count == 0 {
			break
		}
		if count < 0 {
			// A negative count is followed by the block's size in bytes.
			if count = -count; count < 0 {
				return nil, headerErr(name, at, ErrBadHeader, nil, "metadata block count overflows")
			}
			sat := s.pos
			size, err := s.readLong()
			if err != nil {
				return nil, truncated("metadata block size", err)
			}
			if size < 0 {
				return nil, headerErr(name, sat, ErrBadHeader, nil, "negative metadata block size %d", size)
			}
		}
		// Each entry takes at least two bytes, so count is also bounded by
		// the byte limit that readBytes enforces; no allocation depends on it.
		if count > int64(lim.MaxHeaderEntries-len(h.Meta)) {
			return nil, headerErr(name, at, ErrLimit, nil, "metadata block of %d entries takes the header past the limit of %d entries (Limits.MaxHeaderEntries)", count, lim.MaxHeaderEntries)
		}
		for i := int64(0); i < count; i++ {
			kat := s.pos
			k, err := readBytes("metadata key", lim.MaxAlloc, "Limits.MaxAlloc")
			if err != nil {
				return nil, err
			}
			vmax, vwhat := lim.MaxAlloc, "metadata value"
			if string(k) == MetaSchema {
				vmax, vwhat = lim.MaxSchemaSize, MetaSchema
			}
			v, err := readBytes(vwhat, vmax, "Limits.MaxSchemaSize")
			if err != nil {
				return nil, err
			}
			key := string(k)
			if _, dup := h.Meta[key]; dup {
				return nil, headerErr(name, kat, ErrBadHeader, nil, "duplicate metadata key %q", key)
			}
			h.Meta[key] = v
		}
	}
	if err := s.readFull(h.Sync[:]); err != nil {
		return nil, truncated("sync marker", err)
	}
	h.Size = s.pos
	schema, ok := h.Meta[MetaSchema]
	if !ok {
		return nil, headerErr(name, h.Size, ErrBadHeader, nil, "no %s in the metadata", MetaSchema)
	}
	h.Schema = string(bytes.TrimSpace(schema))
	h.Codec = "null"
	if c, ok := h.Meta[MetaCodec]; ok && len(c) > 0 {
		h.Codec = string(c)
	}
	return h, nil
}
