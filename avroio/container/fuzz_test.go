package container

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
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
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		streams := fuzzRead[map[string]any](t, data, 0, Options{Limits: lim})
		streams += fuzzRead[map[string]any](t, data, int64(start), Options{Limits: lim})
		streams += fuzzRead[allRec](t, data, int64(start), Options{Limits: lim, Validate: ValidateAlways})
		streams += fuzzRead[benchRec](t, data, 0, Options{Limits: lim})
		runtime.ReadMemStats(&after)
		// Allocation may follow the input's size, and each bzip2 block
		// costs its decoder's fixed tables; nothing may follow a length field.
		bound := uint64(32<<20 + 2048*len(data) + 4<<20*streams)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > bound {
			t.Fatalf("allocated %d bytes for %d bytes of input (%d bzip2 blocks)", alloc, len(data), streams)
		}
	})
}

// fuzzRead reads up to 10000 records and checks the iteration's shape. It
// returns how many bzip2 blocks it decoded (at most).
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
	for i := 0; i < 10000; i++ {
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
