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
	bad            int64 // BadInput elements emitted
}

// ctxCheckEvery is how many records are read between checks of the context.
const ctxCheckEvery = 1024

func readRestriction[T any](ctx context.Context, src Source[T], rt *sdf.Tracker, emit func(T)) (readStats, error) {
	return readRange(ctx, src, rt, emit, nil)
}

// readRange is the read of a restriction. With bad nil, any error of the
// source fails the tracker and is returned. With bad set, an error the
// source says is bad input (BadInputSource) is reported to bad instead,
// with the range of records it costs, and the read goes on after it when
// the error has an offset (resync), or ends with the range's end lost.
func readRange[T any](ctx context.Context, src Source[T], rt *sdf.Tracker, emit func(T), bad func(BadInput)) (st readStats, err error) {
	r := rt.Range()
	if r.IsEmpty() {
		rt.MarkDone()
		return st, nil
	}
	fail := func(e error) (readStats, error) {
		rt.Fail(e)
		return st, e
	}
	classify, _ := any(src).(BadInputSource)
	if bad == nil {
		classify = nil
	}
	var (
		first, last = int64(-1), r.Start // first claimed offset; offset reached
		claimed     bool                 // a record was claimed
		inBlock     int64                // records of the block at last claimed
		blockRecs   int64                // records that block holds, 0 when unknown
		lost        *BadInput            // bad input whose lost range ends at the next claim
		prevBytes   int64                // bytes counted by readers closed before rd
		at          = r.Start            // where rd was opened
	)
	// report emits the pending bad input, its range ending at end.
	report := func(end int64) {
		if lost == nil {
			return
		}
		if lost.End = max(end, lost.Start); lost.End > lost.Start {
			st.bad++
			bad(*lost)
		} // else bad input of a block of the ranges after this one, which report it
		lost = nil
	}
	// badInput notes a bad-input error e, seen at offset off of the input
	// (-1 when unknown), and returns where the read can go on (-1: it
	// cannot, the rest of the range is lost).
	badInput := func(e error, off int64, opened bool) int64 {
		if lost == nil {
			// (When one is pending, nothing was read since: its range
			// grows, and it keeps the first error, the cause.)
			b := BadInput{Input: inputName(src), Offset: off, Start: at, Error: e.Error()}
			switch {
			case opened && claimed && off > last:
				// The block after the last one read is bad: the
				// offset is its split point (BadInputSource).
				b.Start = off
			case claimed && (blockRecs <= 0 || inBlock < blockRecs):
				b.Start, b.RecordsRead = last, inBlock
			case claimed:
				b.Start = last + 1
			case opened && at > 0 && off > at:
				// The reader's first block is bad. Split points its
				// search for that block passed over are the range's
				// before this one (nextSplitPoint says so there).
				b.Start = off
			}
			lost = &b
		}
		if !opened || off < 0 {
			return -1
		}
		// Go on after the offset where the input was seen bad: strictly
		// after everything claimed and every earlier attempt, so that
		// the read always moves on.
		return max(off, last, at) + 1
	}
	// reportToEnd ends the read (the tracker done, its end fixed) and
	// emits the pending bad input, whose range runs to the end: past it
	// when the ranges after this one would not see the split points there
	// (see nextSplitPoint).
	reportToEnd := func() (readStats, error) {
		rt.MarkDone()
		if lost == nil {
			return st, nil
		}
		end, err := nextSplitPoint(ctx, src, rt.Range().End, classify)
		if err != nil {
			return fail(err)
		}
		report(end)
		return st, nil
	}
	for {
		sub := src.Subrange(at, rt.Range().End)
		rd, oerr := sub.Open(ctx)
		if oerr != nil {
			if classify != nil {
				if off, isBad := classify.BadInput(oerr); isBad {
					badInput(oerr, off, false)
					return reportToEnd()
				}
			}
			return fail(fmt.Errorf("%w (offsetsource: opening %s at offset %d)", oerr, describe(sub), at))
		}
		if rd == nil {
			return fail(fmt.Errorf("offsetsource: opening %s at offset %d: Open returned neither a reader nor an error", describe(sub), at))
		}
		next, done, rerr := readFrom(ctx, rd, sub, rt, emit, &st, &readCursor{first: &first, last: &last, claimed: &claimed, inBlock: &inBlock, blockRecs: &blockRecs, prevBytes: &prevBytes, onClaim: report},
			func(nerr error) int64 {
				if classify == nil {
					return -1
				}
				off, isBad := classify.BadInput(nerr)
				if !isBad {
					return -1
				}
				if p := badInput(nerr, off, true); p >= 0 {
					return p
				}
				return -2
			})
		if rerr != nil {
			rt.Fail(rerr)
			return st, rerr
		}
		if done || next >= rt.Range().End {
			return reportToEnd()
		}
		// Resync: open again after the bad input.
		at = next
	}
}

