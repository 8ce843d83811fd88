package container

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"
)

// heapPeak runs f, sampling the live heap, and returns its peak above
// the heap before f.
func heapPeak(f func()) uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	base := s[0].Value.Uint64()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Add(1)
	go func() {
		defer wg.Done()
		ss := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(ss)
			peak = max(peak, ss[0].Value.Uint64())
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

func deflated(t *testing.T, data []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, 9)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// collection is one array or map datum of n items of encoded zero bytes
// each (false, or a map entry of an empty key and a null).
func collection(n int) []byte {
	b := binary.AppendVarint(nil, int64(n))
	b = append(b, make([]byte, n)...)
	return append(b, 0)
}

// TestDecodedSizeBounded: MaxAlloc bounds what a record decodes into, not
// only the block's bytes. A 6 KB deflate block of 7 M booleans (16 bytes
// each in a []any) or of a 2 M-entry map of nulls (a Go map entry each)
// took gigabytes at full scale (60 M booleans: 2.77 GB); 40 fixed of 60
// MB took 1.3 GB. Each is refused (ErrLimit, naming the record, the field
// and the limit: the collections as their count is read, before any item
// is decoded) with the heap's peak within about MaxAlloc of where it was;
// a million booleans into a []bool, a byte each, read.
func TestDecodedSizeBounded(t *testing.T) {
	const limit = 8 << 20
	opts := Options{Limits: Limits{MaxAlloc: limit}}
	bools := appendRawBlock(headerBytes(`{"type":"record","name":"B","fields":[{"name":"b","type":{"type":"array","items":"boolean"}}]}`, "deflate", nil), 1, deflated(t, collection(7_000_000)))
	nulls := appendRawBlock(headerBytes(`{"type":"record","name":"M","fields":[{"name":"m","type":{"type":"map","values":"null"}}]}`, "deflate", nil), 1, deflated(t, collection(2_000_000)))
	var fs []string
	for i := range 40 {
		fs = append(fs, fmt.Sprintf(`{"name":"f%d","type":{"type":"fixed","name":"F%d","size":60000000}}`, i, i))
	}
	fixed := appendRawBlock(headerBytes(`{"type":"record","name":"X","fields":[`+strings.Join(fs, ",")+`]}`, "deflate", nil), 1, deflated(t, make([]byte, 10)))
	type boolsT struct {
		B []bool `avro:"b"`
	}
	type nullsT struct {
		M map[string]*int `avro:"m"`
	}
	for _, c := range []struct {
		name string
		read func() (int, error)
		want string // "" for a read of the one record
	}{
		{"booleans as generic values", func() (int, error) { return drain[map[string]any](bools, "bools.avro", 0, opts) }, `field "b": the value at data byte 0 takes the record to about`},
		{"booleans as []bool", func() (int, error) { return drain[boolsT](bools, "bools.avro", 0, opts) }, `field "b": the value at data byte 0 takes the record to about 21000024 bytes decoded`},
		{"a million booleans as []bool", func() (int, error) {
			return drain[boolsT](appendRawBlock(headerBytes(`{"type":"record","name":"B","fields":[{"name":"b","type":{"type":"array","items":"boolean"}}]}`, "deflate", nil), 1, deflated(t, collection(1_000_000))), "1m.avro", 0, opts)
		}, ""},
		{"a map of nulls as generic values", func() (int, error) { return drain[map[string]any](nulls, "nulls.avro", 0, opts) }, `field "m": the value at data byte 0 takes the record to about`},
		{"a map of nulls into a struct", func() (int, error) { return drain[nullsT](nulls, "nulls.avro", 0, opts) }, `field "m": the value at data byte 0 takes the record to about`},
		{"40 fixed of 60 MB", func() (int, error) { return drain[map[string]any](fixed, "fixed.avro", 0, Options{}) }, "decodes into at least 4800004353 bytes (its fixed values and fields), over the 67108864-byte limit"},
	} {
		var n int
		var err error
		peak := heapPeak(func() { n, err = c.read() })
		t.Logf("%s: peak %.1f MiB above the heap before, %d records, %.200v", c.name, float64(peak)/(1<<20), n, err)
		if c.want == "" {
			if err != nil || n != 1 {
				t.Errorf("%s: %d records, %v", c.name, n, err)
			}
		} else if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrLimit: %q", c.name, err, c.want)
		}
		if peak > 2*limit {
			t.Errorf("%s: the heap peaked %d bytes above where it was, MaxAlloc %d", c.name, peak, limit)
		}
	}
}
