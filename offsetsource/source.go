package offsetsource

import (
	"context"
	"fmt"
	"io"
	"reflect"

	"github.com/sdfio/sdfio/sdf"
)

// Source is an input read by offset ranges: Java's OffsetBasedSource. A value
// of a Source type is a PCollection element, so the type must be a struct whose
// state lives in exported fields that Beam can encode, and it must be
// registered with Register.
type Source[T any] interface {
	// Range is the range of offsets the source reads. End may be
	// sdf.Unbounded, meaning "up to MaxEndOffset"; any End at or past
	// MaxEndOffset means the same.
	Range() sdf.OffsetRange
	// Subrange returns the same source narrowed to [start, end), which lies
	// within Range (Java's createSourceForSubrange).
	Subrange(start, end int64) Source[T]
	// MaxEndOffset is the exact end of the input (a file's size, say). It is
	// called once per source when the read starts, never at construction.
	MaxEndOffset(ctx context.Context) (int64, error)
	// BytesPerOffset is about how many bytes one offset stands for; it
	// converts offsets to bytes for bundle sizes and restriction sizes.
	// Values <= 0 count as 1.
	BytesPerOffset() int64
	// MinBundleSize is the smallest initial bundle, in offsets. A source
	// smaller than it is read as one bundle.
	MinBundleSize() int64
	// EstimatedSizeBytes estimates the bytes the source would read. The read
	// uses it with the BundleCount option to size initial bundles.
	EstimatedSizeBytes(ctx context.Context) (int64, error)
	// Open returns a Reader positioned to return first the first split point
	// at or after Range().Start.
	Open(ctx context.Context) (Reader[T], error)
}

// Reader reads the records of a Source, in offset order.
//
// Next returns the next record, its offset, and whether it is a split point:
// a record a reader opened at some offset A would return first. Split-point
// offsets strictly increase. A record that is not a split point (the second
// and later records of a block) carries the offset of its block's split point.
// Next returns io.EOF, and nothing else, when the input ends; any other error
// stops the read.
//
// A Reader need not stop at its range's end: the tracker refuses the first
// split point at or past the end (which a dynamic split may have moved), and
// the read stops there. A Reader may return io.EOF once it passes the end.
//
// Close is called once, whatever happened before.
type Reader[T any] interface {
	Next() (rec T, offset int64, splitPoint bool, err error)
	Close() error
}

// BlockReader is implemented by a Reader whose split points start blocks of
// several records. After each split point, BlockInfo returns the block's size
// in offsets and its number of records (0 when unknown); the read passes them
// to sdf.Tracker.SetBlock so that progress moves inside a block.
type BlockReader interface {
	BlockInfo() (size, records int64)
}

// ByteCounter is implemented by a Reader that counts the bytes of input its
// records take: those of every record (or block) Next returned so far, not
// counting headers or bytes skipped to reach the first split point. The read
// takes the count after each record the tracker accepted and reports the last
// one in its bytes_read metric, so the metric sums to the size of the data
// read, each byte once. (A block without records that a reader passes just
// before the split point the tracker refuses is counted by no range.)
// Without it the metric is estimated from the offsets claimed and
// BytesPerOffset.
type ByteCounter interface {
	BytesRead() int64
}

// ReadRestriction reads the records of src in the range of rt and emits them,
// in order: the loop of the splittable DoFn that Read builds, for tests and
// for other transforms.
//
// It opens src.Subrange(start, end) on the tracker's current range, claims
// each record with rt.TryClaimRecord and stops when a claim is refused; at
// io.EOF it marks the tracker done. Errors name the source and the offset and
// also fail the tracker. The reader is closed in every case. Like the DoFn,
// it makes rt report progress in bytes (src.BytesPerOffset per offset), the
// unit of the DoFn's RestrictionSize.
func ReadRestriction[T any](ctx context.Context, src Source[T], rt *sdf.Tracker, emit func(T)) error {
	scaleProgress(src, rt)
	_, err := readRestriction(ctx, src, rt, emit)
	return err
}

// readStats is what one restriction's read adds to the metrics.
type readStats struct {
	records, bytes int64
}

// ctxCheckEvery is how many records are read between checks of the context.
const ctxCheckEvery = 1024

func readRestriction[T any](ctx context.Context, src Source[T], rt *sdf.Tracker, emit func(T)) (st readStats, err error) {
	r := rt.Range()
	if r.IsEmpty() {
		rt.MarkDone()
		return st, nil
	}
	sub := src.Subrange(r.Start, r.End)
	fail := func(e error) (readStats, error) {
		rt.Fail(e)
		return st, e
	}
	rd, err := sub.Open(ctx)
	if err != nil {
		return fail(fmt.Errorf("offsetsource: opening %s: %w", describe(sub), err))
	}
	defer func() {
		if cerr := rd.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("offsetsource: closing %s: %w", describe(sub), cerr)
			rt.Fail(err)
		}
	}()

	blocks, _ := rd.(BlockReader)
	counter, _ := rd.(ByteCounter)
	bpo := sub.BytesPerOffset()
	if bpo <= 0 {
		bpo = 1
	}
	first, last := int64(-1), r.Start // first claimed offset; offset reached
	for n := 1; ; n++ {
		if n%ctxCheckEvery == 0 {
			if cerr := ctx.Err(); cerr != nil {
				return fail(fmt.Errorf("offsetsource: reading %s, after offset %d: %w", describe(sub), last, cerr))
			}
		}
		rec, off, splitPoint, nerr := rd.Next()
		if nerr == io.EOF {
			rt.MarkDone()
			if counter == nil && first >= 0 {
				st.bytes = (max(rt.Range().End, last+1) - first) * bpo
			}
			return st, nil
		}
		if nerr != nil {
			return fail(fmt.Errorf("offsetsource: reading %s, after offset %d: %w", describe(sub), last, nerr))
		}
		if !rt.TryClaimRecord(off, splitPoint) {
			if terr := rt.GetError(); terr != nil {
				return st, fmt.Errorf("offsetsource: reading %s, record at offset %d: %w", describe(sub), off, terr)
			}
			if counter == nil && first >= 0 {
				st.bytes = (off - first) * bpo
			}
			return st, nil
		}
		if first < 0 {
			first = off
		}
		last = off
		if splitPoint && blocks != nil {
			rt.SetBlock(blocks.BlockInfo())
		}
		if counter != nil {
			st.bytes = counter.BytesRead()
		}
		st.records++
		emit(rec)
	}
}

// describe names a source in errors: its String method when it has one, else
// its type and range.
func describe[T any](src Source[T]) string {
	if s, ok := src.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%v %v", reflect.TypeOf(src), src.Range())
}

// InitialRestriction is the range src reads, as the read's
// CreateInitialRestriction computes it: Range with End clamped to
// MaxEndOffset (so an Unbounded End becomes MaxEndOffset), and empty
// (End == Start) when the input ends before Start.
func InitialRestriction[T any](ctx context.Context, src Source[T]) (sdf.OffsetRange, error) {
	r := src.Range()
	if r.Start < 0 || r.End < r.Start {
		return r, fmt.Errorf("offsetsource: %s has an invalid range %v", describe(src), r)
	}
	maxEnd, err := src.MaxEndOffset(ctx)
	if err != nil {
		return r, fmt.Errorf("offsetsource: end offset of %s: %w", describe(src), err)
	}
	if maxEnd < 0 {
		return r, fmt.Errorf("offsetsource: %s has a negative end offset %d", describe(src), maxEnd)
	}
	r.End = min(r.End, maxEnd)
	if r.End < r.Start {
		r.End = r.Start
	}
	return r, nil
}
