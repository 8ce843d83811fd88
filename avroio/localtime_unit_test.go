package avroio

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/sdfio/sdfio/avroio/container"
)

// TestRelabelLocalTimestamps: every local timestamp in a schema position
// (fields, nested and named records, arrays, maps, unions) becomes the
// timestamp of its unit; defaults and other properties are kept as they
// are, even a default whose JSON looks like a local-timestamp schema.
func TestRelabelLocalTimestamps(t *testing.T) {
	const schema = `{"type":"record","name":"R","namespace":"ns","doc":"<&>","fields":[
	 {"name":"a","type":{"type":"long","logicalType":"local-timestamp-millis"},"default":1.0e3},
	 {"name":"b","type":["null",{"type":"long","logicalType":"local-timestamp-micros"},"string"],"default":null},
	 {"name":"c","type":{"type":"array","items":{"type":"map","values":{"type":"long","logicalType":"local-timestamp-millis"}}}},
	 {"name":"d","type":{"type":"record","name":"In","fields":[{"name":"x","type":{"type":"long","logicalType":"local-timestamp-micros"}}]}},
	 {"name":"e","type":"In"},
	 {"name":"f","type":{"type":"map","values":"string"},"default":{"type":"long","logicalType":"local-timestamp-millis"}},
	 {"name":"g","type":{"type":"long","logicalType":"timestamp-millis"}},
	 {"name":"h","type":"long","logicalType":"local-timestamp-millis"}
	]}`
	got, changed, err := container.RelabelLocalTimestamps(schema)
	if err != nil || !changed {
		t.Fatalf("relabelLocalTimestamps: changed %v, %v", changed, err)
	}
	const want = `{"type":"record","name":"R","namespace":"ns","doc":"<&>","fields":[
	 {"name":"a","type":{"type":"long","logicalType":"timestamp-millis"},"default":1.0e3},
	 {"name":"b","type":["null",{"type":"long","logicalType":"timestamp-micros"},"string"],"default":null},
	 {"name":"c","type":{"type":"array","items":{"type":"map","values":{"type":"long","logicalType":"timestamp-millis"}}}},
	 {"name":"d","type":{"type":"record","name":"In","fields":[{"name":"x","type":{"type":"long","logicalType":"timestamp-micros"}}]}},
	 {"name":"e","type":"In"},
	 {"name":"f","type":{"type":"map","values":"string"},"default":{"type":"long","logicalType":"local-timestamp-millis"}},
	 {"name":"g","type":{"type":"long","logicalType":"timestamp-millis"}},
	 {"name":"h","type":"long","logicalType":"local-timestamp-millis"}
	]}`
	if !sameJSON(t, got, want) {
		t.Errorf("relabelled:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(got, `"doc":"<&>"`) || !strings.Contains(got, `"default":1.0e3`) {
		t.Errorf("doc or default not kept as written: %s", got)
	}
	if _, err := avro.ParseWithCache(got, "", &avro.SchemaCache{}); err != nil {
		t.Errorf("relabelled schema does not parse: %v", err)
	}
	plain := `{"type":"record","name":"P","fields":[{"name":"a","type":{"type":"long","logicalType":"timestamp-millis"}}]}`
	if got, changed, err := container.RelabelLocalTimestamps(plain); err != nil || changed || got != plain {
		t.Errorf("a schema without local timestamps: %q, %v, %v", got, changed, err)
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestWriteTimestampUnions: a union of a timestamp and a local timestamp
// of the same unit is refused for structs at construction, naming the
// field; Records write it by the branch they name, each branch its own
// index with the same long.
func TestWriteTimestampUnions(t *testing.T) {
	const schema = `{"type":"record","name":"U","namespace":"ns","fields":[
	 {"name":"id","type":"long"},
	 {"name":"in","type":{"type":"record","name":"In","fields":[
	   {"name":"when","type":{"type":"array","items":["null",{"type":"long","logicalType":"timestamp-micros"},{"type":"long","logicalType":"local-timestamp-micros"}]}}]}}]}`
	type in struct {
		When []any `avro:"when"`
	}
	type u struct {
		ID int64 `avro:"id"`
		In in    `avro:"in"`
	}
	_, err := newWriteConfig("/x/out", schema, reflect.TypeFor[u](), nil)
	if err == nil || !strings.Contains(err.Error(), `field "in.when[]": the union holds both timestamp-micros and local-timestamp-micros`) {
		t.Fatalf("struct type: %v, want the union refused naming field in.when[]", err)
	}
	cfg, err := newWriteConfig("/x/out", schema, RecordType, nil)
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	enc, err := newElementEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tm := time.Date(2024, 3, 10, 2, 30, 0, 1000, time.UTC)
	d, err := enc.encode(Record{"id": int64(1), "in": map[string]any{"when": []any{
		nil,
		map[string]any{"long.timestamp-micros": tm},
		map[string]any{"long.local-timestamp-micros": tm.In(time.FixedZone("", -5*3600))},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	w := avro.NewWriter(nil, 64)
	w.WriteLong(1)
	w.WriteLong(3)
	w.WriteLong(0)
	for _, branch := range []int64{1, 2} {
		w.WriteLong(branch)
		w.WriteLong(tm.UnixMicro())
	}
	w.WriteLong(0)
	if string(d) != string(w.Buffer()) {
		t.Errorf("Record encoded as %x, want %x", d, w.Buffer())
	}
}

// TestWriteLocalTimestampsByUTCFields: structs, through the relabelled
// schema, and Records encode a local timestamp as the UTC fields of the
// time, the same bytes whatever the time's zone, and the same as the
// instant's timestamp; the file's schema is the one given.
func TestWriteLocalTimestampsByUTCFields(t *testing.T) {
	cfg, err := newWriteConfig("/x/out", localSchema, reflect.TypeFor[localRec](), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cfg.StructSchema, `"timestamp-micros"`) || strings.Contains(cfg.StructSchema, "local-") || cfg.Schema != localSchema {
		t.Fatalf("schema %s, struct schema %s", cfg.Schema, cfg.StructSchema)
	}
	enc, err := newElementEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Date(2024, 3, 10, 2, 30, 0, 123456000, time.UTC)
	ms := wall.Truncate(time.Millisecond)
	want := avro.NewWriter(nil, 64)
	want.WriteLong(7)
	want.WriteLong(ms.UnixMilli())
	want.WriteLong(wall.UnixMicro())
	want.WriteLong(1)
	want.WriteLong(ms.UnixMilli())
	want.WriteLong(0)
	want.WriteLong(ms.UnixMilli())
	for _, zone := range []*time.Location{time.UTC, time.FixedZone("", -5*3600), time.FixedZone("", 3600+17)} {
		v := ms.In(zone)
		s := localRec{ID: 7, Ms: v, Us: wall.In(zone), NMs: &v, At: v}
		r := Record{"id": int64(7), "ms": v, "us": wall.In(zone), "nms": v, "nus": nil, "at": v}
		for _, elem := range []any{s, &s, r} {
			d, err := enc.encode(elem)
			if err != nil {
				t.Fatalf("%T in %v: %v", elem, zone, err)
			}
			if string(d) != string(want.Buffer()) {
				t.Errorf("%T in %v encoded as %x, want %x", elem, zone, d, want.Buffer())
			}
		}
	}
}
