// Package sourcetest gives sdftest subjects over offsetsource and
// filesource sources, so that anyone can run sdftest's split checks on a
// real source exactly as Read reads it:
//
//	s, err := sourcetest.Subject(ctx, src)
//	...
//	sdftest.AssertSplitAtFractionExhaustive(t, s)
//
// It lives apart from offsetsource and filesource so that their users'
// binaries link neither sdftest nor the testing package.
package sourcetest

import (
	"context"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/offsetsource/filesource"
	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// Subject returns an sdftest.Subject that reads src exactly as
// offsetsource.Read's DoFn does: its restriction is
// offsetsource.InitialRestriction(src), its trackers are the DoFn's
// (sdf.NewTracker), and Read is offsetsource.ReadRestriction.
func Subject[T any](ctx context.Context, src offsetsource.Source[T]) (sdftest.Subject[T], error) {
	rest, err := offsetsource.InitialRestriction(ctx, src)
	if err != nil {
		return sdftest.Subject[T]{}, err
	}
	return sdftest.Subject[T]{
		Restriction: rest,
		NewTracker:  func(r any) beamsdf.RTracker { return sdf.NewTracker(r.(sdf.OffsetRange)) },
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func(T)) error {
			return offsetsource.ReadRestriction(ctx, src, rt.(*sdf.Tracker), emit)
		},
	}, nil
}

// FileSubject returns a Subject over the file at path read by format,
// exactly as filesource.Read reads it: the file is asked for its metadata
// as a match would, each range opens it as a worker does (checking that it
// did not change), and the format's reader is the one pipelines use.
func FileSubject[T any, F filesource.Format[T]](ctx context.Context, path string, format F) (sdftest.Subject[T], error) {
	m, err := filesource.Stat(ctx, path)
	if err != nil {
		return sdftest.Subject[T]{}, err
	}
	return Subject[T](ctx, filesource.NewSource[T, F](m, format))
}
