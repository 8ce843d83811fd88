package container

import (
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/sdfio/sdfio/internal/box"
)

type dynRec struct {
	ID   int64  `avro:"id"`
	Name string `avro:"name"`
}

// onePtr is pointer-shaped: an interface holds it in its data word.
type onePtr struct {
	Attrs map[string]int64 `avro:"attrs"`
}

const dynSchema = `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`

// readOf reads every record of b through NewReaderOf(typ), checking offsets
// and split points against the static Reader[dynRec].
func readOf(t *testing.T, b []byte, typ reflect.Type) []any {
	t.Helper()
	want, err := OpenReader[dynRec]("f", bytesOpener(b), 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	r, err := OpenReaderOf("f", bytesOpener(b), 0, typ, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []any
	for {
		rec, off, sp, err := r.Next()
		_, woff, wsp, werr := want.Next()
		if err != werr || off != woff || sp != wsp {
			t.Fatalf("record %d: NewReaderOf gives offset %d, split point %v, err %v; NewReader gives %d, %v, %v", len(out), off, sp, err, woff, wsp, werr)
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := reflect.TypeOf(rec); got != typ && typ.Kind() != reflect.Interface {
			t.Fatalf("record %d has type %v, want %v", len(out), got, typ)
		}
		out = append(out, rec)
	}
}

func TestReaderOf(t *testing.T) {
	recs := make([]dynRec, 25)
	for i := range recs {
		recs[i] = dynRec{ID: int64(i), Name: string(rune('a' + i))}
	}
	b := writeFile(t, dynSchema, "null", recs, 4)

	t.Run("struct", func(t *testing.T) {
		got := readOf(t, b, reflect.TypeFor[dynRec]())
		for i, g := range got {
			if g.(dynRec) != recs[i] {
				t.Fatalf("record %d = %+v, want %+v", i, g, recs[i])
			}
		}
		if len(got) != len(recs) {
			t.Fatalf("read %d records, want %d", len(got), len(recs))
		}
		// Every record is its own value: none is overwritten by the next.
		if got[0].(dynRec) != recs[0] {
			t.Fatalf("record 0 changed to %+v after reading on", got[0])
		}
	})
	t.Run("pointer", func(t *testing.T) {
		got := readOf(t, b, reflect.TypeFor[*dynRec]())
		for i, g := range got {
			if *g.(*dynRec) != recs[i] {
				t.Fatalf("record %d = %+v, want %+v", i, g, recs[i])
			}
		}
	})
	t.Run("pointer-shaped struct", func(t *testing.T) {
		const schema = `{"type":"record","name":"M","fields":[{"name":"attrs","type":{"type":"map","values":"long"}}]}`
		want := make([]onePtr, 9)
		for i := range want {
			want[i].Attrs = map[string]int64{"n": int64(i)}
		}
		mb := writeFile(t, schema, "null", want, 2)
		r, err := OpenReaderOf("m", bytesOpener(mb), 0, reflect.TypeFor[onePtr](), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for i := 0; ; i++ {
			rec, _, _, err := r.Next()
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("read %d records, want %d", i, len(want))
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rec, want[i]) {
				t.Fatalf("record %d = %#v, want %#v", i, rec, want[i])
			}
		}
	})
	t.Run("generic map", func(t *testing.T) {
		got := readOf(t, b, reflect.TypeFor[map[string]any]())
		for i, g := range got {
			m := g.(map[string]any)
			if m["id"] != int64(i) || m["name"] != recs[i].Name {
				t.Fatalf("record %d = %v, want %+v", i, m, recs[i])
			}
		}
	})
	t.Run("interface", func(t *testing.T) {
		got := readOf(t, b, reflect.TypeFor[any]())
		for i, g := range got {
			if m, ok := g.(map[string]any); !ok || m["id"] != int64(i) {
				t.Fatalf("record %d = %#v, want a generic map of %+v", i, g, recs[i])
			}
		}
	})
	t.Run("type cannot hold the schema", func(t *testing.T) {
		r, err := OpenReaderOf("f", bytesOpener(b), 0, reflect.TypeFor[int64](), Options{})
		if err == nil {
			_, _, _, err = r.Next()
			r.Close()
		}
		if !errors.Is(err, ErrSchema) {
			t.Fatalf("reading a record into int64: %v, want an ErrSchema error", err)
		}
	})
}

func TestDirectIface(t *testing.T) {
	for _, tc := range []struct {
		typ  reflect.Type
		want bool
	}{
		{reflect.TypeFor[*int](), true},
		{reflect.TypeFor[map[string]any](), true},
		{reflect.TypeFor[onePtr](), true},
		{reflect.TypeFor[[1]*int](), true},
		{reflect.TypeFor[struct{ A [1]map[int]int }](), true},
		{reflect.TypeFor[dynRec](), false},
		{reflect.TypeFor[[2]*int](), false},
		{reflect.TypeFor[struct{ A, B *int }](), false},
		{reflect.TypeFor[int64](), false},
		{reflect.TypeFor[string](), false},
		{reflect.TypeFor[[]byte](), false},
	} {
		if got := box.Direct(tc.typ); got != tc.want {
			t.Errorf("box.Direct(%v) = %v, want %v", tc.typ, got, tc.want)
		}
		// Boxing a zero value must give the zero value, whichever way.
		d := newDynamicType(tc.typ)
		if got, want := d.box(d.new()), reflect.Zero(tc.typ).Interface(); !reflect.DeepEqual(got, want) {
			t.Errorf("box of a zero %v = %#v, want %#v", tc.typ, got, want)
		}
	}
}
