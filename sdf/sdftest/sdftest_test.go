package sdftest_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"

	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// block is a block of records at an offset: its first record is a split
// point, the others carry the block's offset and are not.
type block struct {
	pos     int64
	records int
}

// blockData is an in-memory input of blocks in increasing offset order;
// records are named "offset.index".
type blockData struct {
	blocks []block
	end    int64 // offset where the input ends, at or after the last block
}

// gappy returns n blocks of one record each at increasing offsets with gaps
// of 0 to 2 offsets between them, starting at start.
func gappy(start int64, n int) blockData {
	var d blockData
	pos := start
	for i := range n {
		d.blocks = append(d.blocks, block{pos: pos, records: 1})
		pos += 1 + int64(i*7%3)
	}
	d.end = pos
	return d
}

// blocky returns n blocks of 1 to 4 records, each spanning 3 to 7 offsets.
func blocky(start int64, n int) blockData {
	var d blockData
	pos := start
	for i := range n {
		d.blocks = append(d.blocks, block{pos: pos, records: 1 + i*5%4})
		pos += 3 + int64(i*3%5)
	}
	d.end = pos
	return d
}

func (d blockData) records() []string {
	var out []string
	for _, b := range d.blocks {
		for j := range b.records {
			out = append(out, fmt.Sprintf("%d.%d", b.pos, j))
		}
	}
	return out
}

// blockSize is the number of offsets block i spans.
func (d blockData) blockSize(i int) int64 {
	if i+1 < len(d.blocks) {
		return d.blocks[i+1].pos - d.blocks[i].pos
	}
	return d.end - d.blocks[i].pos
}

// read is the reader of d over any tracker of an sdf.OffsetRange: it claims
// each block's split point, tells the tracker the block's shape when it can,
// claims the block's other records as non-split points, and marks the
// tracker done when the input ends before the range does.
func (d blockData) read(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
	start := rt.GetRestriction().(sdf.OffsetRange).Start
	i := sort.Search(len(d.blocks), func(i int) bool { return d.blocks[i].pos >= start })
	for ; i < len(d.blocks); i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := d.blocks[i]
		if !rt.TryClaim(b.pos) {
			return nil
		}
		if sb, ok := rt.(interface{ SetBlock(size, records int64) }); ok {
			sb.SetBlock(d.blockSize(i), int64(b.records))
		}
		emit(fmt.Sprintf("%d.0", b.pos))
		for j := 1; j < b.records; j++ {
			if !rt.TryClaim(sdf.Claim{Pos: b.pos}) {
				return fmt.Errorf("record %d of the block at %d refused: %v", j, b.pos, rt.GetError())
			}
			emit(fmt.Sprintf("%d.%d", b.pos, j))
		}
	}
	markDone(rt)
	return nil
}

// markDone tells rt that the input ended: MarkDone when it has it,
// otherwise a claim of the end of its range.
func markDone(rt beamsdf.RTracker) {
	if m, ok := rt.(interface{ MarkDone() }); ok {
		m.MarkDone()
		return
	}
	rt.TryClaim(rt.GetRestriction().(sdf.OffsetRange).End)
}

// subject reads d over [start, end) with an *sdf.Tracker (wrapped by wrap
// when not nil).
func (d blockData) subject(start, end int64, wrap func(*sdf.Tracker) beamsdf.RTracker) sdftest.Subject[string] {
	return sdftest.Subject[string]{
		Restriction: sdf.OffsetRange{Start: start, End: end},
		NewTracker: func(r any) beamsdf.RTracker {
			t := sdf.NewTracker(r.(sdf.OffsetRange))
			if wrap != nil {
				return wrap(t)
			}
			return t
		},
		Read: d.read,
	}
}

func TestReadAll(t *testing.T) {
	d := blocky(100, 6)
	want := d.records()
	for _, r := range []sdf.OffsetRange{{Start: 0, End: 1000}, {Start: 100, End: d.end}, {Start: 95, End: d.end + 1}} {
		got := sdftest.AssertReadAll(t, d.subject(r.Start, r.End, nil))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("ReadAll of %v = %v, want %v", r, got, want)
		}
	}
	// A range that starts inside a block reads from the next block.
	got := sdftest.AssertReadAll(t, d.subject(d.blocks[1].pos+1, d.blocks[3].pos+1, nil))
	wantPart := strings.Fields("109.0 109.1 109.2 113.0 113.1 113.2 113.3")
	if strings.Join(got, " ") != strings.Join(wantPart, " ") {
		t.Errorf("ReadAll of a part = %v, want %v", got, wantPart)
	}
}

