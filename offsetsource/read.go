package offsetsource

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/sdfio/sdfio/sdf"
)

// DefaultDesiredBundleSize is the size of initial bundles, in bytes, unless
// an Option says otherwise: Beam Java's default for file-based sources.
const DefaultDesiredBundleSize int64 = 64 << 20

// Namespace is the namespace of the read's Beam metrics.
const Namespace = "sdfio/offsetsource"

// The read's metrics, summed over its restrictions.
var (
	recordsCounter        = beam.NewCounter(Namespace, "records")
	bytesCounter          = beam.NewCounter(Namespace, "bytes_read")
	splitsAcceptedCounter = beam.NewCounter(Namespace, "splits_accepted")
	splitsRefusedCounter  = beam.NewCounter(Namespace, "splits_refused")
)

// Option configures Read and ReadAll.
type Option func(*options)

type options struct {
	desiredBundleSize int64
	bundleCount       int64
}

// DesiredBundleSize sets the size, in bytes, of the initial bundles each
// source is cut into (DefaultDesiredBundleSize when not set). Sizes below one
// offset or below the source's MinBundleSize are raised to them.
func DesiredBundleSize(bytes int64) Option {
	return func(o *options) { o.desiredBundleSize = bytes }
}

// BundleCount cuts each source into about n initial bundles: the desired
// bundle size becomes the source's EstimatedSizeBytes divided by n. It
// overrides DesiredBundleSize. n <= 0 leaves the desired size alone.
func BundleCount(n int) Option {
	return func(o *options) { o.bundleCount = int64(n) }
}

// Read reads src with a splittable DoFn and returns a PCollection of its
// records. The source type S must have been registered with Register[T, S]
// in an init function.
func Read[T any, S Source[T]](s beam.Scope, src S, opts ...Option) beam.PCollection {
	s = s.Scope("offsetsource.Read")
	return ReadAll[T, S](s, beam.Create(s, src), opts...)
}

// ReadAll reads every source of a PCollection of S (the type registered with
// Register[T, S]) and returns a PCollection of their records.
func ReadAll[T any, S Source[T]](s beam.Scope, sources beam.PCollection, opts ...Option) beam.PCollection {
	s = s.Scope("offsetsource.ReadAll")
	return beam.ParDo(s, newReadFn[T, S](opts), sources)
}

func newReadFn[T any, S Source[T]](opts []Option) *readFn[T, S] {
	o := options{desiredBundleSize: DefaultDesiredBundleSize}
	for _, opt := range opts {
		opt(&o)
	}
	return &readFn[T, S]{DesiredBundleSize: o.desiredBundleSize, BundleCount: o.bundleCount}
}

// Register registers the read's DoFn for records T and sources S, its
// emitter, and the types S and T (when they are named types) with Beam. Call
// it from an init function of the package that defines S, once per pair, so
// that a worker started from the same binary finds everything without
// reflection. S must be a struct type (not a pointer) with exported fields.
func Register[T any, S Source[T]]() {
	if st := reflect.TypeFor[S](); st.Kind() != reflect.Struct {
		panic(fmt.Sprintf("offsetsource.Register: source type %v is a %v; it must be a struct with exported fields", st, st.Kind()))
	}
	register.DoFn4x1[context.Context, *sdf.Tracker, S, func(T), error](&readFn[T, S]{})
	register.Emitter1[T]()
	registerNamed(reflect.TypeFor[S]())
	registerNamed(reflect.TypeFor[T]())
}

func registerNamed(t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() != "" && t.PkgPath() != "" {
		beam.RegisterType(t)
	}
}

// readFn is the splittable DoFn of Read: its element is a source, its
// restriction an offset range of it. Its state is exported so that Beam can
// serialise it.
type readFn[T any, S Source[T]] struct {
	// DesiredBundleSize is the size of initial bundles in bytes.
	DesiredBundleSize int64
	// BundleCount, when > 0, sizes initial bundles as the source's estimated
	// size divided by it.
	BundleCount int64
}

// CreateInitialRestriction is the source's range, its end resolved with
// MaxEndOffset.
func (fn *readFn[T, S]) CreateInitialRestriction(ctx context.Context, src S) (sdf.OffsetRange, error) {
	return InitialRestriction[T](ctx, src)
}

// SplitRestriction cuts the range into initial bundles of the desired size.
func (fn *readFn[T, S]) SplitRestriction(ctx context.Context, src S, rest sdf.OffsetRange) ([]sdf.OffsetRange, error) {
	desired := fn.DesiredBundleSize
	if fn.BundleCount > 0 {
		sub := src.Subrange(rest.Start, rest.End)
		size, err := sub.EstimatedSizeBytes(ctx)
		if err != nil {
			return nil, fmt.Errorf("offsetsource: estimating the size of %s: %w", describe(sub), err)
		}
		desired = size / fn.BundleCount
	}
	if desired <= 0 {
		desired = DefaultDesiredBundleSize
	}
	return sdf.SplitIntoBundles(rest, desired, src.MinBundleSize(), src.BytesPerOffset()), nil
}

// RestrictionSize is the size of the range in bytes.
func (fn *readFn[T, S]) RestrictionSize(src S, rest sdf.OffsetRange) float64 {
	bpo := src.BytesPerOffset()
	if bpo <= 0 {
		bpo = 1
	}
	return float64(rest.Size()) * float64(bpo)
}

// CreateTracker tracks the range under the split contract of package sdf.
func (fn *readFn[T, S]) CreateTracker(rest sdf.OffsetRange) *sdf.Tracker {
	return sdf.NewTracker(rest)
}

// ProcessElement reads the records of src in the tracker's range.
func (fn *readFn[T, S]) ProcessElement(ctx context.Context, rt *sdf.Tracker, src S, emit func(T)) error {
	st, err := readRestriction[T](ctx, src, rt, emit)
	recordsCounter.Inc(ctx, st.records)
	bytesCounter.Inc(ctx, st.bytes)
	accepted, refused := rt.SplitStats()
	splitsAcceptedCounter.Inc(ctx, accepted)
	splitsRefusedCounter.Inc(ctx, refused)
	return err
}
