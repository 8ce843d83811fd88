package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var b []byte
	b = AppendUvarint(b, 300)
	b = AppendVarint(b, -5)
	b = AppendVarint(b, math.MaxInt32)
	b = append(b, 7)
	b = AppendUint32(b, 0xdeadbeef)
	b = AppendUint64(b, math.Float64bits(2.5))
	b = AppendString(b, "héllo")
	b = AppendBytes(b, []byte{1, 2, 3})
	b = AppendString(b, "")
	for _, r := range []*Reader{NewReader(b), NewSharingReader(b)} {
		if v := r.Uvarint(); v != 300 {
			t.Errorf("Uvarint %d", v)
		}
		if v := r.Varint(); v != -5 {
			t.Errorf("Varint %d", v)
		}
		if v := r.Int32("part"); v != math.MaxInt32 {
			t.Errorf("Int32 %d", v)
		}
		if v := r.Byte(); v != 7 {
			t.Errorf("Byte %d", v)
		}
		if v := r.Uint32(); v != 0xdeadbeef {
			t.Errorf("Uint32 %x", v)
		}
		if v := math.Float64frombits(r.Uint64()); v != 2.5 {
			t.Errorf("Uint64 %v", v)
		}
		if v := r.Str(); v != "héllo" {
			t.Errorf("Str %q", v)
		}
		if v := string(r.Bytes()); v != "\x01\x02\x03" {
			t.Errorf("Bytes %q", v)
		}
		if v := r.Str(); v != "" {
			t.Errorf("empty Str %q", v)
		}
		if err := r.Done("test"); err != nil {
			t.Error(err)
		}
	}
}

// TestBadInput: every way an encoding can be wrong fails with the offset,
// never panics, and a hostile count allocates nothing.
func TestBadInput(t *testing.T) {
	long := AppendUvarint(nil, 1<<40) // a count far above the bytes left
	for _, c := range []struct {
		name string
		b    []byte
		read func(*Reader)
		want string
	}{
		{"empty uvarint", nil, func(r *Reader) { r.Uvarint() }, "at byte 0: a varint: the encoding ends early"},
		{"overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, func(r *Reader) { r.Uvarint() }, "overflows"},
		{"hostile count", long, func(r *Reader) { r.Count(1) }, "a count of 1099511627776 with 0 bytes left"},
		{"count of wide items", append(AppendUvarint(nil, 3), make([]byte, 8)...), func(r *Reader) { r.Count(4) }, "a count of 3 with 8 bytes left"},
		{"short string", append(AppendUvarint(nil, 2), 'a'), func(r *Reader) { r.Str() }, "a count of 2 with 1 bytes left"},
		{"short fixed", []byte{1, 2}, func(r *Reader) { r.Uint32() }, "at byte 0: 4 bytes: the encoding ends early"},
		{"int32 range", AppendVarint(nil, math.MaxInt32+1), func(r *Reader) { r.Int32("hour") }, "hour 2147483648 out of range"},
		{"left over", []byte{1, 2}, func(r *Reader) { r.Byte() }, "at byte 1: 1 bytes after the thing"},
	} {
		r := NewReader(c.b)
		c.read(r)
		err := r.Done("thing")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		// sticky: later reads give zero values and keep the first error
		if r.Uvarint() != 0 || r.Bytes() != nil || r.Err() != err {
			t.Errorf("%s: the error is not sticky", c.name)
		}
	}
	if err := NewReader(nil).Fixed(1); err != nil {
		t.Error("Fixed past the end returned bytes")
	}
	r := NewReader(nil)
	r.Byte()
	if !errors.Is(r.Err(), ErrShort) {
		t.Errorf("%v is not ErrShort", r.Err())
	}
}

// TestSharedStrings: a sharing reader's strings are substrings of one copy.
func TestSharedStrings(t *testing.T) {
	b := AppendString(AppendString(nil, "first"), "second")
	r := NewSharingReader(b)
	allocs := testing.AllocsPerRun(100, func() {
		r.off, r.err = 0, nil
		_, _ = r.Str(), r.Str()
	})
	if allocs != 0 {
		t.Errorf("%v allocations reading two shared strings", allocs)
	}
	b[1] = 'X' // the reader's copy is its own
	r.off = 0
	if s := r.Str(); s != "first" {
		t.Errorf("shared string %q changed with the caller's bytes", s)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte{3, 'a', 'b', 'c', 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewSharingReader(b)
		for r.Err() == nil && r.Left() > 0 {
			switch r.Byte() % 5 {
			case 0:
				r.Str()
			case 1:
				r.Varint()
			case 2:
				r.Count(2)
			case 3:
				r.Uint64()
			case 4:
				r.Bytes()
			}
		}
	})
}

// TestVarintEdges: Varint reads what binary.AppendVarint writes at the
// edges of int64, and a varint of 11 bytes fails as binary.Varint does.
func TestVarintEdges(t *testing.T) {
	for _, v := range []int64{0, -1, 1, math.MinInt64, math.MaxInt64, math.MinInt32, -1 << 62} {
		r := NewReader(binary.AppendVarint(nil, v))
		if got := r.Varint(); got != v || r.Done("varint") != nil {
			t.Errorf("Varint of %d: %d, %v", v, got, r.Done("varint"))
		}
	}
	r := NewReader(bytes.Repeat([]byte{0xff}, 11))
	if r.Varint(); r.Err() == nil || !strings.Contains(r.Err().Error(), "overflows 64 bits") {
		t.Errorf("11 bytes of 0xff: %v, want an overflow", r.Err())
	}
}
