package sdf

import (
	"math"
	"strings"
	"sync/atomic"
	"testing"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
)

// op is one step of a scripted tracker test. Exactly one of the kinds below
// is used per step; want is the expected boolean result.
type op struct {
	kind string // "sp" split point, "rec" non-split record, "any" TryClaim(v), "split" TrySplit(f),
	// "frac" SplitAtFraction(f), "at" TrySplitAtPosition(pos), "done" MarkDone, "block" SetBlock(pos, n)
	pos  int64
	f    float64
	v    any
	n    int64
	want bool
	// For split steps, the residual expected when want is true.
	res OffsetRange
}

func sp(pos int64, want bool) op  { return op{kind: "sp", pos: pos, want: want} }
func rec(pos int64, want bool) op { return op{kind: "rec", pos: pos, want: want} }
func split(f float64, want bool, res OffsetRange) op {
	return op{kind: "split", f: f, want: want, res: res}
}
func refuseSplit(f float64) op { return op{kind: "split", f: f} }

// apply runs o on tr and reports a test error when the result differs.
func apply(t *testing.T, i int, tr *Tracker, o op) {
	t.Helper()
	var got bool
	var res OffsetRange
	switch o.kind {
	case "sp":
		got = tr.TryClaimSplitPoint(o.pos)
	case "rec":
		got = tr.TryClaimRecord(o.pos, false)
	case "any":
		got = tr.TryClaim(o.v)
	case "split":
		before := tr.Range()
		p, r, err := tr.TrySplit(o.f)
		if err != nil {
			t.Fatalf("step %d: TrySplit(%v) error %v", i, o.f, err)
		}
		if p.(OffsetRange) != tr.Range() {
			t.Errorf("step %d: TrySplit(%v) primary %v, tracker range %v", i, o.f, p, tr.Range())
		}
		got = r != nil
		if got {
			res = r.(OffsetRange)
			if p.(OffsetRange).End != res.Start || res.End != before.End || p.(OffsetRange).Start != before.Start {
				t.Errorf("step %d: TrySplit(%v) of %v gave %v + %v, which do not tile it", i, o.f, before, p, res)
			}
		} else if tr.Range() != before {
			t.Errorf("step %d: refused TrySplit(%v) changed the range %v -> %v", i, o.f, before, tr.Range())
		}
	case "frac", "at":
		before := tr.Range()
		if o.kind == "frac" {
			res, got = tr.SplitAtFraction(o.f)
		} else {
			res, got = tr.TrySplitAtPosition(o.pos)
		}
		if got {
			if tr.Range() != (OffsetRange{before.Start, res.Start}) || res.End != before.End {
				t.Errorf("step %d: %s split of %v gave %v + %v", i, o.kind, before, tr.Range(), res)
			}
		} else if tr.Range() != before {
			t.Errorf("step %d: refused %s split changed the range %v -> %v", i, o.kind, before, tr.Range())
		}
	case "done":
		tr.MarkDone()
		return
	case "block":
		tr.SetBlock(o.pos, o.n)
		return
	default:
		t.Fatalf("bad op kind %q", o.kind)
	}
	if got != o.want {
		t.Errorf("step %d: %s(pos=%d f=%v v=%v) = %v, want %v (tracker %v, err %v)", i, o.kind, o.pos, o.f, o.v, got, o.want, tr, tr.GetError())
	}
	if got && (o.kind == "split" || o.kind == "frac" || o.kind == "at") && res != o.res {
		t.Errorf("step %d: %s residual %v, want %v", i, o.kind, res, o.res)
	}
}

type script struct {
	name    string
	rng     OffsetRange
	ops     []op
	wantErr string // substring of GetError; "" means no error
	done    bool   // IsDone at the end
	final   *OffsetRange
}

func runScripts(t *testing.T, cases []script) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(c.rng)
			for i, o := range c.ops {
				apply(t, i, tr, o)
			}
			err := tr.GetError()
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("GetError() = %v, want nil", err)
			case c.wantErr != "" && err == nil:
				t.Errorf("GetError() = nil, want an error containing %q", c.wantErr)
			case c.wantErr != "" && !strings.Contains(err.Error(), c.wantErr):
				t.Errorf("GetError() = %v, want it to contain %q", err, c.wantErr)
			}
			if got := tr.IsDone(); got != c.done {
				t.Errorf("IsDone() = %v, want %v", got, c.done)
			}
			if c.final != nil && tr.Range() != *c.final {
				t.Errorf("Range() = %v, want %v", tr.Range(), *c.final)
			}
		})
	}
}

func rp(s, e int64) *OffsetRange { return &OffsetRange{s, e} }

