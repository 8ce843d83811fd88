package avroio

import (
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/hamba/avro/v2"
)

func TestReadOptions(t *testing.T) {
	o, err := parseReadOptions(nil, EmptyMatchDisallow)
	if err != nil {
		t.Fatal(err)
	}
	if o.desiredBundleSize != 64<<20 || o.minBundleSize != 128000 || o.maxAlloc != 64<<20 || o.emptyMatch != EmptyMatchDisallow || o.manyFiles {
		t.Errorf("defaults: %+v", o)
	}
	if o, _ := parseReadOptions(nil, EmptyMatchAllowIfWildcard); o.emptyMatch != EmptyMatchAllowIfWildcard {
		t.Errorf("ReadAll's default empty-match treatment is %v", o.emptyMatch)
	}
	for _, bad := range [][]ReadOption{
		{WithDesiredBundleSize(0)}, {WithMinBundleSize(-1)}, {WithMaxAlloc(0)}, {WithEmptyMatch(7)}, {WithReaderSchema(`{"type": "nope"}`)},
	} {
		if _, err := parseReadOptions(bad, EmptyMatchDisallow); err == nil {
			t.Errorf("options %v accepted", bad)
		}
	}
	o, _ = parseReadOptions([]ReadOption{WithMinBundleSize(4096), WithMaxAlloc(1 << 20), WithReaderSchema(eventsSchema)}, EmptyMatchDisallow)
	src := fileSource{Format: o.format(reflect.TypeFor[event]())}
	if src.MinBundleSize() != 4096 || src.Format.Settings.MaxAlloc != 1<<20 || src.Format.Settings.ReaderSchema != eventsSchema {
		t.Errorf("settings %+v", src.Format.Settings)
	}
}

// TestMaxAlloc: a record over the allocation limit fails the read with an
// error naming the file.
func TestMaxAlloc(t *testing.T) {
	big := eventRecord(1)
	big.Name = strings.Repeat("x", 5000)
	path, _ := writeLayoutFile(t, t.TempDir(), "big.avro", "null", []event{eventRecord(0), big}, []int{1})
	src := newSource(t, path, reflect.TypeFor[event]())
	src.Format.Settings.MaxAlloc = 4096
	_, err := sdftestReadAll(t, src)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("reading a 5000-byte string with a 4096-byte limit: %v", err)
	}
}

func sdftestReadAll(t *testing.T, src fileSource) ([]beam.X, error) {
	var out []beam.X
	s := subject(t, src)
	err := s.Read(t.Context(), s.NewTracker(s.Restriction), func(x beam.X) { out = append(out, x) })
	return out, err
}

type embedded struct {
	Score float64 `avro:"score"`
}

type withEmbedded struct {
	embedded
	ID      int64  `avro:"id"`
	Ignored string `avro:"-"`
	private int
}

type nestedOuter struct {
	ID    int64      `avro:"id"`
	Inner *nestedIn  `avro:"inner"`
	Other []nestedIn `avro:"others"`
}

type nestedIn struct {
	A int64 `avro:"a"`
	B int64 `avro:"b"`
}

func TestCheckFields(t *testing.T) {
	s := avro.MustParse(eventsSchema)
	if err := checkFields(reflect.TypeFor[withEmbedded](), s); err != nil {
		t.Errorf("embedded, ignored and unexported fields: %v", err)
	}
	if err := checkFields(reflect.TypeFor[*event](), s); err != nil {
		t.Errorf("pointer to a matching struct: %v", err)
	}
	for _, typ := range []reflect.Type{RecordType, reflect.TypeFor[map[string]any](), reflect.TypeFor[any]()} {
		if err := checkFields(typ, s); err != nil {
			t.Errorf("%v is not a struct and is not checked: %v", typ, err)
		}
	}
	err := checkFields(reflect.TypeFor[jsonTagged](), s)
	if err == nil || !strings.Contains(err.Error(), `field ID of Go type avroio.jsonTagged is Avro field "ID" by its Go name`) {
		t.Errorf("json-tagged struct: %v", err)
	}
	nested := avro.MustParse(`{"type":"record","name":"O","fields":[{"name":"id","type":"long"},
		{"name":"inner","type":["null",{"type":"record","name":"I","fields":[{"name":"a","type":"long"}]}]},
		{"name":"others","type":{"type":"array","items":"I"}}]}`)
	err = checkFields(reflect.TypeFor[nestedOuter](), nested)
	if err == nil || !strings.Contains(err.Error(), `field Inner.B of Go type avroio.nestedOuter is Avro field "b" by its `+"`avro`"+` tag`) {
		t.Errorf("nested record behind a nullable union: %v", err)
	}
}

// TestRecordCoderTypes round-trips the generic values no peer file holds.
func TestRecordCoderTypes(t *testing.T) {
	r := Record{
		"i": 1, "i32": int32(-2), "l": int64(-1 << 40), "f": float32(1.5), "d": 2.25, "s": "x", "b": []byte{0, 1},
		"n": nil, "t": true, "fx": [3]byte{1, 2, 3}, "dur": 3 * time.Millisecond,
		"ld": avro.LogicalDuration{Months: 1, Days: 2, Milliseconds: 3},
		"ts": time.Date(2024, 2, 29, 1, 2, 3, 4000, time.UTC), "dec": big.NewRat(-314, 100),
		"list": []any{int64(1), "a", map[string]any{"k": nil}}, "map": map[string]any{"z": []any{}},
	}
	b, err := encodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("round trip:\n got %#v\nwant %#v", back, r)
	}
	if _, err := encodeRecord(Record{"c": make(chan int)}); err == nil || !strings.Contains(err.Error(), `field "c"`) {
		t.Errorf("encoding a channel: %v", err)
	}
	for _, bad := range [][]byte{nil, {tagMap}, {tagMap, 5}, {tagString}, {99}, append(b, 0)} {
		if _, err := decodeRecord(bad); err == nil {
			t.Errorf("decoded %v", bad)
		}
	}
}
