package avroio

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// TestGenericBoxedValuesIndependent: values the generic decoder boxes into
// shared chunks stay what was decoded after a GC and after the records
// decoded next, and changing or appending to one record's byte slices or
// lists never shows in another record.
func TestGenericBoxedValuesIndependent(t *testing.T) {
	n, err := compileSchema(avro.MustParse(`{"type":"record","name":"B","fields":[
		{"name":"l","type":"long"},{"name":"i","type":"int"},{"name":"f","type":"float"},{"name":"d","type":"double"},
		{"name":"s","type":"string"},{"name":"b","type":"bytes"},{"name":"a","type":{"type":"array","items":"long"}},
		{"name":"t","type":{"type":"long","logicalType":"timestamp-micros"}},{"name":"tm","type":{"type":"int","logicalType":"time-millis"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	const k = 500 // enough records to fill many chunks
	want := make([]map[string]any, k)
	var data []byte
	for i := range k {
		want[i] = map[string]any{
			"l": int64(i) * 1000003, "i": i * 7919, "f": float32(i) / 3, "d": float64(i) / 7,
			"s": fmt.Sprintf("s-%d", i), "b": []byte{byte(i), byte(i >> 8), 1},
			"a": []any{int64(i) * 1001, int64(-i), int64(1 << 40)}, "t": time.UnixMicro(int64(i) * 1e9).UTC(),
			"tm": time.Duration(i) * time.Millisecond,
		}
		if data, err = appendDatum(data, n, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	r := avro.NewReader(nil, 0)
	r.Reset(data)
	dec := recordDecoder{root: n, dec: new(datumDecoder)}
	got := make([]Record, k)
	for i := range got {
		dec.Decode(unsafePointer(&got[i]), r)
		if r.Error != nil {
			t.Fatalf("record %d: %v", i, r.Error)
		}
	}
	runtime.GC()
	for i := range got {
		if !reflect.DeepEqual(map[string]any(got[i]), want[i]) {
			t.Fatalf("record %d: got %v, want %v", i, got[i], want[i])
		}
	}
	// Change and grow record 0's slices: records 1 and 2 keep theirs.
	b0 := got[0]["b"].([]byte)
	b0[0] = 0xee
	got[0]["b"] = append(b0, 9, 9, 9, 9)
	a0 := got[0]["a"].([]any)
	got[0]["a"] = append(a0, int64(5), int64(6), int64(7))
	for i := 1; i < 3; i++ {
		if !reflect.DeepEqual(map[string]any(got[i]), want[i]) {
			t.Fatalf("record %d changed with record 0: got %v, want %v", i, got[i], want[i])
		}
	}
}

// TestRecordCoderBoxedValuesIndependent: the same for Records decoded by
// the Record coder.
func TestRecordCoderBoxedValuesIndependent(t *testing.T) {
	const k = 300
	want := make([]Record, k)
	got := make([]Record, k)
	for i := range k {
		want[i] = Record{"l": int64(i) * 1000003, "s": fmt.Sprintf("s-%d", i), "b": []byte{byte(i), 2},
			"a": []any{int64(i) * 1001, float64(i) / 3}, "t": time.Unix(int64(i)*86400, 5).UTC(), "n": map[string]any{"x": i * 1000}}
		b, err := encodeRecord(want[i])
		if err != nil {
			t.Fatal(err)
		}
		if got[i], err = decodeRecord(b); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	b0 := got[0]["b"].([]byte)
	b0[0] = 0xee
	got[0]["b"] = append(b0, 9, 9, 9)
	got[0]["a"] = append(got[0]["a"].([]any), int64(1), int64(2))
	want[0] = got[0]
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d: got %v, want %v", i, got[i], want[i])
		}
	}
}
