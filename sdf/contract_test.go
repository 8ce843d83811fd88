package sdf

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// blockFile is a fake input made of blocks: a block starts at a split point
// and holds records that all carry the block's offset. It is what an Avro
// container file looks like to the tracker.
type blockFile struct {
	offs  []int64 // strictly increasing block offsets
	nrecs []int   // records per block, >= 1
	end   int64   // offset just past the last block
}

type record struct {
	off int64
	idx int
}

func newBlockFile(r *rand.Rand, blocks, maxGap, maxRecs int) *blockFile {
	f := &blockFile{}
	off := int64(r.IntN(maxGap))
	for range blocks {
		f.offs = append(f.offs, off)
		f.nrecs = append(f.nrecs, 1+r.IntN(maxRecs))
		off += 1 + int64(r.IntN(maxGap))
	}
	f.end = off
	return f
}

// want lists the records whose block starts in [a, b).
func (f *blockFile) want(a, b int64) []record {
	var out []record
	for i, o := range f.offs {
		if o >= a && o < b {
			for j := range f.nrecs[i] {
				out = append(out, record{o, j})
			}
		}
	}
	return out
}

// blockReader reads f through a tracker, one record per next call, the way
// offsetsource readers do: it opens at the first block at or after the range
// start, claims the first record of each block as a split point and the rest
// as plain records, and stops at the first refusal.
type blockReader struct {
	f       *blockFile
	tr      *Tracker
	blk     int // current block index
	rec     int // next record in the block
	stopped bool
	err     error
}

func openBlockReader(f *blockFile, tr *Tracker) *blockReader {
	start := tr.Range().Start
	blk, _ := slices.BinarySearch(f.offs, start)
	return &blockReader{f: f, tr: tr, blk: blk}
}

func (r *blockReader) next() (record, bool) {
	if r.stopped {
		return record{}, false
	}
	if r.blk < len(r.f.offs) && r.rec == r.f.nrecs[r.blk] {
		r.blk++
		r.rec = 0
	}
	if r.blk == len(r.f.offs) {
		r.tr.MarkDone()
		r.stopped = true
		return record{}, false
	}
	off := r.f.offs[r.blk]
	if r.rec == 0 {
		if !r.tr.TryClaimSplitPoint(off) {
			r.stopped = true
			r.err = r.tr.GetError()
			return record{}, false
		}
		size := r.f.end - off
		if r.blk+1 < len(r.f.offs) {
			size = r.f.offs[r.blk+1] - off
		}
		r.tr.SetBlock(size, int64(r.f.nrecs[r.blk]))
	} else if !r.tr.TryClaimRecord(off, false) {
		r.stopped = true
		r.err = fmt.Errorf("record %d of block %d refused: %v", r.rec, off, r.tr.GetError())
		return record{}, false
	}
	rec := record{off, r.rec}
	r.rec++
	return rec, true
}

func (r *blockReader) readAll(out []record) []record {
	for {
		rec, ok := r.next()
		if !ok {
			return out
		}
		out = append(out, rec)
	}
}

func readRange(t *testing.T, f *blockFile, rng OffsetRange) []record {
	t.Helper()
	tr := NewTracker(rng)
	r := openBlockReader(f, tr)
	out := r.readAll(nil)
	if r.err != nil {
		t.Fatalf("reading %v: %v", rng, r.err)
	}
	if !tr.IsDone() {
		t.Fatalf("reading %v: tracker not done at the end: %v", rng, tr)
	}
	return out
}

// Rule 1: [A, B) yields the records of the blocks starting in [A, B), and
// [A, S) followed by [S, B) yields the same as [A, B).
func TestRule1StaticSplits(t *testing.T) {
	f := newBlockFile(rand.New(rand.NewPCG(1, 2)), 12, 4, 3)
	for a := int64(0); a <= f.end+1; a++ {
		for b := a; b <= f.end+1; b++ {
			whole := readRange(t, f, OffsetRange{a, b})
			if w := f.want(a, b); !slices.Equal(whole, w) {
				t.Fatalf("[%d, %d): read %v, want %v", a, b, whole, w)
			}
			for s := a; s <= b; s++ {
				got := append(readRange(t, f, OffsetRange{a, s}), readRange(t, f, OffsetRange{s, b})...)
				if !slices.Equal(got, whole) {
					t.Fatalf("[%d, %d) + [%d, %d) read %v, want %v", a, s, s, b, got, whole)
				}
			}
		}
	}
	// An unbounded range reads to the end of the input.
	if got, w := readRange(t, f, OffsetRange{3, Unbounded}), f.want(3, f.end); !slices.Equal(got, w) {
		t.Fatalf("[3, unbounded) read %v, want %v", got, w)
	}
}

