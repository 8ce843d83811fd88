package avroio

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// Namespace is the Beam metrics namespace of the reads: records,
// bytes_read (the bytes of the blocks read), splits_accepted and
// splits_refused (dynamic splits of running reads), files_matched, and
// ranges_read (the ranges of files opened: initial bundles and the
// pieces dynamic splits made of them).
const Namespace = "sdfio/avroio"

var (
	filesMatched = beam.NewCounter(Namespace, "files_matched")
	rangesRead   = beam.NewCounter(Namespace, "ranges_read")
)

func init() {
	register.DoFn3x1[context.Context, string, func(fileSource), error](&matchFn{})
	register.DoFn3x1[context.Context, fileio.ReadableFile, func(fileSource), error](&readableFileFn{})
	register.Emitter1[fileSource]()
}

// Read reads the Avro object container files that filepattern matches (a
// path or glob on any Beam filesystem: local, gs://, memfs://, ...) and
// returns a PCollection of their records as values of type t: a Go struct
// whose fields are matched to the record's fields by `avro` tags or else
// by name (a pointer to one, or any type hamba/avro decodes records into).
// Use ReadGeneric for records as maps. Every exported field of a struct
// must name a field of the schema; see the package documentation.
//
// The pattern is expanded while the pipeline is built (unless
// MatchesManyFiles is given), and each file is read by a splittable DoFn
// in initial bundles of DesiredBundleSize bytes that runners split further
// while they run. By default a pattern that matches no file is an error
// (EmptyMatch(EmptyMatchDisallow)).
//
// Read panics if the options are invalid, or if matching fails or finds no
// file when that is not allowed.
func Read(s beam.Scope, filepattern string, t reflect.Type, opts ...ReadOption) beam.PCollection {
	s = s.Scope("avroio.Read")
	return read(s, "avroio.Read", filepattern, t, opts)
}

// ReadGeneric is Read for generic records: each record is a Record, a
// map[string]any of its fields (see Record for the Go type of each Avro
// type).
func ReadGeneric(s beam.Scope, filepattern string, opts ...ReadOption) beam.PCollection {
	s = s.Scope("avroio.ReadGeneric")
	return read(s, "avroio.ReadGeneric", filepattern, RecordType, opts)
}

func read(s beam.Scope, name, pattern string, t reflect.Type, opts []ReadOption) beam.PCollection {
	o, err := parseReadOptions(opts, EmptyMatchDisallow)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	checkType(name, t)
	if strings.TrimSpace(pattern) == "" {
		panic(name + ": empty file pattern")
	}
	filesystem.ValidateScheme(pattern)
	if o.manyFiles {
		return readAll(s, beam.Create(s, pattern), t, o)
	}
	srcs, err := match(context.Background(), pattern, o.emptyMatch, beam.EncodedType{T: t}, o.settings())
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	return readSources(s, beam.CreateList(s, srcs), t, o)
}

// ReadAll reads the Avro files that each pattern of a PCollection of
// strings matches, as records of type t (RecordType for generic records).
// Patterns are expanded by the pipeline, in parallel, and the list of files
// is shuffled before reading (Java's AvroIO.readAll). By default a pattern
// without wildcards that matches no file fails the pipeline, and one with
// wildcards reads nothing (EmptyMatch(EmptyMatchAllowIfWildcard)).
func ReadAll(s beam.Scope, patterns beam.PCollection, t reflect.Type, opts ...ReadOption) beam.PCollection {
	s = s.Scope("avroio.ReadAll")
	o, err := parseReadOptions(opts, EmptyMatchAllowIfWildcard)
	if err != nil {
		panic(fmt.Sprintf("avroio.ReadAll: %v", err))
	}
	checkType("avroio.ReadAll", t)
	return readAll(s, patterns, t, o)
}

// ReadFiles reads the Avro files of a PCollection of fileio.ReadableFile
// (from fileio.MatchFiles and fileio.ReadMatches, say) as records of type t
// (RecordType for generic records). A file must not be compressed as a
// whole (gzip around the container): Avro compresses its blocks, which is
// what lets a file be split. The empty-match and many-files options do not
// apply.
func ReadFiles(s beam.Scope, files beam.PCollection, t reflect.Type, opts ...ReadOption) beam.PCollection {
	s = s.Scope("avroio.ReadFiles")
	o, err := parseReadOptions(opts, EmptyMatchAllow)
	if err != nil {
		panic(fmt.Sprintf("avroio.ReadFiles: %v", err))
	}
	checkType("avroio.ReadFiles", t)
	srcs := beam.ParDo(s, &readableFileFn{Type: beam.EncodedType{T: t}, Settings: o.settings()}, files)
	return readSources(s, srcs, t, o)
}

