package avroio

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/offsetsource/filesource"
)

// Defaults of the read options. The size of initial bundles is
// offsetsource.DefaultDesiredBundleSize (64 MiB, Beam Java's default for
// file-based sources) unless WithDesiredBundleSize says otherwise.
const (
	// DefaultMinBundleSize is the smallest initial bundle: 128,000 bytes,
	// twice Avro's default sync interval, as in Beam Java's AvroSource.
	DefaultMinBundleSize int64 = 128000
	// DefaultMaxAlloc bounds one allocation driven by a length in a file
	// (see WithMaxAlloc): container.DefaultMaxAlloc, 64 MiB.
	DefaultMaxAlloc int64 = container.DefaultMaxAlloc
)

// readOptions is the configuration of a read or a watch.
type readOptions struct {
	emptyMatch        EmptyMatchTreatment
	manyFiles         bool
	desiredBundleSize int64
	minBundleSize     int64
	readerSchema      string
	maxAlloc          int64
	maxDepth          int
	matchUpdated      bool
	namespace         string
	err               error // the first option that cannot work
}

// fail records the first option that cannot work, as its call and why.
func (o *readOptions) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

// The read options are typed by transform: each transform takes its own
// interface, and each option returns a type that implements the
// interfaces of the transforms it applies to, so that an option given to
// a transform it does not apply to does not compile.
type (
	// ReadOption configures Read and ReadGeneric.
	ReadOption interface{ applyRead(*readOptions) }
	// ReadAllOption configures ReadAll.
	ReadAllOption interface{ applyReadAll(*readOptions) }
	// ReadFilesOption configures ReadFiles and FileSource.
	ReadFilesOption interface{ applyReadFiles(*readOptions) }
	// WatchOption configures WatchForNewFiles and WatchAllForNewFiles.
	WatchOption interface{ applyWatch(*readOptions) }
	// MatchOption configures MatchNewFiles.
	MatchOption interface{ applyMatch(*readOptions) }
)

// RecordOption is an option of every transform that reads records: Read,
// ReadGeneric, ReadAll, ReadFiles (and FileSource) and the watch's reads.
// WithDesiredBundleSize, WithMinBundleSize, WithReaderSchema, WithMaxAlloc
// and WithMaxDepth return one.
type RecordOption func(*readOptions)

func (f RecordOption) applyRead(o *readOptions)      { f(o) }
func (f RecordOption) applyReadAll(o *readOptions)   { f(o) }
func (f RecordOption) applyReadFiles(o *readOptions) { f(o) }
func (f RecordOption) applyWatch(o *readOptions)     { f(o) }

// PatternOption is an option of the reads that match patterns: Read,
// ReadGeneric and ReadAll (WithEmptyMatch).
type PatternOption func(*readOptions)

func (f PatternOption) applyRead(o *readOptions)    { f(o) }
func (f PatternOption) applyReadAll(o *readOptions) { f(o) }

// UpdatedOption is an option of the watch: WatchForNewFiles,
// WatchAllForNewFiles and MatchNewFiles (WithMatchUpdatedFiles).
type UpdatedOption func(*readOptions)

func (f UpdatedOption) applyWatch(o *readOptions) { f(o) }
func (f UpdatedOption) applyMatch(o *readOptions) { f(o) }

// readOnlyOption is an option of Read and ReadGeneric alone
// (WithMatchesManyFiles).
type readOnlyOption func(*readOptions)

func (f readOnlyOption) applyRead(o *readOptions) { f(o) }

// WithEmptyMatch sets what a file pattern that matches no file means
// (Java's withEmptyMatchTreatment). Read's default is EmptyMatchDisallow,
// ReadAll's EmptyMatchAllowIfWildcard.
func WithEmptyMatch(t EmptyMatchTreatment) PatternOption {
	return func(o *readOptions) {
		o.emptyMatch = t
		if t != emptyMatchDefault && (t < EmptyMatchAllow || t > EmptyMatchAllowIfWildcard) {
			o.fail("WithEmptyMatch(%v): unknown empty-match treatment", t)
		}
	}
}

// WithMatchesManyFiles hints that the pattern given to Read matches very
// many files (tens of thousands or more; Java's withHintMatchesManyFiles).
// Read then expands the pattern in a step of the pipeline, as ReadAll
// does, instead of listing the files while the pipeline is built and
// putting every file in the pipeline graph. For a pattern of few files it
// costs an extra shuffle of the file list.
func WithMatchesManyFiles() ReadOption {
	return readOnlyOption(func(o *readOptions) { o.manyFiles = true })
}