// nextSplitPoint is where the read of the ranges of src after end starts:
// the first split point a reader opened at end returns, or the input's end
// when it returns none. A restriction whose bad input runs to its end
// reports its loss up to there, not to its end: a reader finds its first
// split point by a search (an Avro reader for a sync marker), which passes
// over split points that bad input hides (a block after a corrupt sync
// marker), and those belong to no range that reads them. When that reader
// fails with bad input before its first record, the range after end fails
// the same way: at the offset of a bad block, which that range reports
// from its offset on (so the answer is that offset); else from end (the
// answer is end).
func nextSplitPoint[T any](ctx context.Context, src Source[T], end int64, classify BadInputSource) (int64, error) {
	maxEnd, err := src.MaxEndOffset(ctx)
	if err != nil {
		return 0, fmt.Errorf("%w (offsetsource: the end offset of %s)", err, describe(src))
	}
	if end >= maxEnd {
		return end, nil
	}
	sub := src.Subrange(end, maxEnd)
	badAt := func(err error, opened bool) (int64, error) {
		if off, isBad := classify.BadInput(err); isBad {
			if opened && end > 0 && off > end {
				return off, nil
			}
			return end, nil
		}
		return 0, fmt.Errorf("%w (offsetsource: opening %s at offset %d after bad input before it)", err, describe(sub), end)
	}
	rd, err := sub.Open(ctx)
	if err != nil {
		return badAt(err, false)
	}
	if rd == nil {
		return end, nil
	}
	defer rd.Close()
	_, off, _, err := rd.Next()
	switch {
	case err == io.EOF:
		return maxEnd, nil
	case err != nil:
		return badAt(err, true)
	}
	return max(off, end), nil
}

// readCursor is where a restriction's read stands, shared by the readers
// a read with resyncs opens one after another.
type readCursor struct {
	first, last        *int64
	claimed            *bool
	inBlock, blockRecs *int64
	prevBytes          *int64
	// onClaim is called with each claimed split point before its record
	// is emitted.
	onClaim func(pos int64)
}

// readFrom claims and emits the records of rd until the tracker refuses
// one or rd ends (done), or rd fails. For an error of rd, onBad says where
// the read goes on: an offset >= 0 (rd is closed and next is it), -2 (the
// rest of the range is lost: done, the tracker marked done), -1 (not bad
// input: the error is returned). rd is closed in every case.
func readFrom[T any](ctx context.Context, rd Reader[T], sub Source[T], rt *sdf.Tracker, emit func(T), st *readStats, c *readCursor, onBad func(error) int64) (next int64, done bool, err error) {
	defer func() {
		if cerr := rd.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("%w (offsetsource: closing %s)", cerr, describe(sub))
		}
	}()
	blocks, _ := rd.(BlockReader)
	counter, _ := rd.(ByteCounter)
	bpo := sub.BytesPerOffset()
	if bpo <= 0 {
		bpo = 1
	}
	estimate := func(end int64) {
		if counter == nil && *c.first >= 0 {
			st.bytes = (end - *c.first) * bpo
		}
	}
	for n := 1; ; n++ {
		if n%ctxCheckEvery == 0 {
			if cerr := ctx.Err(); cerr != nil {
				return 0, false, fmt.Errorf("%w (offsetsource: reading %s, after offset %d)", cerr, describe(sub), *c.last)
			}
		}
		rec, off, splitPoint, nerr := rd.Next()
		if nerr == io.EOF {
			rt.MarkDone()
			estimate(max(rt.Range().End, *c.last+1))
			return 0, true, nil
		}
		if nerr != nil {
			switch p := onBad(nerr); {
			case p >= 0:
				if counter != nil {
					*c.prevBytes = st.bytes
				}
				return p, false, nil
			case p == -2:
				return 0, true, nil
			}
			return 0, false, fmt.Errorf("%w (offsetsource: reading %s, after offset %d)", nerr, describe(sub), *c.last)
		}
		if !rt.TryClaimRecord(off, splitPoint) {
			if terr := rt.GetError(); terr != nil {
				return 0, false, fmt.Errorf("%w (offsetsource: reading %s, record at offset %d)", terr, describe(sub), off)
			}
			estimate(off)
			return 0, true, nil
		}
		if *c.first < 0 {
			*c.first = off
		}
		*c.last, *c.claimed = off, true
		if splitPoint {
			*c.inBlock, *c.blockRecs = 0, 0
			if blocks != nil {
				size, recs := blocks.BlockInfo()
				rt.SetBlock(size, recs)
				*c.blockRecs = recs
			}
			c.onClaim(off)
		}
		*c.inBlock++
		if counter != nil {
			st.bytes = *c.prevBytes + counter.BytesRead()
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
		return r, fmt.Errorf("%w (offsetsource: the end offset of %s)", err, describe(src))
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
