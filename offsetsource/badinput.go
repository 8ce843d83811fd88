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

// BadInput is the dead-letter element of a read with ReadAllWithBadInput:
// a range of a source whose records were not read because the input there
// is bad (a corrupt block, a file whose schema does not fit the record
// type, a file that changed), with the error that said so.
//
// The records not read are exactly those whose split point lies in
// [Start, End), except the first RecordsRead records of the block (or
// record) at Start, which were read: every record of the source is either
// in the read's output or covered by a BadInput, never both. One range of
// a source (an initial bundle, a piece a runner split off) reports its
// own losses, so a file whose every range fails (a schema that does not
// fit) gives one BadInput per range, together covering the file. End may
// lie past the end of the range that reports it: a reader finds its first
// split point by a search (an Avro reader looks for a sync marker), which
// passes over the split points bad input hides (a block after a corrupt
// sync marker); the range before them reports them.
type BadInput struct {
	// Input names the input: the path of a file for package filesource's
	// sources (InputNamer), else the source's description.
	Input string
	// Offset is where the input was seen bad (a byte offset in a file),
	// -1 when the error does not say.
	Offset int64
	// Start and End delimit the records lost: those whose split point
	// lies in [Start, End), but for the first RecordsRead records of the
	// block at Start.
	Start, End int64
	// RecordsRead is how many records of the block at Start were read
	// (output) before the error: 0 when the loss starts at a block.
	RecordsRead int64
	// Error is the error's text: the cause first (the file, the offset,
	// what was wrong).
	Error string
}

func (b BadInput) String() string {
	lost := fmt.Sprintf("records at offsets [%d, %d)", b.Start, b.End)
	if b.RecordsRead > 0 {
		lost += fmt.Sprintf(" but the first %d of the block at %d", b.RecordsRead, b.Start)
	}
	return fmt.Sprintf("%s: %s not read: %s", b.Input, lost, b.Error)
}

// BadInputSource is implemented by a Source that tells bad input from
// other errors, for ReadAllWithBadInput: an error of Open or of a Reader's
// Next for which BadInput says bad is reported as a BadInput element,
// and the read goes on; any other error (the filesystem failed, the
// context was cancelled) fails the read, for the runner to retry it.
//
// offset is where the input was seen bad, -1 when unknown: for an error
// of Next, the split point of the block the error is in (the block being
// read, or the one that was to come next: a block after a corrupt sync
// marker starts where that marker should have been), never an offset
// inside a block past its split point, which would leave the block
// unreported. After an error of Next with an offset, the read opens the
// source again just after it and goes on from the first split point the
// new reader finds (resync: an Avro reader searches for the next sync
// marker); after an error without an offset, and after one of Open, the
// rest of the range is lost. A source whose readers cannot start past a
// bad region should return -1.
type BadInputSource interface {
	BadInput(err error) (offset int64, bad bool)
}

// InputNamer is implemented by a Source that names its input (a file's
// path) in BadInput elements.
type InputNamer interface {
	InputName() string
}

func inputName[T any](src Source[T]) string {
	if n, ok := src.(InputNamer); ok {
		return n.InputName()
	}
	return describe(src)
}

// ReadAllWithBadInput is ReadAll with a dead-letter output: it returns the
// records, and a PCollection of BadInput with the ranges of sources whose
// records could not be read because their input is bad, as the source
// says (BadInputSource; a source that does not implement it reports
// nothing there, and its errors fail the read as in ReadAll). The read
// counts them in bad_inputs, and logs each at WARN.
func ReadAllWithBadInput[T any, S Source[T]](s beam.Scope, sources beam.PCollection, opts ...ReadOption) (records, bad beam.PCollection) {
	s = s.Scope("offsetsource.ReadAllWithBadInput")
	o := mustParse("offsetsource.ReadAllWithBadInput", opts)
	var popts []beam.Option
	if o.outputType != nil {
		popts = append(popts, beam.TypeDefinition{Var: reflect.TypeFor[T](), T: o.outputType})
	}
	fn := newReadFn[T, S](o)
	outs := beam.ParDoN(s, &readBadFn[T, S]{DesiredBundleSize: fn.DesiredBundleSize, BundleCount: fn.BundleCount,
		Namespace: fn.Namespace, SourceCounters: fn.SourceCounters}, sources, popts...)
	return outs[0], outs[1]
}