// Rule 2: the first record is a split point; split points strictly increase;
// non-split-point records are accepted once their block was claimed.
func TestRule2ClaimOrder(t *testing.T) {
	runScripts(t, []script{
		{name: "split points then records of their blocks", rng: OffsetRange{0, 100},
			ops:  []op{sp(0, true), rec(0, true), rec(0, true), sp(10, true), rec(10, true), sp(11, true), sp(99, true), rec(99, true)},
			done: true},
		{name: "first claim not a split point", rng: OffsetRange{0, 100},
			ops: []op{rec(0, false)}, wantErr: "not a split point"},
		{name: "first claim not a split point, later claims refused", rng: OffsetRange{0, 100},
			ops: []op{rec(5, false), sp(5, false), sp(6, false)}, wantErr: "not a split point"},
		{name: "repeated split point", rng: OffsetRange{0, 100},
			ops: []op{sp(3, true), sp(3, false)}, wantErr: "strictly increase"},
		{name: "decreasing split point", rng: OffsetRange{0, 100},
			ops: []op{sp(3, true), sp(7, true), sp(5, false)}, wantErr: "strictly increase"},
		{name: "split point behind a non-split record", rng: OffsetRange{0, 100},
			ops: []op{sp(3, true), rec(8, true), sp(6, false)}, wantErr: "strictly increase"},
		// Positions up to the last claimed record are consumed (this is where
		// the tracker is stricter than Java's OffsetRangeTracker).
		{name: "split point at a non-split record after it", rng: OffsetRange{0, 100},
			ops: []op{sp(3, true), rec(8, true), sp(8, false)}, wantErr: "strictly increase"},
		{name: "split point after a non-split record", rng: OffsetRange{0, 100},
			ops: []op{sp(3, true), rec(8, true), sp(9, true)}},
		{name: "record before the last record", rng: OffsetRange{0, 100},
			ops: []op{sp(3, true), rec(8, true), rec(7, false)}, wantErr: "claimed after the record"},
		{name: "record before its block", rng: OffsetRange{0, 100},
			ops: []op{sp(30, true), rec(29, false)}, wantErr: "claimed after the record"},
		{name: "split point before start", rng: OffsetRange{10, 100},
			ops: []op{sp(9, false)}, wantErr: "before the start"},
		{name: "violation stops the tracker for good", rng: OffsetRange{0, 100},
			ops: []op{sp(3, true), sp(2, false), sp(4, false), rec(3, false)}, wantErr: "strictly increase"},
		{name: "first claim after start", rng: OffsetRange{10, 100},
			ops: []op{sp(40, true), rec(40, true), sp(41, true)}},
		// After a split moves the end to just past the current block, the
		// block's remaining records are still accepted; the next split point
		// is refused.
		{name: "records past a shrunken end (TrySplitAtPosition)", rng: OffsetRange{0, 100},
			ops: []op{sp(0, true), sp(10, true), {kind: "at", pos: 11, want: true, res: OffsetRange{11, 100}},
				rec(10, true), rec(10, true), sp(20, false)},
			done: true, final: rp(0, 11)},
		{name: "records at positions past a shrunken end", rng: OffsetRange{0, 100},
			ops:  []op{sp(10, true), split(0, true, OffsetRange{11, 100}), rec(12, true), rec(50, true), rec(50, true), sp(51, false)},
			done: true, final: rp(0, 11)},
		{name: "records past the end after a checkpoint", rng: OffsetRange{0, 100},
			ops:  []op{sp(10, true), split(0, true, OffsetRange{11, 100}), rec(10, true), sp(11, false)},
			done: true, final: rp(0, 11)},
		{name: "TryClaim int64 is a split point", rng: OffsetRange{0, 10},
			ops:     []op{{kind: "any", v: int64(0), want: true}, {kind: "any", v: int64(0), want: false}},
			wantErr: "strictly increase"},
		{name: "TryClaim Claim values", rng: OffsetRange{0, 10},
			ops: []op{{kind: "any", v: Claim{Pos: 2, SplitPoint: true}, want: true},
				{kind: "any", v: Claim{Pos: 2}, want: true},
				{kind: "any", v: Claim{Pos: 9, SplitPoint: true}, want: true},
				{kind: "any", v: Claim{Pos: 10, SplitPoint: true}, want: false}},
			done: true},
		{name: "TryClaim first Claim not a split point", rng: OffsetRange{0, 10},
			ops: []op{{kind: "any", v: Claim{Pos: 2}, want: false}}, wantErr: "not a split point"},
		{name: "TryClaim wrong type", rng: OffsetRange{0, 10},
			ops: []op{{kind: "any", v: 3, want: false}}, wantErr: "want int64 or sdf.Claim"},
	})
}

// Rule 3: a split point at or past the end fails and marks the tracker done;
// any claim after that is an error.
func TestRule3ClaimPastEnd(t *testing.T) {
	runScripts(t, []script{
		{name: "at end", rng: OffsetRange{0, 10}, ops: []op{sp(0, true), sp(10, false)}, done: true},
		{name: "past end", rng: OffsetRange{0, 10}, ops: []op{sp(0, true), sp(1000, false)}, done: true},
		{name: "first claim past end", rng: OffsetRange{0, 10}, ops: []op{sp(10, false)}, done: true},
		{name: "empty range", rng: OffsetRange{5, 5}, ops: []op{sp(5, false)}, done: true},
		{name: "last position then end", rng: OffsetRange{0, 10}, ops: []op{sp(9, true), sp(10, false)}, done: true},
		{name: "split point after stop", rng: OffsetRange{0, 10},
			ops: []op{sp(0, true), sp(10, false), sp(11, false)}, wantErr: "after the tracker"},
		{name: "record after stop", rng: OffsetRange{0, 10},
			ops: []op{sp(0, true), sp(10, false), rec(10, false)}, wantErr: "after the tracker"},
		{name: "claim after MarkDone", rng: OffsetRange{0, 10},
			ops: []op{sp(0, true), {kind: "done"}, sp(1, false)}, wantErr: "after the tracker"},
		{name: "record after MarkDone", rng: OffsetRange{0, 10},
			ops: []op{sp(0, true), {kind: "done"}, rec(0, false)}, wantErr: "after the tracker"},
		{name: "MarkDone mid-range is done", rng: OffsetRange{0, 10},
			ops: []op{sp(0, true), {kind: "done"}}, done: true},
		{name: "MarkDone before any claim", rng: OffsetRange{0, 10},
			ops: []op{{kind: "done"}}, done: true},
		{name: "not done mid-range", rng: OffsetRange{0, 10}, ops: []op{sp(0, true), sp(8, true)}},
		{name: "not done before a claim", rng: OffsetRange{0, 10}},
		{name: "empty range is done", rng: OffsetRange{5, 5}, done: true},
	})
}

