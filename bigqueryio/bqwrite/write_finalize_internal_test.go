package bqwrite

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// finalizeAnswer is one answer of a fake FinalizeWriteStream.
type finalizeAnswer struct {
	n   int64
	err error
}

func streamFinalizedErr(name string) error {
	st, _ := status.New(codes.InvalidArgument, "Stream has been finalized. Entity: "+name).
		WithDetails(&storagepb.StorageError{Code: storagepb.StorageError_STREAM_FINALIZED, Entity: name})
	return st.Err()
}

// TestFinalizeStream drives finalizeStream, the finalize of a bundle's
// stream, against answers of the service: every transient code is retried
// with the client's own retries off; a retry answered STREAM_FINALIZED is
// success when GetWriteStream shows the stream PENDING and uncommitted; a
// retry answered another row count than appended, or STREAM_FINALIZED for a
// committed stream, fails naming the stream and both counts; a permanent
// error or the last retry fails at once.
func TestFinalizeStream(t *testing.T) {
	const name = "projects/p/datasets/d/tables/t/streams/s1"
	cfg := writeConfig{MaxRetries: 3, RetryBase: time.Millisecond}
	pending := &storagepb.WriteStream{Name: name, Type: storagepb.WriteStream_PENDING}
	committed := &storagepb.WriteStream{Name: name, Type: storagepb.WriteStream_PENDING, CommitTime: timestamppb.New(time.Unix(5, 0))}
	for _, tc := range []struct {
		name    string
		answers []finalizeAnswer
		stream  *storagepb.WriteStream
		want    string // the error, or "" for success with 9 rows
		calls   int
	}{
		{"ok", []finalizeAnswer{{n: 9}}, nil, "", 1},
		{"internal", []finalizeAnswer{{err: status.Error(codes.Internal, "x")}, {n: 9}}, nil, "", 2},
		{"every transient code", []finalizeAnswer{{err: status.Error(codes.Unavailable, "x")}, {err: status.Error(codes.Aborted, "x")},
			{err: status.Error(codes.ResourceExhausted, "x")}, {n: 9}}, nil, "", 4},
		{"deadline, unknown", []finalizeAnswer{{err: status.Error(codes.DeadlineExceeded, "x")}, {err: status.Error(codes.Unknown, "x")}, {n: 9}}, nil, "", 3},
		{"already finalized", []finalizeAnswer{{err: status.Error(codes.Internal, "x")}, {err: streamFinalizedErr(name)}}, pending, "", 2},
		{"already finalized and committed", []finalizeAnswer{{err: status.Error(codes.Unavailable, "x")}, {err: streamFinalizedErr(name)}}, committed,
			"bqwrite.Write to p.d.t: stream " + name + ", answered already finalized, is PENDING and committed at 1970-01-01 00:00:05 +0000 UTC: want the PENDING stream of the 9 rows appended, uncommitted", 2},
		{"count differs", []finalizeAnswer{{err: status.Error(codes.Internal, "x")}, {n: 7}}, nil,
			"bqwrite.Write to p.d.t: stream " + name + " finalized with 7 rows, 9 were appended", 2},
		{"finalized before the first attempt", []finalizeAnswer{{err: streamFinalizedErr(name)}}, pending,
			"bqwrite.Write to p.d.t: finalizing stream " + name + " of 9 appended rows (attempt 1): rpc error: code = InvalidArgument", 1},
		{"permanent", []finalizeAnswer{{err: status.Error(codes.PermissionDenied, "denied")}}, nil,
			"bqwrite.Write to p.d.t: finalizing stream " + name + " of 9 appended rows (attempt 1): rpc error: code = PermissionDenied desc = denied", 1},
		{"retries spent", []finalizeAnswer{{err: status.Error(codes.Internal, "a")}, {err: status.Error(codes.Internal, "b")},
			{err: status.Error(codes.Internal, "c")}, {err: status.Error(codes.Internal, "d")}, {n: 9}}, nil,
			"bqwrite.Write to p.d.t: finalizing stream " + name + " of 9 appended rows: 4 attempts: rpc error: code = Internal desc = d", 4},
	} {
		calls := 0
		finalize := func(ctx context.Context, opts ...gax.CallOption) (int64, error) {
			if len(opts) != 1 {
				t.Errorf("%s: finalize called with %d call options, want noRetry", tc.name, len(opts))
			}
			a := tc.answers[calls]
			calls++
			return a.n, a.err
		}
		get := func(ctx context.Context, req *storagepb.GetWriteStreamRequest, opts ...gax.CallOption) (*storagepb.WriteStream, error) {
			if tc.stream == nil || req.GetName() != name {
				t.Fatalf("%s: GetWriteStream(%v)", tc.name, req)
			}
			return tc.stream, nil
		}
		n, err := finalizeStream(context.Background(), cfg, "p.d.t", name, 9, finalize, get)
		switch {
		case tc.want == "" && (err != nil || n != 9):
			t.Errorf("%s: %d rows, %v; want 9", tc.name, n, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v\nwant %s", tc.name, err, tc.want)
		}
		if calls != tc.calls {
			t.Errorf("%s: %d finalize calls, want %d", tc.name, calls, tc.calls)
		}
	}
}
