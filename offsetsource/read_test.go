package offsetsource_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// ---- an in-memory source whose reader can misbehave ----

type memItem struct {
	Rec        string
	Off        int64
	SplitPoint bool
	// BlockSize and BlockRecords are what BlockInfo returns after this item
	// (when it is a split point).
	BlockSize, BlockRecords int64
}

type memStats struct{ opens, closes int }

// memSource reads Items. Its reader starts at the first split point at or
// after Start, or at the first item when Raw is set.
type memSource struct {
	Items      []memItem
	Start, End int64
	MaxEnd     int64
	BPO        int64
	Raw        bool
	OpenErr    error
	NextErr    error // returned by Next after ErrAfter items
	ErrAfter   int
	CloseErr   error
	Stats      *memStats
}

func (s memSource) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: s.Start, End: s.End} }
func (s memSource) Subrange(start, end int64) offsetsource.Source[string] {
	s.Start, s.End = start, end
	return s
}
func (s memSource) MaxEndOffset(context.Context) (int64, error)       { return s.MaxEnd, nil }
func (s memSource) BytesPerOffset() int64                             { return s.BPO }
func (s memSource) MinBundleSize() int64                              { return 1 }
func (s memSource) EstimatedSizeBytes(context.Context) (int64, error) { return s.MaxEnd * s.BPO, nil }
func (s memSource) Open(context.Context) (offsetsource.Reader[string], error) {
	if s.Stats != nil {
		s.Stats.opens++
	}
	if s.OpenErr != nil {
		return nil, s.OpenErr
	}
	i := 0
	if !s.Raw {
		for i < len(s.Items) && !(s.Items[i].SplitPoint && s.Items[i].Off >= s.Start) {
			i++
		}
	}
	return &memReader{s: s, i: i}, nil
}

type memReader struct {
	s    memSource
	i, n int
}

func (r *memReader) Next() (string, int64, bool, error) {
	if r.s.NextErr != nil && r.n == r.s.ErrAfter {
		return "", 0, false, r.s.NextErr
	}
	if r.i >= len(r.s.Items) {
		return "", 0, false, io.EOF
	}
	it := r.s.Items[r.i]
	r.i++
	r.n++
	return it.Rec, it.Off, it.SplitPoint, nil
}

func (r *memReader) BlockInfo() (int64, int64) {
	it := r.s.Items[r.i-1]
	return it.BlockSize, it.BlockRecords
}

func (r *memReader) Close() error {
	if r.s.Stats != nil {
		r.s.Stats.closes++
	}
	return r.s.CloseErr
}

// memRecords is n split points at offsets 0, 10, 20, ...
func memRecords(n int) []memItem {
	items := make([]memItem, n)
	for i := range items {
		items[i] = memItem{Rec: fmt.Sprint("m", i), Off: int64(i) * 10, SplitPoint: true}
	}
	return items
}

func readRange(t *testing.T, src offsetsource.Source[string], r sdf.OffsetRange) ([]string, *sdf.Tracker, error) {
	t.Helper()
	rt := sdf.NewTracker(r)
	var got []string
	err := offsetsource.ReadRestriction(context.Background(), src, rt, func(s string) { got = append(got, s) })
	return got, rt, err
}

func mustReadRange(t *testing.T, src offsetsource.Source[string], r sdf.OffsetRange) []string {
	t.Helper()
	got, rt, err := readRange(t, src, r)
	if err != nil {
		t.Fatalf("reading %v: %v", r, err)
	}
	if !rt.IsDone() || rt.GetError() != nil {
		t.Fatalf("reading %v left the tracker not done: %v", r, rt)
	}
	return got
}

// ---- ReadRestriction on the sample files ----

