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
// file-based sources) unless DesiredBundleSize says otherwise.
const (
	// DefaultMinBundleSize is the smallest initial bundle: 128,000 bytes,
	// twice Avro's default sync interval, as in Beam Java's AvroSource.
	DefaultMinBundleSize int64 = 128000
	// DefaultMaxAlloc bounds one allocation driven by a length in a file
	// (see MaxAlloc): container.DefaultMaxAlloc, 64 MiB.
	DefaultMaxAlloc int64 = container.DefaultMaxAlloc
)

// ReadOption configures Read, ReadGeneric, ReadAll and ReadFiles.
type ReadOption func(*readOptions)

type readOptions struct {
	emptyMatch        EmptyMatchTreatment
	manyFiles         bool
	desiredBundleSize int64
	minBundleSize     int64
	readerSchema      string
	maxAlloc          int64
	maxDepth          int
	matchUpdated      bool
}

// EmptyMatch sets what a file pattern that matches no file means (Java's
// withEmptyMatchTreatment). Read's default is EmptyMatchDisallow, ReadAll's
// EmptyMatchAllowIfWildcard. ReadFiles matches nothing and ignores it.
func EmptyMatch(t EmptyMatchTreatment) ReadOption {
	return func(o *readOptions) { o.emptyMatch = t }
}

// MatchesManyFiles hints that the pattern given to Read matches very many
// files (tens of thousands or more; Java's withHintMatchesManyFiles). Read
// then expands the pattern in a step of the pipeline, as ReadAll does,
// instead of listing the files while the pipeline is built and putting
// every file in the pipeline graph. For a pattern of few files it costs an
// extra shuffle of the file list.
func MatchesManyFiles() ReadOption {
	return func(o *readOptions) { o.manyFiles = true }
}

// DesiredBundleSize sets the size in bytes of the initial bundles each file
// is cut into (offsetsource.DefaultDesiredBundleSize, 64 MiB, when not
// set). Runners
// split bundles further while they run.
func DesiredBundleSize(bytes int64) ReadOption {
	return func(o *readOptions) { o.desiredBundleSize = bytes }
}

// MinBundleSize sets the smallest initial bundle, in bytes
// (DefaultMinBundleSize when not set). A file smaller than it is read as
// one bundle.
func MinBundleSize(bytes int64) ReadOption {
	return func(o *readOptions) { o.minBundleSize = bytes }
}

// ReaderSchema sets the schema records are read with, as Avro JSON. It is
// resolved against each file's writer schema by Avro's schema-resolution
// rules: fields the writer lacks take the reader's defaults, writer fields
// the reader lacks are skipped, numbers promote (int to long, float or
// double; long to float or double; float to double), string and bytes
// convert, enums and named types match by name or alias. A file whose
// schema cannot be resolved against it fails the read, naming the file.
// Read panics at construction if json does not parse.
func ReaderSchema(json string) ReadOption {
	return func(o *readOptions) { o.readerSchema = json }
}

// MaxAlloc bounds what one length field in a file (a block's size, a
// string, an array) may make the reader allocate, in bytes
// (DefaultMaxAlloc when not set). A file that asks for more fails the read
// with an error naming the file and offset, instead of exhausting memory.
func MaxAlloc(bytes int64) ReadOption {
	return func(o *readOptions) { o.maxAlloc = bytes }
}

// MaxDepth bounds how deeply a record's values may nest records, arrays
// and maps (the top record is level 1; unions add no level), for the
// records of recursive schemas, whose data nests as deep as it says:
// decoding recurses once per level. Deeper records, and schemas nested
// deeper, fail the read naming the limit. Default
// container.DefaultMaxDepth (1000), at most container.MaxMaxDepth.
func MaxDepth(levels int) ReadOption {
	return func(o *readOptions) { o.maxDepth = levels }
}

func parseReadOptions(opts []ReadOption, emptyDefault EmptyMatchTreatment) (readOptions, error) {
	o := readOptions{
		desiredBundleSize: offsetsource.DefaultDesiredBundleSize,
		minBundleSize:     DefaultMinBundleSize,
		maxAlloc:          DefaultMaxAlloc,
		maxDepth:          container.DefaultMaxDepth,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.emptyMatch == emptyMatchDefault {
		o.emptyMatch = emptyDefault
	}
	switch {
	case o.emptyMatch < EmptyMatchAllow || o.emptyMatch > EmptyMatchAllowIfWildcard: // not exported by filesource
		return o, fmt.Errorf("unknown empty-match treatment %v", o.emptyMatch)
	case o.desiredBundleSize <= 0:
		return o, fmt.Errorf("desired bundle size %d: must be positive", o.desiredBundleSize)
	case o.minBundleSize <= 0:
		return o, fmt.Errorf("minimum bundle size %d: must be positive", o.minBundleSize)
	case o.maxAlloc <= 0:
		return o, fmt.Errorf("allocation limit %d: must be positive", o.maxAlloc)
	case o.maxDepth <= 0 || o.maxDepth > container.MaxMaxDepth:
		return o, fmt.Errorf("MaxDepth(%d): must be from 1 to %d", o.maxDepth, container.MaxMaxDepth)
	}
	if o.readerSchema != "" {
		if _, err := parseReaderSchema(o.readerSchema); err != nil {
			return o, fmt.Errorf("reader schema: %w", err)
		}
	}
	return o, nil
}

// MatchUpdatedFiles makes WatchForNewFiles and WatchAllForNewFiles read a
// file again, whole, when its size or modification time changed after it
// was read (Java's matchUpdatedFiles; see WatchForNewFiles). Other reads
// ignore it.
func MatchUpdatedFiles() ReadOption {
	return func(o *readOptions) { o.matchUpdated = true }
}

// fileOptions are the options of filesource's read of records of type t.
func (o readOptions) fileOptions(t reflect.Type) []filesource.Option {
	opts := []filesource.Option{
		filesource.EmptyMatch(o.emptyMatch),
		filesource.DesiredBundleSize(o.desiredBundleSize),
		filesource.MetricsNamespace(Namespace),
		filesource.OutputType(t),
	}
	if o.manyFiles {
		opts = append(opts, filesource.MatchesManyFiles())
	}
	if o.matchUpdated {
		opts = append(opts, filesource.MatchUpdatedFiles())
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
