package offsetsource

import (
	"context"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// SplitSubject returns an sdftest.Subject that reads src exactly as Read's
// DoFn does: its restriction is InitialRestriction(src), its trackers are
// the DoFn's (sdf.NewTracker), and Read is ReadRestriction. Anyone can run
// sdftest's split checks on a real source with it:
//
//	s, err := offsetsource.SplitSubject(ctx, src)
//	...
//	sdftest.AssertSplitAtFractionExhaustive(t, s)
func SplitSubject[T any](ctx context.Context, src Source[T]) (sdftest.Subject[T], error) {
	rest, err := InitialRestriction(ctx, src)
	if err != nil {
		return sdftest.Subject[T]{}, err
	}
	return sdftest.Subject[T]{
		Restriction: rest,
		NewTracker:  func(r any) beamsdf.RTracker { return sdf.NewTracker(r.(sdf.OffsetRange)) },
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(T)) error {
			return ReadRestriction(ctx, src, rt.(*sdf.Tracker), emit)
		},
	}, nil
}
