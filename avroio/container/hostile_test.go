package container

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/flate"
)

// allocDuring reports the bytes allocated while f ran.
func allocDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// appendRawBlock appends a block whose data is given as stored.
func appendRawBlock(b []byte, count int64, stored []byte) []byte {
	b = appendLong(b, count)
	b = appendLong(b, int64(len(stored)))
	b = append(b, stored...)
	return append(b, testSync[:]...)
}

const (
	mib = 1 << 20
	// baseline is what opening and reading a tiny file may allocate: the
	// stream's read-ahead buffer, the schema, the decoder.
	baseline = 1 * mib
)

// TestHostileLengths feeds files whose length fields claim far more than the
// file holds, and checks the kind of error and that allocation stayed
// bounded: under a small baseline when the claim is refused before any
// allocation, under the configured limit (plus the baseline) otherwise.
func TestHostileLengths(t *testing.T) {
	hdr := func(schema, codec string) []byte { return headerBytes(schema, codec, nil) }
	strRec := func(claim int64) []byte { return append(appendLong(nil, claim), "abc"...) }
	small := Limits{MaxAlloc: 1 * mib}
	deflateBomb := func() []byte {
		var buf bytes.Buffer
		w, _ := flate.NewWriter(&buf, flate.BestSpeed)
		w.Write(make([]byte, 8*mib))
		w.Close()
		return buf.Bytes()
	}()
	snappyBomb := func() []byte {
		b := binary.AppendUvarint(nil, 1<<31) // decoded length
		b = append(b, 0x00, 'x')
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(nil))
	}()
	zstdBomb := func() []byte {
		b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0} // magic; 8-byte content size, single segment
		b = binary.LittleEndian.AppendUint64(b, 1<<40)
		return append(b, 0x01, 0x00, 0x00) // a raw, last block of 0 bytes
	}()
	lzmaBomb := func() []byte {
		var b []byte
		for i := 0; i < 40; i++ { // 40 LZMA chunks of 2 MiB output, 1 byte input each
			b = append(b, 0xe0|0x1f, 0xff, 0xff, 0x00, 0x00, 0x5d, 0x00)
		}
		return append(b, 0x00)
	}()
	cases := []struct {
		name  string
		file  []byte
		opts  Options
		kind  error
		bound uint64 // allocation allowed beyond baseline
	}{
		{"block of 2^60 bytes", appendLong(appendLong(hdr(`"long"`, "null"), 1), 1<<60), Options{}, ErrLimit, 0},
		{"block of 60 MiB in a tiny file", append(appendLong(appendLong(hdr(`"long"`, "null"), 1), 60*mib), 2, 4, 6), Options{}, ErrTruncated, 0},
		{"block of 2^60 records", appendRawBlock(hdr(`"long"`, "null"), 1<<60, []byte{2, 4, 6}), Options{}, ErrRecordCount, 0},
		{"2^60 zero-width records", appendRawBlock(hdr(`"null"`, "null"), 1<<60, nil), Options{}, ErrLimit, 0},
		{"string of 2^40 bytes", appendRawBlock(hdr(`"string"`, "null"), 1, strRec(1<<40)), Options{}, ErrLimit, 0},
		{"string of 2^40 bytes, validated", appendRawBlock(hdr(`"string"`, "null"), 1, strRec(1<<40)), Options{Validate: ValidateAlways}, ErrRecordCount, 0},
		{"string of 48 MiB, 1 MiB limit", appendRawBlock(hdr(`"string"`, "null"), 1, strRec(48*mib)), Options{Limits: small}, ErrLimit, 0},
		{"string of 48 MiB under the default limit", appendRawBlock(hdr(`"string"`, "null"), 1, strRec(48*mib)), Options{}, ErrRecordCount, DefaultMaxAlloc},
		{"string of 48 MiB, validated", appendRawBlock(hdr(`"string"`, "null"), 1, strRec(48*mib)), Options{Validate: ValidateAlways}, ErrRecordCount, 0},
		{"array of 2^40 longs", appendRawBlock(hdr(`{"type":"array","items":"long"}`, "null"), 1, append(appendLong(nil, 1<<40), 2, 0)), Options{}, ErrLimit, 0},
		{"array of 2^22 longs in 3 bytes", appendRawBlock(hdr(`{"type":"array","items":"long"}`, "null"), 1, append(appendLong(nil, 1<<22), 2, 0)), Options{}, ErrLimit, 0},
		{"array of 2^20 longs in 3 bytes", appendRawBlock(hdr(`{"type":"array","items":"long"}`, "null"), 1, append(appendLong(nil, 1<<20), 2, 0)), Options{}, ErrRecordCount, DefaultMaxAlloc},
		{"array of 2^20 longs, validated", appendRawBlock(hdr(`{"type":"array","items":"long"}`, "null"), 1, append(appendLong(nil, 1<<20), 2, 0)), Options{Validate: ValidateAlways}, ErrRecordCount, 0},
		{"array of 2^50 nulls", appendRawBlock(hdr(`{"type":"array","items":"null"}`, "null"), 1, append(appendLong(nil, 1<<50), 0)), Options{}, ErrLimit, 0},
		{"map of 2^40 entries", appendRawBlock(hdr(`{"type":"map","values":"long"}`, "null"), 1, append(appendLong(nil, 1<<40), 2, 'k', 2, 0)), Options{}, ErrRecordCount, 0},
		{"metadata value of 2^40 bytes", appendLong(appendBytes(appendLong(append([]byte(nil), Magic[:]...), 1), []byte("k")), 1<<40), Options{}, ErrLimit, 0},
		{"metadata of 2^62 entries", appendLong(append([]byte(nil), Magic[:]...), 1<<62), Options{}, ErrLimit, 0},
		{"deflate bomb, 1 MiB limit", appendRawBlock(hdr(`"long"`, "deflate"), 1, deflateBomb), Options{Limits: small}, ErrLimit, 3 * mib},
		{"snappy claiming 2 GiB", appendRawBlock(hdr(`"long"`, "snappy"), 1, snappyBomb), Options{}, ErrLimit, 0},
		{"zstandard frame of 2^40 bytes", appendRawBlock(hdr(`"long"`, "zstandard"), 1, zstdBomb), Options{}, ErrLimit, 0},
		{"lzma chunks of 80 MiB", appendRawBlock(hdr(`"long"`, "lzma"), 1, lzmaBomb), Options{}, ErrLimit, 0},
		{"fixed of 2^40 bytes", appendRawBlock(hdr(`{"type":"fixed","name":"F","size":1099511627776}`, "null"), 1, []byte{1}), Options{}, ErrLimit, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			alloc := allocDuring(func() { _, err = drain[any](c.file, c.name, 0, c.opts) })
			checkErr(t, err, c.kind, c.name)
			if alloc > baseline+c.bound {
				t.Fatalf("allocated %d bytes, want at most %d: %v", alloc, baseline+c.bound, err)
			}
			t.Logf("%d bytes allocated: %v", alloc, err)
		})
	}
}

