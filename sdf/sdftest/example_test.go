package sdftest_test

import (
	"context"
	"fmt"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// A subject reading lines by index, every line a split point. In a test,
// call the Assert functions with the test's *testing.T instead.
func Example() {
	lines := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	s := sdftest.Subject[string]{
		Restriction: sdf.OffsetRange{Start: 0, End: int64(len(lines))},
		NewTracker: func(r any) beamsdf.RTracker {
			return sdf.NewTracker(r.(sdf.OffsetRange))
		},
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(string)) error {
			tr := rt.(*sdf.Tracker)
			for pos := tr.Range().Start; pos < int64(len(lines)); pos++ {
				if !tr.TryClaimSplitPoint(pos) {
					return nil
				}
				emit(lines[pos])
			}
			tr.MarkDone() // the input ended before the range did
			return nil
		},
	}
	ctx := context.Background()

	// After reading "a" and "b" (last claimed 1), split at half of the rest:
	// 1 + ceil(0.5*(8-1)) = 5.
	res, err := sdftest.CheckSplitAtFraction(ctx, s, 2, 0.5, sdftest.MustSucceedAndBeConsistent)
	fmt.Println(res.Primary, res.Residual, res.PrimaryRecords, res.ResidualRecords, err)

	// After reading everything there is nothing to split off.
	_, err = sdftest.CheckSplitAtFraction(ctx, s, 8, 0.5, sdftest.MustFail)
	fmt.Println(err)

	rep, err := sdftest.CheckSplitAtFractionExhaustive(ctx, s)
	fmt.Println(rep.Records, rep.NonTrivial > 0, rep.Concurrent.Trials > 0, err)
	// Output:
	// [0, 5) [5, 8) 5 3 <nil>
	// <nil>
	// 8 true true <nil>
}
