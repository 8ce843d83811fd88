package offsetsource

import (
	"context"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/runnerfix"
	"github.com/sdfio/sdfio/sdf"
)

// DefaultDesiredBundleSize is the size of initial bundles, in bytes, unless
// WithDesiredBundleSize says otherwise: Beam Java's default for file-based sources.
const DefaultDesiredBundleSize int64 = 64 << 20

// MaxInitialBundles caps the number of initial bundles SplitRestriction cuts
// one source into. When the desired bundle size would give more (a source
// of 2^62 offsets, say), the bundles are made larger, so that the runner is
// handed at most this many restrictions per source and dynamic splitting
// does the rest.
const MaxInitialBundles = 10_000

// Namespace is the namespace of the read's Beam metrics.
const Namespace = "sdfio/offsetsource"

// The read's metrics, summed over its restrictions.
var (
	recordsCounter        = beam.NewCounter(Namespace, "records")
	bytesCounter          = beam.NewCounter(Namespace, "bytes_read")
	splitsAcceptedCounter = beam.NewCounter(Namespace, "splits_accepted")
	splitsRefusedCounter  = beam.NewCounter(Namespace, "splits_refused")
)

// Read reads src with a splittable DoFn and returns a PCollection of its
// records. The source type S must have been registered with Register[T, S]
// in an init function.
func Read[T any, S Source[T]](s beam.Scope, src S, opts ...ReadOption) beam.PCollection {
	s = s.Scope("offsetsource.Read")
	return ReadAll[T, S](s, beam.Create(s, src), opts...)
}

// ReadAll reads every source of a PCollection of S (the type registered with
// Register[T, S]) and returns a PCollection of their records.
func ReadAll[T any, S Source[T]](s beam.Scope, sources beam.PCollection, opts ...ReadOption) beam.PCollection {
	s = s.Scope("offsetsource.ReadAll")
	o := mustParse("offsetsource.ReadAll", opts)
	var popts []beam.Option
	if o.outputType != nil {
		popts = append(popts, beam.TypeDefinition{Var: reflect.TypeFor[T](), T: o.outputType})
	}
	return beam.ParDo(s, newReadFn[T, S](o), sources, popts...)
}

func newReadFn[T any, S Source[T]](o options) *readFn[T, S] {
	fn := &readFn[T, S]{DesiredBundleSize: o.desiredBundleSize, BundleCount: o.bundleCount, SourceCounters: o.sourceCounters}
	if o.namespace != Namespace {
		fn.Namespace = o.namespace
	}
	return fn
}

// Register registers the read's DoFns (ReadAll's and ReadAllWithBadInput's)
// for records T and sources S, its
// emitter, and the types S and T (when they are named types) with Beam. Call
// it from an init function of the package that defines S, once per pair, so
// that a worker started from the same binary finds everything without
// reflection. S must be a struct type (not a pointer) with exported fields.
func Register[T any, S Source[T]]() {
	if st := reflect.TypeFor[S](); st.Kind() != reflect.Struct {
		panic(fmt.Sprintf("offsetsource.Register: source type %v is a %v; it must be a struct with exported fields", st, st.Kind()))
	}
	beamreg.DoFn4x1[context.Context, *sdf.Tracker, S, func(T), error](&readFn[T, S]{})
	registerBadInput[T, S]()
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
	// Namespace, when set, is the namespace of the metrics instead of
	// the package's Namespace.
	Namespace string
	// SourceCounters are the counters the sources increment, in the same
	// namespace (the SourceCounters option).
	SourceCounters []string
}

// counters are the read's own counters, in its namespace.
func (fn *readFn[T, S]) counters() (records, bytes, accepted, refused beam.Counter) {
	if ns := fn.Namespace; ns != "" {
		return beam.NewCounter(ns, "records"), beam.NewCounter(ns, "bytes_read"),
			beam.NewCounter(ns, "splits_accepted"), beam.NewCounter(ns, "splits_refused")
	}
	return recordsCounter, bytesCounter, splitsAcceptedCounter, splitsRefusedCounter
}

// StartBundle reports every counter of the read from the start of the
// bundle, before any restriction of it ends (runnerfix.TouchCounters says
// why): a restriction and the residual a runner split off it are bundles
// that finish together.
func (fn *readFn[T, S]) StartBundle(ctx context.Context, _ func(T)) {
	records, bytes, accepted, refused := fn.counters()
	runnerfix.TouchCounters(ctx, records, bytes, accepted, refused)
	ns := fn.Namespace
	if ns == "" {
		ns = Namespace
	}
	for _, name := range fn.SourceCounters {
		runnerfix.TouchCounters(ctx, beam.NewCounter(ns, name))
	}
}

// CreateInitialRestriction is the source's range, its end resolved with
// MaxEndOffset.
//
// It never fails. Beam Go runs it fused after the transform that produced
// the sources, so an error returned here surfaces as a panic of that
// transform's emitter, with a stack trace instead of the error. When the
// range cannot be resolved (MaxEndOffset fails, the range is invalid) it
// returns the unresolved marker [start, Unbounded) instead, which no
// resolvable source yields (InitialRestriction always bounds the end), and
// ProcessElement resolves the range again and fails with the error.
func (fn *readFn[T, S]) CreateInitialRestriction(ctx context.Context, src S) (sdf.OffsetRange, error) {
	r, err := InitialRestriction[T](ctx, src)
	if err != nil {
		log.Warnf(ctx, "%v; the read of it will fail with this error", err)
		return sdf.OffsetRange{Start: max(src.Range().Start, 0), End: sdf.Unbounded}, nil
	}
	return r, nil
}

