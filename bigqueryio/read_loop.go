package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"time"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/googleapis/gax-go/v2"

	"github.com/sdfio/sdfio/internal/retry"
	"github.com/sdfio/sdfio/internal/runnerfix"
	"github.com/sdfio/sdfio/sdf"
)

// readStreamFn reads one stream: a splittable DoFn whose restriction is the
// stream and a row offset.
type readStreamFn struct {
	Cfg  readConfig
	Type beam.EncodedType

	client *bqstorage.BigQueryReadClient
	mu     sync.Mutex
	plans  map[string]*rowPlan // by session
}

// rowPlan is how rows of one session become values of the output type.
type rowPlan struct {
	info   sessionInfo
	schema bigquery.Schema
	dec    *structDecoder // for a struct type; nil for Row
}

// decoder returns a new decoder of the row plan, for one stream read.
func (p *rowPlan) decoder() (batchDecoder, error) {
	if p.dec != nil {
		d := *p.dec
		d.r, d.arrowScratch = avroReader{}, arrowScratch{} // its own reader, buffers and arena
		return &d, nil
	}
	_, rows, err := p.info.decoder()
	if err != nil {
		return nil, err
	}
	schema := p.schema
	return valuesDecoder{rows: rows, conv: func(v []bigquery.Value) (any, error) { return rowOf(schema, v), nil }}, nil
}

func (fn *readStreamFn) Setup(ctx context.Context) error {
	c, err := newClient(ctx, fn.Cfg)
	if err != nil {
		return err
	}
	fn.client = c
	fn.plans = map[string]*rowPlan{}
	return nil
}

func (fn *readStreamFn) Teardown() error {
	if fn.client != nil {
		return fn.client.Close()
	}
	return nil
}

func (fn *readStreamFn) CreateInitialRestriction(e StreamElement) StreamRestriction {
	return StreamRestriction{Stream: e.Stream, Start: 0, End: sdf.Unbounded, EstRows: e.EstRows}
}

func (fn *readStreamFn) SplitRestriction(_ StreamElement, r StreamRestriction) []StreamRestriction {
	return []StreamRestriction{r}
}

func (fn *readStreamFn) RestrictionSize(_ StreamElement, r StreamRestriction) float64 {
	return r.size()
}

func (fn *readStreamFn) CreateTracker(r StreamRestriction) *StreamTracker {
	t := NewStreamTracker(r, fn.client, fn.Cfg.SplitTimeout)
	t.wait = fn.Cfg.SplitWait
	return t
}

func (fn *readStreamFn) rowPlanFor(info sessionInfo) (*rowPlan, error) {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if p := fn.plans[info.Session]; p != nil {
		return p, nil
	}
	p, err := newRowPlan(info, fn.Type.T, fn.Cfg)
	if err != nil {
		return nil, err
	}
	fn.plans[info.Session] = p
	return p, nil
}

// newRowPlan is how the rows of a session become values of t.
func newRowPlan(info sessionInfo, t reflect.Type, cfg readConfig) (*rowPlan, error) {
	schema, _, err := info.decoder()
	if err != nil {
		return nil, fmt.Errorf("bigqueryio: table %s: %w", info.Table, err)
	}
	p := &rowPlan{info: info, schema: schema}
	if t != typeOfRow {
		if p.dec, err = newStructDecoder(t, schema, info.Format, info.Arrow, cfg.fieldRules()); err != nil {
			return nil, fmt.Errorf("%w (table %s, session %s)", err, info.Table, info.Session)
		}
	}
	return p, nil
}

func (fn *readStreamFn) ProcessElement(ctx context.Context, rt *StreamTracker, e StreamElement, emit func(beam.X)) error {
	p, err := fn.rowPlanFor(e.Info)
	if err != nil {
		return err
	}
	dec, err := p.decoder()
	if err != nil {
		return err
	}
	// Every counter is touched first (runnerfix.TouchCounters says why);
	// rows and bytes are counted per response, so they move while a long
	// stream is read.
	rowsCounter, bytesCounter, retriesCounter := fn.Cfg.counter("rows"), fn.Cfg.counter("bytes"), fn.Cfg.counter("retries")
	acceptedCounter, refusedCounter := fn.Cfg.counter("splits_accepted"), fn.Cfg.counter("splits_refused")
	runnerfix.TouchCounters(ctx, rowsCounter, bytesCounter, retriesCounter, acceptedCounter, refusedCounter)
	st := readStats{report: func(rows, bytes int64) {
		rowsCounter.Inc(ctx, rows)
		bytesCounter.Inc(ctx, bytes)
	}}
	err = readStream(ctx, fn.client, fn.Cfg, e.Info, rt, dec, func(v any) error {
		emit(v)
		return nil
	}, &st)
	retriesCounter.Inc(ctx, st.retries)
	acc, ref := rt.SplitStats()
	acceptedCounter.Inc(ctx, acc)
	refusedCounter.Inc(ctx, ref)
	return err
}

// rowsClient is the part of the Storage Read client a stream read uses.
type rowsClient interface {
	ReadRows(ctx context.Context, req *storagepb.ReadRowsRequest, opts ...gax.CallOption) (storagepb.BigQueryRead_ReadRowsClient, error)
}

