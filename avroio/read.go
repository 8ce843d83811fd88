package avroio

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/internal/beamtypes"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/offsetsource/filesource"
)

// Namespace is the Beam metrics namespace of the reads and writes, unless
// WithMetricsNamespace names another: records,
// bytes_read (the bytes of the blocks read), splits_accepted and
// splits_refused (dynamic splits of running reads), files_matched,
// ranges_read (the ranges of files opened: initial bundles and the pieces
// dynamic splits made of them), bad_inputs (BadFile elements of the reads
// with a dead letter), the watch's counters (see WatchForNewFiles), and
// Write's records_written, bytes_written,
// files_written and temp_files_removed (see Write).
const Namespace = "sdfio/avroio"

// Read reads the Avro object container files that filepattern matches (a
// path or glob on any Beam filesystem: local, gs://, memfs://, ...; brace
// groups {a,b}, any number of them, are matched on every filesystem) and
// returns a PCollection of their records as values of type t: a Go
// struct whose fields are matched to the record's fields by `avro` tags or
// else by name (a pointer to one, or any type hamba/avro decodes records
// into). Use ReadGeneric for records as maps. Every exported field of a
// struct must name a field of the schema; see the package documentation.
//
// The pattern is expanded while the pipeline is built (unless
// WithMatchesManyFiles is given), and each file is read by a splittable DoFn
// in initial bundles of WithDesiredBundleSize bytes that runners split further
// while they run. A file whose size or modification time changed between
// matching and reading fails the read, naming the file
// (filesource.ErrChanged). By default a pattern that matches no file is an
// error (WithEmptyMatch(EmptyMatchDisallow)) that fails the pipeline when
// it runs, naming the pattern (filesource.ErrNoMatch), as in Beam Java.
//
// Read panics if the options are invalid, or if matching fails for another
// reason (a filesystem that cannot list, a pattern naming a directory).
func Read(s beam.Scope, filepattern string, t reflect.Type, opts ...ReadOption) beam.PCollection {
	s = s.Scope("avroio.Read")
	return read(s, "avroio.Read", filepattern, t, opts, nil)
}

// ReadGeneric is Read for generic records: each record is a Record, a
// map[string]any of its fields (see Record for the Go type of each Avro
// type).
func ReadGeneric(s beam.Scope, filepattern string, opts ...ReadOption) beam.PCollection {
	s = s.Scope("avroio.ReadGeneric")
	return read(s, "avroio.ReadGeneric", filepattern, RecordType, opts, nil)
}

// read is Read's construction; bad, when not nil, receives the
// dead-letter output of bad files.
func read(s beam.Scope, name, pattern string, t reflect.Type, opts []ReadOption, bad *beam.PCollection) beam.PCollection {
	o := mustParse(name, opts, ReadOption.applyRead, EmptyMatchDisallow)
	checkType(name, t, o)
	if strings.TrimSpace(pattern) == "" {
		panic(name + ": empty file pattern")
	}
	filesystem.ValidateScheme(pattern)
	defer func() {
		// Name this transform in filesource's panics (no file matches...).
		if p := recover(); p != nil {
			panic(fmt.Sprintf("%s: %v", name, p))
		}
	}()
	ropts := o.readOpts(t)
	if bad != nil {
		ropts = append(ropts, filesource.WithBadInput(bad))
	}
	return filesource.Read[beam.X](s, pattern, o.format(t), ropts...)
}

// ReadAll reads the Avro files that each pattern of a PCollection of
// strings matches, as records of type t (RecordType for generic records).
// Patterns are expanded by the pipeline, in parallel, and the list of files
// is shuffled before reading (Java's AvroIO.readAll). By default a pattern
// without wildcards that matches no file fails the pipeline, and one with
// wildcards reads nothing (WithEmptyMatch(EmptyMatchAllowIfWildcard)).
func ReadAll(s beam.Scope, patterns beam.PCollection, t reflect.Type, opts ...ReadAllOption) beam.PCollection {
	s = s.Scope("avroio.ReadAll")
	o := mustParse("avroio.ReadAll", opts, ReadAllOption.applyReadAll, EmptyMatchAllowIfWildcard)
	checkType("avroio.ReadAll", t, o)
	return filesource.ReadAll[beam.X](s, patterns, o.format(t), o.readAllOpts(t)...)
}

