package datastoreio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
)

// sameValue compares two property values exactly: the same Go type, floats
// by their bits, times by instant and offset, keys element by element.
func sameValue(a, b any) error {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return fmt.Errorf("%T != %T", a, b)
	}
	switch x := a.(type) {
	case float64:
		if math.Float64bits(x) != math.Float64bits(b.(float64)) {
			return fmt.Errorf("float %x != %x", math.Float64bits(x), math.Float64bits(b.(float64)))
		}
	case float32:
		if math.Float32bits(x) != math.Float32bits(b.(float32)) {
			return fmt.Errorf("float32 %v != %v", x, b)
		}
	case time.Time:
		y := b.(time.Time)
		_, ox := x.Zone()
		_, oy := y.Zone()
		// The instant and the offset: the zone's name is not kept (nor by
		// Datastore, which keeps UTC microseconds).
		if !x.Equal(y) || ox != oy {
			return fmt.Errorf("time %v != %v", x, y)
		}
	case datastore.GeoPoint:
		y := b.(datastore.GeoPoint)
		if math.Float64bits(x.Lat) != math.Float64bits(y.Lat) || math.Float64bits(x.Lng) != math.Float64bits(y.Lng) {
			return fmt.Errorf("geo %v != %v", x, y)
		}
	case []byte:
		y := b.([]byte)
		if (x == nil) != (y == nil) || !bytes.Equal(x, y) {
			return fmt.Errorf("bytes %v != %v", x, y)
		}
	case *datastore.Key:
		return sameKey(x, b.(*datastore.Key))
	case *datastore.Entity:
		y := b.(*datastore.Entity)
		if (x == nil) != (y == nil) {
			return fmt.Errorf("entity %v != %v", x, y)
		}
		if x == nil {
			return nil
		}
		if err := sameKey(x.Key, y.Key); err != nil {
			return fmt.Errorf("entity key: %w", err)
		}
		return sameProps(x.Properties, y.Properties)
	case []interface{}:
		y := b.([]interface{})
		if (x == nil) != (y == nil) || len(x) != len(y) {
			return fmt.Errorf("array %v != %v", x, y)
		}
		for i := range x {
			if err := sameValue(x[i], y[i]); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	default:
		if a != b {
			return fmt.Errorf("%v != %v", a, b)
		}
	}
	return nil
}

func sameKey(a, b *datastore.Key) error {
	for ; a != nil || b != nil; a, b = a.Parent, b.Parent {
		if a == nil || b == nil || a.Kind != b.Kind || a.ID != b.ID || a.Name != b.Name || a.Namespace != b.Namespace {
			return fmt.Errorf("key %v != %v", a, b)
		}
	}
	return nil
}

func sameProps(a, b []datastore.Property) error {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return fmt.Errorf("%d properties (nil %v) != %d (nil %v)", len(a), a == nil, len(b), b == nil)
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].NoIndex != b[i].NoIndex {
			return fmt.Errorf("property %d: %q/%v != %q/%v", i, a[i].Name, a[i].NoIndex, b[i].Name, b[i].NoIndex)
		}
		if err := sameValue(a[i].Value, b[i].Value); err != nil {
			return fmt.Errorf("property %q: %w", a[i].Name, err)
		}
	}
	return nil
}