// splitter is one way of splitting a tracker while it is being read.
type splitter struct {
	name  string
	split func(tr *Tracker) (OffsetRange, bool)
}

func trySplitter(f float64) splitter {
	return splitter{fmt.Sprintf("TrySplit(%v)", f), func(tr *Tracker) (OffsetRange, bool) {
		_, r, err := tr.TrySplit(f)
		if err != nil || r == nil {
			return OffsetRange{}, false
		}
		return r.(OffsetRange), true
	}}
}

func fracSplitter(f float64) splitter {
	return splitter{fmt.Sprintf("SplitAtFraction(%v)", f), func(tr *Tracker) (OffsetRange, bool) { return tr.SplitAtFraction(f) }}
}

// posSplitter splits at the tracker's start plus d.
func posSplitter(d int64) splitter {
	return splitter{fmt.Sprintf("TrySplitAtPosition(start+%d)", d), func(tr *Tracker) (OffsetRange, bool) {
		return tr.TrySplitAtPosition(tr.Range().Start + d)
	}}
}

// Rule 1 under dynamic splits: read k records, split, finish the primary, then
// read the residual; the records must be those of the unsplit read, in order.
func TestRule1DynamicSplits(t *testing.T) {
	f := newBlockFile(rand.New(rand.NewPCG(3, 4)), 10, 4, 3)
	var splitters []splitter
	for _, fr := range []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1} {
		splitters = append(splitters, trySplitter(fr), fracSplitter(fr))
	}
	for d := int64(-1); d <= f.end+1; d++ {
		splitters = append(splitters, posSplitter(d))
	}
	for _, rng := range []OffsetRange{{0, f.end}, {f.offs[2], f.offs[8]}, {f.offs[1] + 1, f.end + 5}} {
		whole := readRange(t, f, rng)
		accepted, nontrivial := 0, 0
		for k := 0; k <= len(whole); k++ {
			for _, s := range splitters {
				tr := NewTracker(rng)
				r := openBlockReader(f, tr)
				var got []record
				for range k {
					rec, ok := r.next()
					if !ok {
						t.Fatalf("%v: record %d missing", rng, len(got))
					}
					got = append(got, rec)
				}
				res, ok := s.split(tr)
				got = r.readAll(got)
				if r.err != nil {
					t.Fatalf("%v after %d records, %s: primary: %v", rng, k, s.name, r.err)
				}
				if ok {
					accepted++
					if tr.Range().End != res.Start || res.End != rng.End {
						t.Fatalf("%v after %d records, %s: primary %v residual %v", rng, k, s.name, tr.Range(), res)
					}
					rest := readRange(t, f, res)
					if len(rest) > 0 && len(got) > k {
						nontrivial++
					}
					got = append(got, rest...)
				}
				if !slices.Equal(got, whole) {
					t.Fatalf("%v after %d records, %s (residual %v, ok %v): read %v, want %v", rng, k, s.name, res, ok, got, whole)
				}
			}
		}
		if accepted == 0 || nontrivial == 0 {
			t.Errorf("%v: %d splits accepted, %d non-trivial; want some of each", rng, accepted, nontrivial)
		}
	}
}

// Rule 8: a reader claims records while another goroutine splits and asks
// for progress. Every residual is read the same way, so the whole input is
// read by a tree of restrictions; each record must be read exactly once, and
// each tracker's claimed split points must lie in its final range.
func TestRule8Concurrent(t *testing.T) {
	trials := 40
	if testing.Short() {
		trials = 10
	}
	totalSplits := 0
	for trial := range trials {
		rnd := rand.New(rand.NewPCG(uint64(trial), 99))
		f := newBlockFile(rnd, 300+rnd.IntN(300), 5, 3)
		queue := []OffsetRange{{0, f.end}}
		if trial%4 == 3 {
			queue[0].End = Unbounded // the reader meets the end of the input
		}
		seen := make(map[record]int)
		restrictions := 0
		for len(queue) > 0 {
			rng := queue[0]
			queue = queue[1:]
			restrictions++
			allowSplits := restrictions < 60
			got, residuals := readConcurrently(t, f, rng, rnd.Uint64(), allowSplits)
			for _, rec := range got {
				seen[rec]++
			}
			queue = append(queue, residuals...)
		}
		for i, o := range f.offs {
			for j := range f.nrecs[i] {
				if n := seen[record{o, j}]; n != 1 {
					t.Fatalf("trial %d: record %d of block %d read %d times", trial, j, o, n)
				}
			}
		}
		if len(seen) != len(f.want(0, f.end)) {
			t.Fatalf("trial %d: %d distinct records read, the file has %d", trial, len(seen), len(f.want(0, f.end)))
		}
		totalSplits += restrictions - 1
	}
	// Splits race the reader, so a trial may see none; across trials many
	// must have been accepted or the test proved nothing.
	t.Logf("%d splits accepted in %d trials", totalSplits, trials)
	if totalSplits < trials {
		t.Errorf("%d splits accepted in %d trials, want at least %d", totalSplits, trials, trials)
	}
}

