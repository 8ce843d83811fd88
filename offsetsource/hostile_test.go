package offsetsource_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/internal/workertest"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

func init() {
	offsetsource.Register[string, brokenSource]()
}

// brokenSource misbehaves as its fields say; it reads records "b0", "b1",
// ... at offsets 0, 1, ... otherwise. Its fields travel through pipelines.
type brokenSource struct {
	Name       string
	Start, End int64
	MaxEnd     int64
	BPO        int64
	MinBundle  int64
	// MaxEndErr, when set, is what MaxEndOffset fails with.
	MaxEndErr string
	// NilReader makes Open return (nil, nil).
	NilReader bool
}

func (s brokenSource) String() string         { return "broken source " + s.Name }
func (s brokenSource) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: s.Start, End: s.End} }
func (s brokenSource) Subrange(start, end int64) offsetsource.Source[string] {
	s.Start, s.End = start, end
	return s
}
func (s brokenSource) MaxEndOffset(context.Context) (int64, error) {
	if s.MaxEndErr != "" {
		return 0, errors.New(s.MaxEndErr)
	}
	return s.MaxEnd, nil
}
func (s brokenSource) BytesPerOffset() int64 { return s.BPO }
func (s brokenSource) MinBundleSize() int64  { return s.MinBundle }
func (s brokenSource) EstimatedSizeBytes(context.Context) (int64, error) {
	return (s.End - s.Start) * max(s.BPO, 1), nil
}
func (s brokenSource) Open(context.Context) (offsetsource.Reader[string], error) {
	if s.NilReader {
		return nil, nil
	}
	return &countingReader{next: s.Start}, nil
}

type countingReader struct{ next int64 }

func (r *countingReader) Next() (string, int64, bool, error) {
	if r.next >= 3 {
		return "", 0, false, io.EOF
	}
	r.next++
	return "b", r.next - 1, true, nil
}
func (r *countingReader) Close() error { return nil }

func TestPipelineMaxEndOffsetError(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	offsetsource.Read(s, brokenSource{Name: "x", End: sdf.Unbounded, MaxEndErr: "stat failed: permission denied"})
	err := workertest.RunFailing(t, p)
	if err == nil {
		t.Fatal("pipeline succeeded")
	}
	t.Logf("%v", err)
	for _, want := range []string{"broken source x", "stat failed: permission denied"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q", want)
		}
	}
	if strings.Contains(err.Error(), "panic") || strings.Contains(err.Error(), "goroutine ") {
		t.Errorf("error is a panic with a stack trace")
	}
}

// TestMaxEndOffsetErrorFromProcessElement: the DoFn's restriction methods do
// not fail (Beam Go would turn their error into a panic upstream); the
// error comes back from ProcessElement, naming the source.
func TestMaxEndOffsetErrorFromProcessElement(t *testing.T) {
	ctx := context.Background()
	src := brokenSource{Name: "y", Start: 5, End: sdf.Unbounded, MaxEndErr: "no such bucket"}
	fn := offsetsource.NewReadFn[string, brokenSource](offsetsource.WithBundleCount(3))
	rest, err := fn.CreateInitialRestriction(ctx, src)
	if err != nil || rest != (sdf.OffsetRange{Start: 5, End: sdf.Unbounded}) {
		t.Fatalf("CreateInitialRestriction = %v, %v; want the unresolved [5, Unbounded), nil", rest, err)
	}
	splits, err := fn.SplitRestriction(ctx, src, rest)
	if err != nil || len(splits) != 1 || splits[0] != rest {
		t.Fatalf("SplitRestriction = %v, %v; want the range whole", splits, err)
	}
	var got []string
	err = fn.ProcessElement(ctx, fn.CreateTracker(rest), src, func(s string) { got = append(got, s) })
	if err == nil || !strings.Contains(err.Error(), "broken source y") || !strings.Contains(err.Error(), "no such bucket") {
		t.Fatalf("ProcessElement = %v, want the MaxEndOffset error naming the source", err)
	}
	if len(got) != 0 {
		t.Fatalf("emitted %q", got)
	}
	// A source that resolves when it is read (the failure was transient) is
	// read whole.
	src.MaxEndErr, src.MaxEnd, src.Start = "", 3, 0
	if err := fn.ProcessElement(ctx, fn.CreateTracker(sdf.OffsetRange{Start: 0, End: sdf.Unbounded}), src, func(s string) { got = append(got, s) }); err != nil || len(got) != 3 {
		t.Fatalf("ProcessElement after a transient failure: %q, %v; want 3 records", got, err)
	}
}

// TestOpenReturningNoReader: Open returning (nil, nil) is an error naming
// the source and the offset, not a nil dereference.
func TestOpenReturningNoReader(t *testing.T) {
	src := brokenSource{Name: "z", Start: 2, End: 10, MaxEnd: 10, NilReader: true}
	rt := sdf.NewTracker(sdf.OffsetRange{Start: 2, End: 10})
	err := offsetsource.ReadRestriction[string](context.Background(), src, rt, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "broken source z") || !strings.Contains(err.Error(), "offset 2") {
		t.Fatalf("ReadRestriction = %v, want an error naming the source and offset 2", err)
	}
	if rt.GetError() == nil {
		t.Error("the tracker was not failed")
	}
}

// TestInitialBundlesCapped: a huge range with tiny offsets is cut into at
// most MaxInitialBundles bundles that tile it, not 2^36.
func TestInitialBundlesCapped(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		maxEnd, bpo, minBundle int64
	}{
		{1 << 62, 0, 1},
		{1 << 62, 1, 0},
		{sdf.Unbounded - 1, 1, 1},
		{1<<40 + 12345, 3, 7},
	} {
		src := brokenSource{Name: "huge", End: sdf.Unbounded, MaxEnd: c.maxEnd, BPO: c.bpo, MinBundle: c.minBundle}
		fn := offsetsource.NewReadFn[string, brokenSource](offsetsource.WithDesiredBundleSize(1 << 20))
		rest, _ := fn.CreateInitialRestriction(ctx, src)
		got, err := fn.SplitRestriction(ctx, src, rest)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || len(got) > offsetsource.MaxInitialBundles {
			t.Fatalf("%+v: %d bundles, want 1..%d", c, len(got), offsetsource.MaxInitialBundles)
		}
		for i, r := range got {
			if i == 0 && r.Start != 0 || i > 0 && r.Start != got[i-1].End || r.IsEmpty() {
				t.Fatalf("%+v: bundle %d %v does not tile [0, %d)", c, i, r, c.maxEnd)
			}
		}
		if got[len(got)-1].End != c.maxEnd {
			t.Fatalf("%+v: bundles end at %d", c, got[len(got)-1].End)
		}
	}
	// Below the cap, bundles keep the desired size.
	src := brokenSource{Name: "small", End: sdf.Unbounded, MaxEnd: 100 << 20, BPO: 1, MinBundle: 1}
	got, _ := offsetsource.NewReadFn[string, brokenSource](offsetsource.WithDesiredBundleSize(1<<20)).SplitRestriction(ctx, src, sdf.OffsetRange{End: 100 << 20})
	if len(got) != 100 {
		t.Fatalf("%d bundles of a 100 MiB source, want 100", len(got))
	}
}
