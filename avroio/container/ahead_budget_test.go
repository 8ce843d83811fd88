package container

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// Decode-ahead is bounded by bytes, not records (issue 29, item 1).

// boolArraysFile writes blocks records of a long and an array of items
// booleans, perBlock records a block (a block's data is about
// perBlock*items bytes).
func boolArraysFile(t testing.TB, blocks, perBlock, items int) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, `{"type":"record","name":"r","fields":[{"name":"i","type":"long"},{"name":"bits","type":{"type":"array","items":"boolean"}}]}`,
		WriterOptions{Codec: "snappy", SyncInterval: perBlock * items, MaxBlockSize: DefaultMaxAlloc})
	if err != nil {
		t.Fatal(err)
	}
	bits := make([]bool, items)
	for i := range bits {
		bits[i] = i%3 == 0
	}
	for i := range blocks * perBlock {
		if err := w.Append(map[string]any{"i": int64(i), "bits": bits}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bools.avro")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// aheadPeak reads path as map[string]any with DecodeAhead, dropping every
// record, and returns the peak of the live heap above what it was before,
// sampled every `every` records, and the reader's peak of estimated bytes
// held ahead (0 where the reader does not count them).
func aheadPeak(t *testing.T, path string, maxAlloc int64, n, every int) (heap, held int64) {
	t.Helper()
	base := liveHeap()
	r, err := OpenReader[map[string]any](path, FileOpener(path), 0, Options{DecodeAhead: true, Limits: Limits{MaxAlloc: maxAlloc}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	k := 0
	for {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec["i"] != int64(k) {
			t.Fatalf("record %d is %v", k, rec["i"])
		}
		k++
		if k%every == 0 {
			heap = max(heap, liveHeap()-base)
		}
	}
	if k != n {
		t.Fatalf("read %d records, want %d", k, n)
	}
	return heap, r.ahead.peak.Load()
}

// TestDecodeAheadBoundedByBytes: records of 1,000 booleans, 950 a block
// (0.95 MB blocks), read as map[string]any with a MaxAlloc of 16 MiB: each
// decodes into about 16 KB (a []any of 1,000), so a chunk of one block's
// records is 15 MB, and decode-ahead held up to 1,024 records a chunk in
// three chunks (65-75 MiB of live heap above the base, measured). Now it
// holds at most aheadBudget (MaxAlloc/4, 4 MiB here) of estimated bytes plus a record,
// and the live heap above the base stays under that plus the block
// buffers (the compressed and decompressed block being decoded, twice)
// and 8 MiB of slack. SDFIO_AHEAD_ITEMS, SDFIO_AHEAD_BLOCKS and
// SDFIO_AHEAD_MAXALLOC change the shape (4,000, 6 and 67108864 for
// issue 29's 3.8 MB blocks at the default MaxAlloc).
func TestDecodeAheadBoundedByBytes(t *testing.T) {
	items, blocks, maxAlloc := 1000, 3, int64(16<<20)
	if v, err := strconv.Atoi(os.Getenv("SDFIO_AHEAD_ITEMS")); err == nil {
		items = v
	}
	if v, err := strconv.Atoi(os.Getenv("SDFIO_AHEAD_BLOCKS")); err == nil {
		blocks = v
	}
	if v, err := strconv.ParseInt(os.Getenv("SDFIO_AHEAD_MAXALLOC"), 10, 64); err == nil {
		maxAlloc = v
	}
	const perBlock = 950
	path := boolArraysFile(t, blocks, perBlock, items)
	heap, held := aheadPeak(t, path, maxAlloc, blocks*perBlock, 100)
	budget := aheadBudget(maxAlloc)
	perRecord := int64(items) * (genericListItem + encCost) // the estimate of a []any of items
	t.Logf("%d blocks of %d records of %d booleans, MaxAlloc %d: peak live heap %.1f MiB above the base, peak held ahead (estimated) %.1f MiB, budget %.1f MiB",
		blocks, perBlock, items, maxAlloc, float64(heap)/(1<<20), float64(held)/(1<<20), float64(budget)/(1<<20))
	if held < budget || held > budget+2*perRecord+4096 {
		t.Errorf("decode-ahead held up to %d estimated bytes, want the budget %d plus at most a record", held, budget)
	}
	blockBytes := int64(perBlock * items)
	if limit := budget + 2*perRecord + 4*blockBytes + 8<<20; heap > limit {
		t.Errorf("the live heap grew by up to %d bytes during the read, want at most %d (the budget, a record, the block's buffers and 8 MiB)", heap, limit)
	}
}
