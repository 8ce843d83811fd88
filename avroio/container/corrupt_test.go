package container

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// checkErr asserts that err is an *Error of the kind, naming the file and a
// byte offset, and returns it.
func checkErr(t *testing.T, err error, kind error, name string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", kind)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("error %q is not %v", err, kind)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %q is not a *container.Error", err)
	}
	if e.File != name || !strings.Contains(err.Error(), name) {
		t.Fatalf("error %q does not name the file %s", err, name)
	}
	if e.Offset < 0 || !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", e.Offset)) {
		t.Fatalf("error %q does not say at which byte", err)
	}
	return e
}

func readPeer(t *testing.T, key string) ([]byte, *Header, []blockSpan) {
	t.Helper()
	ps := peerFiles(t)
	b, err := os.ReadFile(ps.files[key])
	if err != nil {
		t.Fatal(err)
	}
	h, spans, _ := blocksOf(t, ps.files[key])
	return b, h, spans
}

func TestBadMagic(t *testing.T) {
	b, _, _ := readPeer(t, "py-null")
	b[0] = 'X'
	_, err := drain[map[string]any](b, "bad-magic.avro", 0, Options{})
	e := checkErr(t, err, ErrBadMagic, "bad-magic.avro")
	if e.Offset != 0 || !strings.Contains(err.Error(), `"Xbj\x01"`) {
		t.Fatalf("bad magic error: %v", err)
	}
	// A file that is not Avro at all, and an empty one.
	_, err = drain[map[string]any]([]byte("PAR1...."), "parquet.avro", 0, Options{})
	checkErr(t, err, ErrBadMagic, "parquet.avro")
	_, err = drain[map[string]any](nil, "empty.avro", 0, Options{})
	checkErr(t, err, ErrTruncated, "empty.avro")
}

// TestTruncatedHeader cuts a real header at every byte.
func TestTruncatedHeader(t *testing.T) {
	b, h, _ := readPeer(t, "c-deflate")
	for cut := int64(1); cut < h.Size; cut++ {
		_, err := drain[map[string]any](b[:cut], "cut.avro", 0, Options{})
		e := checkErr(t, err, ErrTruncated, "cut.avro")
		if e.Offset > cut {
			t.Fatalf("cut at %d: error at byte %d", cut, e.Offset)
		}
	}
}

func TestSyncMismatch(t *testing.T) {
	for _, key := range []string{"py-null", "py-snappy", "c-lzma"} {
		t.Run(key, func(t *testing.T) {
			b, _, spans := readPeer(t, key)
			k := 5
			b[spans[k].off-3] ^= 0x40 // inside the marker that ends block k-1
			n, err := drain[map[string]any](b, key, 0, Options{})
			e := checkErr(t, err, ErrSyncMismatch, key)
			if e.Offset != spans[k].off-SyncSize || e.Block != spans[k-1].off {
				t.Fatalf("sync mismatch at byte %d in block %d, want %d in %d: %v", e.Offset, e.Block, spans[k].off-SyncSize, spans[k-1].off, err)
			}
			// Every record before the bad block was read; none of it.
			if n != spans[k-1].first {
				t.Fatalf("%d records before the error, want %d", n, spans[k-1].first)
			}
		})
	}
}

// TestBlockShorterThanDeclared cuts the last block of real files inside
// its data and inside its sync marker.
func TestBlockShorterThanDeclared(t *testing.T) {
	for _, key := range []string{"py-null", "py-deflate", "c-snappy", "py-xz"} {
		t.Run(key, func(t *testing.T) {
			b, _, spans := readPeer(t, key)
			// Read from the block before the last (from 0 is the same
			// framing, through every block).
			last, prev := spans[len(spans)-1], spans[len(spans)-2]
			for _, cut := range []int64{last.off + 5, last.off + last.size/2, last.off + last.size - SyncSize, last.off + last.size - 1} {
				n, err := drain[map[string]any](b[:cut], key, prev.off, Options{})
				e := checkErr(t, err, ErrTruncated, key)
				if e.Block != last.off || e.Offset > cut || n != last.first-prev.first {
					t.Fatalf("cut at %d: %v (block %d, %d records read)", cut, err, e.Block, n)
				}
				if cut < last.off+last.size-SyncSize && !strings.Contains(err.Error(), "declares") {
					t.Fatalf("cut at %d: error does not say what the block declared: %v", cut, err)
				}
			}
		})
	}
}

