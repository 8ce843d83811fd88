package container

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"io"
	"slices"

	"github.com/ulikunitz/xz/lzma"
)

// An LZMA decoder allocates its dictionary before decoding anything, and the
// xz container names a dictionary size the writer chose (8 MiB by default).
// So both codecs first walk the data's structure (xz block headers, LZMA2
// chunk headers) without decompressing, which gives the exact uncompressed
// size, refuse anything over the limit, and then decode with a dictionary no
// larger than the output: back-references never reach before the output's
// first byte, so that is always enough.

const lzma2MinDict = 4096 // lzma.MinDictCap

// scanLZMA2 walks LZMA2 chunks starting at b[0] and returns the number of
// bytes they occupy (through the end marker) and the uncompressed size.
func scanLZMA2(b []byte) (n int, unpacked int64, err error) {
	for {
		if n >= len(b) {
			return n, unpacked, errors.New("LZMA2 data ends without its end marker")
		}
		c := b[n]
		switch {
		case c == 0x00:
			return n + 1, unpacked, nil
		case c == 0x01 || c == 0x02: // uncompressed chunk
			if n+3 > len(b) {
				return n, unpacked, errors.New("truncated LZMA2 chunk header")
			}
			size := int(binary.BigEndian.Uint16(b[n+1:])) + 1
			unpacked += int64(size)
			n += 3 + size
		case c >= 0x80: // LZMA chunk
			hdr := 5
			if c >= 0xc0 {
				hdr = 6 // new properties byte
			}
			if n+hdr > len(b) {
				return n, unpacked, errors.New("truncated LZMA2 chunk header")
			}
			u := int64(c&0x1f)<<16 | int64(binary.BigEndian.Uint16(b[n+1:]))
			p := int(binary.BigEndian.Uint16(b[n+3:])) + 1
			unpacked += u + 1
			n += hdr + p
		default:
			return n, unpacked, fmt.Errorf("invalid LZMA2 control byte 0x%02x", c)
		}
		if n > len(b) {
			return n, unpacked, errors.New("LZMA2 chunk runs past the end of the block")
		}
	}
}

// lzmaCodec reads Avro C's "lzma" codec: a raw LZMA2 stream (preset 6).
type lzmaCodec struct{}

func (lzmaCodec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	n, unpacked, err := scanLZMA2(src)
	if err != nil {
		return dst[:0], corrupt("lzma", err)
	}
	if n != len(src) {
		return dst[:0], corrupt(fmt.Sprintf("lzma: %d bytes after the end of the LZMA2 stream", len(src)-n), nil)
	}
	if unpacked > int64(limit) {
		return dst[:0], limitErr(limit)
	}
	// Back-references cannot reach further than the output produced, so a
	// dictionary of the output's size always suffices, whatever the writer used.
	r, err := lzma.Reader2Config{DictCap: max(int(unpacked), lzma2MinDict)}.NewReader2(bytes.NewReader(src))
	if err != nil {
		return dst[:0], corrupt("lzma", err)
	}
	out, err := readLimited(dst, r, int(unpacked))
	if err != nil {
		return out, corrupt("lzma", err)
	}
	return out, nil
}

// xzCodec reads Java's "xz" codec: an xz stream (LZMA2 blocks with a check).
// It parses the xz container itself and decodes each block's LZMA2 data with
// a dictionary no larger than that block's output, so memory follows the data
// and not the dictionary size the writer chose (8 MiB by default).
type xzCodec struct{}

var xzMagic = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}

// readVLI reads an xz variable-length integer.
func readVLI(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 9; i++ {
		v |= uint64(b[i]&0x7f) << (7 * uint(i))
		if b[i] < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("bad variable-length integer")
}

var crc64Table = crc64.MakeTable(crc64.ECMA)

// xzCheck computes check type t over data, as xz stores it.
func xzCheck(t byte, data []byte) ([]byte, error) {
	switch t {
	case 0x00:
		return nil, nil
	case 0x01:
		return binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(data)), nil
	case 0x04:
		return binary.LittleEndian.AppendUint64(nil, crc64.Checksum(data, crc64Table)), nil
	case 0x0a:
		sum := sha256.Sum256(data)
		return sum[:], nil
	}
	return nil, fmt.Errorf("unsupported xz check type 0x%02x", t)
}

func xzCheckSize(t byte) int {
	switch t {
	case 0x00:
		return 0
	case 0x01:
		return 4
	case 0x04:
		return 8
	case 0x0a:
		return 32
	}
	return -1
}

