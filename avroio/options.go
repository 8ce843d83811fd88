package avroio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
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
	skip              []filesource.UpdatedOption // WithSkipOlderThan, WithSkipListed
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
// WithDesiredBundleSize, WithMinBundleSize, WithReaderSchema,
// WithReaderSchemaFile, WithMaxAlloc and WithMaxDepth return one.
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
// WatchAllForNewFiles and MatchNewFiles (WithMatchUpdatedFiles,
// WithSkipOlderThan, WithSkipListed).
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

// maxReaderSchemaFile is the largest reader schema file
// WithReaderSchemaFile reads: 16 MiB.
const maxReaderSchemaFile = 16 << 20

// WithReaderSchemaFile is WithReaderSchema with the schema's JSON read
// from the file at path, on any Beam filesystem the program imports
// (local paths, gs://, memfs://, ...; see "Files and patterns"), once,
// when the pipeline is built: the process that builds the pipeline must
// be able to read it, and the workers get the schema itself. A file that
// cannot be read, is empty, is over 16 MiB or does not parse is refused
// then, naming the path.
func WithReaderSchemaFile(path string) RecordOption {
	return func(o *readOptions) {
		json, err := readSchemaFile(path)
		if err != nil {
			o.fail("WithReaderSchemaFile(%q): %w", path, err)
			return
		}
		o.readerSchema = json
		if _, err := parseReaderSchema(json); err != nil {
			o.fail("WithReaderSchemaFile(%q): the reader schema does not parse: %w", path, err)
		}
	}
}

// readSchemaFile reads the schema file at path through Beam's filesystem
// registry.
func readSchemaFile(path string) (string, error) {
	if strings.TrimSpace(path) == "" {
		return "", errors.New("an empty path")
	}
	if err := validateScheme(path); err != nil {
		return "", err
	}
	ctx := context.Background()
	fs, err := filesystem.New(ctx, path)
	if err != nil {
		return "", fmt.Errorf("opening its filesystem: %w", err)
	}
	defer fs.Close()
	r, err := fs.OpenRead(ctx, path)
	if err != nil {
		return "", fmt.Errorf("opening it: %w", err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxReaderSchemaFile+1))
	if err != nil {
		return "", fmt.Errorf("reading it: %w", err)
	}
	if len(b) > maxReaderSchemaFile {
		return "", fmt.Errorf("the file is over %d bytes, too large for a schema", maxReaderSchemaFile)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", errors.New("the file is empty")
	}
	return string(b), nil
}

// WithMaxAlloc bounds what one length field in a file (a block's size, a
// string, an array) may make the reader allocate, in bytes
// (DefaultMaxAlloc when not set; it must be positive), and what one
// record may: its estimate, made before it is decoded, of what decoding
// it allocates (Go maps at their real cost, their growth included) and
// of one encoding of it by its coder, which a pipeline makes of sampled
// elements. A file that asks for more fails the read with an error
// naming the file, the offset, the record and the field, instead of
// exhausting memory: a read takes at most about WithMaxAlloc plus 60 MB.
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

// WithSkipOlderThan makes WatchForNewFiles, WatchAllForNewFiles and
// MatchNewFiles skip every file modified before t, as if an earlier job
// had read it: for a streaming job submitted again after a failure, which
// would otherwise read every file again (see WatchForNewFiles, "A
// restarted job"). Take t a little before the failed job's last file was
// read: files between are read twice, none is lost. A file copied with
// its old modification time kept (cp -p, rsync -t) is skipped too; one
// modified at or after t is read. See filesource.WithSkipOlderThan.
func WithSkipOlderThan(t time.Time) UpdatedOption {
	opt := filesource.WithSkipOlderThan(t)
	return func(o *readOptions) { o.skip = append(o.skip, opt) }
}

