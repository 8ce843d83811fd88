package sdf

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"
)

// trackerModel is the split contract restated as plainly as possible, for
// FuzzTrackerModel to compare the Tracker against. Its arithmetic is exact
// (math/big), so that ranges at the ends of int64 ([math.MinInt64, 10), say)
// are checked too.
type trackerModel struct {
	start, end int64 // current range
	started    bool  // a split point was claimed
	stopped    bool  // refused claim or MarkDone
	failed     bool  // contract violation
	first      int64 // first claimed split point
	lastSplit  int64 // last claimed split point
	lastRecord int64 // last claimed record of any kind
	hasEst     bool  // an EndEstimator was given
	est        int64 // its estimate
	claimed    []int64
}

func bi(v int64) *big.Int { return big.NewInt(v) }

func add(a *big.Int, d int64) *big.Int { return new(big.Int).Add(a, bi(d)) }

// bigFloat64 is x rounded to the nearest float64, as Go converts integers.
func bigFloat64(x *big.Int) float64 {
	f, _ := new(big.Float).SetInt(x).Float64()
	return f
}

// floatInt is the integer value of the integral float f.
func floatInt(f float64) *big.Int {
	i, _ := new(big.Float).SetFloat64(f).Int(nil)
	return i
}

func (m *trackerModel) bounded() bool { return m.end != Unbounded }

func (m *trackerModel) done() bool {
	// A split point must lie after the last claimed record.
	return m.stopped || m.start >= m.end || (m.started && add(bi(m.lastRecord), 1).Cmp(bi(m.end)) >= 0)
}

// last is the position a split must lie after: Start-1 before any claim.
func (m *trackerModel) last() *big.Int {
	if !m.started {
		return add(bi(m.start), -1)
	}
	return bi(m.lastRecord)
}

func (m *trackerModel) claim(pos int64, splitPoint bool) bool {
	switch {
	case m.stopped || m.failed:
		m.failed = true // a claim after the tracker stopped is an error
		return false
	case !splitPoint:
		if !m.started || pos < m.lastRecord {
			m.failed = true
			return false
		}
		m.lastRecord = pos
		return true
	case pos < m.start, m.started && pos <= m.lastRecord:
		m.failed = true
		return false
	case pos >= m.end:
		m.stopped = true
		return false
	}
	if !m.started {
		m.started, m.first = true, pos
	}
	m.lastSplit, m.lastRecord = pos, pos
	m.claimed = append(m.claimed, pos)
	return true
}

// splitAtBig moves the end to pos when the contract allows it.
func (m *trackerModel) splitAtBig(pos *big.Int) (OffsetRange, bool) {
	if m.failed || m.done() || pos.Cmp(m.last()) <= 0 || pos.Cmp(bi(m.start)) <= 0 || pos.Cmp(bi(m.end)) >= 0 {
		return OffsetRange{}, false
	}
	res := OffsetRange{pos.Int64(), m.end}
	m.end = pos.Int64()
	return res, true
}

func (m *trackerModel) splitAt(pos int64) (OffsetRange, bool) { return m.splitAtBig(bi(pos)) }

// trySplit is Beam Go's fraction of the remainder.
func (m *trackerModel) trySplit(f float64) (OffsetRange, bool) {
	if m.failed || m.done() {
		return OffsetRange{}, false
	}
	last := m.last()
	if f == 0 {
		// A record that is not a split point may lie past the end.
		p := new(big.Int).Add(last, bi(1))
		if p.Cmp(bi(m.end)) >= 0 {
			return OffsetRange{}, false
		}
		res := OffsetRange{p.Int64(), m.end}
		m.end = p.Int64()
		return res, true
	}
	end := bi(m.end)
	if !m.bounded() {
		if !m.hasEst {
			return OffsetRange{}, false
		}
		end = bi(m.est)
		if p := new(big.Int).Add(last, bi(1)); end.Cmp(p) < 0 {
			end = p
		}
	}
	total := bigFloat64(new(big.Int).Sub(end, last))
	step := math.Max(math.Ceil(f*total), 1)
	pos := end // a step of the whole span or more splits at the end
	if step < total {
		pos = new(big.Int).Add(last, floatInt(step))
	}
	if pos.Cmp(bi(m.end)) >= 0 {
		return OffsetRange{}, false
	}
	res := OffsetRange{pos.Int64(), m.end}
	m.end = pos.Int64()
	return res, true
}