func (xzCodec) Decompress(dst, src []byte, limit int) ([]byte, error) {
	bad := func(format string, args ...any) ([]byte, error) {
		return dst[:0], corrupt("xz: "+fmt.Sprintf(format, args...), nil)
	}
	b := src
	if len(b) < 12 || !bytes.Equal(b[:6], xzMagic) {
		return bad("no xz stream header")
	}
	if crc32.ChecksumIEEE(b[6:8]) != binary.LittleEndian.Uint32(b[8:12]) {
		return dst[:0], &codecError{kind: ErrChecksum, msg: "xz stream header CRC32"}
	}
	if b[6] != 0 || b[7]&0xf0 != 0 {
		return bad("reserved stream flags set")
	}
	checkType := b[7]
	checkSize := xzCheckSize(checkType)
	if checkSize < 0 {
		return bad("unsupported check type 0x%02x", checkType)
	}
	out := dst[:0]
	p := 12
	for {
		if p >= len(b) {
			return bad("stream ends before its index")
		}
		if b[p] == 0 { // index indicator: no more blocks
			return out, nil
		}
		start := p
		hsize := (int(b[p]) + 1) * 4
		if p+hsize > len(b) {
			return bad("truncated block header")
		}
		h := b[p : p+hsize]
		if crc32.ChecksumIEEE(h[:hsize-4]) != binary.LittleEndian.Uint32(h[hsize-4:]) {
			return out, &codecError{kind: ErrChecksum, msg: "xz block header CRC32"}
		}
		flags, q := h[1], 2
		if flags&0x3c != 0 {
			return bad("reserved block flags set")
		}
		var compSize, uncompSize int64 = -1, -1
		for _, f := range []struct {
			bit byte
			v   *int64
		}{{0x40, &compSize}, {0x80, &uncompSize}} {
			if flags&f.bit != 0 {
				v, n, err := readVLI(h[q : hsize-4])
				if err != nil {
					return bad("block header: %v", err)
				}
				*f.v, q = int64(min(v, 1<<62)), q+n
			}
		}
		if flags&0x03 != 0 {
			return bad("filter chains other than a single LZMA2 filter are not supported")
		}
		id, n, err := readVLI(h[q : hsize-4])
		if err != nil {
			return bad("filter flags: %v", err)
		}
		q += n
		psize, n, err := readVLI(h[q : hsize-4])
		if err != nil {
			return bad("filter flags: %v", err)
		}
		q += n
		if id != 0x21 || psize != 1 || q >= hsize-4 {
			return bad("filter 0x%x is not supported (only LZMA2)", id)
		}
		dict, err := lzma.DecodeDictCap(h[q])
		if err != nil {
			return bad("LZMA2 dictionary size: %v", err)
		}
		p += hsize
		n, unpacked, err := scanLZMA2(b[p:])
		if err != nil {
			return bad("%v", err)
		}
		if compSize >= 0 && compSize != int64(n) {
			return bad("block header says %d compressed bytes, the LZMA2 data has %d", compSize, n)
		}
		if uncompSize >= 0 && uncompSize != unpacked {
			return bad("block header says %d uncompressed bytes, the LZMA2 data has %d", uncompSize, unpacked)
		}
		if unpacked > int64(limit-len(out)) {
			return out, limitErr(limit)
		}
		// Back-references cannot reach further than this block's output.
		dc := max(int(min(dict, unpacked)), lzma2MinDict)
		r, err := lzma.Reader2Config{DictCap: dc}.NewReader2(bytes.NewReader(b[p : p+n]))
		if err != nil {
			return bad("%v", err)
		}
		blockStart := len(out)
		out = slices.Grow(out, int(unpacked))
		out = out[:blockStart+int(unpacked)]
		if _, err := io.ReadFull(r, out[blockStart:]); err != nil {
			return out[:blockStart], corrupt("xz: LZMA2 data", err)
		}
		p += n
		for (p-start)%4 != 0 { // block padding
			if p >= len(b) || b[p] != 0 {
				return bad("bad block padding")
			}
			p++
		}
		if p+checkSize > len(b) {
			return bad("truncated block check")
		}
		want, err := xzCheck(checkType, out[blockStart:])
		if err != nil {
			return bad("%v", err)
		}
		if !bytes.Equal(want, b[p:p+checkSize]) {
			return out, &codecError{kind: ErrChecksum, msg: fmt.Sprintf("xz block check (type 0x%02x) %x, data gives %x", checkType, b[p:p+checkSize], want)}
		}
		p += checkSize
	}
}
