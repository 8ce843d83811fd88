package container

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
)

// A minimal container writer for crafting test files (hostile lengths,
// benchmarks). Production writing belongs to the Write transform.

func appendLong(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

func appendBytes(b, v []byte) []byte {
	return append(appendLong(b, int64(len(v))), v...)
}

var testSync = [SyncSize]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}

// headerBytes builds a header with the schema, codec and extra metadata.
func headerBytes(schema, codec string, meta map[string][]byte) []byte {
	b := append([]byte(nil), Magic[:]...)
	n := int64(2 + len(meta))
	b = appendLong(b, n)
	b = appendBytes(b, []byte(MetaSchema))
	b = appendBytes(b, []byte(schema))
	b = appendBytes(b, []byte(MetaCodec))
	b = appendBytes(b, []byte(codec))
	for k, v := range meta {
		b = appendBytes(b, []byte(k))
		b = appendBytes(b, v)
	}
	b = appendLong(b, 0)
	return append(b, testSync[:]...)
}

func compress(t testing.TB, codec string, data []byte) []byte {
	t.Helper()
	switch codec {
	case "null":
		return data
	case "deflate":
		var buf bytes.Buffer
		w, err := flate.NewWriter(&buf, flate.BestSpeed)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
		w.Close()
		return buf.Bytes()
	case "snappy":
		out := snappy.Encode(nil, data)
		return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(data))
	}
	t.Fatalf("test writer has no codec %q", codec)
	return nil
}

// appendBlock appends a block of count records whose serialized data is data.
func appendBlock(t testing.TB, b []byte, codec string, count int64, data []byte) []byte {
	c := compress(t, codec, data)
	b = appendLong(b, count)
	b = appendLong(b, int64(len(c)))
	b = append(b, c...)
	return append(b, testSync[:]...)
}

// writeFile encodes recs with schema into blocks of perBlock records.
func writeFile[T any](t testing.TB, schema, codec string, recs []T, perBlock int) []byte {
	t.Helper()
	s := avro.MustParse(schema)
	b := headerBytes(schema, codec, nil)
	var data []byte
	var w bytes.Buffer
	enc := avro.NewEncoderForSchema(s, &w)
	for i := 0; i < len(recs); i += perBlock {
		j := min(i+perBlock, len(recs))
		w.Reset()
		for _, r := range recs[i:j] {
			if err := enc.Encode(r); err != nil {
				t.Fatal(err)
			}
		}
		data = append(data[:0], w.Bytes()...)
		b = appendBlock(t, b, codec, int64(j-i), data)
	}
	return b
}

// bytesOpener serves a file held in memory.
func bytesOpener(b []byte) Opener {
	return ReaderAtOpener(bytes.NewReader(b), int64(len(b)))
}

// drain reads every record of the file in b, returning how many came before
// the first error (nil at a clean end).
func drain[T any](b []byte, name string, start int64, opts Options) (int, error) {
	r, err := OpenReader[T](name, bytesOpener(b), start, opts)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	for {
		_, _, _, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}