// setCount rewrites the record count of the block at off, keeping the
// varint's length.
func setCount(t *testing.T, b []byte, off int64, delta int64) {
	t.Helper()
	v, n := uvarintLong(b[off:])
	if n <= 0 {
		t.Fatalf("no count at %d", off)
	}
	nb := appendLong(nil, v+delta)
	if len(nb) != n {
		t.Skipf("count %d+%d changes the varint's length", v, delta)
	}
	copy(b[off:], nb)
}

func TestRecordCountMismatch(t *testing.T) {
	for _, key := range []string{"py-null", "c-deflate", "py-zstandard"} {
		for _, delta := range []int64{+1, -1, +5} {
			for _, mode := range []ValidateMode{ValidateAuto, ValidateAlways} {
				t.Run(fmt.Sprintf("%s/%+d/validate=%d", key, delta, mode), func(t *testing.T) {
					b, _, spans := readPeer(t, key)
					k := 7
					setCount(t, b, spans[k].off, delta)
					n, err := drain[allRec](b, key, 0, Options{Validate: mode, ReaderSchema: nil})
					if strings.HasPrefix(key, "c-") {
						// Avro C's schema lacks the logical types allRec uses.
						n, err = drain[map[string]any](b, key, 0, Options{Validate: mode})
					}
					e := checkErr(t, err, ErrRecordCount, key)
					if e.Block != spans[k].off {
						t.Fatalf("error in block %d, want %d: %v", e.Block, spans[k].off, err)
					}
					if mode == ValidateAuto && delta < 0 {
						// Decoding stops at the declared count: all but the
						// last record of the block came out before the error.
						if n != spans[k].first+int(spans[k].records)-2 {
							t.Fatalf("%d records before the error", n)
						}
					} else if n > spans[k].first+int(spans[k].records) {
						t.Fatalf("%d records before the error", n)
					}
				})
			}
		}
	}
}

func TestChecksumMismatch(t *testing.T) {
	t.Run("snappy CRC32", func(t *testing.T) {
		for _, key := range []string{"py-snappy", "c-snappy"} {
			b, _, spans := readPeer(t, key)
			k := 3
			b[spans[k].off+spans[k].size-SyncSize-1] ^= 1 // last byte of the CRC
			n, err := drain[map[string]any](b, key, 0, Options{})
			e := checkErr(t, err, ErrChecksum, key)
			if e.Block != spans[k].off || n != spans[k].first || !strings.Contains(err.Error(), "CRC32") {
				t.Fatalf("%v (%d records before)", err, n)
			}
		}
	})
	t.Run("xz header CRC32", func(t *testing.T) {
		b, _, spans := readPeer(t, "py-xz")
		k := 3
		// The block's data follows its count and size varints.
		_, n1 := uvarintLong(b[spans[k].off:])
		_, n2 := uvarintLong(b[spans[k].off+int64(n1):])
		dataAt := spans[k].off + int64(n1+n2)
		if !bytes.Equal(b[dataAt:dataAt+6], xzMagic) {
			t.Fatalf("no xz stream at %d", dataAt)
		}
		b[dataAt+9] ^= 1
		_, err := drain[map[string]any](b, "py-xz", 0, Options{})
		checkErr(t, err, ErrChecksum, "py-xz")
	})
	t.Run("xz block check", func(t *testing.T) {
		b, _, spans := readPeer(t, "py-xz")
		k := 4
		// The block's CRC64 sits just before the xz index: 8 bytes, then
		// the index (0x00 ...), then the 12-byte footer ending the data.
		end := spans[k].off + spans[k].size - SyncSize
		footer := b[end-12 : end]
		if !bytes.Equal(footer[10:], []byte("YZ")) {
			t.Fatalf("no xz footer before byte %d", end)
		}
		backward := (int64(footer[4]) | int64(footer[5])<<8 | int64(footer[6])<<16 | int64(footer[7])<<24 + 1) * 4
		checkAt := end - 12 - backward - 8
		b[checkAt] ^= 0x80
		_, err := drain[map[string]any](b, "py-xz", 0, Options{})
		e := checkErr(t, err, ErrChecksum, "py-xz")
		if e.Block != spans[k].off {
			t.Fatalf("%v", err)
		}
	})
	t.Run("bzip2 block CRC", func(t *testing.T) {
		b, _, spans := readPeer(t, "py-bzip2")
		k := 2
		_, n1 := uvarintLong(b[spans[k].off:])
		_, n2 := uvarintLong(b[spans[k].off+int64(n1):])
		dataAt := spans[k].off + int64(n1+n2)
		if string(b[dataAt:dataAt+3]) != "BZh" {
			t.Fatalf("no bzip2 stream at %d", dataAt)
		}
		b[dataAt+4+6+2] ^= 1 // the stored CRC of the first bzip2 block
		_, err := drain[map[string]any](b, "py-bzip2", 0, Options{})
		checkErr(t, err, ErrChecksum, "py-bzip2")
	})
}

