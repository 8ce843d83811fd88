package offsetsource_test

import (
	"context"
	"testing"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// subject is what the split-contract harness exercises: the read's
// CreateInitialRestriction, CreateTracker and ProcessElement loop on src.
func subject(t *testing.T, src offsetsource.Source[string]) sdftest.Subject[string] {
	t.Helper()
	r, err := offsetsource.InitialRestriction(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return sdftest.Subject[string]{
		Restriction: r,
		NewTracker:  func(rest any) beamsdf.RTracker { return sdf.NewTracker(rest.(sdf.OffsetRange)) },
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
			return offsetsource.ReadRestriction(ctx, src, rt.(*sdf.Tracker), emit)
		},
	}
}

// javaSplits makes s split with Java's whole-range SplitAtFraction instead of
// Beam Go's fraction of the remainder.
func javaSplits(s sdftest.Subject[string]) sdftest.Subject[string] {
	s.Split = func(rt beamsdf.RTracker, f float64) (any, any, error) {
		tr := rt.(*sdf.Tracker)
		res, ok := tr.SplitAtFraction(f)
		if !ok {
			return tr.Range(), nil, nil
		}
		return tr.Range(), res, nil
	}
	return s
}

func TestSplitContractFixed(t *testing.T) {
	src, _ := writeFixedFile(t, t.TempDir(), 50)
	t.Run("whole file", func(t *testing.T) {
		sdftest.AssertSplitAtFractionExhaustive(t, subject(t, src))
	})
	// A range that starts and ends inside records: the reader rounds the
	// start up, the tracker refuses the record that starts past the end.
	t.Run("subrange", func(t *testing.T) {
		rep := sdftest.AssertSplitAtFractionExhaustive(t, subject(t, src.Subrange(17, 301)))
		if rep.Records != 24 { // records at 24, 36, ..., 300
			t.Errorf("subrange [17, 301) holds %d records, want 24", rep.Records)
		}
	})
	t.Run("java fractions", func(t *testing.T) {
		sdftest.AssertSplitAtFractionExhaustive(t, javaSplits(subject(t, src)))
	})
	t.Run("single splits", func(t *testing.T) {
		s := subject(t, src)
		sdftest.AssertSplitAtFraction(t, s, 0, 0.5, sdftest.MustSucceedAndBeConsistent)
		sdftest.AssertSplitAtFraction(t, s, 10, 0.5, sdftest.MustSucceedAndBeConsistent)
		// Half of what remains after 49 records still holds the last one.
		if res := sdftest.AssertSplitAtFraction(t, s, 49, 0.5, sdftest.MustSucceedAndBeConsistent); res.ResidualRecords != 1 {
			t.Errorf("split after 49 of 50 records: residual holds %d records, want 1", res.ResidualRecords)
		}
		sdftest.AssertSplitAtFraction(t, s, 50, 1, sdftest.MustFail)
		// Java's fractions are of the whole range: 0.5 lies behind the
		// reader after 30 records.
		j := javaSplits(s)
		sdftest.AssertSplitAtFraction(t, j, 10, 0.5, sdftest.MustSucceedAndBeConsistent)
		sdftest.AssertSplitAtFraction(t, j, 30, 0.5, sdftest.MustFail)
	})
}

func TestSplitContractBlocks(t *testing.T) {
	src, recs, _ := writeBlockFile(t, t.TempDir(), 24, []int{3, 1, 0, 4, 2})
	t.Logf("%d records in 24 blocks", len(recs))
	t.Run("whole file", func(t *testing.T) {
		sdftest.AssertSplitAtFractionExhaustive(t, subject(t, src))
	})
	t.Run("subrange", func(t *testing.T) {
		sdftest.AssertSplitAtFractionExhaustive(t, subject(t, src.Subrange(60, 300)))
	})
	t.Run("java fractions", func(t *testing.T) {
		sdftest.AssertSplitAtFractionExhaustive(t, javaSplits(subject(t, src)))
	})
	t.Run("single splits", func(t *testing.T) {
		s := subject(t, src)
		// After the first record of the first block (3 records), a split a
		// few bytes on lands inside that block: the block's other records
		// stay in the primary.
		res := sdftest.AssertSplitAtFraction(t, javaSplits(s), 1, 0.01, sdftest.MustSucceedAndBeConsistent)
		if res.PrimaryRecords != 3 {
			t.Errorf("split inside the first block: primary %v holds %d records, want the block's 3", res.Primary, res.PrimaryRecords)
		}
		sdftest.AssertSplitAtFraction(t, s, 2, 0.5, sdftest.MustSucceedAndBeConsistent)
		sdftest.AssertSplitAtFraction(t, s, len(recs), 1, sdftest.MustFail)
	})
}

// oneSplitPointSource is a FixedSource whose reader breaks the contract: it
// reports only its first record as a split point, so a range reads on past
// its end. The harness must catch it; this keeps the checks above honest.
type oneSplitPointSource struct{ FixedSource }

func (s oneSplitPointSource) Subrange(start, end int64) offsetsource.Source[string] {
	return oneSplitPointSource{s.FixedSource.Subrange(start, end).(FixedSource)}
}

func (s oneSplitPointSource) Open(ctx context.Context) (offsetsource.Reader[string], error) {
	r, err := s.FixedSource.Open(ctx)
	return &oneSplitPointReader{Reader: r}, err
}

type oneSplitPointReader struct {
	offsetsource.Reader[string]
	n int
}

func (r *oneSplitPointReader) Next() (string, int64, bool, error) {
	rec, off, _, err := r.Reader.Next()
	r.n++
	return rec, off, r.n == 1, err
}

func TestSplitContractCatchesBrokenReader(t *testing.T) {
	src, _ := writeFixedFile(t, t.TempDir(), 10)
	_, err := sdftest.CheckSplitAtFractionExhaustive(context.Background(), subject(t, oneSplitPointSource{src}))
	if err == nil {
		t.Fatal("the exhaustive check passed a reader that reports one split point only")
	}
	t.Logf("caught: %.300s", err)
}
