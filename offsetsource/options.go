package offsetsource

import (
	"fmt"
	"reflect"
)

// ReadOption configures Read and ReadAll, which take the same options.
type ReadOption func(*options)

type options struct {
	desiredBundleSize int64
	bundleCount       int64
	outputType        reflect.Type
	namespace         string
	sourceCounters    []string
	err               error // the first option that cannot work
}

// fail records the first option that cannot work.
func (o *options) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

// WithDesiredBundleSize sets the size, in bytes, of the initial bundles
// each source is cut into (DefaultDesiredBundleSize when not set). Sizes
// below one offset or below the source's MinBundleSize are raised to them.
func WithDesiredBundleSize(bytes int64) ReadOption {
	return func(o *options) { o.desiredBundleSize = bytes }
}

// WithBundleCount cuts each source into about n initial bundles: the
// desired bundle size becomes the source's EstimatedSizeBytes divided by
// n. It overrides WithDesiredBundleSize. n <= 0 leaves the desired size
// alone.
func WithBundleCount(n int) ReadOption {
	return func(o *options) { o.bundleCount = int64(n) }
}

// WithOutputType says what type the records have when T is a universal
// type (beam.X, beam.Y, ...), for sources whose record type is known only
// at run time: the read binds T to t in its ParDo (a beam.TypeDefinition),
// so the output PCollection has element type t and Beam picks its coder
// from t. The records a source returns must then be values of type t. It
// is an error at pipeline construction when T is not a universal type.
func WithOutputType(t reflect.Type) ReadOption {
	return func(o *options) { o.outputType = t }
}

// WithMetricsNamespace sets the namespace of the read's metrics (Namespace
// when not set), so that a transform built on this package reports its
// records, bytes and splits under its own name. It must not be empty.
func WithMetricsNamespace(ns string) ReadOption {
	return func(o *options) {
		o.namespace = ns
		if ns == "" {
			o.fail(`WithMetricsNamespace(""): an empty metrics namespace`)
		}
	}
}

// WithSourceCounters names counters of the read's metrics namespace that
// its sources increment themselves (package filesource's ranges_read,
// say), so that the read reports them from the start of every bundle, as
// it does its own (see readFn.StartBundle). Several WithSourceCounters
// options add up.
func WithSourceCounters(names ...string) ReadOption {
	return func(o *options) { o.sourceCounters = append(o.sourceCounters, names...) }
}

// mustParse is the configuration of the transform name from opts; it
// panics, naming the transform and the option, if an option cannot work.
func mustParse(name string, opts []ReadOption) options {
	o := parseOptions(opts)
	if o.err != nil {
		panic(fmt.Sprintf("%s: %v", name, o.err))
	}
	return o
}

func parseOptions(opts []ReadOption) options {
	o := options{desiredBundleSize: DefaultDesiredBundleSize, namespace: Namespace}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
