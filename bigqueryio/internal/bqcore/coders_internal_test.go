package bqcore

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/sdfio/sdfio/internal/wire"
)

// byteSliceSamples are [][]byte values of every shape: nil, empty, nil and
// empty rows, rows of one byte and rows longer than a one-byte varint.
func byteSliceSamples() map[string][][]byte {
	long := bytes.Repeat([]byte{0xab}, 300)
	return map[string][][]byte{
		"nil":            nil,
		"empty":          {},
		"one nil row":    {nil},
		"one empty row":  {{}},
		"mixed":          {nil, {}, {0}, {1, 2, 3}, long, nil, {0xff}},
		"long rows":      {long, long[:128], long[:127]},
		"many short":     bytes.Fields(bytes.Repeat([]byte("ab "), 200)),
		"row of zeroes":  {make([]byte, 40)},
		"rows sharing":   {long[:10], long[5:20]},
		"only empty/nil": {{}, nil, {}, nil},
	}
}

// TestByteSlicesSameBytes: the [][]byte fast path writes exactly what the
// general slice codec writes for the same value (the streaming write's
// chunks and batches in state and between stages keep their format), and
// reads back every value as the general codec does, nil rows as nil and
// empty as empty.
func TestByteSlicesSameBytes(t *testing.T) {
	fast := byteSlicesWire
	general, err := wireItemsCodec(typeOfByteSlices)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := wireCodecOf(typeOfByteSlices); err != nil || reflect.ValueOf(got.enc).Pointer() != reflect.ValueOf(fast.enc).Pointer() {
		t.Fatalf("wireCodecOf([][]byte) is not the fast path (err %v)", err)
	}
	for name, rows := range byteSliceSamples() {
		v := reflect.ValueOf(rows)
		want := general.enc(nil, v)
		got := fast.enc(nil, v)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: fast path wrote %x, the general codec %x", name, got, want)
		}
		if s := fast.size(v); s < len(got) {
			t.Errorf("%s: size %d under the %d bytes written", name, s, len(got))
		}
		for _, c := range []struct {
			name string
			c    wireCodec
		}{{"fast", fast}, {"general", general}} {
			r := wire.NewReader(want)
			out := reflect.New(typeOfByteSlices).Elem()
			c.c.dec(r, out)
			if err := r.Done("rows"); err != nil {
				t.Fatalf("%s: %s decoder: %v", name, c.name, err)
			}
			back := out.Interface().([][]byte)
			if !sameRows(back, rows) {
				t.Errorf("%s: %s decoder read %q, want %q", name, c.name, back, rows)
			}
			for i, p := range back {
				// A row shares the element's bytes: appending to it must
				// not write over the next row.
				if cap(p) != len(p) {
					t.Errorf("%s: %s decoder's row %d has cap %d, len %d", name, c.name, i, cap(p), len(p))
				}
			}
		}
	}
}

// TestByteSlicesBadInput: on every cut of an encoding and on every value
// of every byte of one, the fast decoder fails exactly when the general one
// does, with the same error, and never panics.
func TestByteSlicesBadInput(t *testing.T) {
	fast := byteSlicesWire
	general, err := wireItemsCodec(typeOfByteSlices)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(c wireCodec, b []byte) (rows [][]byte, err error) {
		r := wire.NewReader(b)
		out := reflect.New(typeOfByteSlices).Elem()
		c.dec(r, out)
		if err := r.Done("rows"); err != nil {
			return nil, err
		}
		return out.Interface().([][]byte), nil
	}
	check := func(what string, b []byte) {
		t.Helper()
		fr, ferr := decode(fast, b)
		gr, gerr := decode(general, b)
		if (ferr == nil) != (gerr == nil) || (ferr != nil && ferr.Error() != gerr.Error()) {
			t.Fatalf("%s %x: fast error %v, general error %v", what, b, ferr, gerr)
		}
		if ferr == nil && !sameRows(fr, gr) {
			t.Fatalf("%s %x: fast read %q, general %q", what, b, fr, gr)
		}
	}
	enc := general.enc(nil, reflect.ValueOf(byteSliceSamples()["mixed"]))
	for n := range len(enc) {
		check("cut", enc[:n])
	}
	check("longer", append(bytes.Clone(enc), 0))
	for i := range enc {
		for x := range 256 {
			b := bytes.Clone(enc)
			b[i] = byte(x)
			check("byte changed", b)
		}
	}
	// A count far beyond the bytes there: refused, nothing allocated for it.
	check("huge count", []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1})
}

// sameRows compares rows keeping nil apart from empty, the slice and each row.
func sameRows(a, b [][]byte) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