// everyValue holds every value type the client loads and saves.
func everyValue() datastore.PropertyList {
	parent := &datastore.Key{Kind: "P\U0001f600", Name: "p\x00", Namespace: "ns"}
	key := &datastore.Key{Kind: "K", ID: math.MaxInt64, Parent: parent, Namespace: "ns"}
	nested := &datastore.Entity{Key: datastore.IncompleteKey("Inner", nil), Properties: []datastore.Property{
		{Name: "deep", Value: &datastore.Entity{Properties: []datastore.Property{{Name: "x", Value: int64(-1), NoIndex: true}}}},
		{Name: "arr", Value: []interface{}{int64(1), "two", nil, []byte{}, &datastore.Entity{}}},
	}}
	return datastore.PropertyList{
		{Name: "nil", Value: nil},
		{Name: "i64", Value: int64(math.MinInt64)},
		{Name: "int", Value: int(-7)},
		{Name: "i32", Value: int32(math.MaxInt32)},
		{Name: "t", Value: true},
		{Name: "f", Value: false, NoIndex: true},
		{Name: "s", Value: "\x00\ue000\U0001f600e\u0301"},
		{Name: "empty", Value: ""},
		{Name: "nan", Value: math.Float64frombits(0x7ff8000000000abc)},
		{Name: "inf", Value: math.Inf(-1)},
		{Name: "negzero", Value: math.Copysign(0, -1)},
		{Name: "f32", Value: float32(1.5)},
		{Name: "bytes", Value: []byte{0, 1, 255}, NoIndex: true},
		{Name: "nilbytes", Value: []byte(nil)},
		{Name: "emptybytes", Value: []byte{}},
		{Name: "utc", Value: time.Date(2026, 11, 30, 1, 2, 3, 456789, time.UTC)},
		{Name: "zone", Value: time.Date(1, 1, 1, 0, 0, 0, 1, time.FixedZone("X", -5*3600))},
		{Name: "local", Value: time.Unix(1e9, 5).In(time.Local)},
		{Name: "far", Value: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{Name: "geo", Value: datastore.GeoPoint{Lat: -90, Lng: 180}},
		{Name: "key", Value: key},
		{Name: "nilkey", Value: (*datastore.Key)(nil)},
		{Name: "incomplete", Value: datastore.IncompleteKey("K", parent)},
		{Name: "entity", Value: nested},
		{Name: "nilentity", Value: (*datastore.Entity)(nil)},
		{Name: "array", Value: []interface{}{int64(1), 2.5, "x", []interface{}{true}, key}},
		{Name: "emptyarray", Value: []interface{}{}},
		{Name: "nilarray", Value: []interface{}(nil)},
		{Name: "", Value: int64(0)},
		{Name: "dup", Value: int64(1)},
		{Name: "dup", Value: int64(2)},
	}
}

// TestEntityCoderExact: every value type, nested entities and arrays,
// NoIndex flags, NaN payloads, -0, nil and empty slices, times of any zone,
// keys of every shape come back exactly, as PropertyList, *PropertyList
// and *Entity.
func TestEntityCoderExact(t *testing.T) {
	pl := everyValue()
	b, err := EncodePropertyList(pl)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodePropertyList(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameProps(pl, got); err != nil {
		t.Fatal(err)
	}
	for _, p := range pl { // one by one, as in a PCollection of []datastore.Property
		b, err := encodeProperty(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := decodeProperty(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameProps([]datastore.Property{p}, []datastore.Property{q}); err != nil {
			t.Error(err)
		}
	}
	for _, l := range []datastore.PropertyList{nil, {}} {
		b, _ := EncodePropertyList(l)
		got, err := DecodePropertyList(b)
		if err != nil || (got == nil) != (l == nil) || len(got) != 0 {
			t.Errorf("%#v came back as %#v, %v", l, got, err)
		}
	}
	for _, p := range []*datastore.PropertyList{nil, &pl} {
		b, err := encodePropertyListPtr(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodePropertyListPtr(b)
		if err != nil || (got == nil) != (p == nil) || (p != nil && sameProps(*p, *got) != nil) {
			t.Errorf("*PropertyList %v came back as %v, %v", p, got, err)
		}
	}
	for _, e := range []*datastore.Entity{nil, {}, {Key: datastore.NameKey("K", "k", nil), Properties: pl}} {
		b, err := EncodeEntity(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeEntity(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameValue(e, got); err != nil {
			t.Errorf("entity %v: %v", e, err)
		}
	}
}

// TestEntityCoderRefuses: a value the service cannot hold fails the
// encoding naming the property; too deep a nesting is refused both ways;
// hostile or damaged input fails with the offset, without allocating for a
// count the input cannot hold.
func TestEntityCoderRefuses(t *testing.T) {
	_, err := EncodePropertyList(datastore.PropertyList{{Name: "odd", Value: uint8(3)}})
	if err == nil || !strings.Contains(err.Error(), `"odd"`) || !strings.Contains(err.Error(), "uint8") {
		t.Errorf("uint8: %v", err)
	}
	deep := any(int64(1))
	for range MaxEntityDepth + 1 {
		deep = []interface{}{deep}
	}
	if _, err := EncodePropertyList(datastore.PropertyList{{Name: "deep", Value: deep}}); err == nil || !strings.Contains(err.Error(), "MaxEntityDepth") {
		t.Errorf("too deep: %v", err)
	}
	// Decoding the same depth, written by hand.
	b := []byte{entityCoderVersion, tagArray, 1, 1, 'd', 0}
	for range MaxEntityDepth + 1 {
		b = append(b, tagArray, 1)
	}
	b = append(b, tagNil)
	if _, err := DecodePropertyList(b); err == nil || !strings.Contains(err.Error(), "MaxEntityDepth") {
		t.Errorf("decoding too deep: %v", err)
	}
	good, _ := EncodePropertyList(everyValue())
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "at byte 0: a byte: the encoding ends early"},
		{"version", []byte{9}, "version 9"},
		{"huge count", binary.AppendUvarint([]byte{entityCoderVersion, tagArray}, 1<<62), "a count of 4611686018427387904"},
		{"huge string", binary.AppendUvarint([]byte{entityCoderVersion, tagArray, 1}, 1<<40), "a count of 1099511627776"},
		{"huge array", binary.AppendUvarint([]byte{entityCoderVersion, tagArray, 1, 0, 0, tagArray}, 1<<40), "a count of 1099511627776"},
		{"bad tag", []byte{entityCoderVersion, tagArray, 1, 0, 0, 99}, "unknown value tag 99"},
		{"trailing", append(append([]byte(nil), good...), 0), "1 bytes after the entity"},
		{"truncated", good[:len(good)-3], "the encoding ends early"},
	} {
		if _, err := DecodePropertyList(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// FuzzEntityCoder: no input makes the decoder panic or allocate beyond its
// size, and what it decodes encodes back to the same bytes.
func FuzzEntityCoder(f *testing.F) {
	good, _ := EncodePropertyList(everyValue())
	f.Add(good)
	f.Add([]byte{entityCoderVersion, tagNilArray})
	f.Fuzz(func(t *testing.T, b []byte) {
		pl, err := DecodePropertyList(b)
		if err != nil {
			return
		}
		again, err := EncodePropertyList(pl)
		if err != nil {
			t.Fatalf("decoded %v does not encode: %v", pl, err)
		}
		back, err := DecodePropertyList(again)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameProps(pl, back); err != nil {
			t.Fatal(err)
		}
	})
}
