package avroio

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/memfs"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
)

// TestReaderSchemaFile: WithReaderSchemaFile reads the reader schema from
// a local file and from memfs:// when the pipeline is built, and the read
// resolves as with WithReaderSchema (dropped fields, a default, int
// promoted to double); a file that is missing, empty or not a schema is
// refused then, naming its path.
func TestReaderSchemaFile(t *testing.T) {
	dir := t.TempDir()
	path, want := intScoreFile(t, dir, 40)
	local := filepath.Join(dir, "projected.avsc")
	if err := os.WriteFile(local, []byte(projectedSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	mem := "memfs://avroio-test/" + t.Name() + "/projected.avsc"
	memfs.Write(mem, []byte(projectedSchema))

	p, s := beam.NewPipelineWithRoot()
	for _, f := range []string{local, mem} {
		got := Read(s, path, reflect.TypeFor[projected](), WithReaderSchemaFile(f))
		passert.Equals(s, beam.ParDo(s, projectedString, got), want...)
	}
	g := ReadGeneric(s, path, WithReaderSchemaFile(mem))
	passert.Equals(s, beam.ParDo(s, recordID, g), ids(0, 40)...)
	run(t, p)

	empty := filepath.Join(dir, "empty.avsc")
	notSchema := filepath.Join(dir, "not.avsc")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notSchema, []byte(`{"type":"record"`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.avsc"), "opening it"},
		{"memfs://avroio-test/none.avsc", "opening it"},
		{empty, "the file is empty"},
		{notSchema, "the reader schema does not parse"},
		{"nosuchfs://b/s.avsc", "not registered"},
	} {
		_, s := beam.NewPipelineWithRoot()
		msg := mustPanic(t, "Read with reader schema file "+c.file, func() { Read(s, path, reflect.TypeFor[projected](), WithReaderSchemaFile(c.file)) })
		for _, w := range []string{"avroio.Read", fmt.Sprintf("WithReaderSchemaFile(%q)", c.file), c.want} {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: panic %q does not say %q", c.file, msg, w)
			}
		}
	}
}
