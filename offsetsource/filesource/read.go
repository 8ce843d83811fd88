package filesource

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/offsetsource"
)

// Namespace is the Beam metrics namespace of the reads unless
// MetricsNamespace names another.
const Namespace = "sdfio/filesource"

// counter returns the counter name in namespace ns (Namespace when empty).
func counter(ns, name string) beam.Counter {
	if ns == "" {
		ns = Namespace
	}
	return beam.NewCounter(ns, name)
}

// Option configures the reads and the watch.
type Option func(*options)

type options struct {
	emptyMatch        EmptyMatchTreatment
	manyFiles         bool
	desiredBundleSize int64
	namespace         string
	outputType        reflect.Type
	matchUpdated      bool
}

// EmptyMatch sets what a file pattern that matches no file means (Java's
// withEmptyMatchTreatment). Read's default is EmptyMatchDisallow, ReadAll's
// EmptyMatchAllowIfWildcard. ReadFiles and the watch match nothing and
// ignore it.
func EmptyMatch(t EmptyMatchTreatment) Option {
	return func(o *options) { o.emptyMatch = t }
}

// MatchesManyFiles hints that the pattern given to Read matches very many
// files (tens of thousands or more; Java's withHintMatchesManyFiles). Read
// then expands the pattern in a step of the pipeline, as ReadAll does,
// instead of listing the files while the pipeline is built and putting
// every file in the pipeline graph. For a pattern of few files it costs an
// extra shuffle of the file list.
func MatchesManyFiles() Option {
	return func(o *options) { o.manyFiles = true }
}

// DesiredBundleSize sets the size in bytes of the initial bundles each file
// is cut into (offsetsource.DefaultDesiredBundleSize, 64 MiB, when not
// set). Runners split bundles further while they run.
func DesiredBundleSize(bytes int64) Option {
	return func(o *options) { o.desiredBundleSize = bytes }
}

// MetricsNamespace sets the namespace of the read's metrics (Namespace when
// not set), so that a format reports under its own name.
func MetricsNamespace(ns string) Option {
	return func(o *options) { o.namespace = ns }
}

// OutputType says what type the records have when T is a universal type
// (beam.X), for formats whose record type is known only at run time (see
// offsetsource.OutputType).
func OutputType(t reflect.Type) Option {
	return func(o *options) { o.outputType = t }
}

// MatchUpdatedFiles makes the watch treat a file whose size or
// modification time changed since it was read as a new file, and read it
// again, whole (Java's FileIO.MatchConfiguration.continuously with
// matchUpdatedFiles): see WatchForNewFiles. Other reads ignore it.
func MatchUpdatedFiles() Option {
	return func(o *options) { o.matchUpdated = true }
}

func parseOptions(opts []Option, emptyDefault EmptyMatchTreatment) (options, error) {
	o := options{desiredBundleSize: offsetsource.DefaultDesiredBundleSize, namespace: Namespace}
	for _, opt := range opts {
		opt(&o)
	}
	if o.emptyMatch == emptyMatchDefault {
		o.emptyMatch = emptyDefault
	}
	switch {
	case !o.emptyMatch.valid():
		return o, fmt.Errorf("unknown empty-match treatment %v", o.emptyMatch)
	case o.desiredBundleSize <= 0:
		return o, fmt.Errorf("desired bundle size %d: must be positive", o.desiredBundleSize)
	case o.namespace == "":
		return o, fmt.Errorf("empty metrics namespace")
	}
	return o, nil
}

func mustParse(name string, opts []Option, emptyDefault EmptyMatchTreatment) options {
	o, err := parseOptions(opts, emptyDefault)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	return o
}

