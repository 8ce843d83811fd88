package avroio

import (
	"bytes"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// FuzzRecordCoder: the Record coder decodes any bytes without panicking
// or allocating more than the input backs, and what it decodes encodes
// and decodes to itself (compared by encoding, which is deterministic).
func FuzzRecordCoder(f *testing.F) {
	for _, b := range recordCoderSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := recordCoderProperty(b); err != nil {
			t.Fatal(err)
		}
	})
}

// recordCoderSeeds are the encodings of Records of every kind of value.
func recordCoderSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
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
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// recordCoderProperty is FuzzRecordCoder's property for one input: an
// input that does not decode is fine; one that does must encode, decode
// and encode again to the same bytes.
func recordCoderProperty(b []byte) error {
	r, err := decodeRecord(b)
	if err != nil {
		return nil
	}
	e1, err := encodeRecord(r)
	if err != nil {
		return fmt.Errorf("encoding a decoded record: %w", err)
	}
	r2, err := decodeRecord(e1)
	if err != nil {
		return fmt.Errorf("decoding an encoded record: %w", err)
	}
	e2, err := encodeRecord(r2)
	if err != nil {
		return fmt.Errorf("encoding a record decoded twice: %w", err)
	}
	if !bytes.Equal(e1, e2) {
		return fmt.Errorf("encode, decode is not the identity:\n%v\n%v", r, r2)
	}
	return nil
}

// TestRecordCoderMutations runs FuzzRecordCoder's property on mutations of
// its seeds (bit flips, byte changes, cuts, insertions, splices), without
// the instrumented build that `go test -fuzz` needs, so that `make test`
// exercises the coder on malformed input; `make fuzz` runs the real fuzzer.
func TestRecordCoderMutations(t *testing.T) {
	seeds := recordCoderSeeds(t)
	n := 20000
	if testing.Short() {
		n = 2000
	}
	rng := rand.New(rand.NewPCG(7, 11))
	decoded := 0
	for i := 0; i < n; i++ {
		b := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		for m := 1 + rng.IntN(4); m > 0; m-- {
			switch op := rng.IntN(5); {
			case op == 0 && len(b) > 0:
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			case op == 1 && len(b) > 0:
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			case op == 2 && len(b) > 0:
				b = b[:rng.IntN(len(b))]
			case op == 3:
				at := rng.IntN(len(b) + 1)
				ins := make([]byte, 1+rng.IntN(9))
				for j := range ins {
					ins[j] = byte(rng.IntN(256))
				}
				b = append(b[:at], append(ins, b[at:]...)...)
			default:
				other := seeds[rng.IntN(len(seeds))]
				b = append(b[:rng.IntN(len(b)+1)], other[rng.IntN(len(other)+1):]...)
			}
		}
		if _, err := decodeRecord(b); err == nil {
			decoded++
		}
		if err := recordCoderProperty(b); err != nil {
			t.Fatalf("mutated input %d (%x): %v", i, b, err)
		}
	}
	// The mutations must reach the decoder's success path, not only its
	// errors, or the identity half of the property is never checked.
	if decoded == 0 {
		t.Fatalf("none of %d mutated inputs decoded", n)
	}
	t.Logf("%d mutated inputs, %d decoded", n, decoded)
}