// WithSkipListed makes WatchForNewFiles, WatchAllForNewFiles and
// MatchNewFiles skip the files listed in the text file at path (any Beam
// filesystem), one path per line as the watch names them (/data/in/a.avro,
// gs://bucket/in/a.avro; # starts a comment line): the files an earlier
// job read, kept by the user. The list is read when the pipeline is built
// (a list that cannot be read panics then, naming it) and when the watch
// starts. See filesource.WithSkipListed.
func WithSkipListed(path string) UpdatedOption {
	return func(o *readOptions) {
		o.skip = append(o.skip, filesource.WithSkipListed(path))
		if strings.TrimSpace(path) == "" {
			o.fail("WithSkipListed(%q): an empty path", path)
			return
		}
		if err := validateScheme(path); err != nil {
			o.fail("WithSkipListed(%q): %w", path, err)
		}
	}
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
	for _, skip := range o.skip {
		opts = append(opts, skip)
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

// Defaults of the write options.
const (
	// DefaultShardNameTemplate is Beam Java's default shard name template.
	DefaultShardNameTemplate = "-SSSSS-of-NNNNN"
	// DefaultWriteCodec is the codec Write uses unless WithCodec says otherwise:
	// snappy, as in Beam Java's AvroIO.
	DefaultWriteCodec = "snappy"
	// DefaultSyncInterval is the default number of bytes of serialized
	// records per block: container.DefaultSyncInterval, as in Avro Java.
	DefaultSyncInterval = container.DefaultSyncInterval
)

// WriteOption configures Write. The options of Write alone return a
// WriteOption; WithMetricsNamespace, an option of every transform, is one
// too. A read's option is not a WriteOption: given to Write, it does not
// compile.
type WriteOption interface{ applyWrite(*writeOptions) }

// writeOnlyOption is an option of Write alone.
type writeOnlyOption func(*writeOptions)

func (f writeOnlyOption) applyWrite(o *writeOptions) { f(o) }

type writeOptions struct {
	numShards    int
	suffix       string
	template     string
	codec        string
	level        int
	syncInterval int
	maxBlock     int64
	meta         map[string][]byte
	tempDir      string
	staleAge     time.Duration
	namespace    string
	windowed     bool
	dest         *destFunc    // WithDestination's function, checked by Write
	destType     reflect.Type // its argument's type
	destCall     string       // WithDestination's call, for errors
	// fileCalls are the calls of the options that shape the files (codec,
	// level, sync interval, block size, metadata), which the container
	// writer checks: its errors name them.
	fileCalls []string
	err       error // the first option that cannot work
}

func (o *writeOptions) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

func (o *writeOptions) setNamespace(ns string) {
	o.namespace = ns
	if ns == "" {
		o.fail(`WithMetricsNamespace(""): an empty metrics namespace`)
	}
}

// fileOption is an option that shapes the files, noted as call.
func fileOption(call string, f func(*writeOptions)) WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.fileCalls = append(o.fileCalls, call); f(o) })
}

// WithNumShards sets the number of files: exactly n (empty files
// included), or for 0, the default, as many as the runner makes bundles
// (one file each). Fixed sharding groups the records by shard, a shuffle
// of every record; prefer 0 unless the number of files matters. With
// WithWindowedWrites, it is the number of files per window, pane and
// destination (1 for 0, the default), and shards without records have
// no file; with WithDestination, the number of files per destination.
func WithNumShards(n int) WriteOption {
	return writeOnlyOption(func(o *writeOptions) {
		o.numShards = n
		if n < 0 {
			o.fail("WithNumShards(%d): a negative number of shards", n)
		}
	})
}

// WithSuffix is appended to every file name, after the shard name (e.g.
// ".avro").
func WithSuffix(s string) WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.suffix = s })
}

// WithShardNameTemplate sets the part of a file name between the prefix
// and the suffix (DefaultShardNameTemplate when not set): each run of 'S'
// is replaced by the shard index and each run of 'N' by the number of
// shards, zero-padded to the run's length (wider numbers are not cut); all
// other characters are kept. A template without 'S' suits one file only.
func WithShardNameTemplate(t string) WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.template = t })
}

// WithCodec sets the block codec by its Avro name: "null", "deflate",
// "snappy" (the default), "zstandard" or "xz" (container.WritableCodecs),
// at the codec's default level.
func WithCodec(name string) WriteOption {
	return fileOption(fmt.Sprintf("WithCodec(%q)", name), func(o *writeOptions) { o.codec, o.level = name, 0 })
}

// WithDeflateLevel selects the deflate codec at level 1 (fastest) to 9
// (smallest); its default is 6.
func WithDeflateLevel(level int) WriteOption {
	return fileOption(fmt.Sprintf("WithDeflateLevel(%d)", level), func(o *writeOptions) { o.codec, o.level = "deflate", level })
}