// TestSplitAtFraction checks single splits with known outcomes under Beam
// Go's TrySplit (fraction of the remainder).
func TestSplitAtFraction(t *testing.T) {
	d := gappy(0, 10) // offsets 0 1 3 6 7 9 12 13 15 18, end 19
	s := d.subject(0, d.end, nil)
	for _, c := range []struct {
		n                  int
		f                  float64
		want               sdftest.Outcome
		primary, residual  sdf.OffsetRange
		nPrimary, nResidue int
	}{
		// Before any claim last is -1: split at -1 + ceil(0.5*20) = 9.
		{0, 0.5, sdftest.MustSucceedAndBeConsistent, sdf.OffsetRange{Start: 0, End: 9}, sdf.OffsetRange{Start: 9, End: 19}, 5, 5},
		// After 3 records last is 3: 3 + ceil(0.5*16) = 11.
		{3, 0.5, sdftest.MustSucceedAndBeConsistent, sdf.OffsetRange{Start: 0, End: 11}, sdf.OffsetRange{Start: 11, End: 19}, 6, 4},
		// A checkpoint after 4 records: everything unclaimed is the residual.
		{4, 0, sdftest.MustSucceedAndBeConsistent, sdf.OffsetRange{Start: 0, End: 7}, sdf.OffsetRange{Start: 7, End: 19}, 4, 6},
		// After all 10 records (last 18) nothing is left to split off.
		{10, 0.5, sdftest.MustFail, sdf.OffsetRange{}, sdf.OffsetRange{}, 10, -1},
		{5, 1, sdftest.MustFail, sdf.OffsetRange{}, sdf.OffsetRange{}, 10, -1},
		{9, 0.01, sdftest.ConsistentIfSucceeds, sdf.OffsetRange{Start: 0, End: 16}, sdf.OffsetRange{Start: 16, End: 19}, 9, 1},
	} {
		res := sdftest.AssertSplitAtFraction(t, s, c.n, c.f, c.want)
		if res.Succeeded != (c.nResidue >= 0) || res.PrimaryRecords != c.nPrimary || res.ResidualRecords != c.nResidue {
			t.Errorf("split at %v after %d: %+v, want %d primary and %d residual records", c.f, c.n, res, c.nPrimary, c.nResidue)
		}
		if res.Succeeded && (res.Primary != c.primary || res.Residual != c.residual) {
			t.Errorf("split at %v after %d: primary %v residual %v, want %v %v", c.f, c.n, res.Primary, res.Residual, c.primary, c.residual)
		}
	}

	// Wrong expectations are reported.
	ctx := context.Background()
	if _, err := sdftest.CheckSplitAtFraction(ctx, s, 3, 0.5, sdftest.MustFail); err == nil || !strings.Contains(err.Error(), "want it refused") {
		t.Errorf("MustFail on a split that succeeds: err = %v", err)
	}
	if _, err := sdftest.CheckSplitAtFraction(ctx, s, 10, 0.5, sdftest.MustSucceedAndBeConsistent); err == nil || !strings.Contains(err.Error(), "want it to succeed") {
		t.Errorf("MustSucceedAndBeConsistent on a refused split: err = %v", err)
	}
	if _, err := sdftest.CheckSplitAtFraction(ctx, s, 11, 0.5, sdftest.ConsistentIfSucceeds); err == nil {
		t.Errorf("split after 11 of 10 records: no error")
	}
}

// TestExhaustiveEveryRecordSplitPoint: every record is a split point, with
// gaps between offsets and a range that extends past the input.
func TestExhaustiveEveryRecordSplitPoint(t *testing.T) {
	t.Parallel()
	d := gappy(3, 30)
	rep := sdftest.AssertSplitAtFractionExhaustive(t, d.subject(0, d.end+4, nil))
	checkReport(t, rep, 30)
}

// TestExhaustiveBlocks: several records per block, only block starts are
// split points, the reader calls SetBlock.
func TestExhaustiveBlocks(t *testing.T) {
	t.Parallel()
	d := blocky(10, 12)
	n := len(d.records())
	rep := sdftest.AssertSplitAtFractionExhaustive(t, d.subject(10, d.end, nil))
	checkReport(t, rep, n)
}

