package avroio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sdfio/sdfio/avroio/container"
)

type fitLong struct {
	A int64 `avro:"a"`
}
type fitLongNull struct {
	A int64    `avro:"a"`
	N struct{} `avro:"n"`
}
type fitInt64 struct {
	I int64 `avro:"i"`
}
type fitInt32 struct {
	I int32 `avro:"i"`
}
type fitInt struct {
	I int `avro:"i"`
}
type fitMillisInt64 struct {
	T int64 `avro:"t"`
}
type fitMillis struct {
	T time.Duration `avro:"t"`
}
type fitNested struct {
	A int64 `avro:"a"`
}

func init() {
	for _, t := range []reflect.Type{reflect.TypeFor[fitLong](), reflect.TypeFor[fitLongNull](), reflect.TypeFor[fitInt64](), reflect.TypeFor[fitInt32](),
		reflect.TypeFor[fitInt](), reflect.TypeFor[fitMillisInt64](), reflect.TypeFor[fitMillis](), reflect.TypeFor[fitNested]()} {
		RegisterType(t)
	}
}

// fitFile writes a container file of schema holding the encoded datums.
func fitFile(t *testing.T, name, schema string, datums ...[]byte) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := container.NewWriter(&buf, schema, container.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range datums {
		if err := w.AppendEncoded(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadRefusesTypesAtOpen: a struct that hamba/avro would fail every
// record of (no field for a null, which it cannot skip; an int64 for an
// Avro int) or read changed (an int64 for a time-millis, read as
// nanoseconds) is refused when the file is opened, as a schema error
// naming the field and the file, before any record; the types that fit
// read the values exactly.
func TestReadRefusesTypesAtOpen(t *testing.T) {
	nulls := fitFile(t, "null.avro", `{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"n","type":"null"}]}`, []byte{2}, []byte{4})
	nested := fitFile(t, "nested.avro", `{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"x","type":["null",{"type":"record","name":"X","fields":[{"name":"n","type":{"type":"array","items":"null"}}]}]}]}`, []byte{2, 2, 2, 0})
	ints := fitFile(t, "int.avro", `{"type":"record","name":"R","fields":[{"name":"i","type":"int"}]}`, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f})                         // MaxInt32
	millis := fitFile(t, "millis.avro", `{"type":"record","name":"R","fields":[{"name":"t","type":{"type":"int","logicalType":"time-millis"}}]}`, []byte{0xd0, 0x0f}) // 1000 ms
	for _, c := range []struct {
		path string
		typ  reflect.Type
		want string
	}{
		{nulls, reflect.TypeFor[fitLong](), `has no field for Avro field "n" of record R, which holds a null (at n)`},
		{nested, reflect.TypeFor[fitNested](), `has no field for Avro field "x" of record R, which holds a null (at x.n[])`},
		{ints, reflect.TypeFor[fitInt64](), "Go field I (int64) cannot hold Avro int"},
		{millis, reflect.TypeFor[fitMillisInt64](), "Go field T (int64) holds an Avro time-millis, which hamba/avro reads and writes as a time.Duration in nanoseconds"},
	} {
		_, err := sdftestReadAll(t, newSource(t, c.path, c.typ))
		var ce *container.Error
		if !errors.As(err, &ce) || !errors.Is(err, container.ErrSchema) || ce.Block != -1 || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v from %s: %v, want a schema error at open: %q", c.typ, filepath.Base(c.path), err, c.want)
		}
	}
	for _, c := range []struct {
		path string
		typ  reflect.Type
		want []any
	}{
		{nulls, reflect.TypeFor[fitLongNull](), []any{fitLongNull{A: 1}, fitLongNull{A: 2}}},
		{ints, reflect.TypeFor[fitInt32](), []any{fitInt32{I: 1<<31 - 1}}},
		{ints, reflect.TypeFor[fitInt](), []any{fitInt{I: 1<<31 - 1}}},
		{millis, reflect.TypeFor[fitMillis](), []any{fitMillis{T: time.Second}}},
	} {
		got, err := sdftestReadAll(t, newSource(t, c.path, c.typ))
		if err != nil || !reflect.DeepEqual(anySlice(got), c.want) {
			t.Errorf("%v from %s: %v, %v; want %v", c.typ, filepath.Base(c.path), got, err, c.want)
		}
	}
}