// TestDeepRecursion: a recursive schema with data nested far deeper than any
// real record is an error, not a stack overflow.
func TestDeepRecursion(t *testing.T) {
	schema := `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`
	data := append(bytes.Repeat([]byte{2}, 1_000_000), 0)
	file := appendRawBlock(headerBytes(schema, "null", nil), 1, data)
	_, err := drain[map[string]any](file, "deep.avro", 0, Options{})
	checkErr(t, err, ErrLimit, "deep.avro")
	if !strings.Contains(err.Error(), "deeper than the limit of 1000 levels (Limits.MaxDepth") {
		t.Fatalf("%v", err)
	}
	// Moderate nesting reads fine.
	ok := appendRawBlock(headerBytes(schema, "null", nil), 1, append(bytes.Repeat([]byte{2}, 50), 0))
	if n, err := drain[map[string]any](ok, "ok.avro", 0, Options{}); err != nil || n != 1 {
		t.Fatalf("50 levels: %d, %v", n, err)
	}
	// The limit is named and can be raised: 1500 levels of records (each
	// in a union, which adds no level) fail by default and read with a
	// MaxDepth of 1500, for structs and generic values alike.
	type node struct {
		Next *node `avro:"next"`
	}
	deep := appendRawBlock(headerBytes(schema, "null", nil), 1, append(bytes.Repeat([]byte{2}, 1499), 0))
	if _, err := drain[node](deep, "1500.avro", 0, Options{}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "limit of 1000 levels") {
		t.Fatalf("1500 levels by default: %v", err)
	}
	if n, err := drain[node](deep, "1500.avro", 0, Options{Limits: Limits{MaxDepth: 1500}}); err != nil || n != 1 {
		t.Fatalf("1500 levels, MaxDepth 1500: %d, %v", n, err)
	}
	if n, err := drain[map[string]any](deep, "1500.avro", 0, Options{Limits: Limits{MaxDepth: 1500}}); err != nil || n != 1 {
		t.Fatalf("1500 levels generic, MaxDepth 1500: %d, %v", n, err)
	}
	if _, err := drain[node](deep, "1500.avro", 0, Options{Limits: Limits{MaxDepth: 1499}}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "limit of 1499 levels") {
		t.Fatalf("1500 levels, MaxDepth 1499: %v", err)
	}
	// A schema that nests deeper than the limit is refused when opened.
	nested := `"long"`
	for i := range 30 {
		nested = fmt.Sprintf(`{"type":"record","name":"N%d","fields":[{"name":"a","type":%s}]}`, i, nested)
	}
	_, err = drain[map[string]any](appendRawBlock(headerBytes(nested, "null", nil), 1, []byte{2}), "nested.avro", 0, Options{Limits: Limits{MaxDepth: 20}})
	if h := checkErr(t, err, ErrLimit, "nested.avro"); h.Block != -1 || !strings.Contains(err.Error(), "30 levels deep, over the limit of 20") {
		t.Fatalf("a schema 30 records deep, MaxDepth 20: %v", err)
	}
	// A schema whose records contain themselves unconditionally is refused.
	inf := appendRawBlock(headerBytes(`{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"r","type":"R"}]}`, "null", nil), 1, []byte{2})
	_, err = drain[map[string]any](inf, "inf.avro", 0, Options{})
	checkErr(t, err, ErrSchema, "inf.avro")
}

