package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync/atomic"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/sdf"
)

// StreamRestriction is the restriction of a stream read: the rows of one
// read stream from row offset Start, up to End (sdf.Unbounded: to the
// stream's end, which only the stream knows). Every row is a split point at
// its offset. A split through SplitReadStream replaces Stream by the primary
// stream, keeping Start (primary[0, j) is original[0, j)), and hands the
// remainder stream from offset 0 to the runner; a checkpoint (TrySplit(0))
// bounds End at the next offset of the same stream.
type StreamRestriction struct {
	Stream  string
	Start   int64
	End     int64
	EstRows int64 // estimated rows of the restriction, for sizing; 0 when unknown
}

func (r StreamRestriction) String() string {
	end := "end"
	if r.End != sdf.Unbounded {
		end = fmt.Sprint(r.End)
	}
	return fmt.Sprintf("%s[%d, %s)", r.Stream, r.Start, end)
}

// size is the restriction's size in rows, for RestrictionSize and progress.
func (r StreamRestriction) size() float64 {
	if r.End != sdf.Unbounded {
		return float64(max(r.End-r.Start, 0))
	}
	return float64(max(r.EstRows, 1))
}

func cutStream(r StreamRestriction, pos int64) (primary, residual StreamRestriction) {
	primary, residual = r, r
	primary.End, primary.EstRows = pos, max(pos-r.Start, 0)
	residual.Start, residual.EstRows = pos, max(r.EstRows-(pos-r.Start), 0)
	if r.End != sdf.Unbounded {
		residual.EstRows = max(r.End-pos, 0)
	}
	return primary, residual
}

// splitClient is the part of the Storage Read client a split uses.
type splitClient interface {
	SplitReadStream(ctx context.Context, req *storagepb.SplitReadStreamRequest, opts ...gax.CallOption) (*storagepb.SplitReadStreamResponse, error)
	ReadRows(ctx context.Context, req *storagepb.ReadRowsRequest, opts ...gax.CallOption) (storagepb.BigQueryRead_ReadRowsClient, error)
}

// StreamTracker tracks a StreamRestriction. It implements Beam Go's
// sdf.RTracker and is safe for concurrent use: the reader claims rows while
// the runner splits and asks for progress.
//
// TrySplit(f > 0) asks the service to split the stream (rule 9 of the split
// contract, on sdf.Core's two-phase split): under the lock it converts f,
// a fraction of the remaining work, into a fraction of the whole stream
// with the progress the server reported (StreamStats.Progress, interpolated
// by the rows claimed in the current response); outside it, bounded by the
// split timeout, it calls SplitReadStream and then reads the primary at the
// reader's next offset, to confirm that the primary still holds that row;
// claims wait meanwhile. The split commits only then: the restriction
// becomes the primary stream, the residual is the remainder from offset 0.
// An empty primary or remainder refuses the split and every later one on
// the tracker (the stream can no longer be split); FAILED_PRECONDITION or
// OUT_OF_RANGE from the primary (the reader is already past the split)
// refuses it and the reader goes on with the original, the remainder never
// read. A split of a restriction with a bounded End (after a checkpoint) is
// refused.
type StreamTracker struct {
	core    sdf.Core[StreamRestriction]
	client  splitClient
	timeout time.Duration

	// Under core's lock.
	noSplit  bool     // the service said the stream cannot be split
	resp     respInfo // the response the reader is claiming rows of
	refusal  map[string]int64
	lastFrac float64 // the last fraction done GetProgress reported

	emptyHalves atomic.Int64 // splits the service answered with an empty half
}

// respInfo is the last response of the current stream the reader received.
type respInfo struct {
	stream     string
	first      int64 // offset of its first row
	rows       int64
	start, end float64 // StreamStats.Progress at_response_start, at_response_end
	valid      bool
}

var _ beamsdf.RTracker = (*StreamTracker)(nil)

// NewStreamTracker returns a tracker of r that splits through client (it
// may be nil: then only checkpoints split), each split bounded by timeout
// (sdf.DefaultSplitTimeout when 0).
func NewStreamTracker(r StreamRestriction, client splitClient, timeout time.Duration) *StreamTracker {
	t := &StreamTracker{client: client, timeout: timeout, refusal: map[string]int64{}}
	t.core.Init("bigqueryio.StreamTracker", r, r.Start, r.End, cutStream)
	return t
}

func (t *StreamTracker) String() string { return t.core.String() }

// Restriction is the current restriction.
func (t *StreamTracker) Restriction() StreamRestriction { return t.core.Restriction() }

// GetRestriction returns the current restriction, a StreamRestriction.
func (t *StreamTracker) GetRestriction() any { return t.core.Restriction() }