// WithDesiredBundleSize sets the size in bytes of the initial bundles each
// file is cut into (offsetsource.DefaultDesiredBundleSize, 64 MiB, when
// not set); it must be positive. Runners split bundles further while they
// run.
func WithDesiredBundleSize(bytes int64) RecordOption {
	return positiveOption("WithDesiredBundleSize", "desired bundle size", bytes, func(o *readOptions) *int64 { return &o.desiredBundleSize })
}

// WithMinBundleSize sets the smallest initial bundle, in bytes
// (DefaultMinBundleSize when not set); it must be positive. A file smaller
// than it is read as one bundle.
func WithMinBundleSize(bytes int64) RecordOption {
	return positiveOption("WithMinBundleSize", "minimum bundle size", bytes, func(o *readOptions) *int64 { return &o.minBundleSize })
}

// WithReaderSchema sets the schema records are read with, as Avro JSON. It
// is resolved against each file's writer schema by Avro's
// schema-resolution rules: fields the writer lacks take the reader's
// defaults, writer fields the reader lacks are skipped, numbers promote
// (int to long, float or double; long to float or double; float to
// double), string and bytes convert, enums and named types match by name
// or alias. A file whose schema cannot be resolved against it fails the
// read, naming the file. A json that does not parse is refused when the
// pipeline is built.
func WithReaderSchema(json string) RecordOption {
	return func(o *readOptions) {
		o.readerSchema = json
		if json == "" {
			return // read with each file's writer schema
		}
		if _, err := parseReaderSchema(json); err != nil {
			o.fail("WithReaderSchema: the reader schema does not parse: %w", err)
		}
	}
}

// WithMaxAlloc bounds what one length field in a file (a block's size, a
// string, an array) may make the reader allocate, in bytes
// (DefaultMaxAlloc when not set; it must be positive). A file that asks
// for more fails the read with an error naming the file and offset,
// instead of exhausting memory.
func WithMaxAlloc(bytes int64) RecordOption {
	return positiveOption("WithMaxAlloc", "allocation limit", bytes, func(o *readOptions) *int64 { return &o.maxAlloc })
}

// positiveOption is the option call(bytes), which sets the size of
// bytes that field finds in the options; it must be positive, else the
// error names the size as what.
func positiveOption(call, what string, bytes int64, field func(*readOptions) *int64) RecordOption {
	return func(o *readOptions) {
		*field(o) = bytes
		if bytes <= 0 {
			o.fail("%s(%d): the %s must be positive", call, bytes, what)
		}
	}
}

// WithMaxDepth bounds how deeply a record's values may nest records,
// arrays and maps (the top record is level 1; unions add no level), for
// the records of recursive schemas, whose data nests as deep as it says:
// decoding recurses once per level. Deeper records, and schemas nested
// deeper, fail the read naming the limit. Default
// container.DefaultMaxDepth (1000), at most container.MaxMaxDepth.
func WithMaxDepth(levels int) RecordOption {
	return func(o *readOptions) {
		o.maxDepth = levels
		if levels <= 0 || levels > container.MaxMaxDepth {
			o.fail("WithMaxDepth(%d): must be from 1 to %d", levels, container.MaxMaxDepth)
		}
	}
}

// WithMatchUpdatedFiles makes WatchForNewFiles, WatchAllForNewFiles and
// MatchNewFiles read a file again, whole, when its size or modification
// time changed after it was read (Java's matchUpdatedFiles; see
// WatchForNewFiles).
func WithMatchUpdatedFiles() UpdatedOption {
	return func(o *readOptions) { o.matchUpdated = true }
}

// MetricsOption is WithMetricsNamespace, an option of every transform of
// the package: a ReadOption, ReadAllOption, ReadFilesOption, WatchOption,
// MatchOption and WriteOption.
type MetricsOption struct{ ns string }

func (m MetricsOption) applyRead(o *readOptions)      { o.setNamespace(m.ns) }
func (m MetricsOption) applyReadAll(o *readOptions)   { o.setNamespace(m.ns) }
func (m MetricsOption) applyReadFiles(o *readOptions) { o.setNamespace(m.ns) }
func (m MetricsOption) applyWatch(o *readOptions)     { o.setNamespace(m.ns) }
func (m MetricsOption) applyMatch(o *readOptions)     { o.setNamespace(m.ns) }
func (m MetricsOption) applyWrite(o *writeOptions)    { o.setNamespace(m.ns) }