func TestCorruptCompressedData(t *testing.T) {
	for _, key := range []string{"py-deflate", "py-zstandard", "c-lzma", "py-bzip2", "py-xz", "c-snappy"} {
		b, _, spans := readPeer(t, key)
		k := 6
		mid := spans[k].off + spans[k].size/2
		for i := mid; i < mid+8; i++ {
			b[i] ^= 0x5a
		}
		// Zstandard frames as python writes them carry no checksum: the
		// damage shows only when datums stop making sense. Validating the
		// block first keeps every record of the bad block from coming out.
		n, err := drain[map[string]any](b, key, 0, Options{Validate: ValidateAlways})
		if err == nil {
			t.Fatalf("%s: corrupt block read without error", key)
		}
		var e *Error
		if !errors.As(err, &e) || e.Block != spans[k].off || e.File != key || n > spans[k].first {
			t.Fatalf("%s: %v (%d records before)", key, err, n)
		}
	}
}

func TestUnknownCodec(t *testing.T) {
	b, h, _ := readPeer(t, "py-snappy")
	i := bytes.Index(b[:h.Size], []byte("\x0csnappy"))
	if i < 0 {
		t.Fatal("no codec in the header")
	}
	copy(b[i+1:], "snippy")
	_, err := drain[map[string]any](b, "odd.avro", 0, Options{})
	checkErr(t, err, ErrUnknownCodec, "odd.avro")
	if !strings.Contains(err.Error(), `"snippy"`) {
		t.Fatalf("error does not name the codec: %v", err)
	}
}

func TestBadHeaders(t *testing.T) {
	schema := `"long"`
	cases := map[string][]byte{
		"no schema": func() []byte {
			b := append([]byte(nil), Magic[:]...)
			b = appendLong(b, 1)
			b = appendBytes(b, []byte("avro.codec"))
			b = appendBytes(b, []byte("null"))
			b = appendLong(b, 0)
			return append(b, testSync[:]...)
		}(),
		"duplicate key": func() []byte {
			b := append([]byte(nil), Magic[:]...)
			b = appendLong(b, 2)
			b = appendBytes(b, []byte("avro.schema"))
			b = appendBytes(b, []byte(schema))
			b = appendBytes(b, []byte("avro.schema"))
			b = appendBytes(b, []byte(schema))
			b = appendLong(b, 0)
			return append(b, testSync[:]...)
		}(),
		"negative length": func() []byte {
			b := append([]byte(nil), Magic[:]...)
			b = appendLong(b, 1)
			b = appendLong(b, -5)
			return b
		}(),
		"varint overflow": append(append([]byte(nil), Magic[:]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
	}
	for name, b := range cases {
		_, err := drain[map[string]any](b, name, 0, Options{})
		checkErr(t, err, ErrBadHeader, name)
	}
	// An unparsable schema.
	b := appendBlock(t, headerBytes(`{"type":"nope"}`, "null", nil), "null", 1, []byte{2})
	_, err := drain[map[string]any](b, "schema.avro", 0, Options{})
	checkErr(t, err, ErrSchema, "schema.avro")
	// A negative record count and a negative block size.
	b = headerBytes(schema, "null", nil)
	_, err = drain[int64](appendLong(append([]byte(nil), b...), -3), "neg-count.avro", 0, Options{})
	checkErr(t, err, ErrBadBlock, "neg-count.avro")
	_, err = drain[int64](appendLong(appendLong(append([]byte(nil), b...), 3), -3), "neg-size.avro", 0, Options{})
	checkErr(t, err, ErrBadBlock, "neg-size.avro")
	// Zero records with bytes.
	_, err = drain[int64](appendBlock(t, append([]byte(nil), b...), "null", 0, []byte{2, 4}), "zero.avro", 0, Options{})
	checkErr(t, err, ErrRecordCount, "zero.avro")
	// Zero records and no bytes is a well-formed (if odd) block: skipped.
	ok := appendBlock(t, appendBlock(t, append([]byte(nil), b...), "null", 0, nil), "null", 2, []byte{2, 4})
	if n, err := drain[int64](ok, "ok.avro", 0, Options{}); err != nil || n != 2 {
		t.Fatalf("empty block then 2 records: %d, %v", n, err)
	}
}