// ReadFiles reads the Avro files of a PCollection of fileio.ReadableFile
// (from fileio.MatchFiles and fileio.ReadMatches, say) as records of type t
// (RecordType for generic records). A file must not be compressed as a
// whole (gzip around the container): Avro compresses its blocks, which is
// what lets a file be split. A directory, or a file that is gone, fails
// the read with an error of kind filesource.ErrOpen.
func ReadFiles(s beam.Scope, files beam.PCollection, t reflect.Type, opts ...ReadFilesOption) beam.PCollection {
	s = s.Scope("avroio.ReadFiles")
	o := mustParse("avroio.ReadFiles", opts, ReadFilesOption.applyReadFiles, EmptyMatchAllow)
	checkType("avroio.ReadFiles", t, o)
	return filesource.ReadFiles[beam.X](s, files, o.format(t), o.readFilesOpts(t)...)
}

// checkType panics unless t can travel to the workers: a named type must
// be registered with Beam (beam.RegisterType in an init function), or the
// workers would decode records into an anonymous copy of it; a type
// holding a decimal (*big.Rat) must have been registered with
// RegisterType, which gives it a coder that keeps its values. With a reader
// schema (WithReaderSchema) the records' schema is known now, so a struct
// field that names no field of it (a struct tagged `json:"..."` for Beam
// Go's avroio, say) is refused now rather than when a worker opens the
// first file.
func checkType(name string, t reflect.Type, o readOptions) {
	if t == nil {
		panic(name + ": nil record type")
	}
	if t != RecordType {
		if err := beamtypes.Check(t, "avroio.RegisterType"); err != nil {
			panic(fmt.Sprintf("%s: %v", name, err))
		}
	}
	if err := checkReadable(t); err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	if o.readerSchema != "" && t != RecordType {
		if rs, err := parseReaderSchema(o.readerSchema); err == nil {
			if err := checkFields(t, rs); err != nil {
				panic(fmt.Sprintf("%s: WithReaderSchema: %v", name, err))
			}
		}
	}
}

// checkReadable refuses record types that hamba/avro would read values
// into wrongly whatever the schema: a big.Rat held by value.
func checkReadable(t reflect.Type) error {
	if p := ratValueField(t); p != "" {
		return fmt.Errorf("field %s of Go type %v is a big.Rat, into which hamba/avro reads every decimal as 0; make it a *big.Rat", p, t)
	}
	return nil
}

// FileSource returns the source Read reads for the whole Avro file at path
// as records of type t with the options: the file's real opening (on any
// filesystem, with the change check), the field checks of t against the
// file's schema, the reader schema and limits of the options. Package
// avroio/avrotest runs sdftest's split checks on it:
//
//	s, err := avrotest.Subject(ctx, "/data/events.avro", reflect.TypeFor[Event]())
//	...
//	sdftest.AssertSplitAtFractionExhaustive(t, s)
//
// Records are the decoded values (of type t) as beam.X.
func FileSource(ctx context.Context, path string, t reflect.Type, opts ...ReadFilesOption) (offsetsource.Source[beam.X], error) {
	o, err := parseOptions(opts, ReadFilesOption.applyReadFiles, EmptyMatchDisallow)
	if err != nil {
		return nil, fmt.Errorf("avroio.FileSource: %w", err)
	}
	if t == nil {
		return nil, fmt.Errorf("avroio.FileSource: nil record type")
	}
	if err := checkReadable(t); err != nil {
		return nil, fmt.Errorf("avroio.FileSource: %w", err)
	}
	m, err := filesource.Stat(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("avroio.FileSource: %w", err)
	}
	return filesource.NewSource[beam.X](m, o.format(t)), nil
}
