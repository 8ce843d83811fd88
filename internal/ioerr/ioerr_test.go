package ioerr

import (
	"errors"
	"io/fs"
	"slices"
	"testing"
)

func TestText(t *testing.T) {
	kind := errors.New("sync marker mismatch")
	for _, c := range []struct {
		kind  error
		msg   string
		cause error
		want  string
	}{
		{kind, "", nil, "f.avro at byte 3: sync marker mismatch"},
		{kind, "want 0102", nil, "f.avro at byte 3: sync marker mismatch: want 0102"},
		{kind, "", fs.ErrNotExist, "f.avro at byte 3: sync marker mismatch: file does not exist"},
		{kind, "want 0102", fs.ErrNotExist, "f.avro at byte 3: sync marker mismatch: want 0102: file does not exist"},
		{nil, "no kind", nil, "f.avro at byte 3: : no kind"},
	} {
		if got := Text("f.avro at byte 3", c.kind, c.msg, c.cause); got != c.want {
			t.Errorf("Text(%v, %q, %v) = %q, want %q", c.kind, c.msg, c.cause, got, c.want)
		}
	}
}

func TestUnwrap(t *testing.T) {
	kind, also := errors.New("is a directory"), errors.New("cannot open file")
	if got := Unwrap(kind, fs.ErrNotExist, also); !slices.Equal(got, []error{kind, also, fs.ErrNotExist}) {
		t.Errorf("Unwrap = %v", got)
	}
	if got := Unwrap(nil, nil); len(got) != 0 {
		t.Errorf("Unwrap(nil, nil) = %v", got)
	}
}
