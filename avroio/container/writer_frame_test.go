package container

import (
	"bytes"
	"io"
	"testing"
)

// TestAppendBlockAndFrame: blocks made by one Writer (AppendBlock, a
// block of records serialized elsewhere) and copied into another
// (AppendFrame, ended by the second's sync marker) read back as one file
// with every record, in order; a frame whose lengths do not add up is
// refused.
func TestAppendBlockAndFrame(t *testing.T) {
	const schema = `"long"`
	var frames [][]byte
	sink := &frameCatcher{}
	src, err := NewWriter(sink, schema, WriterOptions{Codec: "snappy"})
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for b := 0; b < 3; b++ {
		var recs []byte
		for i := 0; i < 100; i++ {
			v := int64(b*100 + i)
			want = append(want, v)
			recs = appendVarlong(recs, v)
		}
		if err := src.AppendBlock(100, recs); err != nil {
			t.Fatal(err)
		}
		f, ok := BlockFrame(sink.last)
		if !ok {
			t.Fatalf("block %d: %d bytes", b, len(sink.last))
		}
		frames = append(frames, append([]byte(nil), f...))
	}
	var out bytes.Buffer
	dst, err := NewWriter(&out, schema, WriterOptions{Codec: "snappy"})
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.AppendEncoded(appendVarlong(nil, -1)); err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if err := dst.AppendFrame(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := dst.AppendFrame(frames[0][:len(frames[0])-1]); err == nil {
		t.Fatal("a short frame was taken")
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if dst.Records() != 301 || dst.Blocks() != 4 {
		t.Fatalf("%d records in %d blocks, want 301 in 4", dst.Records(), dst.Blocks())
	}
	r, err := OpenReader[int64]("joined", ReaderAtOpener(bytes.NewReader(out.Bytes()), int64(out.Len())), 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want = append([]int64{-1}, want...)
	for i := 0; ; i++ {
		v, _, _, err := r.Next()
		if err == io.EOF {
			if i != len(want) {
				t.Fatalf("%d records, want %d", i, len(want))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if v != want[i] {
			t.Fatalf("record %d is %d, want %d", i, v, want[i])
		}
	}
}

// frameCatcher keeps the last write of a Writer (a block after the header).
type frameCatcher struct{ last []byte }

func (c *frameCatcher) Write(p []byte) (int, error) {
	c.last = append(c.last[:0], p...)
	return len(p), nil
}
