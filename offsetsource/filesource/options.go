package filesource

import (
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/offsetsource"
)

// options is the configuration of a read or a watch.
type options struct {
	emptyMatch        EmptyMatchTreatment
	manyFiles         bool
	desiredBundleSize int64
	namespace         string
	outputType        reflect.Type
	matchUpdated      bool
	badInput          *beam.PCollection // WithBadInput's output
	skipOlderThan     int64             // WithSkipOlderThan, Unix nanoseconds; 0 for none
	skipListed        string            // WithSkipListed's path
	err               error             // the first option that cannot work
}

// fail records the first option that cannot work, as its call and why.
func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

// The options are typed by transform: each transform takes its own
// interface, and each option returns a type that implements the
// interfaces of the transforms it applies to, so that an option given to
// a transform it does not apply to does not compile.
type (
	// ReadOption configures Read.
	ReadOption interface{ applyRead(*options) }
	// ReadAllOption configures ReadAll.
	ReadAllOption interface{ applyReadAll(*options) }
	// ReadFilesOption configures ReadFiles.
	ReadFilesOption interface{ applyReadFiles(*options) }
	// WatchOption configures WatchForNewFiles and WatchAllForNewFiles.
	WatchOption interface{ applyWatch(*options) }
	// MatchOption configures MatchNewFiles.
	MatchOption interface{ applyMatch(*options) }
)

// CommonOption is an option of every transform: a ReadOption,
// ReadAllOption, ReadFilesOption, WatchOption and MatchOption
// (WithMetricsNamespace).
type CommonOption func(*options)

func (f CommonOption) applyRead(o *options)      { f(o) }
func (f CommonOption) applyReadAll(o *options)   { f(o) }
func (f CommonOption) applyReadFiles(o *options) { f(o) }
func (f CommonOption) applyWatch(o *options)     { f(o) }
func (f CommonOption) applyMatch(o *options)     { f(o) }

// RecordOption is an option of the transforms that read records: Read,
// ReadAll, ReadFiles and the watch's reads (WithDesiredBundleSize,
// WithOutputType).
type RecordOption func(*options)

func (f RecordOption) applyRead(o *options)      { f(o) }
func (f RecordOption) applyReadAll(o *options)   { f(o) }
func (f RecordOption) applyReadFiles(o *options) { f(o) }
func (f RecordOption) applyWatch(o *options)     { f(o) }

// PatternOption is an option of the reads that match patterns: Read and
// ReadAll (WithEmptyMatch).
type PatternOption func(*options)

func (f PatternOption) applyRead(o *options)    { f(o) }
func (f PatternOption) applyReadAll(o *options) { f(o) }

// UpdatedOption is an option of the watch: WatchForNewFiles,
// WatchAllForNewFiles and MatchNewFiles (WithMatchUpdatedFiles,
// WithSkipOlderThan, WithSkipListed).
type UpdatedOption func(*options)

func (f UpdatedOption) applyWatch(o *options) { f(o) }
func (f UpdatedOption) applyMatch(o *options) { f(o) }

// readOnlyOption is an option of Read alone (WithMatchesManyFiles).
type readOnlyOption func(*options)

func (f readOnlyOption) applyRead(o *options) { f(o) }

// WithEmptyMatch sets what a file pattern that matches no file means
// (Java's withEmptyMatchTreatment). Read's default is EmptyMatchDisallow,
// ReadAll's EmptyMatchAllowIfWildcard.
func WithEmptyMatch(t EmptyMatchTreatment) PatternOption {
	return func(o *options) {
		o.emptyMatch = t
		if t != emptyMatchDefault && !t.valid() {
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
	return readOnlyOption(func(o *options) { o.manyFiles = true })
}

// WithDesiredBundleSize sets the size in bytes of the initial bundles each
// file is cut into (offsetsource.DefaultDesiredBundleSize, 64 MiB, when
// not set); it must be positive. Runners split bundles further while they
// run.
func WithDesiredBundleSize(bytes int64) RecordOption {
	return func(o *options) {
		o.desiredBundleSize = bytes
		if bytes <= 0 {
			o.fail("WithDesiredBundleSize(%d): the desired bundle size must be positive", bytes)
		}
	}
}

// WithMetricsNamespace sets the namespace of the metrics (Namespace when
// not set), so that a format reports under its own name.
func WithMetricsNamespace(ns string) CommonOption {
	return func(o *options) {
		o.namespace = ns
		if ns == "" {
			o.fail(`WithMetricsNamespace(""): an empty metrics namespace`)
		}
	}
}

// WithOutputType says what type the records have when T is a universal
// type (beam.X), for formats whose record type is known only at run time
// (see offsetsource.WithOutputType).
func WithOutputType(t reflect.Type) RecordOption {
	return func(o *options) { o.outputType = t }
}

// WithBadInput gives the read a dead-letter output, set into *out when
// the read is built: a PCollection of offsetsource.BadInput, one for each
// range of a file whose records could not be read because the file is bad
// (what the format says is bad input, see BadFormat; a file that changed
// since it was matched, a directory, a file that is gone), with the file's
// path, the offset, the records lost and the error. The read goes on with
// the rest of the file after the bad part where the format can find its
// way back (offsetsource.BadInputSource), and with the other files; other
// errors (the filesystem failed) still fail the read. Without it any
// error fails the read.
func WithBadInput(out *beam.PCollection) RecordOption {
	return func(o *options) {
		o.badInput = out
		if out == nil {
			o.fail("WithBadInput(nil): no PCollection to set")
		}
	}
}

// WithMatchUpdatedFiles makes the watch treat a file whose size or
// modification time changed since it was read as a new file, and read it
// again, whole (Java's FileIO.MatchConfiguration.continuously with
// matchUpdatedFiles): see WatchForNewFiles.
func WithMatchUpdatedFiles() UpdatedOption {
	return func(o *options) { o.matchUpdated = true }
}

// mustParse is the configuration of the transform name from opts, each
// applied by apply; it panics, naming the transform and the option, if an
// option cannot work.
func mustParse[O any](name string, opts []O, apply func(O, *options), emptyDefault EmptyMatchTreatment) options {
	o := options{desiredBundleSize: offsetsource.DefaultDesiredBundleSize, namespace: Namespace}
	for _, opt := range opts {
		apply(opt, &o)
	}
	if o.emptyMatch == emptyMatchDefault {
		o.emptyMatch = emptyDefault
	}
	if o.err != nil {
		panic(fmt.Sprintf("%s: %v", name, o.err))
	}
	return o
}
