package filesource

import (
	"context"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// SplitSubject returns an sdftest.Subject over the file at path read by
// format, exactly as Read reads it: the file is asked for its metadata as
// a match would, each range opens it as a worker does (checking that it
// did not change), and the format's reader is the one pipelines use. Run
// sdftest's checks on it to test a format's splitting on real files.
func SplitSubject[T any, F Format[T]](ctx context.Context, path string, format F) (sdftest.Subject[T], error) {
	m, err := Stat(ctx, path)
	if err != nil {
		return sdftest.Subject[T]{}, err
	}
	return offsetsource.SplitSubject[T](ctx, NewSource[T, F](m, format))
}
