package offsetsource_test

import (
	"context"
	"encoding/binary"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// badBlockSource is BlockSource whose readers' errors are bad input, at
// the offset their text names.
type badBlockSource struct{ BlockSource }

func (s badBlockSource) Subrange(start, end int64) offsetsource.Source[string] {
	s.Start, s.End = start, end
	return s
}

var offsetInError = regexp.MustCompile(`at offset (\d+)`)

func (s badBlockSource) BadInput(err error) (int64, bool) {
	m := offsetInError.FindStringSubmatch(err.Error())
	if m == nil {
		return -1, true
	}
	off, _ := strconv.ParseInt(m[1], 10, 64)
	return off, true
}

// corruptBlocks writes 8 blocks of 5 records and corrupts record 2 of
// block 3 (its length) and the sync marker of block 6.
func corruptBlocks(t *testing.T) (badBlockSource, []string, []int64, int64) {
	t.Helper()
	src, recs, offs := writeBlockFile(t, t.TempDir(), 8, []int{5})
	b, err := os.ReadFile(src.Path)
	if err != nil {
		t.Fatal(err)
	}
	// Record 2 of block 3: after the block header and records 0 and 1.
	at := int(offs[15]) + blockHeaderSize
	for _, r := range recs[15:17] {
		at += len(binary.AppendUvarint(nil, uint64(len(r)))) + len(r)
	}
	b[at] = 0x7f // longer than the block
	b[offs[30]] ^= 0xff
	if err := os.WriteFile(src.Path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return badBlockSource{src}, recs, offs, int64(len(b))
}

// TestReadRestrictionWithBadInput: the records before each bad part are
// read once, each bad part is one BadInput with the range it costs, the
// read goes on after it, and every record is read once or covered once.
func TestReadRestrictionWithBadInput(t *testing.T) {
	src, recs, offs, size := corruptBlocks(t)
	rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: size})
	var got []string
	var bad []offsetsource.BadInput
	err := offsetsource.ReadRestrictionWithBadInput[string](context.Background(), src, rt,
		func(r string) { got = append(got, r) }, func(b offsetsource.BadInput) { bad = append(bad, b) })
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]string(nil), recs[:17]...), recs[20:30]...), recs[35:]...)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("read\n%v\nwant\n%v", got, want)
	}
	wantBad := []offsetsource.BadInput{
		{Offset: offs[15], Start: offs[15], End: offs[20], RecordsRead: 2},
		{Offset: offs[30], Start: offs[30], End: offs[35]},
	}
	if len(bad) != len(wantBad) {
		t.Fatalf("bad inputs %v, want %d", bad, len(wantBad))
	}
	for i, b := range bad {
		if !strings.Contains(b.Error, "at offset") {
			t.Errorf("bad input %d: error %q", i, b.Error)
		}
		if !strings.HasPrefix(b.Input, "block file "+src.Path) {
			t.Errorf("bad input %d names %q", i, b.Input)
		}
		if b.Offset != wantBad[i].Offset || b.Start != wantBad[i].Start || b.End != wantBad[i].End || b.RecordsRead != wantBad[i].RecordsRead {
			t.Errorf("bad input %d: %+v, want %+v", i, b, wantBad[i])
		}
	}
	if !rt.IsDone() {
		t.Errorf("tracker not done: %v", rt)
	}

	// Without a dead letter the same read fails at the first bad part,
	// the cause first.
	rt = sdf.NewTracker(sdf.OffsetRange{Start: 0, End: size})
	err = offsetsource.ReadRestriction[string](context.Background(), src, rt, func(string) {})
	if err == nil || !strings.HasPrefix(err.Error(), "block at offset ") || !strings.Contains(err.Error(), "(offsetsource: reading block file") {
		t.Errorf("read without a dead letter: %v, want the cause first, then the read", err)
	}
}

// TestReadRestrictionWithBadInputSplits reads the corrupt file in ranges
// cut at every offset of the bad blocks and around them, and in ranges
// that a split cuts while the read runs: every record is read once or
// covered once.
func TestReadRestrictionWithBadInputSplits(t *testing.T) {
	src, recs, offs, size := corruptBlocks(t)
	covered := func(got map[string]int, bad []offsetsource.BadInput) {
		t.Helper()
		for i, r := range recs {
			nth := i % 5
			c := 0
			for _, b := range bad {
				if offs[i] >= b.Start && offs[i] < b.End && !(offs[i] == b.Start && int64(nth) < b.RecordsRead) {
					c++
				}
			}
			if got[r]+c != 1 {
				t.Errorf("record %s (block at %d): read %d times, covered %d times", r, offs[i], got[r], c)
			}
		}
	}
	for cut := offs[10]; cut <= offs[35]+3; cut++ {
		got := map[string]int{}
		var bad []offsetsource.BadInput
		for _, r := range []sdf.OffsetRange{{Start: 0, End: cut}, {Start: cut, End: size}} {
			rt := sdf.NewTracker(r)
			if err := offsetsource.ReadRestrictionWithBadInput[string](context.Background(), src.Subrange(r.Start, r.End), rt,
				func(s string) { got[s]++ }, func(b offsetsource.BadInput) { bad = append(bad, b) }); err != nil {
				t.Fatalf("cut at %d: range %v: %v", cut, r, err)
			}
		}
		covered(got, bad)
		if t.Failed() {
			t.Fatalf("cut at %d", cut)
		}
	}
	// A split while the read runs: after each record, at half the rest.
	for k := 1; k < 30; k++ {
		got := map[string]int{}
		var bad []offsetsource.BadInput
		rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: size})
		n := 0
		var residual any
		if err := offsetsource.ReadRestrictionWithBadInput[string](context.Background(), src, rt, func(s string) {
			got[s]++
			if n++; n == k {
				_, residual, _ = rt.TrySplit(0.5)
			}
		}, func(b offsetsource.BadInput) { bad = append(bad, b) }); err != nil {
			t.Fatal(err)
		}
		if residual != nil {
			r := residual.(sdf.OffsetRange)
			rt := sdf.NewTracker(r)
			if err := offsetsource.ReadRestrictionWithBadInput[string](context.Background(), src.Subrange(r.Start, r.End), rt,
				func(s string) { got[s]++ }, func(b offsetsource.BadInput) { bad = append(bad, b) }); err != nil {
				t.Fatal(err)
			}
		}
		covered(got, bad)
		if t.Failed() {
			t.Fatalf("split after %d records (residual %v)", k, residual)
		}
	}
}

// TestReadRestrictionWithBadInputOther: a source that does not tell bad
// input apart fails the read with the dead letter too.
func TestReadRestrictionWithBadInputOther(t *testing.T) {
	src, _, _, size := corruptBlocks(t)
	rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: size})
	var bad []offsetsource.BadInput
	err := offsetsource.ReadRestrictionWithBadInput[string](context.Background(), src.BlockSource, rt, func(string) {}, func(b offsetsource.BadInput) { bad = append(bad, b) })
	if err == nil || len(bad) != 0 {
		t.Errorf("read of a source without BadInput: %v, %v; want it to fail", err, bad)
	}
}