// TryClaim claims the row at offset pos (an int64); see claim.
func (t *StreamTracker) TryClaim(pos any) bool {
	p, ok := pos.(int64)
	if !ok {
		t.core.Fail(fmt.Errorf("bigqueryio: TryClaim got %T, want an int64 row offset", pos))
		return false
	}
	ok, _ = t.claim(p, "")
	return ok
}

// claim claims the row at offset pos of stream, the stream the reader reads.
// swapped reports that a split committed before the claim: the restriction
// is now a primary stream, which holds the row at pos (so the reader may
// emit the row it read from stream), and the reader must read on from the
// primary at pos+1.
func (t *StreamTracker) claim(pos int64, stream string) (ok, swapped bool) {
	t.core.Lock()
	defer t.core.Unlock()
	ok = t.core.ClaimLocked(pos, true)
	return ok, stream != "" && t.core.RestrictionLocked().Stream != stream
}

// received records a response of stream the reader is about to claim the
// rows of, for progress and for converting split fractions.
func (t *StreamTracker) received(stream string, first, rows int64, p *storagepb.StreamStats_Progress) {
	t.core.Lock()
	t.resp = respInfo{stream: stream, first: first, rows: rows, start: p.GetAtResponseStart(), end: p.GetAtResponseEnd(), valid: p != nil}
	t.core.Unlock()
}

// MarkDone records that the stream ended: the rest of the restriction is
// claimed, empty.
func (t *StreamTracker) MarkDone() { t.core.MarkDone() }

// Fail stops the tracker with err.
func (t *StreamTracker) Fail(err error) { t.core.Fail(err) }

// GetError returns the error that stopped the tracker, or nil.
func (t *StreamTracker) GetError() error { return t.core.GetError() }

// IsDone reports whether the restriction was read entirely, without error.
func (t *StreamTracker) IsDone() bool { return t.core.IsDone() }

// IsBounded is true: a stream holds a finite number of rows.
func (t *StreamTracker) IsBounded() bool { return true }

// fractionLocked is the fraction of the current stream consumed, from the
// server's progress, interpolated by the rows claimed in the current
// response; ok is false when it is not known for the current stream.
func (t *StreamTracker) fractionLocked() (float64, bool) {
	c := t.core.ClaimedLocked()
	rest := t.core.RestrictionLocked()
	if !c.Started {
		if rest.Start == 0 {
			return 0, true
		}
		if !t.resp.valid || t.resp.stream != rest.Stream {
			return 0, false
		}
		return t.resp.start, true
	}
	if !t.resp.valid || t.resp.stream != rest.Stream || t.resp.rows <= 0 {
		return 0, false
	}
	consumed := min(max(c.LastRecord-t.resp.first+1, 0), t.resp.rows)
	f := t.resp.start + (t.resp.end-t.resp.start)*float64(consumed)/float64(t.resp.rows)
	return min(max(f, 0), 1), true
}

// GetProgress reports rows done and remaining: done is the rows claimed,
// remaining is extrapolated from the fraction of the stream the server
// reports consumed, or from the restriction's estimate before that. Before
// the first claim done+remaining is the restriction's size (RestrictionSize);
// the fraction done never goes down.
func (t *StreamTracker) GetProgress() (done, remaining float64) {
	t.core.Lock()
	defer t.core.Unlock()
	done, remaining = t.progressLocked()
	if tot := done + remaining; tot > 0 && remaining > 0 {
		if f := done / tot; f < t.lastFrac {
			remaining = done * (1 - t.lastFrac) / t.lastFrac
		} else {
			t.lastFrac = f
		}
	}
	return done, remaining
}

func (t *StreamTracker) progressLocked() (done, remaining float64) {
	c := t.core.ClaimedLocked()
	rest := t.core.RestrictionLocked()
	if c.Started {
		done = float64(c.LastRecord - c.First + 1)
	}
	if t.core.StoppedLocked() {
		return max(done, 1), 0
	}
	if rest.End != sdf.Unbounded {
		next := rest.Start
		if c.Started {
			next = c.LastRecord + 1
		}
		return done, math.Max(float64(rest.End-next), 0)
	}
	if !c.Started {
		return 0, rest.size()
	}
	if f, ok := t.fractionLocked(); ok && f > 0 {
		read := float64(c.LastRecord + 1) // rows of the stream up to here
		return done, math.Max(read/f-read, 1)
	}
	return done, math.Max(rest.size()-done, 1)
}