func TestReadFixedWhole(t *testing.T) {
	src, want := writeFixedFile(t, t.TempDir(), 100)
	r, err := offsetsource.InitialRestriction(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if want := (sdf.OffsetRange{Start: 0, End: 100 * fixedWidth}); r != want {
		t.Fatalf("InitialRestriction = %v, want %v", r, want)
	}
	if got := mustReadRange(t, src, r); !slices.Equal(got, want) {
		t.Fatalf("read %d records %q..., want %d", len(got), got[:min(3, len(got))], len(want))
	}
}

// expectInRange is the records whose split point lies in r.
func expectInRange(recs []string, offs []int64, r sdf.OffsetRange) []string {
	var out []string
	for i, o := range offs {
		if o >= r.Start && o < r.End {
			out = append(out, recs[i])
		}
	}
	return out
}

// checkSubranges checks rule 1 of the split contract on a file source: a
// range yields exactly the records whose split point lies in it, and two
// adjacent ranges yield together what their union does.
func checkSubranges(t *testing.T, src offsetsource.Source[string], recs []string, offs []int64) {
	whole, err := offsetsource.InitialRestriction(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	all := mustReadRange(t, src, whole)
	if !slices.Equal(all, recs) {
		t.Fatalf("whole read gives %d records, want %d", len(all), len(recs))
	}
	for s := whole.Start; s <= whole.End; s++ {
		a := mustReadRange(t, src, sdf.OffsetRange{Start: whole.Start, End: s})
		b := mustReadRange(t, src, sdf.OffsetRange{Start: s, End: whole.End})
		if got := append(a, b...); !slices.Equal(got, all) {
			t.Fatalf("reads of [%d, %d) and [%d, %d) give %q, want %q", whole.Start, s, s, whole.End, got, all)
		}
		if want := expectInRange(recs, offs, sdf.OffsetRange{Start: s, End: whole.End}); !slices.Equal(b, want) {
			t.Fatalf("read of [%d, %d) gives %q, want %q", s, whole.End, b, want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		a := rng.Int64N(whole.End + 1)
		b := a + rng.Int64N(whole.End-a+1)
		r := sdf.OffsetRange{Start: a, End: b}
		if got, want := mustReadRange(t, src, r), expectInRange(recs, offs, r); !slices.Equal(got, want) {
			t.Fatalf("read of %v gives %q, want %q", r, got, want)
		}
	}
}

func TestReadFixedSubranges(t *testing.T) {
	src, recs := writeFixedFile(t, t.TempDir(), 40)
	offs := make([]int64, len(recs))
	for i := range offs {
		offs[i] = int64(i) * fixedWidth
	}
	checkSubranges(t, src, recs, offs)
}

func TestReadBlockSubranges(t *testing.T) {
	src, recs, offs := writeBlockFile(t, t.TempDir(), 25, []int{3, 1, 0, 5, 2})
	checkSubranges(t, src, recs, offs)
}

func TestReadBlockSplitPoints(t *testing.T) {
	src, recs, offs := writeBlockFile(t, t.TempDir(), 6, []int{3, 1, 0, 2})
	rd, err := src.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	for i := range recs {
		rec, off, sp, err := rd.Next()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		wantSP := i == 0 || offs[i] != offs[i-1]
		if rec != recs[i] || off != offs[i] || sp != wantSP {
			t.Fatalf("record %d = (%q, %d, %v), want (%q, %d, %v)", i, rec, off, sp, recs[i], offs[i], wantSP)
		}
	}
	if _, _, _, err := rd.Next(); err != io.EOF {
		t.Fatalf("after the last record Next returned %v, want io.EOF", err)
	}
}

func TestInitialRestriction(t *testing.T) {
	ctx := context.Background()
	src, _ := writeFixedFile(t, t.TempDir(), 10) // 120 bytes
	for _, tc := range []struct {
		start, end int64
		want       sdf.OffsetRange
	}{
		{0, sdf.Unbounded, sdf.OffsetRange{Start: 0, End: 120}},
		{30, sdf.Unbounded, sdf.OffsetRange{Start: 30, End: 120}},
		{30, 60, sdf.OffsetRange{Start: 30, End: 60}},
		{30, 500, sdf.OffsetRange{Start: 30, End: 120}},
		{200, sdf.Unbounded, sdf.OffsetRange{Start: 200, End: 200}},
	} {
		got, err := offsetsource.InitialRestriction(ctx, src.Subrange(tc.start, tc.end))
		if err != nil || got != tc.want {
			t.Errorf("InitialRestriction of [%d, %d) = %v, %v; want %v", tc.start, tc.end, got, err, tc.want)
		}
	}
	if _, err := offsetsource.InitialRestriction(ctx, src.Subrange(50, 40)); err == nil {
		t.Error("InitialRestriction of an inverted range: no error")
	}
	missing := FixedSource{Path: filepath.Join(t.TempDir(), "missing"), Width: 12, End: sdf.Unbounded}
	_, err := offsetsource.InitialRestriction(ctx, missing)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing.Path) {
		t.Errorf("InitialRestriction of a missing file: %v; want an os.ErrNotExist naming the file", err)
	}
}

func TestReadFixedTruncated(t *testing.T) {
	src, want := writeFixedFile(t, t.TempDir(), 10)
	f, err := os.OpenFile(src.Path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("rec00") // 5 bytes of an 11th record
	f.Close()
	r, err := offsetsource.InitialRestriction(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	got, rt, err := readRange(t, src, r)
	if err == nil {
		t.Fatal("read of a truncated file: no error")
	}
	for _, s := range []string{src.Path, "truncated record at offset 120", "after offset 108"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("records before the error: %q, want %q", got, want)
	}
	if _, res, _ := rt.TrySplit(0.5); res != nil || rt.GetError() == nil {
		t.Errorf("after a read error the tracker %v still splits or holds no error", rt)
	}
}

// ---- ReadRestriction's handling of readers ----

func TestReadRestrictionErrors(t *testing.T) {
	errOpen, errNext, errClose := errors.New("open failed"), errors.New("next failed"), errors.New("close failed")
	blocks := []memItem{{Rec: "a", Off: 0, SplitPoint: true}, {Rec: "b", Off: 0}, {Rec: "c", Off: 10, SplitPoint: true}}
	for _, tc := range []struct {
		name     string
		src      memSource
		wantErr  error    // errors.Is
		wantMsg  []string // substrings
		wantRecs []string
		closes   int
	}{
		{
			name:    "open",
			src:     memSource{Items: memRecords(5), OpenErr: errOpen},
			wantErr: errOpen, wantMsg: []string{"opening", "memSource [0, 100)"},
		},
		{
			name:    "next",
			src:     memSource{Items: memRecords(5), NextErr: errNext, ErrAfter: 2},
			wantErr: errNext, wantMsg: []string{"after offset 10", "memSource [0, 100)"}, wantRecs: []string{"m0", "m1"}, closes: 1,
		},
		{
			name:    "close",
			src:     memSource{Items: memRecords(3), CloseErr: errClose},
			wantErr: errClose, wantMsg: []string{"closing"}, wantRecs: []string{"m0", "m1", "m2"}, closes: 1,
		},
		{
			name:    "first record not a split point",
			src:     memSource{Items: blocks[1:], Raw: true},
			wantMsg: []string{"record at offset 0", "not a split point"}, closes: 1,
		},
		{
			name:    "split points decrease",
			src:     memSource{Items: []memItem{blocks[2], blocks[0]}, Raw: true},
			wantMsg: []string{"record at offset 0", "strictly increase"}, wantRecs: []string{"c"}, closes: 1,
		},
		{
			name:    "record before the start",
			src:     memSource{Items: blocks, Raw: true, Start: 5},
			wantMsg: []string{"record at offset 0", "before the start"}, closes: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.src.Stats = &memStats{}
			r := sdf.OffsetRange{Start: tc.src.Start, End: 100}
			got, rt, err := readRange(t, tc.src, r)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v does not wrap %v", err, tc.wantErr)
			}
			for _, s := range tc.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if !slices.Equal(got, tc.wantRecs) {
				t.Errorf("emitted %q, want %q", got, tc.wantRecs)
			}
			if tc.src.Stats.closes != tc.closes {
				t.Errorf("reader closed %d times, want %d", tc.src.Stats.closes, tc.closes)
			}
			if rt.GetError() == nil || rt.IsDone() {
				t.Errorf("tracker after the error: %v, want it failed", rt)
			}
		})
	}
}

func TestReadRestrictionStopsAtEnd(t *testing.T) {
	st := &memStats{}
	src := memSource{Items: memRecords(10), Stats: st}
	got, rt, err := readRange(t, src, sdf.OffsetRange{Start: 5, End: 35})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"m1", "m2", "m3"}; !slices.Equal(got, want) {
		t.Errorf("read [5, 35) = %q, want %q", got, want)
	}
	if !rt.IsDone() || st.opens != 1 || st.closes != 1 {
		t.Errorf("tracker %v, opens %d, closes %d; want done, 1, 1", rt, st.opens, st.closes)
	}

	// A split during the read moves the end: the reader stops there.
	rt = sdf.NewTracker(sdf.OffsetRange{Start: 0, End: 100})
	got = nil
	err = offsetsource.ReadRestriction(context.Background(), src, rt, func(s string) {
		got = append(got, s)
		if len(got) == 2 {
			if _, res, _ := rt.TrySplit(0.2); res != (sdf.OffsetRange{Start: 28, End: 100}) {
				t.Errorf("TrySplit(0.2) after claiming 10: residual %v, want [28, 100)", res)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"m0", "m1", "m2"}; !slices.Equal(got, want) || !rt.IsDone() {
		t.Errorf("read with a split to [0, 28) = %q (tracker %v), want %q and done", got, rt, want)
	}
}

func TestReadRestrictionEmptyRange(t *testing.T) {
	st := &memStats{}
	got, rt, err := readRange(t, memSource{Items: memRecords(3), Stats: st}, sdf.OffsetRange{Start: 10, End: 10})
	if err != nil || len(got) != 0 || !rt.IsDone() || st.opens != 0 {
		t.Errorf("read of an empty range: %q, %v, tracker %v, %d opens; want nothing, done, not opened", got, err, rt, st.opens)
	}
}

// TestReadRestrictionBlockProgress checks that BlockInfo reaches the tracker:
// progress moves inside a block as its records are read.
func TestReadRestrictionBlockProgress(t *testing.T) {
	items := []memItem{
		{Rec: "a0", Off: 0, SplitPoint: true, BlockSize: 100, BlockRecords: 4},
		{Rec: "a1", Off: 0}, {Rec: "a2", Off: 0}, {Rec: "a3", Off: 0},
		{Rec: "b0", Off: 100, SplitPoint: true, BlockSize: 100, BlockRecords: 2},
		{Rec: "b1", Off: 100},
	}
	rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: 200})
	var done []float64
	err := offsetsource.ReadRestriction(context.Background(), memSource{Items: items}, rt, func(string) {
		d, _ := rt.GetProgress()
		done = append(done, d)
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{25, 50, 75, 100, 150, 200}; !slices.Equal(done, want) {
		t.Errorf("progress after each record: %v, want %v", done, want)
	}
}

func TestReadRestrictionCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := &memStats{}
	rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: 1 << 40})
	n := 0
	err := offsetsource.ReadRestriction(ctx, memSource{Items: memRecords(5000), Stats: st}, rt, func(string) { n++ })
	if !errors.Is(err, context.Canceled) || n >= 5000 || st.closes != 1 {
		t.Errorf("read with a cancelled context: %v after %d records, %d closes; want context.Canceled early, closed", err, n, st.closes)
	}
}

// ---- the DoFn's restriction methods ----

func TestSplitRestriction(t *testing.T) {
	ctx := context.Background()
	src, _ := writeFixedFile(t, t.TempDir(), 1000) // 12000 bytes
	whole := sdf.OffsetRange{Start: 0, End: 12000}
	check := func(name string, got []sdf.OffsetRange, n int, size int64) {
		t.Helper()
		if len(got) != n {
			t.Fatalf("%s: %d bundles, want %d: %v", name, len(got), n, got)
		}
		for i, r := range got {
			if i > 0 && r.Start != got[i-1].End || i == 0 && r.Start != 0 || i == n-1 && r.End != 12000 {
				t.Fatalf("%s: bundles do not tile %v: %v", name, whole, got)
			}
			if i < n-1 && r.Size() != size {
				t.Fatalf("%s: bundle %d is %v, want size %d", name, i, r, size)
			}
		}
	}
	fn := offsetsource.NewReadFn[string, FixedSource]()
	rest, err := fn.CreateInitialRestriction(ctx, src)
	if err != nil || rest != whole {
		t.Fatalf("CreateInitialRestriction = %v, %v; want %v", rest, err, whole)
	}
	got, err := fn.SplitRestriction(ctx, src, whole)
	if err != nil {
		t.Fatal(err)
	}
	check("default", got, 1, 12000)
	got, _ = offsetsource.NewReadFn[string, FixedSource](offsetsource.WithDesiredBundleSize(1200)).SplitRestriction(ctx, src, whole)
	check("1200 bytes", got, 10, 1200)
	got, _ = offsetsource.NewReadFn[string, FixedSource](offsetsource.WithDesiredBundleSize(1)).SplitRestriction(ctx, src, whole)
	check("1 byte, raised to MinBundleSize", got, 1000, fixedWidth)
	got, _ = offsetsource.NewReadFn[string, FixedSource](offsetsource.WithBundleCount(4)).SplitRestriction(ctx, src, whole)
	check("4 bundles", got, 4, 3000)
	if s := fn.RestrictionSize(src, sdf.OffsetRange{Start: 100, End: 400}); s != 300 {
		t.Errorf("RestrictionSize = %v, want 300", s)
	}
	if tr := fn.CreateTracker(whole); tr.Range() != whole {
		t.Errorf("CreateTracker tracks %v, want %v", tr.Range(), whole)
	}

	// Offsets of 4 bytes: sizes convert.
	mem := memSource{Items: memRecords(100), MaxEnd: 1000, BPO: 4, End: sdf.Unbounded}
	mfn := offsetsource.NewReadFn[string, memSource](offsetsource.WithDesiredBundleSize(400))
	mrest, err := mfn.CreateInitialRestriction(ctx, mem)
	if err != nil || mrest != (sdf.OffsetRange{Start: 0, End: 1000}) {
		t.Fatalf("CreateInitialRestriction of an unbounded source = %v, %v; want [0, 1000)", mrest, err)
	}
	if got, _ := mfn.SplitRestriction(ctx, mem, mrest); len(got) != 10 || got[0] != (sdf.OffsetRange{Start: 0, End: 100}) {
		t.Errorf("SplitRestriction with 4 bytes per offset, 400-byte bundles: %v, want 10 of 100 offsets", got)
	}
	if s := mfn.RestrictionSize(mem, sdf.OffsetRange{Start: 0, End: 100}); s != 400 {
		t.Errorf("RestrictionSize with 4 bytes per offset = %v, want 400", s)
	}
}

// TestReadFnIsSerialisable checks that the DoFn keeps its options in exported
// fields, which Beam encodes.
func TestReadFnIsSerialisable(t *testing.T) {
	fn := offsetsource.NewReadFn[string, FixedSource](offsetsource.WithDesiredBundleSize(123), offsetsource.WithBundleCount(7))
	v := reflect.ValueOf(fn).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			t.Errorf("readFn field %s is not exported", v.Type().Field(i).Name)
		}
	}
	if v.FieldByName("DesiredBundleSize").Int() != 123 || v.FieldByName("BundleCount").Int() != 7 {
		t.Errorf("options not kept in fields: %+v", fn)
	}
}

func TestRegisterRejectsPointerSources(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "must be a struct") {
			t.Errorf("Register with a pointer source type: panic %v, want one saying it must be a struct", r)
		}
	}()
	offsetsource.Register[string, *FixedSource]()
}
