package bigqueryio

import (
	"context"
	"fmt"

	"cloud.google.com/go/bigquery"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"

	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// StreamSubject returns an sdftest.Subject of the read of one stream, for
// checking the split contract against a real server (bqtest's, or the
// service): it creates a read session of table with opts and takes its
// first stream (pass WithMaxStreams(1) to have the whole table in it). The
// records are the rows as []bigquery.Value. Splits go through
// SplitReadStream. Call close when done.
func StreamSubject(ctx context.Context, table string, opts ...ReadOption) (s sdftest.Subject[[]bigquery.Value], close func() error, err error) {
	cfg, err := newConfig(table, opts)
	if err != nil {
		return s, nil, err
	}
	c, err := newClient(ctx, cfg)
	if err != nil {
		return s, nil, err
	}
	sess, err := createSession(ctx, c, cfg)
	if err != nil {
		c.Close()
		return s, nil, err
	}
	if len(sess.GetStreams()) == 0 {
		c.Close()
		return s, nil, fmt.Errorf("bigqueryio: the session of %s has no streams (empty table?)", cfg.Table)
	}
	info, err := sessionInfoOf(sess)
	if err != nil {
		c.Close()
		return s, nil, err
	}
	if _, _, err := info.decoder(); err != nil {
		c.Close()
		return s, nil, err
	}
	s = sdftest.Subject[[]bigquery.Value]{
		Restriction: StreamRestriction{Stream: sess.GetStreams()[0].GetName(), End: sdf.Unbounded, EstRows: sess.GetEstimatedRowCount()},
		NewTracker: func(r any) beamsdf.RTracker {
			return NewStreamTracker(r.(StreamRestriction), c, cfg.SplitTimeout)
		},
		Size: func(r any) float64 { return r.(StreamRestriction).size() },
		Read: func(ctx context.Context, rt beamsdf.RTracker, emit func([]bigquery.Value)) error {
			_, rows, err := info.decoder()
			if err != nil {
				return err
			}
			dec := valuesDecoder{rows: rows, conv: func(row []bigquery.Value) (any, error) {
				return append([]bigquery.Value(nil), row...), nil
			}}
			var st readStats
			return readStream(ctx, c, cfg, info, rt.(*StreamTracker), dec, func(row any) error {
				emit(row.([]bigquery.Value))
				return nil
			}, &st)
		},
	}
	return s, c.Close, nil
}