// Read reads the files that filepattern matches (a path or glob on any
// Beam filesystem, see Match) with format, and returns a PCollection of
// their records. T and F must be registered with Register.
//
// The pattern is expanded while the pipeline is built (unless
// MatchesManyFiles is given), and each file is read by a splittable DoFn
// in initial bundles of DesiredBundleSize bytes that runners split further
// while they run. Each range checks, when it opens its file, that the file
// has the size and modification time it was matched with, and fails with
// an error of kind ErrChanged naming the file if not: a read never mixes
// two versions of a file. By default a pattern that matches no file is an
// error (EmptyMatch(EmptyMatchDisallow)).
//
// Read panics if the options are invalid, or if matching fails or finds no
// file when that is not allowed.
func Read[T any, F Format[T]](s beam.Scope, filepattern string, format F, opts ...Option) beam.PCollection {
	s = s.Scope("filesource.Read")
	o := mustParse("filesource.Read", opts, EmptyMatchDisallow)
	if strings.TrimSpace(filepattern) == "" {
		panic("filesource.Read: empty file pattern")
	}
	filesystem.ValidateScheme(filepattern)
	if o.manyFiles {
		return readAll[T, F](s, beam.Create(s, filepattern), format, o)
	}
	files, err := Match(context.Background(), filepattern, o.emptyMatch)
	if err != nil {
		panic(fmt.Sprintf("filesource.Read: %v", err))
	}
	srcs := make([]Source[T, F], len(files))
	for i, m := range files {
		srcs[i] = newSource[T, F](m, format, ChangeFail, o)
	}
	return readSources[T, F](s, beam.CreateList(s, srcs), o)
}

// ReadAll reads the files that each pattern of a PCollection of strings
// matches, with format. Patterns are expanded by the pipeline, in
// parallel, and the list of files is shuffled before reading (Java's
// readAll); only file names are shuffled, never records. By default a
// pattern without wildcards that matches no file fails the pipeline, and
// one with wildcards reads nothing (EmptyMatch(EmptyMatchAllowIfWildcard)).
func ReadAll[T any, F Format[T]](s beam.Scope, patterns beam.PCollection, format F, opts ...Option) beam.PCollection {
	s = s.Scope("filesource.ReadAll")
	o := mustParse("filesource.ReadAll", opts, EmptyMatchAllowIfWildcard)
	return readAll[T, F](s, patterns, format, o)
}

// ReadFiles reads the files of a PCollection of fileio.ReadableFile (from
// fileio.MatchFiles and fileio.ReadMatches, say) with format. A file
// compressed as a whole (gzip) cannot be split and is an error; so is a
// directory or a file that is gone (kind ErrOpen). The empty-match and
// many-files options do not apply.
func ReadFiles[T any, F Format[T]](s beam.Scope, files beam.PCollection, format F, opts ...Option) beam.PCollection {
	s = s.Scope("filesource.ReadFiles")
	o := mustParse("filesource.ReadFiles", opts, EmptyMatchAllow)
	srcs := beam.ParDo(s, &readableFileFn[T, F]{Format: format, Namespace: o.namespace}, files)
	return readSources[T, F](s, srcs, o)
}

func newSource[T any, F Format[T]](m Metadata, format F, change ChangeTreatment, o options) Source[T, F] {
	src := NewSource[T, F](m, format)
	src.OnChange = int(change)
	src.Namespace = o.namespace
	return src
}

func readAll[T any, F Format[T]](s beam.Scope, patterns beam.PCollection, format F, o options) beam.PCollection {
	srcs := beam.ParDo(s, &matchFn[T, F]{EmptyMatch: int(o.emptyMatch), Format: format, Namespace: o.namespace}, patterns)
	// Spread the files over workers: matching yields them all in one
	// bundle. Only file names are shuffled, never records.
	srcs = beam.Reshuffle(s, srcs)
	return readSources[T, F](s, srcs, o)
}

func readSources[T any, F Format[T]](s beam.Scope, srcs beam.PCollection, o options) beam.PCollection {
	opts := []offsetsource.Option{
		offsetsource.MetricsNamespace(o.namespace),
		offsetsource.DesiredBundleSize(o.desiredBundleSize),
		offsetsource.SourceCounters("ranges_read"), // Source.Open counts it
	}
	if o.outputType != nil {
		opts = append(opts, offsetsource.OutputType(o.outputType))
	}
	return offsetsource.ReadAll[T, Source[T, F]](s, srcs, opts...)
}

