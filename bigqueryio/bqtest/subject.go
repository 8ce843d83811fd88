package bqtest

import (
	"context"
	"testing"

	"cloud.google.com/go/bigquery"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/sdf/sdftest"
)

// Stream is the read of one stream that Subject checks:
// *bigqueryio.StreamCheck, with R bigqueryio.StreamRestriction and T
// *bigqueryio.StreamTracker. (bqtest does not import bigqueryio, so that
// bigqueryio's own tests can use bqtest's server.)
type Stream[R any, T beamsdf.RTracker] interface {
	Restriction() R
	NewTracker(r R) T
	Size(r R) float64
	Read(ctx context.Context, rt T, emit func([]bigquery.Value)) error
	Close() error
}

// Subject returns an sdftest.Subject of the stream reader of bigqueryio on
// the stream of s: its restriction is the stream and a row offset, its
// tracker bigqueryio's StreamTracker (splits go through SplitReadStream),
// its Read what the reading SDF's ProcessElement does, its records the rows
// as []bigquery.Value. s is closed when tb ends. Run sdftest's checks on it
// to check the split contract against a real server:
//
//	sc, err := bigqueryio.NewStreamCheck(ctx, "p.d.t", bigqueryio.WithMaxStreams(1),
//		bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
//	if err != nil {
//		t.Fatal(err)
//	}
//	sdftest.AssertSplitAtFractionExhaustive(t, bqtest.Subject(t, sc))
func Subject[R any, T beamsdf.RTracker](tb testing.TB, s Stream[R, T]) sdftest.Subject[[]bigquery.Value] {
	tb.Helper()
	tb.Cleanup(func() { s.Close() })
	return sdftest.Subject[[]bigquery.Value]{
		Restriction: s.Restriction(),
		NewTracker:  func(r any) beamsdf.RTracker { return s.NewTracker(r.(R)) },
		Size:        func(r any) float64 { return s.Size(r.(R)) },
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func([]bigquery.Value)) error {
			return s.Read(ctx, rt.(T), emit)
		},
	}
}
