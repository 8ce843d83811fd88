package container

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileHeader is a header whose metadata has n distinct tiny entries,
// in one block of n entries (blocks == 1) or n blocks of one.
func hostileHeader(n int, oneBlock bool) []byte {
	b := append([]byte(nil), Magic[:]...)
	b = appendLong(b, 1)
	b = appendBytes(b, []byte(MetaSchema))
	b = appendBytes(b, []byte(`"long"`))
	if oneBlock {
		b = appendLong(b, int64(n))
	}
	for i := 0; i < n; i++ {
		if !oneBlock {
			b = appendLong(b, 1)
		}
		b = appendBytes(b, fmt.Appendf(nil, "k%d", i))
		b = appendBytes(b, nil)
	}
	b = appendLong(b, 0)
	return append(b, testSync[:]...)
}

// TestHostileHeaders: headers that cost far more to parse than their size
// (millions of tiny entries, a huge schema) are refused early, with memory
// bounded well under their size.
func TestHostileHeaders(t *testing.T) {
	bigSchema := `{"type":"record","name":"R","fields":[` + strings.Repeat(`{"name":"f","type":"long"},`, 80_000) + `{"name":"g","type":"long"}]}`
	cases := []struct {
		name  string
		file  []byte
		bound uint64
	}{
		{"100k entries in one block", hostileHeader(100_000, true), 1 * mib},
		{"100k blocks of one entry", hostileHeader(100_000, false), 1 * mib},
		{"schema of 2 MB", headerBytes(bigSchema, "null", nil), 1 * mib},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("header of %d bytes", len(c.file))
			var err error
			start := time.Now()
			alloc := allocDuring(func() { _, err = ReadHeader("h.avro", bytes.NewReader(c.file), Limits{}) })
			checkErr(t, err, ErrLimit, "h.avro")
			if alloc > c.bound {
				t.Fatalf("allocated %d bytes refusing the header, want at most %d: %v", alloc, c.bound, err)
			}
			t.Logf("%d bytes allocated in %v: %v", alloc, time.Since(start), err)
		})
	}
	// Within the limits such headers read fine.
	if h, err := ReadHeader("ok.avro", bytes.NewReader(hostileHeader(1000, false)), Limits{}); err != nil || len(h.Meta) != 1001 {
		t.Fatalf("1000 entries: %v", err)
	}
	if _, err := ReadHeader("ok.avro", bytes.NewReader(hostileHeader(3000, true)), Limits{MaxHeaderEntries: 4000}); err != nil {
		t.Fatalf("3000 entries, MaxHeaderEntries 4000: %v", err)
	}
	if _, err := ReadHeader("ok.avro", bytes.NewReader(headerBytes(bigSchema, "null", nil)), Limits{MaxSchemaSize: 4 * mib}); err != nil {
		t.Fatalf("2 MB schema, MaxSchemaSize 4 MiB: %v", err)
	}
}

// countingOpener counts the opens of a file held in memory, by offset.
type countingOpener struct {
	mu    sync.Mutex
	b     []byte
	opens map[int64]int
}

func (o *countingOpener) open(off int64) (io.ReadCloser, error) {
	o.mu.Lock()
	o.opens[off]++
	b := o.b
	o.mu.Unlock()
	return bytesOpener(b)(off)
}

func (o *countingOpener) at(off int64) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opens[off]
}

// readVia reads every record of the blocks from start on, through c.
func readVia(t *testing.T, c *HeaderCache, v FileVersion, open Opener, start int64) []int64 {
	t.Helper()
	br, err := c.Open(v, open, start, Limits{})
	if err != nil {
		t.Fatalf("open at %d: %v", start, err)
	}
	r, err := NewReader[int64](br, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []int64
	for {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read from %d: %v", start, err)
		}
		out = append(out, rec)
	}
}

func longs(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

// TestHeaderCache: the ranges of one file parse its header once, read the
// same records as without the cache, and open the file where their blocks
// are, not at 0.
func TestHeaderCache(t *testing.T) {
	file := writeFile(t, `"long"`, "null", longs(0, 100), 10)
	h, blocks, _ := blocksOfBytes(t, file)
	o := &countingOpener{b: file, opens: map[int64]int{}}
	c := NewHeaderCache(10, 1<<20)
	v := FileVersion{Name: "f.avro", Size: int64(len(file))}
	for i, b := range blocks {
		got := readVia(t, c, v, o.open, b.off)
		if want := longs(10*i, 100-10*i); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("from block %d: %v, want %v", i, got, want)
		}
	}
	if c.parses != 1 || o.at(0) != 1 {
		t.Fatalf("%d parses, %d opens at 0 for %d ranges; want 1 and 1", c.parses, o.at(0), len(blocks))
	}
	if n := o.at(h.Size - SyncSize); n != len(blocks)-1 {
		t.Fatalf("%d opens at the header's sync marker, want %d", n, len(blocks)-1)
	}

	// Concurrent opens of one version parse the header once.
	c2 := NewHeaderCache(10, 1<<20)
	var wg sync.WaitGroup
	var recs atomic.Int64
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs.Add(int64(len(readVia(t, c2, v, o.open, blocks[i%len(blocks)].off))))
		}()
	}
	wg.Wait()
	if c2.parses != 1 {
		t.Fatalf("8 concurrent opens parsed the header %d times", c2.parses)
	}

	// The file replaced under the same version (a header of the same size
	// but another sync marker): the stale header is noticed and the file read anew.
	other := bytes.ReplaceAll(writeFile(t, `"long"`, "null", []int64{7, 8, 9}, 1), testSync[:], []byte("0123456789abcdef"))
	o.mu.Lock()
	o.b = other
	o.mu.Unlock()
	if got := readVia(t, c, v, o.open, 0); fmt.Sprint(got) != "[7 8 9]" {
		t.Fatalf("replaced file read %v", got)
	}
	if c.parses != 2 {
		t.Fatalf("replaced file: %d parses, want 2", c.parses)
	}

	// A cached header larger than a reader's limits is refused for it.
	bigMeta := headerBytes(`"long"`, "null", map[string][]byte{"big": make([]byte, 200<<10)})
	bigFile := appendRawBlock(bigMeta, 1, []byte{2})
	bv := FileVersion{Name: "big.avro", Size: int64(len(bigFile))}
	if _, err := c.Open(bv, bytesOpener(bigFile), 0, Limits{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Open(bv, bytesOpener(bigFile), 0, Limits{MaxAlloc: 100 << 10})
	checkErr(t, err, ErrLimit, "big.avro")

	// Bounds: entries and bytes.
	small := NewHeaderCache(2, 1<<20)
	for i := 0; i < 3; i++ {
		readVia(t, small, FileVersion{Name: fmt.Sprint("f", i), Size: int64(len(file))}, o.open, 0)
	}
	if small.Len() != 2 {
		t.Fatalf("cache of 2 holds %d", small.Len())
	}
	tiny := NewHeaderCache(10, 1000)
	if _, err := tiny.Open(bv, bytesOpener(bigFile), 0, Limits{}); err != nil || tiny.Len() != 0 {
		t.Fatalf("a header over the byte bound was kept (%d) or failed: %v", tiny.Len(), err)
	}
}