func registerReadFns[T any, F Format[T]]() {
	register.DoFn3x1[context.Context, string, func(Source[T, F]), error](&matchFn[T, F]{})
	register.DoFn3x1[context.Context, fileio.ReadableFile, func(Source[T, F]), error](&readableFileFn[T, F]{})
	register.DoFn3x1[context.Context, fileio.FileMetadata, func(Source[T, F]), error](&watchedFileFn[T, F]{})
	register.Emitter1[Source[T, F]]()
}

// matchFn expands file patterns into sources, in the pipeline.
type matchFn[T any, F Format[T]] struct {
	EmptyMatch int
	Format     F
	Namespace  string
}

// StartBundle reports files_matched from the bundle's start, for the
// reason offsetsource's read does its counters (see its StartBundle).
func (fn *matchFn[T, F]) StartBundle(ctx context.Context, _ func(Source[T, F])) {
	counter(fn.Namespace, "files_matched").Inc(ctx, 0)
}

func (fn *matchFn[T, F]) ProcessElement(ctx context.Context, pattern string, emit func(Source[T, F])) error {
	files, err := Match(ctx, pattern, EmptyMatchTreatment(fn.EmptyMatch))
	if err != nil {
		return err
	}
	counter(fn.Namespace, "files_matched").Inc(ctx, int64(len(files)))
	for _, m := range files {
		emit(newSource[T, F](m, fn.Format, ChangeFail, options{namespace: fn.Namespace}))
	}
	return nil
}

// readableFileFn turns fileio.ReadableFiles into sources.
type readableFileFn[T any, F Format[T]] struct {
	Format    F
	Namespace string
}

// fileio's compression of a ReadableFile (its constants are unexported).
const (
	fileioCompressionAuto = 0
	fileioCompressionGzip = 1
)

// StartBundle reports files_matched from the bundle's start (see
// matchFn.StartBundle).
func (fn *readableFileFn[T, F]) StartBundle(ctx context.Context, _ func(Source[T, F])) {
	counter(fn.Namespace, "files_matched").Inc(ctx, 0)
}

func (fn *readableFileFn[T, F]) ProcessElement(ctx context.Context, f fileio.ReadableFile, emit func(Source[T, F])) error {
	path := f.Metadata.Path
	c := int(f.Compression)
	if c == fileioCompressionGzip || c == fileioCompressionAuto && strings.EqualFold(filepath.Ext(path), ".gz") {
		return fmt.Errorf("filesource: %s is gzip-compressed as a whole, and cannot be split inside a gzip stream; read it with fileio.ReadUncompressed() if the name misleads", path)
	}
	m := MetadataOf(f.Metadata)
	if m.Size < 0 {
		// fileio did not say (or said 0): ask, which also tells a
		// directory or a missing file apart.
		cur, err := Stat(ctx, path)
		if err != nil {
			return fmt.Errorf("filesource: reading %s: %w", path, err)
		}
		m.Size = cur.Size
		if m.LastModified == 0 {
			m.LastModified = cur.LastModified
		}
	}
	counter(fn.Namespace, "files_matched").Inc(ctx, 1)
	emit(newSource[T, F](m, fn.Format, ChangeFail, options{namespace: fn.Namespace}))
	return nil
}

// watchedFileFn turns the files a watch emits into sources that read them
// as the watch saw them.
type watchedFileFn[T any, F Format[T]] struct {
	Format    F
	Namespace string
}

func (fn *watchedFileFn[T, F]) ProcessElement(ctx context.Context, fm fileio.FileMetadata, emit func(Source[T, F])) error {
	m := MetadataOf(fm)
	if m.Size < 0 {
		m.Size = 0 // the watch knows: an empty file
	}
	emit(newSource[T, F](m, fn.Format, ChangeReadAsMatched, options{namespace: fn.Namespace}))
	return nil
}
