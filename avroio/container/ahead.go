package container

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Decoding ahead (Options.DecodeAhead).
//
// A goroutine runs the reader's own sequential next and hands the records
// over in chunks: the records of one block, or of part of one (at most
// aheadChunk records), in file order, the last chunk carrying the error
// (io.EOF at the end) that next returned after them. The caller's Next
// returns a chunk's records before its error, so an error surfaces at the
// record where the sequential reader reports it, and no record after an
// error is ever returned. A chunk knows whether its first record is its
// block's first (the split point) and the block's offset, size and record
// count, so BlockInfo describes the block of the record Next returned last.
//
// Memory stays bounded, by bytes as well as by records: aheadChunks chunk
// buffers circulate between the two goroutines (one being filled, one
// queued, one being returned), plus the block reader's buffers for one
// block, and the records in them (decoded and not yet given back by Next)
// hold at most aheadBudget(MaxAlloc) bytes by the reader's estimate of
// what each decodes into, plus one record: the goroutine decodes a record
// only while they hold less, ends a chunk early when they reach it, and
// waits for Next to give a chunk back before it starts another. A record's
// estimate is the bound of budget.go at the record's share of its block's
// data (the block's data divided evenly among its records), so it never
// walks the block. Chunk buffers are reused; the records in them are
// cleared when a chunk has been returned.
//
// The caller may stop calling Next at any point (a tracker refused the next
// split point): the records decoded beyond it are simply dropped by Close,
// which stops the goroutine and waits for it to exit.

// aheadChunk is the most records a chunk holds.
const aheadChunk = 1024

// aheadChunks is the number of chunk buffers: one being filled, one queued
// and one being returned.
const aheadChunks = 3

// aheadBudget is the most estimated bytes of decoded records decode-ahead
// holds (plus one record) for a reader whose Limits.MaxAlloc is maxAlloc:
// a quarter of it (16 MiB at DefaultMaxAlloc), at least 1 MiB.
func aheadBudget(maxAlloc int64) int64 { return max(maxAlloc/4, 1<<20) }

type aheadBatch[T any] struct {
	recs  []T
	off   int64 // offset of the records' block
	first bool  // recs[0] is its block's first record
	size  int64 // the block's size and record count
	count int64
	bytes int64 // bytes read from the file after reading the block
	held  int64 // the records' estimated decoded bytes, counted in ahead.held
	err   error // returned after recs; nil if more chunks follow
	// BlockInfo and BytesRead as next left them when it returned err
	errSize, errCount, errBytes int64
}

type ahead[T any] struct {
	full chan *aheadBatch[T]
	free chan *aheadBatch[T]
	stop chan struct{}
	done chan struct{}
	once sync.Once

	// budget bounds held: the estimated bytes of the records decoded and
	// not yet given back by Next, in chunks being filled, queued or
	// returned. returned wakes the goroutine when Next gives a chunk back;
	// peak is the most held has been (tests).
	budget   int64
	held     atomic.Int64
	peak     atomic.Int64
	returned chan struct{}

	started bool
	cur     *aheadBatch[T]
	// rest are the records of cur not returned yet, after its first
	// (which nextAhead returns), and off is cur's off: Next returns them
	// without a call.
	rest []T
	off  int64
	err  error // sticky error of Next
	// the block of the record Next returned last
	size, records, bytes int64
	haveBytes            bool
}

func newAhead[T any](budget int64) *ahead[T] {
	a := &ahead[T]{
		full:     make(chan *aheadBatch[T], 1),
		free:     make(chan *aheadBatch[T], aheadChunks),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		budget:   budget,
		returned: make(chan struct{}, 1),
	}
	for range aheadChunks {
		a.free <- &aheadBatch[T]{}
	}
	return a
}

