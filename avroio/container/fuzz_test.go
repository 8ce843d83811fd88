package container

import (
	"bytes"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

func seedFiles(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("testdata/seed/*.avro")
	if err != nil || len(paths) < 10 {
		t.Fatalf("seed files: %v, %v", paths, err)
	}
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// TestSeedFiles reads the committed peer-written files record by record.
func TestSeedFiles(t *testing.T) {
	for name, b := range seedFiles(t) {
		var opts Options
		if strings.HasPrefix(name, "c-") {
			opts.ReaderSchema = avro.MustParse(allSchema)
		}
		r, err := OpenReader[allRec](name, bytesOpener(b), 0, opts)
		if err != nil {
			t.Fatal(err)
		}
		i, blocks := 0, 0
		for ; ; i++ {
			rec, _, sp, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s record %d: %v", name, i, err)
			}
			if sp {
				blocks++
			}
			if !equalAll(rec, expectedAll(i)) {
				t.Fatalf("%s record %d: %+v", name, i, rec)
			}
		}
		if i != 12 || blocks < 4 {
			t.Fatalf("%s: %d records in %d blocks", name, i, blocks)
		}
	}
}

// heapAllocs is the bytes allocated on the heap so far. It reads
// runtime/metrics, which does not stop the world (ReadMemStats does, and
// on every input it made the fuzzer crawl).
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// fuzzRecords is how many records each read of a fuzz input decodes: enough
// to cross a few blocks, few enough that an input costs microseconds.
const fuzzRecords = 64

// FuzzBlockReader feeds arbitrary bytes and start offsets to the block
// reader and the datum decoder (generic and typed). Nothing may panic, and
// allocation must stay proportional to the input: hostile lengths are
// refused against Limits before memory is taken for them.
//
//	go test ./avroio/container -run '^$' -fuzz FuzzBlockReader -fuzztime 60s
func FuzzBlockReader(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b, uint16(0))
		f.Add(b, uint16(len(b)/2))
	}
	f.Add(writeFile(f, benchSchema, "snappy", []benchRec{makeBenchRec(1), makeBenchRec(2), makeBenchRec(3)}, 2), uint16(70))
	f.Add(writeFile(f, `{"type":"array","items":"null"}`, "deflate", [][]any{{nil, nil}, {}}, 1), uint16(0))
	// 4 MiB lets bzip2's largest block size (900k, 3.6 MB of decoder) in.
	lim := Limits{MaxAlloc: 4 << 20}
	f.Fuzz(func(t *testing.T, data []byte, start uint16) {
		before := heapAllocs()
		streams := fuzzRead[map[string]any](t, data, int64(start), Options{Limits: lim})
		streams += fuzzRead[allRec](t, data, 0, Options{Limits: lim, Validate: ValidateAlways})
		streams += fuzzRead[benchRec](t, data, int64(start), Options{Limits: lim})
		// Allocation may follow the input's size, and each bzip2 block
		// costs its decoder's fixed tables (twice for a block decoded
		// twice); nothing may follow a length field.
		bound := uint64(24<<20 + 2048*len(data) + 8<<20*streams)
		if alloc := heapAllocs() - before; alloc > bound {
			t.Fatalf("allocated %d bytes for %d bytes of input (%d bzip2 blocks)", alloc, len(data), streams)
		}
	})
}

