package avroio_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/avroio"
)

// beamGoTagged is a struct tagged for Beam Go's avroio (json tags), the
// mistake a migrated pipeline makes.
type beamGoTagged struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// withExtra holds a field that names no field of buildSchema.
type withExtra struct {
	ID    int64  `avro:"id"`
	Name  string `avro:"name"`
	Extra string `json:"extra"`
}

const buildSchema = `{"type":"record","name":"E","fields":[
	{"name":"id","type":"long","default":0},
	{"name":"name","type":"string","default":""}]}`

func init() {
	avroio.RegisterType(reflect.TypeFor[beamGoTagged]())
	avroio.RegisterType(reflect.TypeFor[withExtra]())
}

func panicText(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	f()
	return ""
}

// TestSchemaMistakesAtBuild: where the records' schema is known when the
// pipeline is built (Write's schema, Read's WithReaderSchema), a struct
// field that names no Avro field is refused then, naming the field, not
// when a worker opens a file. (Before: Write dropped such a field
// silently, and Read failed only on the workers.)
func TestSchemaMistakesAtBuild(t *testing.T) {
	dir := t.TempDir()
	pattern := filepath.Join(dir, "*.avro")
	cases := []struct {
		name string
		run  func(s beam.Scope)
		want string
	}{
		{"Write json tags", func(s beam.Scope) {
			avroio.Write(s, filepath.Join(dir, "out"), buildSchema, beam.Create(s, beamGoTagged{ID: 1}))
		}, `field ID of Go type avroio_test.beamGoTagged is Avro field "ID" by its Go name`},
		{"Write extra field", func(s beam.Scope) {
			avroio.Write(s, filepath.Join(dir, "out"), buildSchema, beam.Create(s, withExtra{ID: 1}))
		}, `field Extra of Go type avroio_test.withExtra is Avro field "Extra"`},
		{"Read reader schema", func(s beam.Scope) {
			avroio.Read(s, pattern, reflect.TypeFor[beamGoTagged](), avroio.WithEmptyMatch(avroio.EmptyMatchAllow),
				avroio.WithReaderSchema(buildSchema))
		}, `avroio.Read: WithReaderSchema: field ID of Go type avroio_test.beamGoTagged`},
		{"ReadAll reader schema", func(s beam.Scope) {
			avroio.ReadAll(s, beam.Create(s, pattern), reflect.TypeFor[beamGoTagged](), avroio.WithReaderSchema(buildSchema))
		}, `avroio.ReadAll: WithReaderSchema: field ID`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, s := beam.NewPipelineWithRoot()
			got := panicText(func() { tc.run(s) })
			if !strings.Contains(got, tc.want) {
				t.Fatalf("panic %q\nwant it to contain %q", got, tc.want)
			}
		})
	}
	// The same types tagged right are taken.
	_, s := beam.NewPipelineWithRoot()
	if got := panicText(func() {
		avroio.Read(s, pattern, reflect.TypeFor[withExtra](), avroio.WithEmptyMatch(avroio.EmptyMatchAllow))
	}); got != "" {
		t.Fatalf("Read without a reader schema: %s", got)
	}
}
