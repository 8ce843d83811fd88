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
// contract, on sdf.Core's two-phase split with Prepare): under the lock it
// converts f, a fraction of the remaining work, into a fraction of the whole
// stream with the progress the server reported (StreamStats.Progress,
// interpolated by the rows claimed in the current response); outside it,
// bounded by the split timeout, it calls SplitReadStream and then reads one
// response of the primary, half way to the expected split row or at the
// reader's next row, to learn rows the primary still holds. TrySplit waits
// for that at most the split wait (0 for a tracker from NewStreamTracker;
// the read's WithSplitWait for the SDF's): otherwise it refuses, and the
// split prepared in the background is committed by the next TrySplit if the
// reader has not claimed the last row seen in the primary. Claims never
// wait. Committed, the restriction becomes the primary stream, the residual
// is the remainder from offset 0. An empty primary or remainder refuses the
// split and every later one on the tracker (the stream can no longer be
// split); FAILED_PRECONDITION or OUT_OF_RANGE from the primary at the
// reader's next row (the reader is already past the split) refuses it and
// the reader goes on with the original, the remainder never read. A split
// of a restriction with a bounded End (after a checkpoint) is refused.
type StreamTracker struct {
	core    sdf.Core[StreamRestriction]
	client  splitClient
	timeout time.Duration
	wait    time.Duration // how long TrySplit waits for the RPCs (WithSplitWait)

	noSplit atomic.Bool // the service said the stream cannot be split

	// Under core's lock.
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
// may be nil: then only checkpoints split), each split's RPCs bounded by
// timeout (sdf.DefaultSplitTimeout when 0); its TrySplit never waits for
// them (see StreamTracker).
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
	ok = t.core.ClaimLocked(pos, true)
	cur := t.core.RestrictionLocked().Stream
	t.core.Unlock()
	return ok, stream != "" && cur != stream
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
	reason := func(r sdf.Refusal) string {
		if w, ok := why.Load().(string); ok && (r == sdf.RefusedByIO || r == sdf.RefusedPassed) {
			return w
		}
		return r.String()
	}
	opts := sdf.IOSplitOptions{Timeout: t.timeout, Prepare: true, Wait: t.wait,
		Settled: func(r sdf.Refusal, err error) {
			if r == sdf.NotRefused {
				return
			}
			t.count("background: "+reason(r), 1)
			log.Debugf(context.Background(), "bigqueryio: split prepared in the background refused (%s): %v", reason(r), err)
		}}
	res := t.core.SplitWithIO(context.Background(), opts,
		func(s sdf.Snapshot[StreamRestriction]) sdf.SplitIO[StreamRestriction] {
			return t.planLocked(s, f, &why)
		})
	if res.Dropped != sdf.NotRefused {
		t.count("prepared split dropped: "+res.Dropped.String(), 1)
	}
	if !res.Accepted {
		t.count(reason(res.Refusal), 1)
		return res.Primary, nil, nil
	}
	// A runner's rebalancing, made visible in the worker's log.
	how := ""
	if res.Prepared {
		how = " (prepared in the background after an earlier request)"
	}
	log.Infof(context.Background(), "bigqueryio: split accepted at fraction %.3g of the rest: primary %v, residual %v%s", f, res.Primary, res.Residual, how)
	return res.Primary, res.Residual, nil
}

// count counts n refusals for reason.
func (t *StreamTracker) count(reason string, n int64) {
	t.core.Lock()
	t.refusal[reason] += n
	t.core.Unlock()
}

const (
	refusedEmpty  = "stream cannot be split (empty half)"
	refusedPassed = "reader past the split point"
)

// planLocked decides a split from a snapshot, under the lock.
func (t *StreamTracker) planLocked(s sdf.Snapshot[StreamRestriction], f float64, why *atomic.Value) sdf.SplitIO[StreamRestriction] {
	rest := s.Restriction
	if t.client == nil || t.noSplit.Load() || rest.End != sdf.Unbounded {
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
	// The row half way from the reader to where the split should lie:
	// the rows up to the reader's are the fraction p of the stream.
	ahead := next
	if p > 0 && s.Claimed.Started {
		if j := whole * float64(next) / p; j > float64(next) && j < math.MaxInt64/2 {
			ahead = next + int64((j-float64(next))/2)
		}
	}
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
			t.noSplit.Store(true)
			why.Store(refusedEmpty)
			return none, false, nil
		}
		// Confirm that the primary holds the reader's next row, as Java's
		// reader does, by reading one response of the primary; its rows
		// are rows the primary holds. The split is answered later than it
		// is asked for (it is prepared in the background), so the reader
		// may have moved on by then: first read ahead, half way to where
		// the split should lie, so that the split still holds when the
		// reader gets there; when the primary does not hold that row,
		// read at the reader's next row.
		end := int64(sdf.Unbounded)
		pos := next
		at := ahead
		held, err := firstHeld(ctx, client, prim, at)
		if at > next && (passedSplit(err) || errors.Is(err, io.EOF)) {
			at = next
			held, err = firstHeld(ctx, client, prim, at)
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
			return none, false, fmt.Errorf("reading primary %s at offset %d: %w", prim, at, err)
		default:
			// The primary holds [next, held]: the split holds while the
			// reader has not claimed held.
			pos = held
		}
		estRem := int64(float64(max(rest.EstRows, 0)) * (1 - whole))
		return sdf.IOSplit[StreamRestriction]{
			Primary:  StreamRestriction{Stream: prim, Start: rest.Start, End: sdf.Unbounded, EstRows: max(rest.EstRows-estRem, 0)},
			Residual: StreamRestriction{Stream: rem, Start: 0, End: sdf.Unbounded, EstRows: estRem},
			Pos:      pos,
			End:      end,
		}, true, nil
	}
}

// firstHeld reads the first response of stream that holds rows, from row
// off, and returns the offset of its last row: the stream holds every row
// from off to there. io.EOF means the stream ends at off.
func firstHeld(ctx context.Context, client splitClient, stream string, off int64) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := client.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: stream, Offset: off})
	if err != nil {
		return 0, err
	}
	for {
		r, err := rc.Recv()
		if err != nil {
			return 0, err
		}
		// A response without rows (by either count, or by its payload)
		// is skipped; the first that holds some holds the row at off.
		if !holdsRows(r) {
			continue
		}
		n, err := rowCount(r)
		if err != nil || n <= 0 {
			return off, nil // it holds the row at off, at least
		}
		return off + n - 1, nil
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