// TestSkippedCollectionsAreValidated: hamba/avro skips writer fields that the
// Go type leaves out with loops that do not stop at the end of the data, so a
// hostile item count in a skipped array would spin for 2^60 rounds. The
// reader sees those decoders and validates such blocks first.
func TestSkippedCollectionsAreValidated(t *testing.T) {
	schema := `{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"xs","type":{"type":"array","items":"string"}},{"name":"m","type":{"type":"map","values":"long"}}]}`
	type onlyA struct {
		A int64 `avro:"a"`
	}
	type full struct {
		A  int64            `avro:"a"`
		Xs []string         `avro:"xs"`
		M  map[string]int64 `avro:"m"`
	}
	// a=1, xs claims 2^60 strings, then nothing.
	hostile := appendRawBlock(headerBytes(schema, "null", nil), 1, append([]byte{2}, appendLong(nil, 1<<60)...))
	done := make(chan error, 1)
	go func() { _, err := drain[onlyA](hostile, "skip.avro", 0, Options{}); done <- err }()
	select {
	case err := <-done:
		checkErr(t, err, ErrRecordCount, "skip.avro")
	case <-time.After(10 * time.Second):
		t.Fatal("reading a skipped array with a hostile count did not stop")
	}
	// Through a reader schema that drops the array too.
	rs := avro.MustParse(`{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`)
	_, err := drain[map[string]any](hostile, "skip2.avro", 0, Options{ReaderSchema: rs})
	checkErr(t, err, ErrRecordCount, "skip2.avro")

	// The detection itself: skipping decoders are seen, full ones are not.
	good := writeFile(t, schema, "null", []full{{A: 1, Xs: []string{"x"}, M: map[string]int64{"k": 2}}}, 1)
	for _, c := range []struct {
		valid bool
		open  func() (bool, error)
	}{
		{true, func() (bool, error) {
			r, err := OpenReader[onlyA]("g", bytesOpener(good), 0, Options{})
			return r != nil && r.valid, err
		}},
		{false, func() (bool, error) {
			r, err := OpenReader[full]("g", bytesOpener(good), 0, Options{})
			return r != nil && r.valid, err
		}},
		{false, func() (bool, error) {
			r, err := OpenReader[map[string]any]("g", bytesOpener(good), 0, Options{})
			return r != nil && r.valid, err
		}},
		{false, func() (bool, error) {
			r, err := OpenReader[full]("g", bytesOpener(good), 0, Options{Validate: ValidateNever})
			return r != nil && r.valid, err
		}},
	} {
		valid, err := c.open()
		if err != nil || valid != c.valid {
			t.Fatalf("validation %v (err %v), want %v", valid, err, c.valid)
		}
	}
}

type stuckReader struct{}

func (stuckReader) Read([]byte) (int, error) { return 0, nil }

// TestDecoderWithoutProgress: a decompressor that returns nothing forever
// (compress/bzip2 can, on corrupt input) ends in an error.
func TestDecoderWithoutProgress(t *testing.T) {
	if _, err := readLimited(nil, stuckReader{}, 1<<20); err != io.ErrNoProgress {
		t.Fatalf("readLimited on a stuck reader: %v", err)
	}
}
