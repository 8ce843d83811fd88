package bigqueryio

import (
	"context"
	"fmt"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"

	"github.com/sdfio/sdfio/sdf"
)

// StreamCheck is the read of one stream of a read session outside a
// pipeline, as the reading SDF does it, for checking the split contract
// against a server (bqtest's, or the service): bqtest.Subject turns it into
// an sdf/sdftest subject. A pipeline needs none of it; Read reads tables.
// It exists so that the split-check harness, which links package testing,
// lives in bqtest and not in the binaries of bigqueryio's users.
type StreamCheck struct {
	client *bqstorage.BigQueryReadClient
	cfg    readConfig
	info   sessionInfo
	first  StreamRestriction
}

// NewStreamCheck creates a read session of table with opts and takes its
// first stream (pass WithMaxStreams(1) to have the whole table in it). The
// records are the rows as []bigquery.Value; splits go through
// SplitReadStream. Close it when done.
func NewStreamCheck(ctx context.Context, table string, opts ...ReadOption) (*StreamCheck, error) {
	cfg, err := newConfig("bigqueryio.NewStreamCheck", table, opts)
	if err != nil {
		return nil, err
	}
	c, err := newClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*StreamCheck, error) {
		c.Close()
		return nil, err
	}
	sess, err := createSession(ctx, c, cfg)
	if err != nil {
		return fail(err)
	}
	if len(sess.GetStreams()) == 0 {
		return fail(fmt.Errorf("bigqueryio: the session of %s has no streams (empty table?)", cfg.Table))
	}
	info, err := sessionInfoOf(sess)
	if err != nil {
		return fail(err)
	}
	if _, _, err := info.decoder(); err != nil {
		return fail(err)
	}
	first := StreamRestriction{Stream: sess.GetStreams()[0].GetName(), End: sdf.Unbounded, EstRows: sess.GetEstimatedRowCount()}
	return &StreamCheck{client: c, cfg: cfg, info: info, first: first}, nil
}

// Restriction is the whole restriction of the stream.
func (c *StreamCheck) Restriction() StreamRestriction { return c.first }

// NewTracker is the SDF's CreateTracker.
func (c *StreamCheck) NewTracker(r StreamRestriction) *StreamTracker {
	t := NewStreamTracker(r, c.client, c.cfg.SplitTimeout)
	t.wait = c.cfg.SplitWait
	return t
}

// Size is the SDF's RestrictionSize.
func (c *StreamCheck) Size(r StreamRestriction) float64 { return r.size() }

// Read is the SDF's ProcessElement: it reads rt's restriction, emitting
// each row it claims, until a claim is refused or the stream ends.
func (c *StreamCheck) Read(ctx context.Context, rt *StreamTracker, emit func([]bigquery.Value)) error {
	_, rows, err := c.info.decoder()
	if err != nil {
		return err
	}
	dec := valuesDecoder{rows: rows, conv: func(row []bigquery.Value) (any, error) {
		return append([]bigquery.Value(nil), row...), nil
	}}
	var st readStats
	return readStream(ctx, c.client, c.cfg, c.info, rt, dec, func(row any) error {
		emit(row.([]bigquery.Value))
		return nil
	}, &st)
}

// Close closes the connection to the server.
func (c *StreamCheck) Close() error { return c.client.Close() }