// TestExhaustiveWholeRangeFractions checks Java's SplitAtFraction (fractions of
// the whole range) through Subject.Split.
func TestExhaustiveWholeRangeFractions(t *testing.T) {
	t.Parallel()
	d := blocky(0, 8)
	s := d.subject(0, d.end, nil)
	s.Split = func(rt beamsdf.RTracker, f float64) (any, any, error) {
		tr := rt.(*sdf.Tracker)
		res, ok := tr.SplitAtFraction(f)
		if !ok {
			return tr.Range(), nil, nil
		}
		return tr.Range(), res, nil
	}
	rep := sdftest.AssertSplitAtFractionExhaustive(t, s)
	checkReport(t, rep, len(d.records()))
}

// TestExhaustiveBeamOffsetRange runs Beam's own offsetrange.Tracker (behind
// its LockRTracker) through the harness: the harness knows nothing of sdf.
// Its progress is off: once the claim of the end was refused, Beam's tracker
// reports done End+1-Start and remaining -1 (TestReportsBeamOffsetRangeProgress).
func TestExhaustiveBeamOffsetRange(t *testing.T) {
	t.Parallel()
	s := beamOffsetRangeSubject()
	s.SkipProgress = true
	rep := sdftest.AssertSplitAtFractionExhaustive(t, s)
	checkReport(t, rep, 20)
}

// TestReportsBeamOffsetRangeProgress: the progress checks see Beam's
// offsetrange.Tracker report negative remaining work at its end.
func TestReportsBeamOffsetRangeProgress(t *testing.T) {
	_, err := sdftest.ReadAll(context.Background(), beamOffsetRangeSubject())
	if err == nil || !strings.Contains(err.Error(), "negative work") {
		t.Errorf("ReadAll: err = %v, want negative work reported", err)
	}
}

func beamOffsetRangeSubject() sdftest.Subject[string] {
	d := gappy(0, 20)
	return sdftest.Subject[string]{
		Restriction: offsetrange.Restriction{Start: 0, End: d.end + 2},
		NewTracker: func(r any) beamsdf.RTracker {
			return beamsdf.NewLockRTracker(offsetrange.NewTracker(r.(offsetrange.Restriction)))
		},
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
			start := rt.GetRestriction().(offsetrange.Restriction).Start
			for _, b := range d.blocks {
				if b.pos < start {
					continue
				}
				if !rt.TryClaim(b.pos) {
					return nil
				}
				emit(fmt.Sprintf("%d.0", b.pos))
			}
			rt.TryClaim(rt.GetRestriction().(offsetrange.Restriction).End)
			return nil
		},
	}
}

// checkReport checks that an exhaustive run did real work: every index was
// split, and the races saw both outcomes somewhere.
func checkReport(t *testing.T, rep sdftest.ExhaustiveReport, records int) {
	t.Helper()
	if rep.Records != records {
		t.Errorf("report counts %d records, want %d", rep.Records, records)
	}
	if rep.Splits < 3*(records+1) || rep.NonTrivial == 0 {
		t.Errorf("report %v: too few splits", rep)
	}
	c := rep.Concurrent
	if c.Indices == 0 || c.Trials < c.Indices || c.NonTrivial == 0 || c.Other == 0 || c.BothSeen == 0 {
		t.Errorf("concurrent stage %v: want both outcomes seen", c)
	}
}

func TestConcurrent(t *testing.T) {
	t.Parallel()
	d := blocky(0, 10)
	s := d.subject(0, d.end, nil)
	rep := sdftest.AssertSplitAtFractionConcurrent(t, s, 5, 0.3, 50)
	if rep.Trials != 50 || rep.NonTrivial+rep.Other != 50 || rep.NonTrivial == 0 {
		t.Errorf("report %v, want 50 trials with non-trivial splits", rep)
	}
	if _, err := sdftest.CheckSplitAtFractionConcurrent(context.Background(), s, 99, 0.3, 1); err == nil {
		t.Errorf("racing after 99 of %d records: no error", len(d.records()))
	}
}