// FuzzHeader feeds arbitrary bytes to the header parser, directly and
// through a HeaderCache. Nothing may panic; errors are *Error; memory stays
// within a small multiple of MaxAlloc whatever the header claims; a header
// that parses is written back (appendHeader) and parses to the same thing.
//
//	go test ./avroio/container -run '^$' -fuzz FuzzHeader -fuzztime 60s
func FuzzHeader(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b[:min(len(b), 4096)])
	}
	f.Add(headerBytes(`"long"`, "null", map[string][]byte{"a": []byte("1"), "b": nil}))
	f.Add(hostileHeader(40, false))
	f.Add(hostileHeader(40, true))
	lim := Limits{MaxAlloc: 64 << 10, MaxHeaderEntries: 32, MaxSchemaSize: 16 << 10}
	cache := NewHeaderCache(4, 1<<20)
	f.Fuzz(func(t *testing.T, data []byte) {
		before := heapAllocs()
		h, err := ReadHeader("fuzz", bytes.NewReader(data), lim)
		// Parsing a schema allocates a few hundred bytes per byte of schema
		// text in all (its peak is far lower), and MaxSchemaSize bounds that
		// text; nothing may follow a length field.
		if alloc := heapAllocs() - before; alloc > uint64(4*lim.MaxAlloc+256<<10+512*int64(len(data))) {
			t.Fatalf("parsing a header of %d bytes allocated %d bytes", len(data), alloc)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if h.Size > int64(len(data)) || h.Size < int64(len(Magic)+1+SyncSize) || len(h.Meta) > lim.MaxHeaderEntries {
			t.Fatalf("header of %d bytes, %d entries, from %d bytes of input", h.Size, len(h.Meta), len(data))
		}
		user := map[string][]byte{}
		for k, v := range h.Meta {
			if k != MetaSchema && k != MetaCodec {
				user[k] = v
			}
		}
		codec := h.Codec
		if _, ok := h.Meta[MetaCodec]; !ok {
			codec = ""
		}
		again, err := ReadHeader("again", bytes.NewReader(appendHeader(nil, string(h.Meta[MetaSchema]), codec, user, h.Sync)), Limits{})
		if err != nil {
			t.Fatalf("the header written back does not parse: %v", err)
		}
		want := len(h.Meta)
		if codec == "" {
			want++ // written back as an empty avro.codec
		}
		if again.Schema != h.Schema || again.Codec != h.Codec || again.Sync != h.Sync || len(again.Meta) != want {
			t.Fatalf("written back: %+v, want %+v", again, h)
		}
		for k, v := range user {
			if !bytes.Equal(again.Meta[k], v) {
				t.Fatalf("metadata %q written back as %q, want %q", k, again.Meta[k], v)
			}
		}
		// Through the cache: the same header, for every start offset.
		// (A FileVersion identifies the content: each input is its own.)
		sum := sha256.Sum256(data)
		v := FileVersion{Name: "fuzz", Size: int64(len(data)), Version: string(sum[:])}
		for _, start := range []int64{0, h.Size, int64(len(data))} {
			br, err := cache.Open(v, bytesOpener(data), start, lim)
			if err != nil {
				if _, ok := err.(*Error); !ok {
					t.Fatalf("error of type %T: %v", err, err)
				}
				continue
			}
			if got := br.Header(); got.Size != h.Size || got.Sync != h.Sync || got.Schema != h.Schema {
				t.Fatalf("cached header %+v, parsed %+v", got, h)
			}
			br.Close()
		}
	})
}

// fuzzRead reads up to fuzzRecords records and checks the iteration's
// shape. It returns how many bzip2 blocks it decoded (at most).
func fuzzRead[T any](t *testing.T, data []byte, start int64, opts Options) (bzip2Blocks int) {
	r, err := OpenReader[T]("fuzz", bytesOpener(data), start, opts)
	if err != nil {
		if _, ok := err.(*Error); !ok {
			t.Fatalf("error of type %T: %v", err, err)
		}
		return 0
	}
	defer r.Close()
	defer func() {
		if r.Header().Codec == "bzip2" {
			bzip2Blocks = int(r.blocks.inflated)
		}
	}()
	last := int64(-1)
	for i := 0; i < fuzzRecords; i++ {
		_, off, sp, err := r.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		switch {
		case i == 0 && !sp:
			t.Fatalf("first record is not a split point")
		case off < start:
			t.Fatalf("record of block %d read from start %d", off, start)
		case sp && off <= last:
			t.Fatalf("split point %d after %d", off, last)
		case !sp && off != last:
			t.Fatalf("record of block %d inside block %d", off, last)
		}
		last = off
		if size, n := r.BlockInfo(); size <= 0 || n <= 0 {
			t.Fatalf("BlockInfo() = %d, %d", size, n)
		}
	}
	return
}