// SplitRestriction cuts the range into initial bundles of the desired size,
// at most MaxInitialBundles of them. Like CreateInitialRestriction it never
// fails: an unresolved range stays whole, and when the BundleCount option
// cannot estimate the source's size the desired size is used instead.
func (fn *readFn[T, S]) SplitRestriction(ctx context.Context, src S, rest sdf.OffsetRange) ([]sdf.OffsetRange, error) {
	if !rest.IsBounded() {
		return []sdf.OffsetRange{rest}, nil
	}
	desired := fn.DesiredBundleSize
	if fn.BundleCount > 0 {
		sub := src.Subrange(rest.Start, rest.End)
		if size, err := sub.EstimatedSizeBytes(ctx); err != nil {
			log.Warnf(ctx, "offsetsource: estimating the size of %s: %v; cutting it into bundles of %d bytes instead of %d bundles", describe(sub), err, desired, fn.BundleCount)
		} else {
			desired = size / fn.BundleCount
		}
	}
	if desired <= 0 {
		desired = DefaultDesiredBundleSize
	}
	bundles := splitCapped(rest, desired, src.MinBundleSize(), src.BytesPerOffset())
	// The read's plan, for a user to see how it was cut.
	log.Infof(ctx, "offsetsource: planned %s: %d bytes in %d initial bundles of about %d bytes", describe[T](src.Subrange(rest.Start, rest.End)),
		rest.Size()*bytesPerOffset[T](src), len(bundles), desired)
	return bundles, nil
}

// splitCapped is sdf.SplitIntoBundles with at most MaxInitialBundles pieces:
// the minimum bundle size is raised to the range's size divided by the cap,
// so that pieces of the desired size are cut only when there are few enough.
func splitCapped(rest sdf.OffsetRange, desiredBytes, minBundle, bytesPerOffset int64) []sdf.OffsetRange {
	if size := rest.Size(); size > MaxInitialBundles {
		minBundle = max(minBundle, (size-1)/MaxInitialBundles+1)
	}
	return sdf.SplitIntoBundles(rest, desiredBytes, minBundle, bytesPerOffset)
}

// RestrictionSize is the size of the range in bytes: offsets times the
// source's BytesPerOffset. The tracker's progress is in the same unit
// (scaleProgress).
func (fn *readFn[T, S]) RestrictionSize(src S, rest sdf.OffsetRange) float64 {
	return float64(rest.Size()) * float64(bytesPerOffset[T](src))
}

// bytesPerOffset is src.BytesPerOffset, 1 when not positive.
func bytesPerOffset[T any](src Source[T]) int64 {
	if bpo := src.BytesPerOffset(); bpo > 0 {
		return bpo
	}
	return 1
}

// scaleProgress makes rt report progress in bytes, the unit of
// RestrictionSize. CreateTracker sees only the range, not the source, so the
// read sets it before its first claim; until then (between CreateTracker and
// ProcessElement) progress is in offsets, which changes no fraction, and
// fractions are all Beam Go's runtime takes from progress.
func scaleProgress[T any](src Source[T], rt *sdf.Tracker) {
	rt.SetProgressScale(float64(bytesPerOffset(src)))
}

// CreateTracker tracks the range under the split contract of package sdf.
func (fn *readFn[T, S]) CreateTracker(rest sdf.OffsetRange) *sdf.Tracker {
	return sdf.NewTracker(rest)
}

// ProcessElement reads the records of src in the tracker's range.
//
// An unbounded range is the marker of a source whose range
// CreateInitialRestriction could not resolve: the range is resolved again,
// and the read fails with the error if it still cannot be (if it now can,
// the source is read from its start to the end of its input).
func (fn *readFn[T, S]) ProcessElement(ctx context.Context, rt *sdf.Tracker, src S, emit func(T)) error {
	if !rt.Range().IsBounded() {
		if _, err := InitialRestriction[T](ctx, src); err != nil {
			rt.Fail(err)
			logFailure(ctx, err)
			return err
		}
	}
	scaleProgress[T](src, rt)
	st, err := readRestriction[T](ctx, src, rt, emit)
	records, bytes, accepted, refused := fn.counters()
	records.Inc(ctx, st.records)
	bytes.Inc(ctx, st.bytes)
	nAccepted, nRefused := rt.SplitStats()
	accepted.Inc(ctx, nAccepted)
	refused.Inc(ctx, nRefused)
	if nAccepted > 0 {
		// A runner's rebalancing, made visible in the worker's log.
		log.Infof(ctx, "offsetsource: %d runner splits accepted while reading %s; this bundle read %v (%d records), the rest went to residuals",
			nAccepted, describe[T](src), rt.Range(), st.records)
	}
	logFailure(ctx, err)
	return err
}

// logFailure logs the error that fails a read at ERROR, on a line of its
// own, before Beam's harness logs it: Beam's line (and the error
// beamx.Run returns) is its plan of the bundle, 1.5 KB or more, with the
// cause last; this line is the cause alone, first (the file, the offset,
// what was wrong, then where it was read).
func logFailure(ctx context.Context, err error) {
	if err != nil {
		log.Errorf(ctx, "%v", err)
	}
}