func TestSubjectValidation(t *testing.T) {
	ctx := context.Background()
	if _, err := sdftest.ReadAll(ctx, sdftest.Subject[int]{}); err == nil {
		t.Error("ReadAll of an empty Subject: no error")
	}
	d := gappy(0, 1)
	if _, err := sdftest.CheckSplitAtFractionExhaustive(ctx, d.subject(0, 10, nil)); err == nil || !strings.Contains(err.Error(), "at least 2") {
		t.Errorf("exhaustive check of 1 record: err = %v", err)
	}
	big := gappy(0, sdftest.MaxExhaustiveRecords+1)
	if _, err := sdftest.CheckSplitAtFractionExhaustive(ctx, big.subject(0, big.end, nil)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("exhaustive check of %d records: err = %v", sdftest.MaxExhaustiveRecords+1, err)
	}
	nilTracker := d.subject(0, 10, func(*sdf.Tracker) beamsdf.RTracker { return nil })
	if _, err := sdftest.ReadAll(ctx, nilTracker); err == nil || !strings.Contains(err.Error(), "returned nil") {
		t.Errorf("nil tracker: err = %v", err)
	}
}

type fixedEnd int64

func (e fixedEnd) EstimateEnd() int64 { return int64(e) }

// TestExhaustiveUnbounded reads an unbounded range whose end an estimator
// guesses right, too low and too high.
func TestExhaustiveUnbounded(t *testing.T) {
	t.Parallel()
	d := blocky(0, 8)
	for _, est := range []int64{d.end, d.end / 2, 3 * d.end} {
		s := d.subject(0, sdf.Unbounded, nil)
		s.NewTracker = func(r any) beamsdf.RTracker {
			return sdf.NewUnboundedTracker(r.(sdf.OffsetRange), fixedEnd(est))
		}
		checkReport(t, sdftest.AssertSplitAtFractionExhaustive(t, s), len(d.records()))
	}
}

// TestExhaustiveUnalignedRange: the range starts and ends inside blocks.
func TestExhaustiveUnalignedRange(t *testing.T) {
	t.Parallel()
	d := blocky(0, 12)
	s := d.subject(d.blocks[1].pos+1, d.blocks[10].pos+2, nil)
	all := sdftest.AssertReadAll(t, s)
	if all[0] != fmt.Sprintf("%d.0", d.blocks[2].pos) || all[len(all)-1] != fmt.Sprintf("%d.%d", d.blocks[10].pos, d.blocks[10].records-1) {
		t.Fatalf("ReadAll of %v = %v: want blocks 2 to 10", s.Restriction, all)
	}
	checkReport(t, sdftest.AssertSplitAtFractionExhaustive(t, s), len(all))
}

// fakeTB records what the Assert functions tell a test.
type fakeTB struct {
	testing.TB
	fatal string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Logf(string, ...any)       {}
func (f *fakeTB) Fatal(args ...any)         { f.fatal = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(s string, a ...any) { f.fatal = fmt.Sprintf(s, a...) }

func TestAssertFailsTheTest(t *testing.T) {
	d := gappy(0, 10)
	refusing := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return refusingTracker{t} })
	dup := d.subject(0, d.end, func(t *sdf.Tracker) beamsdf.RTracker { return &dupTracker{Tracker: t} })
	for name, assert := range map[string]func(testing.TB){
		"ReadAll": func(tb testing.TB) {
			sdftest.AssertReadAll(tb, d.subject(0, d.end, func(*sdf.Tracker) beamsdf.RTracker { return nil }))
		},
		"SplitAtFraction": func(tb testing.TB) {
			sdftest.AssertSplitAtFraction(tb, refusing, 2, 0.5, sdftest.MustSucceedAndBeConsistent)
		},
		"Exhaustive": func(tb testing.TB) { sdftest.AssertSplitAtFractionExhaustive(tb, refusing) },
		"Concurrent": func(tb testing.TB) { sdftest.AssertSplitAtFractionConcurrent(tb, dup, 3, 0.5, 5) },
	} {
		var tb fakeTB
		assert(&tb)
		if !strings.HasPrefix(tb.fatal, "sdftest: ") {
			t.Errorf("Assert%s: Fatal(%q), want an sdftest error", name, tb.fatal)
		}
	}
	var tb fakeTB
	sdftest.AssertSplitAtFraction(&tb, refusing, 2, 0.5, sdftest.MustFail)
	if tb.fatal != "" {
		t.Errorf("AssertSplitAtFraction MustFail on a refused split: Fatal(%q)", tb.fatal)
	}
}