// readBadFn is readFn with the dead-letter output of ReadAllWithBadInput.
// Its fields are readFn's.
type readBadFn[T any, S Source[T]] struct {
	DesiredBundleSize int64
	BundleCount       int64
	Namespace         string
	SourceCounters    []string
}

func (fn *readBadFn[T, S]) inner() *readFn[T, S] {
	return &readFn[T, S]{DesiredBundleSize: fn.DesiredBundleSize, BundleCount: fn.BundleCount, Namespace: fn.Namespace, SourceCounters: fn.SourceCounters}
}

func (fn *readBadFn[T, S]) badCounter() beam.Counter {
	ns := fn.Namespace
	if ns == "" {
		ns = Namespace
	}
	return beam.NewCounter(ns, "bad_inputs")
}

// StartBundle reports the read's counters from the bundle's start, as
// readFn does, and bad_inputs.
func (fn *readBadFn[T, S]) StartBundle(ctx context.Context, _ func(T), _ func(BadInput)) {
	fn.inner().StartBundle(ctx, nil)
	runnerfix.TouchCounters(ctx, fn.badCounter())
}

// CreateInitialRestriction is readFn's.
func (fn *readBadFn[T, S]) CreateInitialRestriction(ctx context.Context, src S) (sdf.OffsetRange, error) {
	return fn.inner().CreateInitialRestriction(ctx, src)
}

// SplitRestriction is readFn's.
func (fn *readBadFn[T, S]) SplitRestriction(ctx context.Context, src S, rest sdf.OffsetRange) ([]sdf.OffsetRange, error) {
	return fn.inner().SplitRestriction(ctx, src, rest)
}

// RestrictionSize is readFn's.
func (fn *readBadFn[T, S]) RestrictionSize(src S, rest sdf.OffsetRange) float64 {
	return fn.inner().RestrictionSize(src, rest)
}

// CreateTracker is readFn's.
func (fn *readBadFn[T, S]) CreateTracker(rest sdf.OffsetRange) *sdf.Tracker {
	return sdf.NewTracker(rest)
}

// ProcessElement reads the records of src in the tracker's range, as
// readFn does, and emits a BadInput for each range lost to bad input.
func (fn *readBadFn[T, S]) ProcessElement(ctx context.Context, rt *sdf.Tracker, src S, emit func(T), bad func(BadInput)) error {
	if !rt.Range().IsBounded() {
		if _, err := InitialRestriction[T](ctx, src); err != nil {
			rt.Fail(err)
			logFailure(ctx, err)
			return err
		}
	}
	scaleProgress[T](src, rt)
	st, err := readRange[T](ctx, src, rt, emit, func(b BadInput) {
		log.Warnf(ctx, "offsetsource: bad input, sent to the dead-letter output: %v", b)
		bad(b)
	})
	f := fn.inner()
	records, bytes, accepted, refused := f.counters()
	records.Inc(ctx, st.records)
	bytes.Inc(ctx, st.bytes)
	fn.badCounter().Inc(ctx, st.bad)
	nAccepted, nRefused := rt.SplitStats()
	accepted.Inc(ctx, nAccepted)
	refused.Inc(ctx, nRefused)
	logFailure(ctx, err)
	return err
}

// registerBadInput registers ReadAllWithBadInput's DoFn for T and S.
func registerBadInput[T any, S Source[T]]() {
	beamreg.DoFn5x1[context.Context, *sdf.Tracker, S, func(T), func(BadInput), error](&readBadFn[T, S]{})
}

func init() {
	beam.RegisterType(reflect.TypeFor[BadInput]())
	register.Emitter1[BadInput]()
}

// ReadRestrictionWithBadInput is ReadRestriction with the dead-letter
// output of ReadAllWithBadInput: bad input that src reports
// (BadInputSource) goes to bad, with the range it costs, and the read goes
// on; other errors fail the tracker and are returned.
func ReadRestrictionWithBadInput[T any](ctx context.Context, src Source[T], rt *sdf.Tracker, emit func(T), bad func(BadInput)) error {
	scaleProgress(src, rt)
	_, err := readRange(ctx, src, rt, emit, bad)
	return err
}
