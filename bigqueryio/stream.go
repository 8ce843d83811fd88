package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rowsClient is the part of the Storage Read client a stream read uses.
type rowsClient interface {
	ReadRows(ctx context.Context, req *storagepb.ReadRowsRequest, opts ...gax.CallOption) (storagepb.BigQueryRead_ReadRowsClient, error)
}

// readStats is what one stream read did, for metrics.
type readStats struct {
	rows, bytes, retries int64
}

var errStop = errors.New("stop")

// readStream reads the rows of rt's restriction, claiming each by its
// offset and passing it to fn, until a claim is refused or the stream ends
// (then the tracker is marked done). A transient ReadRows error is retried
// with backoff, resuming at the next unread offset; a split that committed
// switches the read to the primary stream at the next offset. Errors name
// the table, session, stream and offset.
func readStream(ctx context.Context, c rowsClient, cfg readConfig, info sessionInfo, rt *StreamTracker, dec rowDecoder, fn func([]bigquery.Value) error, st *readStats) error {
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
	attempt := 0
	for {
		rctx, cancel := context.WithCancel(ctx)
		rc, err := c.ReadRows(rctx, &storagepb.ReadRowsRequest{ReadStream: stream, Offset: off})
		swapped, stopped := false, false
		for err == nil && !swapped && !stopped {
			var resp *storagepb.ReadRowsResponse
			if resp, err = rc.Recv(); err != nil {
				break
			}
			n := resp.GetRowCount()
			if n <= 0 {
				continue
			}
			attempt = 0
			payload := payloadOf(resp)
			rt.received(stream, off, n, resp.GetStats().GetProgress())
			st.bytes += int64(len(payload))
			i := int64(0)
			derr := dec.decode(payload, n, func(row []bigquery.Value) error {
				ok, sw := rt.claim(off+i, stream)
				if !ok {
					stopped = true
					return errStop
				}
				i++
				st.rows++
				if err := fn(row); err != nil {
					return err
				}
				if sw {
					swapped = true
					return errStop
				}
				return nil
			})
			off += i
			if derr != nil && !errors.Is(derr, errStop) {
				cancel()
				err = fmt.Errorf("bigqueryio: %s: %w", where(), derr)
				rt.Fail(err)
				return err
			}
		}
		cancel()
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
		case !transient(err) || attempt >= maxRetries:
			err = fmt.Errorf("bigqueryio: ReadRows of %s failed after %d retries: %w", where(), attempt, err)
			rt.Fail(err)
			return err
		}
		attempt++
		st.retries++
		d := min(base<<min(attempt-1, 16), 10*time.Second)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return fmt.Errorf("bigqueryio: %s: %w", where(), ctx.Err())
		}
	}
}

// transient reports errors worth retrying: the service or the connection
// failed, not the request.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.Aborted, codes.ResourceExhausted, codes.DeadlineExceeded, codes.Unknown:
		return true
	}
	return false
}
