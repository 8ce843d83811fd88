package container

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// aheadStep is what one Next call returned, with the reader's BlockInfo and
// BytesRead right after it.
type aheadStep struct {
	rec          any
	off          int64
	sp           bool
	err          string
	size, count  int64
	bytes        int64
	errAfterStop string // the error a further Next returns
}

// readSteps reads path from start with or without DecodeAhead into steps,
// ending with the step of io.EOF or of the first error.
func readSteps(t *testing.T, path string, start int64, ahead bool) []aheadStep {
	t.Helper()
	typ := reflect.TypeFor[map[string]any]()
	r, err := OpenReaderOf(path, FileOpener(path), start, typ, Options{DecodeAhead: ahead})
	if err != nil {
		t.Fatalf("open %s at %d: %v", path, start, err)
	}
	defer r.Close()
	if (r.ahead != nil) != ahead {
		t.Fatalf("DecodeAhead %v but ahead set %v", ahead, r.ahead != nil)
	}
	steps := []aheadStep{{bytes: r.BytesRead()}}
	for {
		rec, off, sp, err := r.Next()
		s := aheadStep{rec: rec, off: off, sp: sp}
		s.size, s.count = r.BlockInfo()
		s.bytes = r.BytesRead()
		if err != nil {
			s.err = err.Error()
			_, _, _, err2 := r.Next()
			if err2 == nil {
				t.Fatalf("%s: Next after %v succeeded", path, err)
			}
			s.errAfterStop = err2.Error()
			return append(steps, s)
		}
		steps = append(steps, s)
	}
}

func compareSteps(t *testing.T, what string, want, got []aheadStep) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d steps with DecodeAhead, %d without (last: %+v vs %+v)", what, len(got), len(want), got[len(got)-1], want[len(want)-1])
	}
	for i := range want {
		if !reflect.DeepEqual(want[i], got[i]) {
			t.Fatalf("%s: step %d differs:\nwithout: %+v\nwith:    %+v", what, i, want[i], got[i])
		}
	}
}

// bigBlocksFile writes n records in blocks of about blockBytes serialized
// bytes, so blocks hold more than aheadChunk records when blockBytes is large.
func bigBlocksFile(t testing.TB, codec string, n, blockBytes int) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, `{"type":"record","name":"r","fields":[{"name":"i","type":"long"},{"name":"s","type":"string"}]}`,
		WriterOptions{Codec: codec, SyncInterval: blockBytes})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Append(map[string]any{"i": int64(i), "s": fmt.Sprint("v", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("big-%s-%d.avro", codec, blockBytes))
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// committedFiles are the committed test files DecodeAhead is checked on:
// avroio's events-* (every codec, 3 records a block) and one of the trips
// files (200 records a block, deflate). trips-2 and trips-3 are the same
// records and blocks in snappy and null, codecs the events files have.
func committedFiles(t *testing.T) []string {
	files, err := filepath.Glob("../testdata/events-*.avro")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../testdata/avro/trips-1.avro")
	if len(files) < 7 {
		t.Fatalf("found %d committed test files: %v", len(files), files)
	}
	return files
}

// TestDecodeAheadSameOutput: with DecodeAhead, Next returns the same
// records, offsets, split points, block info, byte counts and final EOF as
// without, on every committed test file and on files whose blocks hold more
// records than one chunk, from every block's offset and from just past it.
func TestDecodeAheadSameOutput(t *testing.T) {
	files := committedFiles(t)
	files = append(files,
		bigBlocksFile(t, "null", 10000, 64000),
		bigBlocksFile(t, "deflate", 10000, 1<<20),
		bigBlocksFile(t, "zstandard", 400, 100))
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			sameOutputFrom(t, path)
		})
	}
}

// sameOutputFrom is TestDecodeAheadSameOutput on one file.
func sameOutputFrom(t *testing.T, path string) {
	_, spans, size := blocksOf(t, path)
	starts := []int64{0, size}
	// Every block of small files; of large ones the first and last
	// few and others evenly spaced (reading from every block of a
	// file of many is quadratic, and no start is special beyond
	// these).
	step := max(1, len(spans)/6)
	for i, s := range spans {
		if i < 2 || i >= len(spans)-2 || i%step == 0 {
			starts = append(starts, s.off, s.off+1)
		}
	}
	records := 0
	for _, start := range starts {
		want := readSteps(t, path, start, false)
		got := readSteps(t, path, start, true)
		compareSteps(t, fmt.Sprintf("%s from %d", path, start), want, got)
		if last := want[len(want)-1]; last.err != io.EOF.Error() {
			t.Fatalf("%s from %d ends with %q, want EOF", path, start, last.err)
		}
		if start == 0 {
			records = len(want) - 2
		}
	}
	if records == 0 {
		t.Fatalf("%s: no records read", path)
	}
	t.Logf("%s: %d records, %d blocks, %d starts", filepath.Base(path), records, len(spans), len(starts))
}

