package container

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

const bytesSchema = `{"type":"record","name":"B","fields":[{"name":"b","type":"bytes"}]}`

type bytesRec struct {
	B []byte `avro:"b"`
}

// readBytesRecs reads every record of a file of bytesSchema with limits.
func readBytesRecs(t *testing.T, file []byte, lim Limits) ([]bytesRec, error) {
	t.Helper()
	r, err := OpenReader[bytesRec]("mem", bytesOpener(file), 0, Options{Limits: lim})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []bytesRec
	for {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}

// TestWriterMaxBlockSize: a record that would take a block past
// MaxBlockSize ends the block before it, so that a reader whose MaxAlloc is
// that size reads every block; a record larger than it alone is refused
// naming it, and the Writer goes on; a sync interval above it is refused.
func TestWriterMaxBlockSize(t *testing.T) {
	const max = 1000
	var buf bytes.Buffer
	w, err := NewWriter(&buf, bytesSchema, WriterOptions{SyncInterval: max, MaxBlockSize: max})
	if err != nil {
		t.Fatal(err)
	}
	var want []bytesRec
	for i := range 20 {
		rec := bytesRec{bytes.Repeat([]byte{byte(i)}, 300)}
		if err := w.Append(rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
		if i == 9 {
			err := w.Append(bytesRec{make([]byte, max)})
			if err == nil || !strings.Contains(err.Error(), "record 10 serializes to 1002 bytes") || !strings.Contains(err.Error(), "MaxBlockSize 1000") {
				t.Fatalf("Append of a record of 1002 bytes = %v, want it refused naming record 10, its size and the bound", err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, spans, _ := blocksOfBytes(t, buf.Bytes())
	for i, s := range spans {
		if s.records != 3 && i != len(spans)-1 {
			t.Fatalf("block %d holds %d records of 302 bytes, want 3 (a fourth would take it past 1000 bytes)", i, s.records)
		}
	}
	got, err := readBytesRecs(t, buf.Bytes(), Limits{MaxAlloc: max})
	if err != nil {
		t.Fatalf("reading with MaxAlloc %d: %v", max, err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].B, want[i].B) {
			t.Fatalf("record %d differs", i)
		}
	}

	if _, err := NewWriter(io.Discard, bytesSchema, WriterOptions{SyncInterval: 2000, MaxBlockSize: 1000}); err == nil || !strings.Contains(err.Error(), "sync interval 2000 is above MaxBlockSize 1000") {
		t.Fatalf("a sync interval above MaxBlockSize: %v", err)
	}
	if _, err := NewWriter(io.Discard, bytesSchema, WriterOptions{MaxBlockSize: -1}); err == nil || !strings.Contains(err.Error(), "negative MaxBlockSize") {
		t.Fatalf("a negative MaxBlockSize: %v", err)
	}
}

// TestWriterDefaultsReadByDefaults: what a Writer with default options
// writes, a reader with default Limits reads: a record of 30 MiB is
// written and read back (one of 60 MiB makes a block a reader reads, but
// its bytes value costs twice its size, copied out of the block and, in
// a pipeline, encoded: over the limit); one of 100 MB, which no default
// reader reads, is refused when it is appended, not found when the file
// is read.
func TestWriterDefaultsReadByDefaults(t *testing.T) {
	for _, codec := range []string{"null", "deflate"} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, bytesSchema, WriterOptions{Codec: codec})
		if err != nil {
			t.Fatal(err)
		}
		small := bytesRec{[]byte("a")}
		big := bytesRec{bytes.Repeat([]byte("0123456789abcdef"), 30<<20/16)}
		huge := bytesRec{make([]byte, 100_000_000)}
		for _, rec := range []bytesRec{small, big, small} {
			if err := w.Append(rec); err != nil {
				t.Fatalf("%s: %v", codec, err)
			}
		}
		if err := w.Append(huge); err == nil || !strings.Contains(err.Error(), "record 3 serializes to 100000004 bytes") {
			t.Fatalf("%s: Append of a 100 MB record = %v, want it refused naming its size", codec, err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := readBytesRecs(t, buf.Bytes(), Limits{})
		if err != nil {
			t.Fatalf("%s: reading with default limits: %v", codec, err)
		}
		if len(got) != 3 || len(got[1].B) != len(big.B) {
			t.Fatalf("%s: read %d records, want 3 with the 30 MiB one second", codec, len(got))
		}
	}
}