// readStats is what one stream read did, for metrics.
type readStats struct {
	rows, bytes, retries int64
	// report, when set, is told the rows and bytes of each response once
	// its rows are claimed (or the read stopped in it).
	report func(rows, bytes int64)
}

// fetched is one response of a ReadRows call, decoded ahead of the reader,
// or the call's end (err: io.EOF when the stream ended).
type fetched struct {
	rows      int64
	progress  *storagepb.StreamStats_Progress
	bytes     int64
	batch     batch
	err       error
	decodeErr bool // err is the payload's, not the call's
}

// fetch reads stream from off with one ReadRows call, decoding each
// response with dec and sending it to out, until the call ends or ctx is
// cancelled; it closes out when it returns. It runs on its own goroutine, so
// that receiving and decoding the next responses overlap the emission of
// the rows of this one (on another core when there is one).
func fetch(ctx context.Context, c rowsClient, stream string, off int64, dec batchDecoder, out chan<- fetched) {
	defer close(out)
	send := func(f fetched) bool {
		select {
		case out <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	rc, err := c.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: stream, Offset: off})
	if err != nil {
		send(fetched{err: err})
		return
	}
	for {
		resp, err := rc.Recv()
		if err != nil {
			send(fetched{err: err})
			return
		}
		payload := payloadOf(resp)
		n, err := rowCount(resp)
		if err == nil && n == 0 && len(payload) == 0 {
			continue // no rows: the stats of a response, say
		}
		f := fetched{rows: n, progress: resp.GetStats().GetProgress(), bytes: int64(len(payload))}
		// The decoders decode every row the payload holds and fail when
		// those are not the n the response says (see rowcount.go); the
		// count bounds nothing they allocate.
		if err == nil {
			err = dec.decodeBatch(payload, n, &f.batch)
		}
		if err == nil && int64(f.batch.len) != n {
			err = countMismatch(n, int64(f.batch.len))
		}
		if err != nil {
			f.err, f.decodeErr = err, true
			send(f)
			return
		}
		if n == 0 {
			continue // a payload of no rows, as its count says
		}
		if !send(f) {
			return
		}
	}
}

// readStream reads the rows of rt's restriction, claiming each by its
// offset and passing it to fn, until a claim is refused or the stream ends
// (then the tracker is marked done). A transient ReadRows error is retried
// with backoff, resuming at the next unread offset; a split that committed
// switches the read to the primary stream at the next offset. Responses are
// received and decoded ahead, on another goroutine (see fetch); the claims
// and fn run on the caller's. Errors name the table, session, stream and
// offset.
func readStream(ctx context.Context, c rowsClient, cfg readConfig, info sessionInfo, rt *StreamTracker, dec batchDecoder, fn func(any) error, st *readStats) error {
	rest := rt.Restriction()
	stream, off := rest.Stream, rest.Start
	where := func() string {
		return fmt.Sprintf("table %s, session %s, stream %s, offset %d", info.Table, info.Session, stream, off)
	}
	maxRetries, base := cfg.MaxRetries, cfg.RetryBase
	if maxRetries <= 0 && base == 0 {
		maxRetries = 10
	}
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	// The waits of one run of retries, anew after a response (progress).
	// ReadRows at an offset is idempotent: every transient code is retried.
	r := retryBackoff(maxRetries, base).Start()
	for {
		var err error
		swapped, stopped := false, false
		if ferr := func() error {
			rctx, cancel := context.WithCancel(ctx)
			ch := make(chan fetched, 2)
			go fetch(rctx, c, stream, off, dec, ch)
			// The fetch ends, and is waited for, however this returns
			// (even by a panic in fn): the next one reuses dec.
			defer func() {
				cancel()
				for range ch {
				}
			}()
			for f := range ch {
				if f.decodeErr {
					return f.err
				}
				if f.err != nil {
					err = f.err
					return nil
				}
				r.Reset()
				rt.received(stream, off, f.rows, f.progress)
				st.bytes += f.bytes
				rows0 := st.rows
				flush := func() {
					if st.report != nil {
						st.report(st.rows-rows0, f.bytes)
					}
				}
				for i := 0; i < f.batch.len; i++ {
					ok, sw := rt.claim(off, stream)
					if !ok {
						stopped = true
						flush()
						return nil
					}
					off++
					st.rows++
					if err := fn(f.batch.at(i)); err != nil {
						flush()
						return err
					}
					if sw {
						swapped = true
						flush()
						return nil
					}
				}
				flush()
			}
			return nil
		}(); ferr != nil {
			ferr = fmt.Errorf("bigqueryio: %s: %w", where(), ferr)
			rt.Fail(ferr)
			return ferr
		}
		switch {
		case stopped:
			return rt.GetError()
		case swapped:
			// The restriction is a primary stream now, which holds the rows
			// from off on that the original would have given.
			stream = rt.Restriction().Stream
			continue
		case errors.Is(err, io.EOF):
			rt.MarkDone()
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("bigqueryio: %s: %w", where(), ctx.Err())
		}
		if rerr := r.Retry(ctx, err, retry.Transient(err, retry.Idempotent), "bigqueryio: ReadRows of "+where()); rerr != nil {
			if rerr.(*retry.Error).Stopped == nil {
				rt.Fail(rerr)
			}
			return rerr
		}
		st.retries++
	}
}
