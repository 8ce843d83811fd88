package container

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

const tripWriter = `{"type":"record","name":"Trip","namespace":"sdfio.test","fields":[
	{"name":"id","type":"long"},
	{"name":"driver","type":{"type":"record","name":"Driver","fields":[
		{"name":"id","type":"long"},
		{"name":"name","type":"string"}
	]}},
	{"name":"stops","type":{"type":"array","items":{"type":"record","name":"Stop","fields":[
		{"name":"seq","type":"int"},
		{"name":"at","type":"string"}
	]}}},
	{"name":"tags","type":{"type":"map","values":"long"}},
	{"name":"fare","type":["null",{"type":"record","name":"Fare","fields":[
		{"name":"amount","type":"double"},
		{"name":"currency","type":"string"}
	]}]},
	{"name":"note","type":["null","string"]},
	{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C"]}}
]}`

// tripReader is a reader schema for tripWriter's files with the given
// replacements of the field definitions.
func tripReader(t *testing.T, repl ...string) avro.Schema {
	t.Helper()
	s := tripWriter
	for i := 0; i < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			t.Fatalf("tripWriter has no %s", repl[i])
		}
		s = strings.Replace(s, repl[i], repl[i+1], 1)
	}
	return avro.MustParse(s)
}

// TestResolveErrorNamesField: a reader schema that does not resolve
// against the writer's is an ErrSchema error naming the file and the
// fields responsible, by their path, and wrapping hamba/avro's error.
func TestResolveErrorNamesField(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, tripWriter, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for _, c := range []struct {
		name   string
		reader avro.Schema
		want   []string
	}{
		{"nested record", tripReader(t, `{"name":"id","type":"long"},
		{"name":"name"`, `{"name":"id","type":"string"},
		{"name":"name"`),
			[]string{`field "driver.id": reader string, writer long`}},
		{"array of records", tripReader(t, `{"name":"at","type":"string"}`, `{"name":"at","type":"long"}`),
			[]string{`field "stops[].at": reader long, writer string`}},
		{"missing without default", tripReader(t, `{"name":"name","type":"string"}`, `{"name":"name","type":"string"},{"name":"rating","type":"double"}`),
			[]string{`field "driver.rating": the reader's field (double) is missing from the writer's record sdfio.test.Driver and has no default`}},
		{"alias", tripReader(t, `{"name":"seq","type":"int"}`, `{"name":"order","aliases":["seq"],"type":"string"}`),
			[]string{`field "stops[].order": reader string, writer int`}},
		{"map values", tripReader(t, `"values":"long"`, `"values":"int"`),
			[]string{`field "tags{}": reader int, writer long`}},
		{"union branch", tripReader(t, `{"name":"amount","type":"double"}`, `{"name":"amount","type":"float"}`),
			[]string{`field "fare.amount": reader float, writer double`}},
		{"union lacking a branch", tripReader(t, `{"name":"note","type":["null","string"]}`, `{"name":"note","type":["null","long"]}`),
			[]string{`field "note": the reader's union [null, long] has no branch for the writer's string`}},
		{"union to non-union", tripReader(t, `{"name":"note","type":["null","string"]}`, `{"name":"note","type":"string"}`),
			[]string{`field "note": reader string, writer null`}},
		{"enum", tripReader(t, `"symbols":["A","B","C"]`, `"symbols":["A","C"]`),
			[]string{`field "kind": the reader's enum sdfio.test.Kind lacks the writer's symbols [B] and has no default`}},
		{"record name", tripReader(t, `"name":"Driver"`, `"name":"Chauffeur"`),
			[]string{`field "driver": reader record sdfio.test.Chauffeur, writer record sdfio.test.Driver`}},
		{"two fields", tripReader(t, `{"name":"id","type":"long"},
	{"name":"driver"`, `{"name":"id","type":"int"},
	{"name":"driver"`, `{"name":"at","type":"string"}`, `{"name":"at","type":"bytes"},{"name":"eta","type":"long"}`),
			[]string{`field "id": reader int, writer long`, `field "stops[].eta": the reader's field (long) is missing`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenReader[map[string]any]("trips.avro", bytesOpener(b), 0, Options{ReaderSchema: c.reader})
			e := checkErr(t, err, ErrSchema, "trips.avro")
			for _, want := range c.want {
				if !strings.Contains(e.Error(), want) {
					t.Errorf("error %q\ndoes not say %q", e, want)
				}
			}
			// The cause is hamba/avro's error, wrapped.
			if e.Err == nil || errors.Unwrap(e.Err) == nil {
				t.Errorf("error %q does not wrap hamba/avro's", e)
			}
		})
	}
	// A reader schema that resolves gives no error.
	ok := tripReader(t, `{"name":"id","type":"long"},
	{"name":"driver"`, `{"name":"id","type":"double"},
	{"name":"driver"`)
	if _, err := OpenReader[map[string]any]("trips.avro", bytesOpener(b), 0, Options{ReaderSchema: ok}); err != nil {
		t.Fatalf("a promotable reader schema: %v", err)
	}
}

// TestResolveErrorRecursive: the walk ends on recursive schemas and names
// the field once.
func TestResolveErrorRecursive(t *testing.T) {
	const node = `{"type":"record","name":"Node","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","Node"]}]}`
	var buf bytes.Buffer
	w, err := NewWriter(&buf, node, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	reader := avro.MustParse(strings.Replace(node, `"type":"long"`, `"type":"string"`, 1))
	_, err = OpenReader[map[string]any]("list.avro", bytesOpener(buf.Bytes()), 0, Options{ReaderSchema: reader})
	e := checkErr(t, err, ErrSchema, "list.avro")
	if msg := e.Error(); !strings.Contains(msg, `field "v": reader string, writer long`) || strings.Count(msg, `field "`) != 1 {
		t.Fatalf("error %q, want field \"v\" named once", msg)
	}
}