func (m *trackerModel) splitAtFraction(f float64) (OffsetRange, bool) {
	// A fraction of 1 or more splits at or past End: refused, also where
	// f*(End-s) rounds below End-s in float64 (ranges wider than 2^53).
	if !m.bounded() || !(f >= 0 && f < 1) {
		return OffsetRange{}, false
	}
	s := m.start
	if m.started {
		s = m.first
	}
	if m.end <= s {
		return OffsetRange{}, false
	}
	d := math.Floor(f * bigFloat64(new(big.Int).Sub(bi(m.end), bi(s))))
	return m.splitAtBig(new(big.Int).Add(bi(s), floatInt(d)))
}

// FuzzTrackerModel drives a Tracker and the model with the same random
// sequence of claims and splits. After every step the tracker must agree with
// the model, the current range and all residuals must tile the original range
// with nothing twice, and every claimed split point must lie in the current
// range.
//
// The input: start and size pick the range, mode bit 0 makes it unbounded and
// bit 1 gives it an end estimator; ops holds (opcode, argument) byte pairs.
func FuzzTrackerModel(f *testing.F) {
	f.Add(int64(0), uint16(100), uint8(0), []byte{0, 0, 1, 0, 0, 3, 3, 128, 0, 0, 1, 0, 6, 0, 0, 0})
	f.Add(int64(10), uint16(50), uint8(0), []byte{3, 100, 0, 0, 4, 128, 5, 20, 0, 5, 1, 1, 0, 1, 3, 255, 7, 0, 0, 0})
	f.Add(int64(0), uint16(20), uint8(0), []byte{0, 2, 1, 4, 5, 0, 5, 14, 1, 0, 0, 0, 2, 3, 0, 0})
	f.Add(int64(1<<40), uint16(1000), uint8(0), []byte{0, 7, 0, 7, 8, 40, 1, 0, 3, 10, 4, 30, 4, 200, 6, 0, 1, 0, 0, 0})
	f.Add(int64(5), uint16(300), uint8(3), []byte{9, 50, 0, 0, 0, 3, 3, 128, 9, 1, 3, 128, 4, 128, 5, 200, 6, 0, 0, 0})
	f.Add(int64(0), uint16(0), uint8(1), []byte{0, 0, 0, 0, 3, 128, 4, 100, 5, 100, 6, 0, 1, 0, 0, 0})
	f.Add(int64(1<<62-1), uint16(150), uint8(0), []byte{0, 0, 3, 50, 0, 1, 1, 4, 3, 250, 7, 0})
	f.Add(int64(3), uint16(7), uint8(0), []byte{2, 2, 2, 1, 0, 0})
	f.Add(int64(0), uint16(9), uint8(0), []byte{7, 0, 0, 0, 3, 9})
	// Issue 7 defect 9: [MinInt64, ...), negative and top-of-int64 ranges.
	f.Add(int64(0), uint16(10), uint8(4), []byte{3, 128, 0, 0, 3, 128, 6, 0})
	f.Add(int64(0), uint16(1<<15), uint8(4|16), []byte{3, 128, 4, 128, 8, 200, 3, 128, 5, 200, 1, 3, 6, 0})
	f.Add(int64(0), uint16(0), uint8(4|1), []byte{3, 128, 0, 0, 6, 0})
	f.Add(int64(0), uint16(0), uint8(4|3), []byte{9, 255, 3, 128, 0, 0, 9, 0, 3, 200, 6, 0})
	f.Add(int64(77), uint16(500), uint8(8|16), []byte{8, 10, 3, 128, 4, 64, 5, 130, 0, 3, 1, 7, 3, 250, 6, 0})
	f.Add(int64(3), uint16(100), uint8(12), []byte{8, 255, 0, 0, 3, 255, 5, 255, 1, 255, 3, 1, 7, 0})
	f.Add(int64(3), uint16(100), uint8(12|16), []byte{8, 255, 0, 7, 1, 3, 3, 128, 4, 255, 6, 0})

	f.Fuzz(func(t *testing.T, start int64, size uint16, mode uint8, ops []byte) {
		// Bits 2-3 of mode place the range: ordinary non-negative offsets,
		// at the bottom of int64, negative, or at the top just below
		// Unbounded. Bit 4 makes it span size<<46 (up to 2^62) instead
		// of size. Positions the ops compute wrap around; the model is
		// exact whatever they are.
		width := int64(size)
		if mode&16 != 0 {
			width = int64(size) << 46
		}
		switch mode >> 2 & 3 {
		case 0:
			start &= 1<<62 - 1
		case 1:
			start = math.MinInt64 + start&0xffff
		case 2:
			start = -(start & (1<<62 - 1)) - width
		case 3:
			start = math.MaxInt64 - 1 - width - start&0xff
		}
		orig := OffsetRange{start, start + width}
		m := &trackerModel{start: start, end: orig.End}
		var tr *Tracker
		var est *estimate
		if mode&1 != 0 {
			orig.End = Unbounded
			m.end = Unbounded
		}
		if mode&2 != 0 {
			m.hasEst, m.est = true, start+width
			est = newEstimate(m.est)
			tr = NewUnboundedTracker(orig, est)
		} else {
			tr = NewTracker(orig)
		}
		// lastPos is the position splits lie after, wrapped for the ops.
		lastPos := func() int64 { return m.last().Int64() }
		if len(ops) > 512 {
			ops = ops[:512]
		}

		var residuals []OffsetRange
		var log []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("%s\nafter ops:\n  %s\nmodel %+v\ntracker %v", fmt.Sprintf(format, args...), joinLines(log), *m, tr)
		}
		checkSplit := func(what string, gotRes OffsetRange, gotOK bool, wantRes OffsetRange, wantOK bool) {
			t.Helper()
			if gotOK != wantOK || (wantOK && gotRes != wantRes) {
				fail("%s = %v, %v; model %v, %v", what, gotRes, gotOK, wantRes, wantOK)
			}
			if gotOK {
				residuals = append(residuals, gotRes)
			}
		}

		for i := 0; i+1 < len(ops); i += 2 {
			code, arg := ops[i]%10, ops[i+1]
			// A fraction in [0, 1] with both ends reachable.
			frac := float64(arg) / 255
			switch code {
			case 0, 8: // the reader's next split point
				pos := lastPos() + 1 + int64(arg%8)
				if code == 8 {
					pos = lastPos() + 1 + int64(arg)*max(width, 1)/64
				}
				log = append(log, fmt.Sprintf("TryClaimSplitPoint(%d)", pos))
				if got, want := tr.TryClaimSplitPoint(pos), m.claim(pos, true); got != want {
					fail("TryClaimSplitPoint(%d) = %v, model %v", pos, got, want)
				}
			case 1: // a record of the current block, sometimes further on
				pos := m.lastRecord
				if arg%4 == 3 {
					pos += int64(arg % 16)
				}
				log = append(log, fmt.Sprintf("TryClaimRecord(%d, false)", pos))
				if got, want := tr.TryClaimRecord(pos, false), m.claim(pos, false); got != want {
					fail("TryClaimRecord(%d, false) = %v, model %v", pos, got, want)
				}
			case 2: // any split point, often breaking the contract
				pos := start + int64(arg) - 8
				log = append(log, fmt.Sprintf("TryClaim(%d)", pos))
				if got, want := tr.TryClaim(pos), m.claim(pos, true); got != want {
					fail("TryClaim(%d) = %v, model %v", pos, got, want)
				}
			case 3:
				log = append(log, fmt.Sprintf("TrySplit(%v)", frac))
				p, r, err := tr.TrySplit(frac)
				if err != nil {
					fail("TrySplit(%v) error %v", frac, err)
				}
				wantRes, wantOK := m.trySplit(frac)
				gotRes, gotOK := asRange(r)
				checkSplit(fmt.Sprintf("TrySplit(%v)", frac), gotRes, gotOK, wantRes, wantOK)
				if p.(OffsetRange) != (OffsetRange{m.start, m.end}) {
					fail("TrySplit(%v) primary %v, model [%d, %d)", frac, p, m.start, m.end)
				}
			case 4:
				log = append(log, fmt.Sprintf("SplitAtFraction(%v)", frac))
				r, ok := tr.SplitAtFraction(frac)
				wr, wok := m.splitAtFraction(frac)
				checkSplit(fmt.Sprintf("SplitAtFraction(%v)", frac), r, ok, wr, wok)
			case 5: // a position near the last claim or anywhere in the range
				pos := lastPos() + int64(arg%16) - 4
				if arg >= 128 && m.bounded() {
					// start-2 + (arg-128)*(end-start+4)/127, kept in int64.
					p := new(big.Int).Sub(bi(m.end), bi(m.start))
					p.Mul(add(p, 4), bi(int64(arg-128)))
					p.Quo(p, bi(127))
					pos = clampInt64(p.Add(p, add(bi(m.start), -2)))
				}
				log = append(log, fmt.Sprintf("TrySplitAtPosition(%d)", pos))
				r, ok := tr.TrySplitAtPosition(pos)
				wr, wok := m.splitAt(pos)
				checkSplit(fmt.Sprintf("TrySplitAtPosition(%d)", pos), r, ok, wr, wok)
			case 6:
				log = append(log, "TrySplit(0)")
				_, r, _ := tr.TrySplit(0)
				gotRes, gotOK := asRange(r)
				wantRes, wantOK := m.trySplit(0)
				checkSplit("TrySplit(0)", gotRes, gotOK, wantRes, wantOK)
				if !m.failed && !tr.IsDone() {
					fail("IsDone false after a checkpoint")
				}
			case 7:
				if arg%4 == 0 {
					log = append(log, "MarkDone()")
					tr.MarkDone()
					m.stopped = true
				} else {
					log = append(log, fmt.Sprintf("SetBlock(%d, %d)", arg%9, arg%5))
					tr.SetBlock(int64(arg%9), int64(arg%5))
				}
			case 9: // the end estimate moves
				if est != nil {
					m.est = clampInt64(add(bi(m.lastRecord), int64(arg)*4-200))
					est.v.Store(m.est)
					log = append(log, fmt.Sprintf("estimate %d", m.est))
				}
			}

			// The tracker agrees with the model.
			if got := tr.Range(); got != (OffsetRange{m.start, m.end}) {
				fail("Range() = %v, model [%d, %d)", got, m.start, m.end)
			}
			if got := tr.GetError() != nil; got != m.failed {
				fail("GetError() = %v, model failed %v", tr.GetError(), m.failed)
			}
			if got, want := tr.IsDone(), !m.failed && m.done(); got != want {
				fail("IsDone() = %v, model %v", got, want)
			}
			if got := tr.IsBounded(); got != m.bounded() {
				fail("IsBounded() = %v, model %v", got, m.bounded())
			}
			// The current range and the residuals tile the original range.
			pieces := append([]OffsetRange{{m.start, m.end}}, residuals...)
			slices.SortFunc(pieces, func(a, b OffsetRange) int {
				if a.Start != b.Start {
					return compareInt64(a.Start, b.Start)
				}
				return compareInt64(a.End, b.End)
			})
			next := orig.Start
			for _, p := range pieces {
				if p.Start != next || p.End < p.Start {
					fail("pieces %v do not tile %v", pieces, orig)
				}
				next = p.End
			}
			if next != orig.End {
				fail("pieces %v do not reach the end of %v", pieces, orig)
			}
			for _, r := range residuals {
				if r.IsEmpty() {
					fail("empty residual %v", r)
				}
			}
			// Claimed split points lie in the primary.
			for _, p := range m.claimed {
				if p < m.start || p >= m.end {
					fail("claimed split point %d outside the primary [%d, %d)", p, m.start, m.end)
				}
			}
			// Progress stays in range.
			fc := tr.FractionConsumed()
			if fc < 0 || fc > 1 || math.IsNaN(fc) {
				fail("FractionConsumed() = %v", fc)
			}
			if !m.started && !m.stopped && !m.failed && fc != 0 && m.start < m.end {
				fail("FractionConsumed() = %v before any claim", fc)
			}
			if m.stopped && !m.failed && fc != 1 {
				fail("FractionConsumed() = %v when done", fc)
			}
			d, r := tr.GetProgress()
			if d < 0 || r < 0 || math.IsNaN(d) || math.IsNaN(r) || math.IsInf(d, 0) || math.IsInf(r, 0) {
				fail("GetProgress() = %v, %v", d, r)
			}
			if m.stopped && !m.failed && r != 0 {
				fail("GetProgress() remaining %v when done", r)
			}
			spc := tr.SplitPointsConsumed()
			want := int64(len(m.claimed))
			if !m.stopped && !m.failed && want > 0 {
				want--
			}
			if spc != want {
				fail("SplitPointsConsumed() = %d, model %d", spc, want)
			}
			if spr := tr.SplitPointsRemaining(); spr < -1 || (m.stopped && spr != 0) {
				fail("SplitPointsRemaining() = %d", spr)
			}
		}
	})
}

func clampInt64(x *big.Int) int64 {
	switch {
	case x.Cmp(bi(math.MinInt64)) < 0:
		return math.MinInt64
	case x.Cmp(bi(math.MaxInt64)) > 0:
		return math.MaxInt64
	}
	return x.Int64()
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func joinLines(s []string) string {
	if len(s) > 40 {
		s = append([]string{fmt.Sprintf("... %d earlier", len(s)-40)}, s[len(s)-40:]...)
	}
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}