// WithMetricsNamespace puts the transform's Beam metrics in namespace ns
// instead of Namespace, the default (say, to tell two reads of a pipeline
// apart). It must not be empty.
func WithMetricsNamespace(ns string) MetricsOption { return MetricsOption{ns} }

func (o *readOptions) setNamespace(ns string) {
	o.namespace = ns
	if ns == "" {
		o.fail(`WithMetricsNamespace(""): an empty metrics namespace`)
	}
}

// parseReadOptions is the configuration of Read (and ReadGeneric) from
// opts.
func parseReadOptions(opts []ReadOption, emptyDefault EmptyMatchTreatment) (readOptions, error) {
	return parseOptions(opts, ReadOption.applyRead, emptyDefault)
}

// parseOptions is the configuration of a transform from opts, each applied
// by apply; the error is the first option that cannot work.
func parseOptions[O any](opts []O, apply func(O, *readOptions), emptyDefault EmptyMatchTreatment) (readOptions, error) {
	o := readOptions{
		desiredBundleSize: offsetsource.DefaultDesiredBundleSize,
		minBundleSize:     DefaultMinBundleSize,
		maxAlloc:          DefaultMaxAlloc,
		maxDepth:          container.DefaultMaxDepth,
		namespace:         Namespace,
	}
	for _, opt := range opts {
		apply(opt, &o)
	}
	if o.emptyMatch == emptyMatchDefault {
		o.emptyMatch = emptyDefault
	}
	return o, o.err
}

// mustParse is parseOptions for the transform name, which panics naming
// the transform and the option if an option cannot work.
func mustParse[O any](name string, opts []O, apply func(O, *readOptions), emptyDefault EmptyMatchTreatment) readOptions {
	o, err := parseOptions(opts, apply, emptyDefault)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	return o
}

// readOpts are the options of filesource's Read of records of type t.
func (o readOptions) readOpts(t reflect.Type) []filesource.ReadOption {
	opts := []filesource.ReadOption{filesource.WithEmptyMatch(o.emptyMatch), filesource.WithDesiredBundleSize(o.desiredBundleSize),
		filesource.WithMetricsNamespace(o.namespace), filesource.WithOutputType(t)}
	if o.manyFiles {
		opts = append(opts, filesource.WithMatchesManyFiles())
	}
	return opts
}

// readAllOpts are the options of filesource's ReadAll of records of type t.
func (o readOptions) readAllOpts(t reflect.Type) []filesource.ReadAllOption {
	return []filesource.ReadAllOption{filesource.WithEmptyMatch(o.emptyMatch), filesource.WithDesiredBundleSize(o.desiredBundleSize),
		filesource.WithMetricsNamespace(o.namespace), filesource.WithOutputType(t)}
}

// readFilesOpts are the options of filesource's ReadFiles of records of
// type t.
func (o readOptions) readFilesOpts(t reflect.Type) []filesource.ReadFilesOption {
	return []filesource.ReadFilesOption{filesource.WithDesiredBundleSize(o.desiredBundleSize),
		filesource.WithMetricsNamespace(o.namespace), filesource.WithOutputType(t)}
}

// watchOpts are the options of filesource's watch of records of type t.
func (o readOptions) watchOpts(t reflect.Type) []filesource.WatchOption {
	opts := []filesource.WatchOption{filesource.WithDesiredBundleSize(o.desiredBundleSize),
		filesource.WithMetricsNamespace(o.namespace), filesource.WithOutputType(t)}
	if o.matchUpdated {
		opts = append(opts, filesource.WithMatchUpdatedFiles())
	}
	return opts
}

// format is the Avro format reading records of type t with the options.
func (o readOptions) format(t reflect.Type) format {
	return format{Type: beam.EncodedType{T: t}, Settings: o.settings()}
}

// settings is what every source of the read carries to the workers.
func (o readOptions) settings() sourceSettings {
	return sourceSettings{ReaderSchema: o.readerSchema, MaxAlloc: o.maxAlloc, MaxDepth: o.maxDepth, MinBundleSize: o.minBundleSize}
}

// parseReaderSchema parses a reader schema with a cache of its own, so that
// its named types neither leak into nor clash with other schemas.
func parseReaderSchema(json string) (avro.Schema, error) {
	return avro.ParseWithCache(json, "", &avro.SchemaCache{})
}