// TrySplit splits off the residual at fraction f of the remaining work.
// f == 0 is a checkpoint on the same stream; f > 0 splits the stream through
// SplitReadStream (see StreamTracker). A refused split returns a nil
// residual and changes nothing.
func (t *StreamTracker) TrySplit(f float64) (primary, residual any, err error) {
	if math.IsNaN(f) {
		return t.core.Restriction(), nil, nil
	}
	if f <= 0 {
		t.core.Lock()
		defer t.core.Unlock()
		res, ok := t.core.CheckpointLocked()
		if !ok {
			return t.core.RestrictionLocked(), nil, nil
		}
		return t.core.RestrictionLocked(), res, nil
	}
	f = min(f, 1)
	var why atomic.Value
	res := t.core.SplitWithIO(context.Background(), sdf.IOSplitOptions{Timeout: t.timeout, HoldClaims: true},
		func(s sdf.Snapshot[StreamRestriction]) sdf.SplitIO[StreamRestriction] {
			return t.planLocked(s, f, &why)
		})
	if !res.Accepted {
		reason := res.Refusal.String()
		if w, ok := why.Load().(string); ok {
			reason = w
		}
		t.core.Lock()
		if reason == refusedEmpty {
			t.noSplit = true
		}
		t.refusal[reason]++
		t.core.Unlock()
		return res.Primary, nil, nil
	}
	// A runner's rebalancing, made visible in the worker's log.
	log.Infof(context.Background(), "bigqueryio: split accepted at fraction %.3g of the rest: primary %v, residual %v", f, res.Primary, res.Residual)
	return res.Primary, res.Residual, nil
}

const (
	refusedEmpty  = "stream cannot be split (empty half)"
	refusedPassed = "reader past the split point"
)

// planLocked decides a split from a snapshot, under the lock.
func (t *StreamTracker) planLocked(s sdf.Snapshot[StreamRestriction], f float64, why *atomic.Value) sdf.SplitIO[StreamRestriction] {
	rest := s.Restriction
	if t.client == nil || t.noSplit || rest.End != sdf.Unbounded {
		return nil
	}
	p, ok := t.fractionLocked()
	if !ok {
		return nil
	}
	whole := p + f*(1-p)
	if whole <= 0 || whole >= 1 {
		return nil
	}
	next := s.Next
	client := t.client
	return func(ctx context.Context) (sdf.IOSplit[StreamRestriction], bool, error) {
		var none sdf.IOSplit[StreamRestriction]
		resp, err := client.SplitReadStream(ctx, &storagepb.SplitReadStreamRequest{Name: rest.Stream, Fraction: whole})
		if err != nil {
			return none, false, fmt.Errorf("SplitReadStream(%s, %v): %w", rest.Stream, whole, err)
		}
		prim, rem := resp.GetPrimaryStream().GetName(), resp.GetRemainderStream().GetName()
		if prim == "" || rem == "" {
			t.emptyHalves.Add(1)
			why.Store(refusedEmpty)
			return none, false, nil
		}
		// Confirm that the primary holds the reader's next row, as Java's
		// reader does: read one response of the primary at that offset.
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		end := int64(sdf.Unbounded)
		rc, err := client.ReadRows(rctx, &storagepb.ReadRowsRequest{ReadStream: prim, Offset: next})
		if err == nil {
			var r *storagepb.ReadRowsResponse
			// A response without rows (by either count, or by its
			// payload) is skipped; the first that holds some is the
			// primary's next row.
			for err == nil && (r == nil || !holdsRows(r)) {
				r, err = rc.Recv()
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			// The primary ends exactly at the reader's next row: the
			// reader is done with it, the remainder holds the rest.
			end = next
		case passedSplit(err):
			why.Store(refusedPassed)
			return none, false, nil
		case err != nil:
			return none, false, fmt.Errorf("reading primary %s at offset %d: %w", prim, next, err)
		}
		estRem := int64(float64(max(rest.EstRows, 0)) * (1 - whole))
		return sdf.IOSplit[StreamRestriction]{
			Primary:  StreamRestriction{Stream: prim, Start: rest.Start, End: sdf.Unbounded, EstRows: max(rest.EstRows-estRem, 0)},
			Residual: StreamRestriction{Stream: rem, Start: 0, End: sdf.Unbounded, EstRows: estRem},
			Pos:      next,
			End:      end,
		}, true, nil
	}
}

// passedSplit reports the service's answer to reading a primary stream at
// an offset it does not hold.
func passedSplit(err error) bool {
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.OutOfRange:
		return true
	}
	return false
}

// SplitStats returns the splits accepted and refused so far (checkpoints
// not counted).
func (t *StreamTracker) SplitStats() (accepted, refused int64) { return t.core.SplitStats() }

// Refusals counts the refused splits by reason, for logs and tests.
func (t *StreamTracker) Refusals() map[string]int64 {
	t.core.Lock()
	defer t.core.Unlock()
	out := make(map[string]int64, len(t.refusal))
	for k, v := range t.refusal {
		out[k] = v
	}
	return out
}
