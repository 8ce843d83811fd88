package avroio

import (
	"bytes"
	"math/big"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// FuzzRecordCoder: the Record coder decodes any bytes without panicking
// or allocating more than the input backs, and what it decodes encodes
// and decodes to itself (compared by encoding, which is deterministic).
func FuzzRecordCoder(f *testing.F) {
	for _, r := range []Record{
		{},
		{"a": int64(1), "b": "x", "c": []byte{0, 1}, "d": nil, "e": true, "f": 1.5, "g": float32(2), "h": 3, "i": int32(4)},
		{"t": time.Date(1850, 1, 1, 0, 0, 0, 5, time.FixedZone("", -17762)), "u": time.Unix(0, 0).UTC(), "d": time.Second},
		{"r": big.NewRat(-5, 100), "fx": [3]byte{1, 2, 3}, "ld": avro.LogicalDuration{Months: 1, Days: 2, Milliseconds: 3}},
		{"l": []any{int64(1), map[string]any{"k": []any{nil}}}, "u": map[string]any{"int.date": time.Unix(86400, 0).UTC()}},
		unionRecord(7),
	} {
		b, err := encodeRecord(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		e1, err := encodeRecord(r)
		if err != nil {
			t.Fatalf("encoding a decoded record: %v", err)
		}
		r2, err := decodeRecord(e1)
		if err != nil {
			t.Fatalf("decoding an encoded record: %v", err)
		}
		e2, err := encodeRecord(r2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e1, e2) {
			t.Fatalf("encode, decode is not the identity:\n%v\n%v", r, r2)
		}
	})
}