// produce runs on the goroutine: it fills chunks until an error (io.EOF
// included) or a stop.
func (r *Reader[T]) produce(a *ahead[T]) {
	defer close(a.done)
	est := int64(-1) // recordEstimate of the block being decoded
	for {
		var b *aheadBatch[T]
		select {
		case b = <-a.free:
		case <-a.stop:
			return
		}
		// Start a chunk only under the budget: wait for Next to give
		// chunks back (every byte held is in a chunk it can take).
		for a.held.Load() >= a.budget {
			select {
			case <-a.returned:
			case <-a.stop:
				return
			}
		}
		b.recs, b.err, b.held = b.recs[:0], nil, 0
		// The chunk's records count in held as they are decoded: b.held
		// is added to it when the chunk is sent (one atomic add a chunk,
		// not one a record), and until then the budget is checked
		// against held plus b.held. Every record of a block has the same
		// estimate (recordEstimate), taken at its first.
		var peak int64
		for len(b.recs) < aheadChunk {
			if len(b.recs) > 0 && a.held.Load()+b.held >= a.budget {
				break // the rest goes in the next chunk
			}
			rec, off, sp, err := r.next()
			if err != nil {
				b.err = err
				if r.blk != nil {
					b.errSize, b.errCount = r.blk.Size, r.blk.Records
				}
				b.errBytes = r.blocks.BytesRead()
				break
			}
			if len(b.recs) == 0 {
				b.off, b.first = off, sp
				b.size, b.count = r.blk.Size, r.blk.Records
				b.bytes = r.blocks.BytesRead()
			}
			if sp || est < 0 {
				est = r.recordEstimate()
			}
			b.recs = append(b.recs, rec)
			b.held += est
			peak = max(peak, a.held.Load()+b.held)
			if r.idx == r.blk.Records {
				break // a chunk never holds records of two blocks
			}
		}
		a.held.Add(b.held)
		a.peak.Store(max(a.peak.Load(), peak))
		select {
		case a.full <- b:
		case <-a.stop:
			return
		}
		if b.err != nil {
			return
		}
	}
}

func (r *Reader[T]) nextAhead() (rec T, offset int64, splitPoint bool, err error) {
	a := r.ahead
	if a.err != nil {
		return rec, 0, false, a.err
	}
	for a.cur == nil || len(a.rest) == 0 {
		if b := a.cur; b != nil {
			if b.err != nil {
				a.err = b.err
				a.size, a.records, a.bytes = b.errSize, b.errCount, b.errBytes
				return rec, 0, false, a.err
			}
			clear(b.recs)
			a.cur = nil
			a.held.Add(-b.held)
			a.free <- b // never blocks: free holds every buffer
			select {
			case a.returned <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
		if !a.started {
			a.started = true
			a.bytes, a.haveBytes = r.blocks.BytesRead(), true
			go r.produce(a)
		}
		a.cur = <-a.full
		a.rest, a.off = a.cur.recs, a.cur.off
		if len(a.cur.recs) > 0 {
			a.size, a.records, a.bytes, a.haveBytes = a.cur.size, a.cur.count, a.cur.bytes, true
		}
	}
	// Called with rest empty, nextAhead returns the first record of
	// a chunk; Next returns the others.
	b := a.cur
	rec = a.rest[0]
	a.rest = a.rest[1:]
	return rec, b.off, b.first, nil
}

func (a *ahead[T]) bytesRead(r *Reader[T]) int64 {
	if a.haveBytes {
		return a.bytes
	}
	return r.blocks.BytesRead() // the goroutine has not started
}

// stopAndWait stops the goroutine, waits for it to exit, and makes Next
// fail from then on.
func (a *ahead[T]) stopAndWait(name string) {
	a.once.Do(func() {
		close(a.stop)
		if a.started {
			<-a.done
		}
		if a.err == nil {
			a.err = errors.New("avro container " + name + ": reader closed")
		}
		if a.cur != nil {
			clear(a.cur.recs)
			a.cur, a.rest = nil, nil
		}
	})
}

// recordEstimate is what the record next returned last decodes into, by
// the bound of budget.go at an even share of its block's data; a schema
// without such a bound counts an interface per byte.
func (r *Reader[T]) recordEstimate() int64 {
	size := int64(len(r.blk.Data))
	if n := r.blk.Records; n > 0 {
		size = (size + n - 1) / n
	}
	b := r.info.bound[r.prof]
	if b.unbounded {
		return satAdd(r.rootSlot, satMul(ifaceSize, size))
	}
	return satAdd(satAdd(r.rootSlot, b.a), satMul(b.b, size))
}