// checkType panics unless t can travel to the workers: a named type must
// be registered with Beam (beam.RegisterType in an init function), or the
// workers would decode records into an anonymous copy of it.
func checkType(name string, t reflect.Type) {
	if t == nil {
		panic(name + ": nil record type")
	}
	et := t
	for et.Kind() == reflect.Pointer {
		et = et.Elem()
	}
	if key, ok := runtime.TypeKey(et); ok {
		if rt, found := runtime.LookupType(key); !found || rt != et {
			panic(fmt.Sprintf("%s: record type %v is not registered with Beam: call beam.RegisterType(reflect.TypeFor[%v]()) in an init function", name, t, et))
		}
	}
}

func readAll(s beam.Scope, patterns beam.PCollection, t reflect.Type, o readOptions) beam.PCollection {
	srcs := beam.ParDo(s, &matchFn{EmptyMatch: int(o.emptyMatch), Type: beam.EncodedType{T: t}, Settings: o.settings()}, patterns)
	// Spread the files over workers: matching yields them all in one
	// bundle. Only file names are shuffled, never records.
	srcs = beam.Reshuffle(s, srcs)
	return readSources(s, srcs, t, o)
}

func readSources(s beam.Scope, srcs beam.PCollection, t reflect.Type, o readOptions) beam.PCollection {
	return offsetsource.ReadAll[beam.X, fileSource](s, srcs,
		offsetsource.OutputType(t),
		offsetsource.MetricsNamespace(Namespace),
		offsetsource.DesiredBundleSize(o.desiredBundleSize))
}

// match expands pattern into one source per file.
func match(ctx context.Context, pattern string, empty EmptyMatchTreatment, t beam.EncodedType, set sourceSettings) ([]fileSource, error) {
	fs, err := filesystem.New(ctx, pattern)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	files, err := fs.List(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("matching %q: %w", pattern, err)
	}
	srcs := make([]fileSource, 0, len(files))
	for _, f := range files {
		if schemeOf(f) == "default" {
			if fi, err := os.Stat(f); err == nil && fi.IsDir() {
				continue
			}
		}
		size, err := fs.Size(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("matching %q: size of %s: %w", pattern, f, err)
		}
		srcs = append(srcs, fileSource{Path: f, End: sdf.Unbounded, Size: size, Type: t, Settings: set})
	}
	if len(srcs) == 0 && !empty.allows(pattern) {
		return nil, fmt.Errorf("no file matches %q (empty-match treatment %v)", pattern, empty)
	}
	return srcs, nil
}

// matchFn expands file patterns into sources, in the pipeline.
type matchFn struct {
	EmptyMatch int
	Type       beam.EncodedType
	Settings   sourceSettings
}

func (fn *matchFn) ProcessElement(ctx context.Context, pattern string, emit func(fileSource)) error {
	if strings.TrimSpace(pattern) == "" {
		return fmt.Errorf("avroio: empty file pattern")
	}
	srcs, err := match(ctx, pattern, EmptyMatchTreatment(fn.EmptyMatch), fn.Type, fn.Settings)
	if err != nil {
		return fmt.Errorf("avroio: %w", err)
	}
	filesMatched.Inc(ctx, int64(len(srcs)))
	for _, src := range srcs {
		emit(src)
	}
	return nil
}

// readableFileFn turns fileio.ReadableFiles into sources.
type readableFileFn struct {
	Type     beam.EncodedType
	Settings sourceSettings
}

// fileio's compression of a ReadableFile (its constants are unexported).
const (
	fileioCompressionAuto = 0
	fileioCompressionGzip = 1
)

func (fn *readableFileFn) ProcessElement(ctx context.Context, f fileio.ReadableFile, emit func(fileSource)) error {
	path := f.Metadata.Path
	c := int(f.Compression)
	if c == fileioCompressionGzip || c == fileioCompressionAuto && strings.EqualFold(filepath.Ext(path), ".gz") {
		return fmt.Errorf("avroio: %s is gzip-compressed as a whole; Avro container files compress their blocks (codecs), and cannot be split inside a gzip stream; read them with fileio.ReadUncompressed() if the name misleads", path)
	}
	size := f.Metadata.Size
	if size <= 0 {
		var err error
		if size, err = fileSize(ctx, path); err != nil {
			return fmt.Errorf("avroio: size of %s: %w", path, err)
		}
	}
	filesMatched.Inc(ctx, 1)
	emit(fileSource{Path: path, End: sdf.Unbounded, Size: size, Type: fn.Type, Settings: fn.Settings})
	return nil
}
