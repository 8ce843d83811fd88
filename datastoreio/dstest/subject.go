package dstest

import (
	"context"
	"reflect"
	"testing"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// Subject returns an sdftest.Subject of the reading SDF of datastoreio on
// one initial split r (from datastoreio.Plan), with entities loaded as
// values of t: its restriction is r's sub-range indices, its tracker
// datastoreio.KeyRangeTracker (the module's sdf.Tracker), and its Read what the SDF's ProcessElement does. The
// connection is closed when tb ends. Run sdftest's checks on it to check the
// split contract against a real server:
//
//	ranges, _ := datastoreio.Plan(ctx, project, datastoreio.NewQuery("Task"), datastoreio.WithNumQuerySplits(2))
//	sdftest.AssertSplitAtFractionExhaustive(t, dstest.Subject(t, ranges[0], reflect.TypeFor[Task]()))
func Subject(tb testing.TB, r datastoreio.Range, t reflect.Type) sdftest.Subject[any] {
	tb.Helper()
	rr, err := datastoreio.NewRangeReader(context.Background(), r)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rr.Close)
	return sdftest.Subject[any]{
		Restriction: r.Restriction(),
		NewTracker: func(rest any) beamsdf.RTracker {
			return datastoreio.NewKeyRangeTracker(rest.(sdf.OffsetRange))
		},
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(any)) error {
			return rr.Read(ctx, r, rt.(*datastoreio.KeyRangeTracker).Tracker, t, emit)
		},
	}
}