// WithZstandardLevel selects the zstandard codec at a level of up to 22
// (see container.WriterOptions.Level); its default is 3.
func WithZstandardLevel(level int) WriteOption {
	return fileOption(fmt.Sprintf("WithZstandardLevel(%d)", level), func(o *writeOptions) { o.codec, o.level = "zstandard", level })
}

// WithSyncInterval sets the number of bytes of serialized records after
// which a block ends (DefaultSyncInterval when not set), from
// container.MinSyncInterval to container.MaxSyncInterval.
func WithSyncInterval(bytes int) WriteOption {
	return fileOption(fmt.Sprintf("WithSyncInterval(%d)", bytes), func(o *writeOptions) { o.syncInterval = bytes })
}

// WithMaxBlockSize bounds the blocks of the files (their serialized
// records, and those compressed), by default container.DefaultMaxAlloc:
// the largest block Read, with its default WithMaxAlloc, reads. So what
// Write writes with its defaults, Read reads with its defaults (but for a
// single record whose decoding Read estimates over WithMaxAlloc: a string
// or bytes value over about half of it, which costs its size twice, read
// and encoded): a record that would take a block past the bound ends the
// block first, and a record that alone serializes to more fails the
// write naming it and its size (as a record the schema cannot hold does:
// see "When a write fails"). Raise it together with the readers'
// WithMaxAlloc.
func WithMaxBlockSize(bytes int64) WriteOption {
	return fileOption(fmt.Sprintf("WithMaxBlockSize(%d)", bytes), func(o *writeOptions) { o.maxBlock = bytes })
}

// WithMetadata adds user metadata to every file's header. Keys starting
// with "avro." are reserved. Several WithMetadata options add up; a later
// value for a key replaces an earlier one.
func WithMetadata[V ~string | ~[]byte](m map[string]V) WriteOption {
	return fileOption("WithMetadata(...)", func(o *writeOptions) {
		if o.meta == nil {
			o.meta = map[string][]byte{}
		}
		for k, v := range m {
			o.meta[k] = []byte(v)
		}
	})
}

// WithTempDirectory sets the directory under which the write makes its
// temporary directory (by default the directory of the prefix). It must
// be on the same filesystem as the prefix, so that files can be renamed.
func WithTempDirectory(dir string) WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.tempDir = dir })
}

// WithStaleTempAge sets how long the temporary directory of another write
// beside this one's, when it holds no lease, must have gone unmodified
// before this write takes it for the debris of a write that is no longer
// running and removes it (see "When a write fails"; a directory with a
// lease goes as soon as the lease is released, or 5 minutes after it was
// last renewed): DefaultStaleTempAge (7 days) unless given.
// It must be positive; set it below the longest a write of yours may run
// between two of its steps and a live write's files may be removed (it
// then fails, naming the file).
func WithStaleTempAge(d time.Duration) WriteOption {
	return writeOnlyOption(func(o *writeOptions) {
		o.staleAge = d
		if d <= 0 {
			o.fail("WithStaleTempAge(%v): the age must be positive", d)
		}
	})
}

// WithWindowedWrites writes a set of files for each window and pane of
// the input, as Beam Java's AvroIO.write().withWindowedWrites(): the
// records are grouped by the input's windowing and trigger, and the files
// of a pane are committed when the pane fires, so an unbounded input (a
// watch, say) is written as it comes. Names carry the window and the pane
// (see "Windowed writes" at Write); each window has one file per
// destination unless WithNumShards says otherwise.
func WithWindowedWrites() WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.windowed = true })
}

// WithDestination routes each element to the destination fn returns for
// it, a string appended to Write's prefix: with the prefix "/out/" and
// the destination "eu/events", the files are /out/eu/events-00000-of-00002
// and so on; with the prefix "/out/events-" and "eu", /out/events-eu-...
// (Beam Java's FileIO.writeDynamic). Each destination has its own files,
// shards and shard numbering. T must be the element type of the write; fn
// must be a top-level function registered with Beam
// (register.Function1x1(fn) in an init function), so that workers find it.
// A destination with a ".." path element or a "://" fails the write, as a
// record the schema cannot hold does.
func WithDestination[T any](fn func(T) string) WriteOption {
	call := fmt.Sprintf("WithDestination(%T)", fn)
	return writeOnlyOption(func(o *writeOptions) {
		o.destCall = call
		if fn == nil {
			o.fail("%s: a nil function", call)
			return
		}
		o.dest = &destFunc{Fn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fn)}}
		o.destType = reflect.TypeFor[T]()
	})
}
