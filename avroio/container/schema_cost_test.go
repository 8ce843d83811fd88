package container

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// unionOfRecords is a record whose one field is a union of n records.
func unionOfRecords(n int) string {
	br := make([]string, n)
	for i := range br {
		br[i] = fmt.Sprintf(`{"type":"record","name":"U%d","fields":[{"name":"a","type":"long"}]}`, i)
	}
	return `{"type":"record","name":"R","fields":[{"name":"u","type":[` + strings.Join(br, ",") + `]}]}`
}

// TestCompileCostBounded: hamba/avro compiles a union of 10,000 records
// for a typed read in gigabytes (3.4 GB allocated, 2 s); such a schema is
// refused when the reader is made, naming the limit, having allocated a
// small multiple of the schema's text, and a smaller one is refused by a
// smaller MaxAlloc.
func TestCompileCostBounded(t *testing.T) {
	file := appendRawBlock(headerBytes(unionOfRecords(10000), "null", nil), 1, []byte{0, 2})
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	_, err := drain[map[string]any](file, "union.avro", 0, Options{})
	took := time.Since(t0)
	runtime.ReadMemStats(&m1)
	e := checkErr(t, err, ErrLimit, "union.avro")
	if e.Block != -1 || !strings.Contains(err.Error(), "compiling the schema through hamba/avro would allocate about") || !strings.Contains(err.Error(), "Limits.MaxAlloc") {
		t.Fatalf("a union of 10,000 records: %v", err)
	}
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("refused in %v, %.1f MiB allocated (the schema's text: %d KB)", took.Round(time.Millisecond), float64(alloc)/(1<<20), len(file)>>10)
	if alloc > 400<<20 {
		t.Errorf("refusing the schema allocated %d bytes", alloc)
	}
	// 3,000 branches compile in about 300 MiB: refused at a MaxAlloc of
	// 16 MiB, read at the default.
	file = appendRawBlock(headerBytes(unionOfRecords(3000), "null", nil), 1, []byte{0, 2})
	if _, err := drain[map[string]any](file, "u3000.avro", 0, Options{Limits: Limits{MaxAlloc: 16 << 20}}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "16777216-byte limit") {
		t.Fatalf("3,000 branches, MaxAlloc 16 MiB: %v", err)
	}
	if n, err := drain[map[string]any](file, "u3000.avro", 0, Options{}); err != nil || n != 1 {
		t.Fatalf("3,000 branches by default: %d, %v", n, err)
	}
}

// TestSchemaErrorsCut: a schema nested deeper than hamba/avro's JSON
// parser reads was reported as "unknown type" quoting all its 639 KB; the
// error now names the cause and is a few hundred bytes, as is any schema
// error.
func TestSchemaErrorsCut(t *testing.T) {
	var sb strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&sb, `{"type":"record","name":"R%d","fields":[{"name":"a","type":`, i)
	}
	sb.WriteString(`"long"`)
	sb.WriteString(strings.Repeat(`}]}`, 10000))
	file := appendRawBlock(headerBytes(sb.String(), "null", nil), 1, []byte{2})
	_, err := drain[map[string]any](file, "nested.avro", 0, Options{})
	checkErr(t, err, ErrSchema, "nested.avro")
	if len(err.Error()) > 1000 || !strings.Contains(err.Error(), "nests objects and arrays 30000 levels deep; hamba/avro's JSON parser reads at most 10000") {
		t.Fatalf("%d bytes: %.2000s", len(err.Error()), err)
	}
	// An unknown type deep in a large schema is named, briefly.
	bad := strings.Replace(unionOfRecords(2000), `"long"}]}]}]}`, `"lnog"}]}]}]}`, 1)
	_, err = drain[map[string]any](appendRawBlock(headerBytes(bad, "null", nil), 1, []byte{0, 2}), "bad.avro", 0, Options{})
	checkErr(t, err, ErrSchema, "bad.avro")
	if len(err.Error()) > 1000 || !strings.Contains(err.Error(), "unknown type: lnog") {
		t.Fatalf("%d bytes: %.2000s", len(err.Error()), err)
	}
	// Text that is not JSON says so, and a long error is cut, keeping
	// its start and end.
	if err := cutErr(errors.New(strings.Repeat("x", 100_000) + "end")); len(err.Error()) > 1000 || !strings.Contains(err.Error(), "bytes cut") || !strings.HasSuffix(err.Error(), "end") {
		t.Fatalf("cut: %.2000s", err)
	}
	if _, err := ParseSchema(`{"type":"record",`); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("truncated JSON: %v", err)
	}
	if _, err := ParseSchema(`"long"`); err != nil {
		t.Fatal(err)
	}
}
