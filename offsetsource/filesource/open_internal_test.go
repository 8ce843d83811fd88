package filesource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"cloud.google.com/go/storage"
)

// TestNotExistGCS: the watch knows Beam's gcs filesystem's "not there" (the
// storage client's ErrObjectNotExist, returned as it is) by its text, so
// that this package links no Cloud Storage client; the text is the
// client's.
func TestNotExistGCS(t *testing.T) {
	if got := storage.ErrObjectNotExist.Error(); got != gcsNotExist {
		t.Fatalf("storage.ErrObjectNotExist says %q, gcsNotExist %q", got, gcsNotExist)
	}
	for _, err := range []error{storage.ErrObjectNotExist, fmt.Errorf("size of gs://b/x: %w", storage.ErrObjectNotExist)} {
		if !notExist(err) {
			t.Errorf("notExist(%v) = false", err)
		}
	}
	if notExist(errors.New("permission denied")) || notExist(nil) {
		t.Error("notExist is true for another error or nil")
	}
}

// TestChunkedReader reads a "file" through ranged reads of growing size,
// with the size known and unknown, and checks the requests it made.
func TestChunkedReader(t *testing.T) {
	data := make([]byte, 3*maxChunk+12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, known := range []bool{true, false} {
		for _, from := range []int64{0, 1000, int64(len(data)) - 10, int64(len(data))} {
			var reqs [][2]int64
			size := int64(len(data))
			if !known {
				size = -1
			}
			r := &chunkedReader{off: from, size: size, chunk: firstChunk, read: func(off, n int64) (io.ReadCloser, error) {
				reqs = append(reqs, [2]int64{off, n})
				end := min(off+n, int64(len(data)))
				return io.NopCloser(bytes.NewReader(data[min(off, end):end])), nil
			}}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[from:]) {
				t.Fatalf("known size %v, from %d: read %d bytes, want %d", known, from, len(got), len(data)-int(from))
			}
			next, chunk := from, int64(firstChunk)
			for i, q := range reqs {
				if q[0] != next || (q[1] != chunk && !(known && q[0]+q[1] == int64(len(data)))) {
					t.Fatalf("known size %v, from %d: request %d is %v, want [%d, +%d)", known, from, i, q, next, chunk)
				}
				next, chunk = q[0]+q[1], min(2*chunk, maxChunk)
			}
			if known && next != int64(len(data)) && from != int64(len(data)) {
				t.Errorf("known size: requests end at %d, want the file's end %d", next, len(data))
			}
			r.Close()
		}
	}
	// An error from a range read names the range.
	r := &chunkedReader{size: -1, chunk: firstChunk, read: func(off, n int64) (io.ReadCloser, error) {
		return nil, errors.New("boom")
	}}
	if _, err := r.Read(make([]byte, 10)); err == nil || !strings.Contains(err.Error(), "from byte 0: boom") {
		t.Errorf("error %v, want one naming the range", err)
	}
}
