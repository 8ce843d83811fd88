package avroio

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

// Valid files whose schemas declare large fixed types (issue 29, item 1):
// what a read allocates follows the values it decodes, not the types the
// schema declares.

// bigFixed is a fixed of 60 MB, declared 40 times by fixedTypesSchema.
const bigFixed = 60_000_000

type fixed60 [bigFixed]byte

// fixedTypes holds three of fixedTypesSchema's fields; the read skips
// the others.
type fixedTypes struct {
	F0  *fixed60 `avro:"f0"`
	F1  *fixed60 `avro:"f1"`
	F39 *fixed60 `avro:"f39"`
}

// fixedTypesSchema is a record of n nullable fields, each of a fixed type
// of its own of size bytes.
func fixedTypesSchema(n, size int) string {
	f := make([]string, n)
	for i := range f {
		f[i] = fmt.Sprintf(`{"name":"f%d","type":["null",{"type":"fixed","name":"F%d","size":%d}]}`, i, i, size)
	}
	return `{"type":"record","name":"R","fields":[` + strings.Join(f, ",") + `]}`
}

// unionOfFixedSchema is a record whose one field is a union of null and n
// fixed types of size bytes.
func unionOfFixedSchema(n, size int) string {
	br := make([]string, n)
	for i := range br {
		br[i] = fmt.Sprintf(`{"type":"fixed","name":"U%d","size":%d}`, i, size)
	}
	return `{"type":"record","name":"R","fields":[{"name":"u","type":["null",` + strings.Join(br, ",") + `]}]}`
}

// allocatedBy is the bytes allocated while f ran.
func allocatedBy(f func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}

// TestFixedTypesCostWhatIsDecoded: a 3 KB file whose records declare 40
// fixed types of 60 MB, all null, was read as Records by allocating one
// 60 MB buffer per type when its schema was compiled (2,400 MB, 229 MB of
// peak RSS above the process's base), and so was every Write of its
// schema; a union of 10,000 fixed types of 40 KB, 400 MB. Now compiling
// allocates nothing per fixed size, and a read allocates what the values
// it decodes take: a few MB for these files, by Records, map[string]any
// and a struct alike, and one value's size (not two) for a fixed that is
// there.
func TestFixedTypesCostWhatIsDecoded(t *testing.T) {
	const limit = 4 << 20 // far below any one fixed type's size
	nulls := fitFile(t, "nulls.avro", fixedTypesSchema(40, bigFixed), make([]byte, 40), make([]byte, 40))
	if fi, err := os.Stat(nulls); err != nil || fi.Size() > 4<<10 {
		t.Fatalf("the file of nulls: %v, %v", fi, err)
	}
	for _, typ := range []reflect.Type{RecordType, reflect.TypeFor[map[string]any](), reflect.TypeFor[fixedTypes]()} {
		var got []any
		var err error
		n := allocatedBy(func() { got, err = readAllAny(t, newSource(t, nulls, typ)) })
		if err != nil || len(got) != 2 {
			t.Fatalf("%v: %d records, %v", typ, len(got), err)
		}
		switch r := got[1].(type) {
		case Record:
			if len(r) != 40 || r["f0"] != nil || r["f39"] != nil {
				t.Fatalf("%v: %d fields, f0 %T", typ, len(r), r["f0"])
			}
		case map[string]any:
			if len(r) != 40 || r["f0"] != nil {
				t.Fatalf("%v: %d fields, f0 %T", typ, len(r), r["f0"])
			}
		case fixedTypes:
			if r.F0 != nil || r.F39 != nil {
				t.Fatalf("%v: %+v", typ, r)
			}
		default:
			t.Fatalf("%v: read a %T", typ, r)
		}
		t.Logf("%v: 2 records of 40 null fixed(60 MB) fields, %.1f MiB allocated", typ, float64(n)/(1<<20))
		if n > limit {
			t.Errorf("%v: reading 2 records of nulls allocated %d bytes, want under %d (nothing per fixed type)", typ, n, limit)
		}
	}

	// A union of 10,000 fixed types of 40 KB, read as Records: the
	// schema's parse (its text is 400 KB; hamba/avro's parse allocates
	// about 60 MiB, mostly garbage) and nothing per type (10,000 x 40 KB
	// was 400 MB more).
	union := fitFile(t, "union.avro", unionOfFixedSchema(10000, 40_000), []byte{0})
	var got []any
	var err error
	n := allocatedBy(func() { got, err = readAllAny(t, newSource(t, union, RecordType)) })
	t.Logf("union of 10,000 fixed(40 KB), one null: %.1f MiB allocated", float64(n)/(1<<20))
	if err != nil || len(got) != 1 || got[0].(Record)["u"] != nil {
		t.Fatalf("union: %v, %v", got, err)
	}
	if n > 2*container.DefaultMaxAlloc {
		t.Errorf("reading a union of 10,000 fixed types allocated %d bytes, over twice MaxAlloc (10,000 x 40 KB is 400 MB)", n)
	}

	// Write compiles the schema too (Records): nothing per fixed type.
	s, err := avro.Parse(fixedTypesSchema(40, bigFixed))
	if err != nil {
		t.Fatal(err)
	}
	if n := allocatedBy(func() { _, err = compileSchema(s) }); err != nil || n > limit {
		t.Fatalf("compiling the schema of 40 fixed(60 MB): %d bytes allocated, %v", n, err)
	}

	// A fixed that is there costs its size on a read (beside the block's
	// bytes, read into buffers that grow as they arrive), and through the
	// Record coder between stages, beside the copy of the encoding that
	// its strings share, once (it was copied a second time).
	const size = 8 << 20
	one := append([]byte{2}, make([]byte, size)...)
	one[size/2] = 7
	present := fitFile(t, "present.avro", fixedTypesSchema(1, size), one)
	n = allocatedBy(func() { got, err = readAllAny(t, newSource(t, present, RecordType)) })
	if err != nil || len(got) != 1 {
		t.Fatalf("present: %d records, %v", len(got), err)
	}
	v, ok := got[0].(Record)["f0"].([size]byte)
	if !ok || v[size/2-1] != 7 {
		t.Fatalf("present: f0 is %T", got[0].(Record)["f0"])
	}
	t.Logf("one fixed(8 MiB) value: %.1f MiB allocated reading it", float64(n)/(1<<20))
	if n > 4*size+1<<20 {
		t.Errorf("reading one fixed of %d bytes allocated %d", size, n)
	}
	enc, err := encodeRecord(got[0].(Record))
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if n = allocatedBy(func() { back, err = decodeRecord(enc) }); err != nil || back["f0"] != got[0].(Record)["f0"] {
		t.Fatalf("the coder gave back %T, %v", back["f0"], err)
	}
	t.Logf("the Record coder decoding it: %.1f MiB allocated", float64(n)/(1<<20))
	if n > 2*size+size/2 {
		t.Errorf("the Record coder decoding one fixed of %d bytes allocated %d", size, n)
	}
}

// readAllAny reads the whole source, records as any.
func readAllAny(t *testing.T, src fileSource) ([]any, error) {
	x, err := sdftestReadAll(t, src)
	out := make([]any, len(x))
	for i := range x {
		out[i] = x[i]
	}
	return out, err
}