func TestFailKeepsFirstError(t *testing.T) {
	tr := NewTracker(OffsetRange{0, 10})
	tr.TryClaimSplitPoint(1)
	first := errString("first")
	tr.Fail(first)
	tr.Fail(errString("second"))
	if tr.GetError() != first {
		t.Errorf("GetError() = %v, want %v", tr.GetError(), first)
	}
	if tr.IsDone() {
		t.Error("a failed tracker reports IsDone")
	}
	if tr.TryClaimSplitPoint(2) {
		t.Error("claim accepted after Fail")
	}
	if tr.GetError() != first {
		t.Errorf("GetError() = %v after a later claim, want the first error", tr.GetError())
	}
	if _, r, _ := tr.TrySplit(0.5); r != nil {
		t.Errorf("failed tracker split, residual %v", r)
	}
	if _, r, _ := tr.TrySplit(0); r != nil {
		t.Errorf("failed tracker checkpointed, residual %v", r)
	}
	if _, ok := tr.TrySplitAtPosition(5); ok {
		t.Error("failed tracker split at position")
	}
	if _, ok := tr.SplitAtFraction(0.5); ok {
		t.Error("failed tracker split at fraction")
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// Rule 4: TrySplit(f) is a fraction of the remainder:
// pos = last + max(ceil(f*(end-last)), 1).
func TestRule4TrySplit(t *testing.T) {
	r := func(s, e int64) OffsetRange { return OffsetRange{s, e} }
	runScripts(t, []script{
		{name: "before any claim", rng: r(0, 100), ops: []op{split(0.5, true, r(50, 100))}, final: rp(0, 50)},
		// last = 9, ceil(0.5*91) = 46.
		{name: "mid-range", rng: r(0, 100), ops: []op{sp(9, true), split(0.5, true, r(55, 100))}, final: rp(0, 55)},
		// ceil(0.01*91) = 1: the smallest split lies just after the last claim.
		{name: "tiny fraction", rng: r(0, 100), ops: []op{sp(9, true), split(0.01, true, r(10, 100))}, final: rp(0, 10), done: true},
		// ceil(0.1*91) = ceil(9.1) = 10, not round(9.1) = 9.
		{name: "ceil not round", rng: r(0, 100), ops: []op{sp(9, true), split(0.1, true, r(19, 100))}},
		{name: "offset start", rng: r(1000, 2000), ops: []op{split(0.25, true, r(1250, 2000))}},
		// before a claim last = start-1 = 999, ceil(0.25*1001) = 251.
		{name: "offset start rounding", rng: r(1000, 2001), ops: []op{split(0.25, true, r(1250, 2001))}},
		{name: "after a non-split record", rng: r(0, 100),
			ops: []op{sp(10, true), rec(30, true), split(0.5, true, r(65, 100))}},
		{name: "second split is relative to the new end", rng: r(0, 100),
			ops: []op{sp(9, true), split(0.5, true, r(55, 100)), split(0.5, true, r(32, 55))}, final: rp(0, 32)},
		{name: "one position left", rng: r(0, 100), ops: []op{sp(98, true), split(0.5, true, r(99, 100))}, final: rp(0, 99), done: true},
		{name: "refused: f=1", rng: r(0, 100), ops: []op{sp(9, true), refuseSplit(1)}, final: rp(0, 100)},
		{name: "refused: f>1", rng: r(0, 100), ops: []op{sp(9, true), refuseSplit(3)}, final: rp(0, 100)},
		// ceil(0.99*5) = 5 = end-last.
		{name: "refused: pos rounds to end", rng: r(0, 10), ops: []op{sp(5, true), refuseSplit(0.99)}, final: rp(0, 10)},
		{name: "refused: last position claimed", rng: r(0, 100), ops: []op{sp(99, true), refuseSplit(0.5)}, done: true},
		{name: "refused: claim refused", rng: r(0, 100), ops: []op{sp(5, true), sp(100, false), refuseSplit(0.5)}, done: true, final: rp(0, 100)},
		{name: "refused: MarkDone", rng: r(0, 100), ops: []op{sp(5, true), {kind: "done"}, refuseSplit(0.5), refuseSplit(0)}, done: true, final: rp(0, 100)},
		{name: "refused: failed", rng: r(0, 100), ops: []op{sp(5, true), sp(4, false), refuseSplit(0.5), refuseSplit(0)}, wantErr: "strictly", final: rp(0, 100)},
		{name: "refused: empty", rng: r(7, 7), ops: []op{refuseSplit(0.5), refuseSplit(0)}, done: true},
		// A record of the block at 10 that carries a position at or past the
		// new end leaves no split point to claim: done, nothing to split.
		{name: "refused: non-split record at the end", rng: r(0, 100),
			ops: []op{sp(10, true), split(0.1, true, r(19, 100)), rec(18, true), refuseSplit(0.5), refuseSplit(0), sp(19, false)}, done: true, final: rp(0, 19)},
		{name: "refused: non-split record past the end", rng: r(0, 100),
			ops: []op{sp(10, true), split(0.1, true, r(19, 100)), rec(40, true), refuseSplit(0.5), refuseSplit(0), sp(41, false)}, done: true, final: rp(0, 19)},
		// The checkpoint after a record past its block's offset leaves the
		// tracker done (Beam's runtime checks IsDone after TrySplit(0)).
		{name: "checkpoint after a record past its block", rng: r(0, 100),
			ops: []op{sp(75, true), rec(82, true), split(0, true, r(83, 100)), sp(82, false)}, wantErr: "strictly", final: rp(0, 83)},
		{name: "checkpoint after a record past its block is done", rng: r(0, 100),
			ops: []op{sp(75, true), rec(82, true), split(0, true, r(83, 100)), rec(82, true)}, done: true, final: rp(0, 83)},
		{name: "claims follow the new end", rng: r(0, 100),
			ops: []op{sp(9, true), split(0.5, true, r(55, 100)), sp(54, true), sp(55, false)}, done: true, final: rp(0, 55)},
	})
}

// TrySplit matches Beam Go's offsetrange.Tracker exactly when every record is
// a split point.
func TestTrySplitMatchesBeamOffsetRange(t *testing.T) {
	fractions := []float64{0, 1e-9, 0.001, 0.1, 0.25, 1.0 / 3, 0.5, 2.0 / 3, 0.75, 0.9, 0.999, 1}
	for _, rng := range []OffsetRange{{0, 1}, {0, 2}, {0, 7}, {3, 50}, {1 << 40, 1<<40 + 100}} {
		for claimed := rng.Start - 1; claimed < rng.End; claimed++ {
			for _, f := range fractions {
				ours := NewTracker(rng)
				beam := offsetrange.NewTracker(offsetrange.Restriction{Start: rng.Start, End: rng.End})
				for p := rng.Start; p <= claimed; p++ {
					if ours.TryClaimSplitPoint(p) != beam.TryClaim(p) {
						t.Fatalf("%v: claim %d disagrees", rng, p)
					}
				}
				op, or, _ := ours.TrySplit(f)
				bp, br, _ := beam.TrySplit(f)
				if (or == nil) != (br == nil) {
					t.Errorf("%v claimed %d TrySplit(%v): residual %v, Beam %v", rng, claimed, f, or, br)
					continue
				}
				bpr := bp.(offsetrange.Restriction)
				if op.(OffsetRange) != (OffsetRange{bpr.Start, bpr.End}) {
					t.Errorf("%v claimed %d TrySplit(%v): primary %v, Beam %v", rng, claimed, f, op, bp)
				}
				if or != nil {
					brr := br.(offsetrange.Restriction)
					if or.(OffsetRange) != (OffsetRange{brr.Start, brr.End}) {
						t.Errorf("%v claimed %d TrySplit(%v): residual %v, Beam %v", rng, claimed, f, or, br)
					}
				}
				if ours.IsDone() != beam.IsDone() {
					t.Errorf("%v claimed %d TrySplit(%v): IsDone %v, Beam %v", rng, claimed, f, ours.IsDone(), beam.IsDone())
				}
			}
		}
	}
}

// Rule 5: TrySplit(0) is a checkpoint; the tracker is then done and the next
// split point is refused.
func TestRule5Checkpoint(t *testing.T) {
	cases := []struct {
		name          string
		rng           OffsetRange
		claims        []int64
		primary, resd OffsetRange
		refused       bool
		next          int64 // the next split point the reader would claim
	}{
		{name: "before any claim", rng: OffsetRange{10, 20}, primary: OffsetRange{10, 10}, resd: OffsetRange{10, 20}, next: 10},
		{name: "mid-range", rng: OffsetRange{10, 20}, claims: []int64{10, 13}, primary: OffsetRange{10, 14}, resd: OffsetRange{14, 20}, next: 14},
		{name: "sparse split points", rng: OffsetRange{0, 1000}, claims: []int64{0, 400}, primary: OffsetRange{0, 401}, resd: OffsetRange{401, 1000}, next: 700},
		{name: "one before the end", rng: OffsetRange{10, 20}, claims: []int64{18}, primary: OffsetRange{10, 19}, resd: OffsetRange{19, 20}, next: 19},
		{name: "at the end", rng: OffsetRange{10, 20}, claims: []int64{19}, primary: OffsetRange{10, 20}, refused: true, next: 20},
		{name: "unbounded", rng: OffsetRange{0, Unbounded}, claims: []int64{0, 5}, primary: OffsetRange{0, 6}, resd: OffsetRange{6, Unbounded}, next: 6},
		{name: "unbounded before any claim", rng: OffsetRange{3, Unbounded}, primary: OffsetRange{3, 3}, resd: OffsetRange{3, Unbounded}, next: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(c.rng)
			for _, p := range c.claims {
				if !tr.TryClaimSplitPoint(p) {
					t.Fatalf("claim %d refused", p)
				}
			}
			p, r, err := tr.TrySplit(0)
			if err != nil {
				t.Fatal(err)
			}
			if p.(OffsetRange) != c.primary {
				t.Errorf("primary %v, want %v", p, c.primary)
			}
			if c.refused {
				if r != nil {
					t.Errorf("residual %v, want refusal", r)
				}
			} else if r == nil || r.(OffsetRange) != c.resd {
				t.Errorf("residual %v, want %v", r, c.resd)
			}
			if !tr.IsDone() {
				t.Error("IsDone false after a checkpoint")
			}
			if acc, ref := tr.SplitStats(); acc != 0 || ref != 0 {
				t.Errorf("SplitStats() = %d, %d: checkpoints must not be counted", acc, ref)
			}
			if _, r2, _ := tr.TrySplit(0); r2 != nil {
				t.Errorf("second checkpoint gave residual %v", r2)
			}
			if _, r2, _ := tr.TrySplit(0.5); r2 != nil {
				t.Errorf("split after a checkpoint gave residual %v", r2)
			}
			if len(c.claims) > 0 {
				if !tr.TryClaimRecord(c.claims[len(c.claims)-1], false) {
					t.Error("a record of the current block was refused after a checkpoint")
				}
			}
			if tr.TryClaimSplitPoint(c.next) {
				t.Errorf("split point %d accepted after a checkpoint", c.next)
			}
			if err := tr.GetError(); err != nil {
				t.Errorf("GetError() = %v after the refused claim", err)
			}
			if !tr.IsDone() {
				t.Error("IsDone false at the end")
			}
		})
	}
}

// Java's BoundedReader.splitAtFraction: floor, measured from the first
// claimed position.
func TestSplitAtFraction(t *testing.T) {
	r := func(s, e int64) OffsetRange { return OffsetRange{s, e} }
	frac := func(f float64, want bool, res OffsetRange) op { return op{kind: "frac", f: f, want: want, res: res} }
	runScripts(t, []script{
		{name: "before any claim", rng: r(0, 100), ops: []op{frac(0.3, true, r(30, 100))}, final: rp(0, 30)},
		// floor(0.33*10) = 3; ceil would give 4.
		{name: "floor", rng: r(0, 10), ops: []op{frac(0.33, true, r(3, 10))}},
		{name: "from the first claimed position", rng: r(0, 100), ops: []op{sp(10, true), frac(0.5, true, r(55, 100))}, final: rp(0, 55)},
		{name: "from the first claim, not the last", rng: r(0, 100), ops: []op{sp(10, true), sp(20, true), frac(0.5, true, r(55, 100))}},
		{name: "relative to the current range", rng: r(0, 100), ops: []op{sp(10, true), frac(0.5, true, r(55, 100)), frac(0.5, true, r(32, 55))}, final: rp(0, 32)},
		{name: "refused: position already read", rng: r(0, 100), ops: []op{sp(10, true), sp(60, true), frac(0.5, false, r(0, 0))}, final: rp(0, 100)},
		{name: "refused: position equals the last record", rng: r(0, 100), ops: []op{sp(10, true), sp(55, true), frac(0.5, false, r(0, 0))}},
		{name: "refused: f=0 before a claim (p <= start)", rng: r(0, 100), ops: []op{frac(0, false, r(0, 0))}},
		{name: "refused: f=1 (p >= end)", rng: r(0, 100), ops: []op{sp(0, true), frac(1, false, r(0, 0))}},
		{name: "refused: f>1", rng: r(0, 100), ops: []op{frac(1.5, false, r(0, 0))}},
		{name: "refused: f<0", rng: r(0, 100), ops: []op{frac(-0.5, false, r(0, 0))}},
		{name: "refused: NaN", rng: r(0, 100), ops: []op{frac(math.NaN(), false, r(0, 0))}},
		{name: "refused: done", rng: r(0, 100), ops: []op{sp(0, true), {kind: "done"}, frac(0.5, false, r(0, 0))}, done: true},
		{name: "refused: failed", rng: r(0, 100), ops: []op{rec(0, false), frac(0.5, false, r(0, 0))}, wantErr: "split point"},
		{name: "refused: unbounded", rng: r(0, Unbounded), ops: []op{sp(0, true), frac(0.5, false, r(0, 0))}},
	})
}

// Java's RangeTracker.trySplitAtPosition and each of its refusals.
func TestTrySplitAtPosition(t *testing.T) {
	r := func(s, e int64) OffsetRange { return OffsetRange{s, e} }
	at := func(p int64, want bool, res OffsetRange) op { return op{kind: "at", pos: p, want: want, res: res} }
	runScripts(t, []script{
		{name: "before any claim", rng: r(10, 100), ops: []op{at(11, true, r(11, 100))}, final: rp(10, 11)},
		{name: "just after the last claim", rng: r(0, 100), ops: []op{sp(10, true), at(11, true, r(11, 100))}, final: rp(0, 11), done: true},
		{name: "just before the end", rng: r(0, 100), ops: []op{sp(10, true), at(99, true, r(99, 100))}, final: rp(0, 99)},
		{name: "twice", rng: r(0, 100), ops: []op{sp(10, true), at(50, true, r(50, 100)), at(20, true, r(20, 50))}, final: rp(0, 20)},
		{name: "refused: at the last claimed split point", rng: r(0, 100), ops: []op{sp(10, true), at(10, false, r(0, 0))}, final: rp(0, 100)},
		{name: "refused: before the last claimed split point", rng: r(0, 100), ops: []op{sp(10, true), sp(20, true), at(15, false, r(0, 0))}, final: rp(0, 100)},
		{name: "refused: at the last claimed record", rng: r(0, 100), ops: []op{sp(10, true), rec(30, true), at(30, false, r(0, 0))}, final: rp(0, 100)},
		{name: "refused: between split point and record", rng: r(0, 100), ops: []op{sp(10, true), rec(30, true), at(20, false, r(0, 0))}},
		{name: "accepted: after the last record", rng: r(0, 100), ops: []op{sp(10, true), rec(30, true), at(31, true, r(31, 100))}, done: true},
		{name: "refused: at start", rng: r(10, 100), ops: []op{at(10, false, r(0, 0))}, final: rp(10, 100)},
		{name: "refused: before start", rng: r(10, 100), ops: []op{at(5, false, r(0, 0))}},
		{name: "refused: at end", rng: r(10, 100), ops: []op{sp(10, true), at(100, false, r(0, 0))}},
		{name: "refused: past end", rng: r(10, 100), ops: []op{at(200, false, r(0, 0))}},
		{name: "refused: done by claim", rng: r(0, 100), ops: []op{sp(10, true), sp(100, false), at(50, false, r(0, 0))}, done: true},
		{name: "refused: done by MarkDone", rng: r(0, 100), ops: []op{sp(10, true), {kind: "done"}, at(50, false, r(0, 0))}, done: true},
		{name: "refused: failed", rng: r(0, 100), ops: []op{sp(10, true), sp(5, false), at(50, false, r(0, 0))}, wantErr: "strictly"},
		{name: "refused: last position claimed", rng: r(0, 100), ops: []op{sp(99, true), at(99, false, r(0, 0))}, done: true},
		{name: "unbounded end", rng: r(0, Unbounded), ops: []op{sp(10, true), at(1000, true, r(1000, Unbounded))}, final: rp(0, 1000)},
		{name: "refusal changes nothing", rng: r(0, 100),
			ops: []op{sp(10, true), at(5, false, r(0, 0)), sp(99, true), sp(100, false)}, done: true, final: rp(0, 100)},
	})
}

func TestSplitStats(t *testing.T) {
	tr := NewTracker(OffsetRange{0, 100})
	tr.TryClaimSplitPoint(10)
	tr.TrySplit(0.5)          // accepted
	tr.TrySplit(1)            // refused
	tr.SplitAtFraction(0.5)   // accepted: 10 + floor(0.5*45) = 32
	tr.SplitAtFraction(0)     // refused: 10 is not after the last claim
	tr.TrySplitAtPosition(20) // accepted
	tr.TrySplitAtPosition(20) // refused
	tr.TrySplitAtPosition(5)  // refused
	tr.TrySplit(0)            // checkpoint, not counted
	tr.TrySplit(0.5)          // refused: done
	if acc, ref := tr.SplitStats(); acc != 3 || ref != 5 {
		t.Errorf("SplitStats() = %d accepted, %d refused; want 3, 5", acc, ref)
	}
	if tr.Range() != (OffsetRange{0, 11}) {
		t.Errorf("Range() = %v, want [0, 11)", tr.Range())
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Rule 6: fraction consumed and progress.
func TestRule6FractionConsumed(t *testing.T) {
	type check struct {
		op   op
		frac float64
	}
	cases := []struct {
		name   string
		rng    OffsetRange
		steps  []check
		finish float64
	}{
		{name: "split points", rng: OffsetRange{0, 100}, steps: []check{
			{op{kind: "none"}, 0}, {sp(0, true), 0}, {sp(25, true), 0.25}, {sp(50, true), 0.5}, {sp(99, true), 0.99}, {sp(100, false), 1}}},
		{name: "from the first claimed position", rng: OffsetRange{0, 100}, steps: []check{
			{sp(20, true), 0}, {sp(60, true), 0.5}}},
		{name: "after a split", rng: OffsetRange{0, 100}, steps: []check{
			{sp(20, true), 0}, {sp(40, true), 0.25}, {op{kind: "at", pos: 60, want: true, res: OffsetRange{60, 100}}, 0.5}}},
		// Block of 10 offsets and 4 records at 20: each claimed record moves
		// the position by 2.5 offsets over [20, 100).
		{name: "refined inside a block", rng: OffsetRange{0, 100}, steps: []check{
			{sp(20, true), 0}, {op{kind: "block", pos: 10, n: 4}, 2.5 / 80}, {rec(20, true), 5.0 / 80},
			{rec(20, true), 7.5 / 80}, {rec(20, true), 10.0 / 80},
			{rec(20, true), 10.0 / 80}, // more records than announced: capped at the block's end
			{sp(30, true), 10.0 / 80},  // the next split point forgets the block
		}},
		{name: "MarkDone", rng: OffsetRange{0, 100}, steps: []check{{sp(20, true), 0}, {op{kind: "done"}, 1}}},
		{name: "MarkDone before any claim", rng: OffsetRange{0, 100}, steps: []check{{op{kind: "done"}, 1}}},
		{name: "refused first claim", rng: OffsetRange{0, 100}, steps: []check{{sp(100, false), 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := NewTracker(c.rng)
			for i, s := range c.steps {
				if s.op.kind != "none" {
					apply(t, i, tr, s.op)
				}
				if got := tr.FractionConsumed(); !approx(got, s.frac) {
					t.Errorf("step %d (%s %d): FractionConsumed() = %v, want %v", i, s.op.kind, s.op.pos, got, s.frac)
				}
			}
		})
	}
}

func TestGetProgress(t *testing.T) {
	tr := NewTracker(OffsetRange{10, 110})
	check := func(what string, wantDone, wantRem float64) {
		t.Helper()
		d, r := tr.GetProgress()
		if !approx(d, wantDone) || !approx(r, wantRem) {
			t.Errorf("%s: GetProgress() = %v, %v; want %v, %v", what, d, r, wantDone, wantRem)
		}
	}
	check("before any claim", 0, 100)
	tr.TryClaimSplitPoint(20)
	check("first claim", 0, 90)
	tr.TryClaimSplitPoint(50)
	check("mid-range", 30, 60)
	tr.SetBlock(20, 4) // the block at 50 spans 20 offsets, 4 records; 1 claimed
	check("in block, 1 of 4", 35, 55)
	tr.TryClaimRecord(50, false)
	check("in block, 2 of 4", 40, 50)
	tr.TrySplitAtPosition(80)
	check("after split", 40, 20)
	tr.TryClaimSplitPoint(90)
	check("claim refused", 60, 0)
	if f := tr.FractionConsumed(); f != 1 {
		t.Errorf("FractionConsumed() = %v when done", f)
	}
}

// Rule 7.
func TestRule7SplitPoints(t *testing.T) {
	tr := NewTracker(OffsetRange{0, 100})
	check := func(what string, consumed, remaining int64) {
		t.Helper()
		if got := tr.SplitPointsConsumed(); got != consumed {
			t.Errorf("%s: SplitPointsConsumed() = %d, want %d", what, got, consumed)
		}
		if got := tr.SplitPointsRemaining(); got != remaining {
			t.Errorf("%s: SplitPointsRemaining() = %d, want %d", what, got, remaining)
		}
	}
	check("before any claim", 0, -1)
	tr.TryClaimSplitPoint(0)
	check("first", 0, -1)
	tr.TryClaimRecord(0, false)
	check("record", 0, -1)
	tr.TryClaimSplitPoint(10)
	check("second", 1, -1)
	tr.TrySplitAtPosition(21)
	tr.TryClaimSplitPoint(20)
	check("last split point the range can hold", 2, 1)
	tr.TryClaimRecord(20, false)
	check("record of the last block", 2, 1)
	tr.TryClaimSplitPoint(21)
	check("done", 3, 0)

	tr = NewTracker(OffsetRange{0, 100})
	tr.TryClaimSplitPoint(5)
	tr.TrySplit(0)
	check("after a checkpoint", 0, 1)
	tr.MarkDone()
	check("MarkDone", 1, 0)

	tr = NewTracker(OffsetRange{4, 4})
	check("empty", 0, 0)
}

// estimate is an EndEstimator whose estimate can change.
type estimate struct{ v atomic.Int64 }

func (e *estimate) EstimateEnd() int64 { return e.v.Load() }

func newEstimate(v int64) *estimate {
	e := &estimate{}
	e.v.Store(v)
	return e
}

func TestUnbounded(t *testing.T) {
	t.Run("without estimator", func(t *testing.T) {
		for _, tr := range []*Tracker{NewTracker(OffsetRange{0, Unbounded}), NewUnboundedTracker(OffsetRange{0, Unbounded}, nil)} {
			if tr.IsBounded() {
				t.Error("IsBounded true for an unbounded range")
			}
			if tr.IsDone() {
				t.Error("IsDone before any claim")
			}
			if d, r := tr.GetProgress(); d != 0 || r != 1 {
				t.Errorf("GetProgress() = %v, %v before any claim; want 0, 1", d, r)
			}
			for p := int64(0); p < 10; p++ {
				if !tr.TryClaimSplitPoint(p * 10) {
					t.Fatalf("claim %d refused", p*10)
				}
			}
			for _, f := range []float64{0.5, 0.01, 1} {
				if _, r, _ := tr.TrySplit(f); r != nil {
					t.Errorf("TrySplit(%v) gave %v without an estimator", f, r)
				}
			}
			if _, ok := tr.SplitAtFraction(0.5); ok {
				t.Error("SplitAtFraction accepted on an unbounded range")
			}
			if acc, ref := tr.SplitStats(); acc != 0 || ref != 4 {
				t.Errorf("SplitStats() = %d, %d; want 0, 4", acc, ref)
			}
			if f := tr.FractionConsumed(); f != 0 {
				t.Errorf("FractionConsumed() = %v without an estimator, want 0", f)
			}
			if d, r := tr.GetProgress(); d != 90 || r != 1 {
				t.Errorf("GetProgress() = %v, %v; want 90, 1", d, r)
			}
			if tr.IsDone() {
				t.Error("IsDone mid-way in an unbounded range")
			}
			p, r, _ := tr.TrySplit(0)
			if r == nil || r.(OffsetRange) != (OffsetRange{91, Unbounded}) || p.(OffsetRange) != (OffsetRange{0, 91}) {
				t.Fatalf("checkpoint gave %v, %v; want [0, 91), [91, unbounded)", p, r)
			}
			if !tr.IsBounded() || !tr.IsDone() {
				t.Errorf("after a checkpoint IsBounded %v IsDone %v, want true true", tr.IsBounded(), tr.IsDone())
			}
		}
	})
	t.Run("with estimator", func(t *testing.T) {
		est := newEstimate(1000)
		tr := NewUnboundedTracker(OffsetRange{0, Unbounded}, est)
		if tr.IsBounded() {
			t.Error("IsBounded true")
		}
		if d, r := tr.GetProgress(); d != 0 || r != 1000 {
			t.Errorf("GetProgress() = %v, %v before any claim; want 0, 1000", d, r)
		}
		tr.TryClaimSplitPoint(0)
		tr.TryClaimSplitPoint(9)
		if d, r := tr.GetProgress(); d != 9 || r != 991 {
			t.Errorf("GetProgress() = %v, %v; want 9, 991", d, r)
		}
		if f := tr.FractionConsumed(); !approx(f, 9.0/1000) {
			t.Errorf("FractionConsumed() = %v, want 0.009", f)
		}
		// last 9, estimate 1000: 9 + ceil(0.5*991) = 505.
		p, r, _ := tr.TrySplit(0.5)
		if r == nil || r.(OffsetRange) != (OffsetRange{505, Unbounded}) || p.(OffsetRange) != (OffsetRange{0, 505}) {
			t.Fatalf("TrySplit(0.5) = %v, %v; want [0, 505), [505, unbounded)", p, r)
		}
		if !tr.IsBounded() {
			t.Error("IsBounded false after the split bounded the range")
		}
		if !tr.TryClaimSplitPoint(504) || tr.TryClaimSplitPoint(505) {
			t.Error("claims do not follow the new end 505")
		}
	})
	t.Run("estimate behind the reader", func(t *testing.T) {
		est := newEstimate(5)
		tr := NewUnboundedTracker(OffsetRange{0, Unbounded}, est)
		tr.TryClaimSplitPoint(9)
		if f := tr.FractionConsumed(); f < 0 || f > 1 {
			t.Errorf("FractionConsumed() = %v", f)
		}
		if d, r := tr.GetProgress(); d != 0 || r != 1 {
			t.Errorf("GetProgress() = %v, %v; want 0, 1 (the end is taken as just past the reader)", d, r)
		}
		_, r, _ := tr.TrySplit(0.5)
		if r == nil || r.(OffsetRange) != (OffsetRange{10, Unbounded}) {
			t.Fatalf("TrySplit(0.5) residual %v, want [10, unbounded)", r)
		}
	})
	t.Run("growing estimate", func(t *testing.T) {
		est := newEstimate(100)
		tr := NewUnboundedTracker(OffsetRange{50, Unbounded}, est)
		tr.TryClaimSplitPoint(50)
		tr.TryClaimSplitPoint(75)
		if f := tr.FractionConsumed(); !approx(f, 0.5) {
			t.Errorf("FractionConsumed() = %v, want 0.5", f)
		}
		est.v.Store(150)
		if f := tr.FractionConsumed(); !approx(f, 0.25) {
			t.Errorf("FractionConsumed() = %v after the estimate grew, want 0.25", f)
		}
		// 75 + ceil(0.2*75) = 90.
		_, r, _ := tr.TrySplit(0.2)
		if r == nil || r.(OffsetRange) != (OffsetRange{90, Unbounded}) {
			t.Fatalf("TrySplit(0.2) residual %v, want [90, unbounded)", r)
		}
	})
	t.Run("done", func(t *testing.T) {
		tr := NewUnboundedTracker(OffsetRange{0, Unbounded}, newEstimate(100))
		tr.TryClaimSplitPoint(3)
		tr.MarkDone()
		if !tr.IsDone() || tr.FractionConsumed() != 1 {
			t.Errorf("IsDone %v FractionConsumed %v after MarkDone", tr.IsDone(), tr.FractionConsumed())
		}
		if _, r := tr.GetProgress(); r != 0 {
			t.Errorf("remaining %v after MarkDone, want 0", r)
		}
	})
}

func TestTrackerImplementsBeamInterfaces(t *testing.T) {
	var rt beamsdf.RTracker = NewTracker(OffsetRange{0, 10})
	if _, ok := rt.(beamsdf.BoundableRTracker); !ok {
		t.Error("*Tracker is not a BoundableRTracker")
	}
	if got := rt.GetRestriction(); got != (OffsetRange{0, 10}) {
		t.Errorf("GetRestriction() = %#v", got)
	}
	if s := NewTracker(OffsetRange{0, 10}).String(); !strings.Contains(s, "[0, 10)") {
		t.Errorf("String() = %q", s)
	}
}