// TestDecodeAheadErrorPosition: on a file with one byte damaged (every byte
// of small files, in turn), Next with DecodeAhead returns the same records
// and then the same error at the same position as without it.
func TestDecodeAheadErrorPosition(t *testing.T) {
	cases := []string{"../testdata/events-null.avro", "../testdata/events-deflate.avro", "../testdata/events-snappy.avro"}
	dir := t.TempDir()
	for _, src := range cases {
		orig, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		h, _, _ := blocksOf(t, src)
		failures, damaged := 0, 0
		// Every byte of the first blocks, every fourth after them.
		for pos := int(h.Size); pos < len(orig); pos++ {
			if pos > int(h.Size)+300 && pos%4 != 0 {
				continue
			}
			damaged++
			b := bytes.Clone(orig)
			b[pos] ^= 0x5a
			path := filepath.Join(dir, filepath.Base(src))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			want := readSteps(t, path, 0, false)
			got := readSteps(t, path, 0, true)
			compareSteps(t, fmt.Sprintf("%s with byte %d damaged", src, pos), want, got)
			if want[len(want)-1].err != io.EOF.Error() {
				failures++
			}
		}
		// Truncated at every block boundary and inside.
		for n := int(h.Size); n < len(orig); n += 7 {
			path := filepath.Join(dir, "trunc-"+filepath.Base(src))
			if err := os.WriteFile(path, orig[:n], 0o644); err != nil {
				t.Fatal(err)
			}
			compareSteps(t, fmt.Sprintf("%s cut to %d bytes", src, n), readSteps(t, path, 0, false), readSteps(t, path, 0, true))
		}
		if failures < damaged/4 {
			t.Fatalf("%s: only %d of %d damaged bytes made the read fail", src, failures, damaged)
		}
		t.Logf("%s: %d of %d damaged bytes fail the read", src, failures, damaged)
	}
}

// TestDecodeAheadErrorMidBigBlock: an error in a later block of a big file
// comes after every record before it, even when the goroutine found it
// chunks ahead of the caller.
func TestDecodeAheadErrorMidBigBlock(t *testing.T) {
	path := bigBlocksFile(t, "null", 20000, 64000)
	_, spans, _ := blocksOf(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := spans[len(spans)/2]
	// Damage the sync marker after the block: the error follows its records.
	b[bad.off+bad.size-1] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	want := readSteps(t, path, 0, false)
	got := readSteps(t, path, 0, true)
	compareSteps(t, "damaged sync marker", want, got)
	if n := len(want) - 2; n != bad.first {
		t.Fatalf("read %d records before the error, want %d (the records before the bad block)", n, bad.first)
	}
}

// TestDecodeAheadCloseStopsGoroutine: closing a reader mid-file, before or
// after its first Next, leaves no goroutine behind, and Next after Close
// fails.
func TestDecodeAheadCloseStopsGoroutine(t *testing.T) {
	path := bigBlocksFile(t, "deflate", 20000, 4000)
	settle := func(want int) int {
		var n int
		for range 200 {
			runtime.GC()
			if n = runtime.NumGoroutine(); n <= want {
				return n
			}
			time.Sleep(5 * time.Millisecond)
		}
		return n
	}
	base := settle(runtime.NumGoroutine())
	for i := range 50 {
		r, err := OpenReader[map[string]any](path, FileOpener(path), 0, Options{DecodeAhead: true})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < i*37; j++ {
			if _, _, _, err := r.Next(); err != nil {
				t.Fatalf("record %d: %v", j, err)
			}
		}
		if i > 0 && runtime.NumGoroutine() <= base {
			t.Fatalf("no goroutine decodes ahead after %d records", i*37)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := r.Next(); err == nil {
			t.Fatal("Next after Close succeeded")
		}
		if err := r.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
	if n := settle(base); n > base {
		t.Fatalf("%d goroutines after closing 50 readers, %d before", n, base)
	}
}