// readConcurrently reads rng on one goroutine while another splits it.
func readConcurrently(t *testing.T, f *blockFile, rng OffsetRange, seed uint64, allowSplits bool) ([]record, []OffsetRange) {
	t.Helper()
	// An unbounded range is estimated to end at the end of the input, as a
	// file reader would estimate it from the file size.
	tr := NewUnboundedTracker(rng, newEstimate(f.end))
	var (
		got      []record
		claimed  []int64 // split points
		finished = make(chan struct{})
		wg       sync.WaitGroup
	)
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(finished)
		<-started
		r := openBlockReader(f, tr)
		for {
			rec, ok := r.next()
			if !ok {
				break
			}
			if rec.idx == 0 {
				claimed = append(claimed, rec.off)
			}
			got = append(got, rec)
			if len(got)%2 == 0 {
				runtime.Gosched()
			}
		}
		if r.err != nil {
			t.Errorf("reader of %v: %v", rng, r.err)
		}
	}()

	var residuals []OffsetRange
	rnd := rand.New(rand.NewPCG(seed, 7))
	splits := 0
	close(started)
loop:
	for {
		select {
		case <-finished:
			break loop
		default:
		}
		if fc := tr.FractionConsumed(); fc < 0 || fc > 1 {
			t.Errorf("FractionConsumed() = %v", fc)
		}
		if d, r := tr.GetProgress(); d < 0 || r < 0 {
			t.Errorf("GetProgress() = %v, %v", d, r)
		}
		tr.SplitPointsRemaining()
		tr.SplitPointsConsumed()
		if !allowSplits || splits >= 4 {
			runtime.Gosched()
			continue
		}
		var (
			res OffsetRange
			ok  bool
		)
		switch n := rnd.IntN(100); {
		case n < 2:
			var r any
			_, r, _ = tr.TrySplit(0)
			res, ok = asRange(r)
		case n < 60:
			var r any
			_, r, _ = tr.TrySplit(0.05 + 0.9*rnd.Float64())
			res, ok = asRange(r)
		case n < 80:
			res, ok = tr.SplitAtFraction(rnd.Float64())
		default:
			cur := tr.Range()
			end := min(cur.End, f.end)
			if end > cur.Start {
				res, ok = tr.TrySplitAtPosition(cur.Start + rnd.Int64N(end-cur.Start+1))
			}
		}
		if ok {
			splits++
			residuals = append(residuals, res)
		}
		runtime.Gosched()
	}
	wg.Wait()

	if err := tr.GetError(); err != nil {
		t.Fatalf("%v: tracker error %v", rng, err)
	}
	if !tr.IsDone() {
		t.Fatalf("%v: tracker not done after the reader stopped: %v", rng, tr)
	}
	final := tr.Range()
	for _, p := range claimed {
		if p < final.Start || p >= final.End {
			t.Fatalf("%v: split point %d claimed outside the final range %v", rng, p, final)
		}
	}
	// Residuals tile [final.End, rng.End) in reverse order of splitting.
	next := final.End
	for i := len(residuals) - 1; i >= 0; i-- {
		if residuals[i].Start != next {
			t.Fatalf("%v: final %v, residuals %v do not tile the range", rng, final, residuals)
		}
		next = residuals[i].End
	}
	if next != rng.End {
		t.Fatalf("%v: final %v, residuals %v do not reach the end", rng, final, residuals)
	}
	// Every block of rng is claimed by this reader xor lies in a residual.
	claimedSet := make(map[int64]bool, len(claimed))
	for _, p := range claimed {
		claimedSet[p] = true
	}
	for _, o := range f.offs {
		if o < rng.Start || o >= rng.End {
			continue
		}
		inRes := 0
		for _, r := range residuals {
			if o >= r.Start && o < r.End {
				inRes++
			}
		}
		if claimedSet[o] == (inRes == 1) || inRes > 1 {
			t.Fatalf("%v: block %d claimed %v, in %d residuals (final %v, residuals %v)", rng, o, claimedSet[o], inRes, final, residuals)
		}
	}
	return got, residuals
}

func asRange(r any) (OffsetRange, bool) {
	if r == nil {
		return OffsetRange{}, false
	}
	return r.(OffsetRange), true
}
