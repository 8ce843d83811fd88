package avroio

// avroio on the file layer: the exported source (FileSource) under sdftest, and the file
// defects of issue 7 (brace patterns, files changed after construction,
// open failures that are not truncation).

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/workertest"
	"github.com/sdfio/sdfio/offsetsource/filesource"
	"github.com/sdfio/sdfio/offsetsource/sourcetest"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// splitSubject is avrotest.Subject, which this package's own tests cannot
// import: sdftest over FileSource.
func splitSubject(t *testing.T, path string, typ reflect.Type, opts ...ReadFilesOption) (sdftest.Subject[beam.X], error) {
	src, err := FileSource(t.Context(), path, typ, opts...)
	if err != nil {
		return sdftest.Subject[beam.X]{}, err
	}
	return sourcetest.Subject(t.Context(), src)
}

// TestSplitSubject runs sdftest on avroio's real source through the
// exported FileSource: real file opening, field checks, reader schema.
func TestSplitSubject(t *testing.T) {
	path, _ := writeLayoutFile(t, t.TempDir(), "s.avro", "deflate", eventRecords(0, 24), []int{1, 5, 3, 7, 2, 6})
	s, err := splitSubject(t, path, reflect.TypeFor[event]())
	if err != nil {
		t.Fatal(err)
	}
	recs := sdftest.AssertReadAll(t, s)
	if len(recs) != 24 || recs[23].(event).ID != eventRecord(23).ID {
		t.Fatalf("read %d records, last %v", len(recs), recs[len(recs)-1])
	}
	rep := sdftest.AssertSplitAtFractionExhaustive(t, s)
	t.Logf("%+v", rep)

	// The field checks are the real ones: a struct with a field the
	// schema lacks fails, naming it.
	type wrong struct {
		Nope int64 `avro:"nope"`
	}
	s, err = splitSubject(t, path, reflect.TypeFor[wrong]())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdftest.ReadAll(t.Context(), s); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("reading into a struct with a field the schema lacks: %v", err)
	}
	// And the options are: a reader schema that does not parse.
	if _, err := splitSubject(t, path, RecordType, WithReaderSchema(`{"type":`)); err == nil {
		t.Error("FileSource with a bad reader schema: no error")
	}
}

// TestOpenFailureIsNotTruncation: a file deleted after matching fails with
// filesource.ErrOpen and fs.ErrNotExist, not container.ErrTruncated (which
// it was before the file layer), and a directory given to ReadFiles says
// it is a directory.
func TestOpenFailureIsNotTruncation(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeLayoutFile(t, dir, "gone.avro", "null", eventRecords(0, 5), []int{5})
	s, err := splitSubject(t, path, reflect.TypeFor[event]())
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	_, err = sdftest.ReadAll(t.Context(), s)
	if !errors.Is(err, filesource.ErrOpen) || !errors.Is(err, fs.ErrNotExist) || errors.Is(err, container.ErrTruncated) || !strings.Contains(err.Error(), path) {
		t.Errorf("reading a deleted file: %v; want ErrOpen and ErrNotExist, not ErrTruncated, naming the file", err)
	}

	p, sc := beam.NewPipelineWithRoot()
	ReadFiles(sc, beam.Create(sc, fileio.ReadableFile{Metadata: fileio.FileMetadata{Path: dir}}), reflect.TypeFor[event]())
	if err := workertest.RunFailing(t, p); err == nil || !strings.Contains(err.Error(), "is a directory") || strings.Contains(err.Error(), "truncated") {
		t.Errorf("ReadFiles of a directory: %v", err)
	}
	msg := mustPanic(t, "Read of a directory", func() { Read(beam.NewPipeline().Root(), dir, reflect.TypeFor[event]()) })
	if !strings.Contains(msg, "is a directory") {
		t.Errorf("Read of a directory: %s", msg)
	}
}

// TestBracePattern: ReadAll of x-{a,b}.avro reads both files. Before the
// file layer it matched nothing, and EmptyMatchAllowIfWildcard (ReadAll's
// default) let it succeed with no records.
func TestBracePattern(t *testing.T) {
	dir := t.TempDir()
	writeLayoutFile(t, dir, "x-a.avro", "null", eventRecords(0, 10), []int{4})
	writeLayoutFile(t, dir, "x-b.avro", "null", eventRecords(10, 20), []int{4})
	writeLayoutFile(t, dir, "x-c.avro", "null", eventRecords(20, 30), []int{4})
	p, s := beam.NewPipelineWithRoot()
	got := ReadAll(s, beam.Create(s, filepath.Join(dir, "x-{a,b}.avro")), reflect.TypeFor[event]())
	passert.Equals(s, beam.ParDo(s, eventID, got), ids(0, 20)...)
	got = Read(s, filepath.Join(dir, "x-{b,c}.avro"), reflect.TypeFor[event]())
	passert.Equals(s, beam.ParDo(s, eventID, got), ids(10, 30)...)
	ptest.RunAndValidate(t, p)

	// An unclosed brace is literal, so no wildcard: not an allowed empty
	// match.
	p, s = beam.NewPipelineWithRoot()
	ReadAll(s, beam.Create(s, filepath.Join(dir, "x-{a.avro")), reflect.TypeFor[event]())
	if err := workertest.RunFailing(t, p); err == nil || !strings.Contains(err.Error(), "no file matches") {
		t.Errorf("ReadAll of an unclosed brace matching nothing: %v", err)
	}
}

// TestFileChangedAfterConstruction: Read lists files while the pipeline is
// built; a file appended to, or replaced by a smaller one, before the
// pipeline runs fails the read naming the file. Before the file layer the
// first read 461 of 1000 records and the second the smaller file, with no
// error.
func TestFileChangedAfterConstruction(t *testing.T) {
	dir := t.TempDir()
	for _, change := range []string{"append", "replace"} {
		path, _ := writeLayoutFile(t, dir, change+".avro", "null", eventRecords(0, 100), []int{10})
		p, s := beam.NewPipelineWithRoot()
		Read(s, path, reflect.TypeFor[event]())
		switch change {
		case "append":
			b, _ := layoutFile(t, eventsSchema, "null", eventRecords(100, 200), []int{10})
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(b) // bytes after the end: a changed size is what matters
			f.Close()
		case "replace":
			writeLayoutFile(t, dir, "small.avro", "null", eventRecords(0, 10), []int{10})
			if err := os.Rename(filepath.Join(dir, "small.avro"), path); err != nil {
				t.Fatal(err)
			}
		}
		err := workertest.RunFailing(t, p)
		if err == nil || !strings.Contains(err.Error(), "changed since it was matched") || !strings.Contains(err.Error(), path) {
			t.Errorf("%s after construction: %v; want an error naming the file", change, err)
		}
	}
}
