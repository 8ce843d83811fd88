package bigqueryio

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/googleapis/gax-go/v2"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/sdf"
)

// aheadRow is a row of p.d.nums whose columns the struct decoder reads
// inline (rowInline).
type aheadRow struct {
	ID    int64
	Name  bigquery.NullString
	Score bigquery.NullFloat64
}

// settledGoroutines waits until the goroutines are at most want, and
// returns how many there are.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(5 * time.Millisecond)
	}
	return n
}

// TestReadAheadExact checks the reads whose responses are decoded ahead
// (fetch): a checkpoint taken while responses after the current one are
// already decoded loses and repeats no row (the decoded-ahead rows are
// discarded and read again by the residual), a read stopped by its
// function's error or by its context is stopped with the stream and
// offset named, and none leaves a goroutine behind.
func TestReadAheadExact(t *testing.T) {
	const n = 100
	srv := newTestServer(t, bqtest.WithBlockRows(5), bqtest.WithResponseRows(10))
	numbersTable(t, srv, n)
	ctx := context.Background()
	cfg, _ := newConfig("bigqueryio.Read", "p.d.nums", []ReadOption{WithEndpoint(srv.Addr()), WithInsecure(), WithMaxStreams(1), WithRetries(2, time.Millisecond)})
	c, err := newClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := createSession(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := sessionInfoOf(s)
	schema, _, err := info.decoder()
	if err != nil {
		t.Fatal(err)
	}
	sd, err := newStructDecoder(reflect.TypeOf(aheadRow{}), schema, info.Format, info.Arrow, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	if !sd.inline {
		t.Fatal("aheadRow is not decoded inline")
	}
	stream := s.GetStreams()[0].GetName()
	newDec := func() batchDecoder { d := *sd; d.r = avroReader{}; return &d }
	// read reads r, calling at for each row; it returns the ids read.
	read := func(ctx context.Context, r StreamRestriction, at func(rt *StreamTracker, id int64) error) ([]int64, *StreamTracker, error) {
		rt := NewStreamTracker(r, c, 0)
		var got []int64
		var st readStats
		err := readStream(ctx, c, cfg, info, rt, newDec(), func(v any) error {
			id := v.(aheadRow).ID
			got = append(got, id)
			if at != nil {
				return at(rt, id)
			}
			return nil
		}, &st)
		return got, rt, err
	}
	whole := StreamRestriction{Stream: stream, End: sdf.Unbounded}
	// A first read starts the client's own goroutines.
	if got, rt, err := read(ctx, whole, nil); err != nil || len(got) != n || !rt.IsDone() {
		t.Fatalf("whole read: %d rows, done %v, %v", len(got), rt.IsDone(), err)
	}
	base := runtime.NumGoroutine()

	for _, k := range []int64{0, 3, 9, 10, 47, 98, 99} {
		var residual any
		got, rt, err := read(ctx, whole, func(rt *StreamTracker, id int64) error {
			if id == k {
				// Let fetch decode the next responses first.
				time.Sleep(10 * time.Millisecond)
				var err error
				_, residual, err = rt.TrySplit(0)
				return err
			}
			return nil
		})
		if err != nil || rt.GetError() != nil {
			t.Fatalf("checkpoint at %d: %v, %v", k, err, rt.GetError())
		}
		if residual == nil {
			t.Fatalf("checkpoint at %d refused", k)
		}
		rest, rt2, err := read(ctx, residual.(StreamRestriction), nil)
		if err != nil || !rt2.IsDone() {
			t.Fatalf("residual of %d: %v, done %v", k, err, rt2.IsDone())
		}
		all := append(slices.Clone(got), rest...)
		if int64(len(got)) != k+1 || len(all) != n || !slices.IsSorted(all) || all[0] != 0 || all[n-1] != n-1 {
			t.Fatalf("checkpoint at %d: primary %v, residual %v", k, got, rest)
		}
	}

	// The function's error stops the read, naming stream and offset.
	boom := errors.New("boom")
	_, _, err = read(ctx, whole, func(_ *StreamTracker, id int64) error {
		if id == 42 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "stream "+stream+", offset 43") {
		t.Errorf("function's error: %v", err)
	}

	// A cancelled context stops it.
	cctx, cancel := context.WithCancel(ctx)
	_, _, err = read(cctx, whole, func(_ *StreamTracker, id int64) error {
		if id == 25 {
			cancel()
			time.Sleep(10 * time.Millisecond)
		}
		return nil
	})
	cancel()
	if err == nil || !strings.Contains(err.Error(), "stream "+stream) {
		t.Errorf("cancelled read: %v", err)
	}

	// A payload that does not decode fails with the stream and offset.
	bad := badPayloads{rowsClient: c, after: 3}
	rt := NewStreamTracker(whole, c, 0)
	var st readStats
	err = readStream(ctx, &bad, cfg, info, rt, newDec(), func(any) error { return nil }, &st)
	if err == nil || !strings.Contains(err.Error(), "stream "+stream+", offset 30") || st.rows != 30 {
		t.Errorf("bad payload: %d rows, %v", st.rows, err)
	}

	if got := settledGoroutines(base); got > base {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the reads, %d before:\n%s", got, base, buf[:runtime.Stack(buf, true)])
	}
}

// badPayloads is a rowsClient whose ReadRows responses after the first
// `after` carry a payload cut short.
type badPayloads struct {
	rowsClient
	after int
}

func (b *badPayloads) ReadRows(ctx context.Context, req *storagepb.ReadRowsRequest, opts ...gax.CallOption) (storagepb.BigQueryRead_ReadRowsClient, error) {
	rc, err := b.rowsClient.ReadRows(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	return &cutRows{BigQueryRead_ReadRowsClient: rc, after: b.after}, nil
}

type cutRows struct {
	storagepb.BigQueryRead_ReadRowsClient
	after, seen int
}

func (c *cutRows) Recv() (*storagepb.ReadRowsResponse, error) {
	r, err := c.BigQueryRead_ReadRowsClient.Recv()
	if err != nil {
		return r, err
	}
	if c.seen++; c.seen > c.after {
		if a := r.GetAvroRows(); a != nil {
			a.SerializedBinaryRows = a.SerializedBinaryRows[:len(a.SerializedBinaryRows)-1]
		}
	}
	return r, nil
}
