package filesource

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/runnerfix"
	"github.com/sdfio/sdfio/offsetsource"
)

// Namespace is the Beam metrics namespace of the reads unless
// WithMetricsNamespace names another.
const Namespace = "sdfio/filesource"

// counter returns the counter name in namespace ns (Namespace when empty).
func counter(ns, name string) beam.Counter {
	if ns == "" {
		ns = Namespace
	}
	return beam.NewCounter(ns, name)
}

// Read reads the files that filepattern matches (a path or glob on any
// Beam filesystem, see Match) with format, and returns a PCollection of
// their records. T and F must be registered with Register.
//
// The pattern is expanded while the pipeline is built (unless
// WithMatchesManyFiles is given), and each file is read by a splittable DoFn
// in initial bundles of WithDesiredBundleSize bytes that runners split further
// while they run. Each range checks, when it opens its file, that the file
// has the size and modification time it was matched with, and fails with
// an error of kind ErrChanged naming the file if not: a read never mixes
// two versions of a file. By default a pattern that matches no file is an
// error, of kind ErrNoMatch naming the pattern, when the pipeline runs
// (WithEmptyMatch(EmptyMatchDisallow); as Beam Java, whose read matches
// when it runs): a pattern that matches nothing when the pipeline is built
// is matched again in the pipeline, as WithMatchesManyFiles does.
//
// Read panics if the options are invalid, or if matching fails for another
// reason (a filesystem that cannot list, a pattern naming a directory).
func Read[T any, F Format[T]](s beam.Scope, filepattern string, format F, opts ...ReadOption) beam.PCollection {
	s = s.Scope("filesource.Read")
	o := mustParse("filesource.Read", opts, ReadOption.applyRead, EmptyMatchDisallow)
	if strings.TrimSpace(filepattern) == "" {
		panic("filesource.Read: empty file pattern")
	}
	filesystem.ValidateScheme(filepattern)
	if o.manyFiles {
		return readAll[T, F](s, beam.Create(s, filepattern), format, o)
	}
	ctx := context.Background()
	files, err := Match(ctx, filepattern, o.emptyMatch)
	if errors.Is(err, ErrNoMatch) {
		// As in Beam Java, a pattern that matches nothing fails the
		// pipeline when it runs, not while it is built: the pattern is
		// matched again in the pipeline, which fails then if it still
		// matches nothing (and reads the files if some came since).
		log.Warnf(ctx, "filesource.Read: %v; matching it again when the pipeline runs, where it fails the read if it still matches nothing", err)
		return readAll[T, F](s, beam.Create(s, filepattern), format, o)
	}
	if err != nil {
		panic(fmt.Sprintf("filesource.Read: %v", err))
	}
	logMatched(ctx, filepattern, files)
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
// one with wildcards reads nothing (WithEmptyMatch(EmptyMatchAllowIfWildcard)).
func ReadAll[T any, F Format[T]](s beam.Scope, patterns beam.PCollection, format F, opts ...ReadAllOption) beam.PCollection {
	s = s.Scope("filesource.ReadAll")
	o := mustParse("filesource.ReadAll", opts, ReadAllOption.applyReadAll, EmptyMatchAllowIfWildcard)
	return readAll[T, F](s, patterns, format, o)
}

// ReadFiles reads the files of a PCollection of fileio.ReadableFile (from
// fileio.MatchFiles and fileio.ReadMatches, say) with format. A file
// compressed as a whole (gzip) cannot be split and is an error; so is a
// directory or a file that is gone (kind ErrOpen). The empty-match and
// many-files options do not apply.
func ReadFiles[T any, F Format[T]](s beam.Scope, files beam.PCollection, format F, opts ...ReadFilesOption) beam.PCollection {
	s = s.Scope("filesource.ReadFiles")
	o := mustParse("filesource.ReadFiles", opts, ReadFilesOption.applyReadFiles, EmptyMatchAllow)
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
	opts := []offsetsource.ReadOption{
		offsetsource.WithMetricsNamespace(o.namespace),
		offsetsource.WithDesiredBundleSize(o.desiredBundleSize),
		offsetsource.WithSourceCounters("ranges_read"), // Source.Open counts it
	}
	if o.outputType != nil {
		opts = append(opts, offsetsource.WithOutputType(o.outputType))
	}
	if o.badInput != nil {
		records, bad := offsetsource.ReadAllWithBadInput[T, Source[T, F]](s, srcs, opts...)
		*o.badInput = bad
		return records
	}
	return offsetsource.ReadAll[T, Source[T, F]](s, srcs, opts...)
}

// logMatched logs at INFO what a pattern matched: the read's plan, for a
// user to see.
func logMatched(ctx context.Context, pattern string, files []Metadata) {
	var bytes int64
	for _, m := range files {
		bytes += m.Size
	}
	log.Infof(ctx, "filesource: pattern %q matched %d files, %d bytes", pattern, len(files), bytes)
}

func registerReadFns[T any, F Format[T]]() {
	beamreg.DoFn3x1[context.Context, string, func(Source[T, F]), error](&matchFn[T, F]{})
	beamreg.DoFn3x1[context.Context, fileio.ReadableFile, func(Source[T, F]), error](&readableFileFn[T, F]{})
	beamreg.DoFn3x1[context.Context, fileio.FileMetadata, func(Source[T, F]), error](&watchedFileFn[T, F]{})
	register.Emitter1[Source[T, F]]()
}

// matchFn expands file patterns into sources, in the pipeline.
type matchFn[T any, F Format[T]] struct {
	EmptyMatch int
	Format     F
	Namespace  string
}

// StartBundle reports files_matched from the bundle's start
// (runnerfix.TouchCounters says why).
func (fn *matchFn[T, F]) StartBundle(ctx context.Context, _ func(Source[T, F])) {
	runnerfix.TouchCounters(ctx, counter(fn.Namespace, "files_matched"))
}

func (fn *matchFn[T, F]) ProcessElement(ctx context.Context, pattern string, emit func(Source[T, F])) error {
	files, err := Match(ctx, pattern, EmptyMatchTreatment(fn.EmptyMatch))
	if err != nil {
		return err
	}
	counter(fn.Namespace, "files_matched").Inc(ctx, int64(len(files)))
	logMatched(ctx, pattern, files)
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
	runnerfix.TouchCounters(ctx, counter(fn.Namespace, "files_matched"))
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
