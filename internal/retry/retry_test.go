package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestTransient is the rule's table: every gRPC code, for an idempotent
// call and for one that is not.
func TestTransient(t *testing.T) {
	want := map[codes.Code][2]bool{ // {idempotent, not idempotent}
		codes.OK:                 {false, false},
		codes.Canceled:           {false, false},
		codes.Unknown:            {true, false},
		codes.InvalidArgument:    {false, false},
		codes.DeadlineExceeded:   {true, false},
		codes.NotFound:           {false, false},
		codes.AlreadyExists:      {false, false},
		codes.PermissionDenied:   {false, false},
		codes.ResourceExhausted:  {true, true},
		codes.FailedPrecondition: {false, false},
		codes.Aborted:            {true, true},
		codes.OutOfRange:         {false, false},
		codes.Unimplemented:      {false, false},
		codes.Internal:           {true, false},
		codes.Unavailable:        {true, true},
		codes.DataLoss:           {false, false},
		codes.Unauthenticated:    {false, false},
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		w, ok := want[c]
		if !ok {
			t.Fatalf("code %v missing from the table", c)
		}
		err := status.Error(c, "x")
		wrapped := fmt.Errorf("call: %w", err)
		for i, idem := range []Idempotency{Idempotent, NotIdempotent} {
			if got := Transient(err, idem); got != w[i] {
				t.Errorf("Transient(%v, idempotent=%v) = %v, want %v", c, idem, got, w[i])
			}
			if got := Transient(wrapped, idem); got != w[i] {
				t.Errorf("Transient(wrapped %v, idempotent=%v) = %v, want %v", c, idem, got, w[i])
			}
		}
	}
}

func TestTransientOtherErrors(t *testing.T) {
	for _, c := range []struct {
		err       error
		idem, not bool
	}{
		{nil, false, false},
		{errors.New("decoding row 3"), false, false}, // status.Code calls it UNKNOWN: not a gRPC error
		{context.Canceled, false, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false, false},
		{io.EOF, true, false},
		{fmt.Errorf("recv: %w", io.ErrUnexpectedEOF), true, false},
		{status.Error(codes.ResourceExhausted, "grpc: received message larger than max (5000000 vs. 4194304)"), false, false},
		{status.Error(codes.ResourceExhausted, "Quota exceeded"), true, true},
		{&googleapi.Error{Code: http.StatusTooManyRequests}, true, true},
		{&googleapi.Error{Code: http.StatusInternalServerError}, true, false},
		{&googleapi.Error{Code: http.StatusBadGateway}, true, true},
		{&googleapi.Error{Code: http.StatusServiceUnavailable}, true, true},
		{fmt.Errorf("copy: %w", &googleapi.Error{Code: http.StatusGatewayTimeout}), true, false},
		{&googleapi.Error{Code: http.StatusNotFound}, false, false},
		{&googleapi.Error{Code: http.StatusBadRequest}, false, false},
		{&googleapi.Error{Code: http.StatusForbidden}, false, false},
	} {
		if got := Transient(c.err, Idempotent); got != c.idem {
			t.Errorf("Transient(%v, Idempotent) = %v, want %v", c.err, got, c.idem)
		}
		if got := Transient(c.err, NotIdempotent); got != c.not {
			t.Errorf("Transient(%v, NotIdempotent) = %v, want %v", c.err, got, c.not)
		}
	}
}

// reasonErr is a REST error of BigQuery: status code, first reason reason.
func reasonErr(code int, reason string) error {
	return fmt.Errorf("GET projects/p/datasets/d/tables/t: %w", &googleapi.Error{Code: code, Message: "m",
		Errors: []googleapi.ErrorItem{{Reason: reason, Message: "m"}}})
}

// TestReasons: the REST reasons the official BigQuery client retries
// (cloud.google.com/go/bigquery's retryableError), each to its code, and
// others left to the status. The rule before them judged by the status
// alone: a 403 was never transient, a 500 backendError not for a call
// that is not idempotent.
func TestReasons(t *testing.T) {
	for _, c := range []struct {
		err       error
		code      codes.Code
		carries   bool
		idem, not bool
	}{
		{reasonErr(http.StatusForbidden, "rateLimitExceeded"), codes.ResourceExhausted, true, true, true},
		{reasonErr(http.StatusForbidden, "jobRateLimitExceeded"), codes.ResourceExhausted, true, true, true},
		{reasonErr(http.StatusTooManyRequests, "rateLimitExceeded"), codes.ResourceExhausted, true, true, true},
		{reasonErr(http.StatusInternalServerError, "backendError"), codes.Unavailable, true, true, true},
		{reasonErr(http.StatusServiceUnavailable, "backendError"), codes.Unavailable, true, true, true},
		{reasonErr(http.StatusInternalServerError, "internalError"), codes.Internal, true, true, false},
		// Not the official client's reasons: the status decides.
		{reasonErr(http.StatusForbidden, "accessDenied"), codes.Unknown, false, false, false},
		{reasonErr(http.StatusForbidden, "quotaExceeded"), codes.Unknown, false, false, false},
		{reasonErr(http.StatusForbidden, "billingNotEnabled"), codes.Unknown, false, false, false},
		{reasonErr(http.StatusNotFound, "notFound"), codes.Unknown, false, false, false},
		{reasonErr(http.StatusServiceUnavailable, "unavailable"), codes.Unavailable, true, true, true},
		// The first reason decides, as the official client reads it.
		{&googleapi.Error{Code: http.StatusForbidden, Errors: []googleapi.ErrorItem{{Reason: "accessDenied"}, {Reason: "rateLimitExceeded"}}}, codes.Unknown, false, false, false},
	} {
		code, ok := Code(c.err)
		if code != c.code || ok != c.carries {
			t.Errorf("Code(%v) = %v, %v; want %v, %v", c.err, code, ok, c.code, c.carries)
		}
		if got := Transient(c.err, Idempotent); got != c.idem {
			t.Errorf("Transient(%v, Idempotent) = %v, want %v", c.err, got, c.idem)
		}
		if got := Transient(c.err, NotIdempotent); got != c.not {
			t.Errorf("Transient(%v, NotIdempotent) = %v, want %v", c.err, got, c.not)
		}
	}
}

// TestDroppedConnection: a connection reset, closed or lost under a call
// is UNKNOWN, retried only when the call is idempotent (the request may
// have taken effect). The rule before knew only io.EOF.
func TestDroppedConnection(t *testing.T) {
	reset := &url.Error{Op: "Post", URL: "https://bigquery.googleapis.com/bigquery/v2/projects/p/jobs",
		Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	for _, err := range []error{
		reset,
		fmt.Errorf("jobs.insert: %w", reset),
		errors.New("read tcp 10.0.0.1:443: read: connection reset by peer"),
		&net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed},
		errors.New("http2: stream closed"),
		fmt.Errorf("GET: %w", errors.New("http2: client connection lost")),
	} {
		if code, ok := Code(err); code != codes.Unknown || !ok {
			t.Errorf("Code(%v) = %v, %v; want Unknown, true", err, code, ok)
		}
		if !Transient(err, Idempotent) || Transient(err, NotIdempotent) {
			t.Errorf("Transient(%v) = %v idempotent, %v not; want true, false", err, Transient(err, Idempotent), Transient(err, NotIdempotent))
		}
	}
	// A gRPC status decides before the text it carries.
	if err := status.Error(codes.InvalidArgument, "connection reset by peer"); Transient(err, Idempotent) {
		t.Errorf("Transient(%v) = true", err)
	}
}

// TestRetry: Retrier.Retry's three ends and their shapes.
func TestRetry(t *testing.T) {
	ctx := context.Background()
	down := status.Error(codes.Unavailable, "down")
	r := Backoff{Retries: 2}.Start()
	for i := 0; i < 2; i++ {
		if err := r.Retry(ctx, down, true, "x"); err != nil {
			t.Fatalf("retry %d: %v", i, err)
		}
	}
	err := r.Retry(ctx, down, true, "Commit of k")
	var e *Error
	if !errors.As(err, &e) || !e.Exhausted || e.Attempts != 3 || status.Code(err) != codes.Unavailable ||
		err.Error() != "Commit of k: 3 attempts: rpc error: code = Unavailable desc = down" || e.Doing() != "Commit of k: 3 attempts" {
		t.Errorf("retries spent: %#v, %v", e, err)
	}
	err = Backoff{Retries: 2}.Start().Retry(ctx, down, false, "Commit of k")
	if err.Error() != "Commit of k (attempt 1): rpc error: code = Unavailable desc = down" || status.Code(err) != codes.Unavailable || err.(*Error).Exhausted {
		t.Errorf("not transient: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	err = Backoff{Retries: 2}.Start().Retry(cctx, down, true, "Commit of k")
	if !errors.Is(err, context.Canceled) || err.(*Error).Stopped == nil ||
		err.Error() != "Commit of k: after 1 attempts: context canceled (last error: rpc error: code = Unavailable desc = down)" {
		t.Errorf("cancelled: %v", err)
	}
}

// TestBackoffBounded: Retries retries, then ErrExhausted without a wait;
// each wait within (0, cap], the cap growing by Multiplier up to Max.
func TestBackoffBounded(t *testing.T) {
	b := Backoff{Retries: 5, Initial: 10 * time.Millisecond, Max: 35 * time.Millisecond, Multiplier: 2}
	r := b.Start()
	var caps []time.Duration
	r.rand = func(n int64) int64 { caps = append(caps, time.Duration(n)); return n - 1 } // the longest wait
	for i := 0; i < 5; i++ {
		if err := r.Wait(context.Background()); err != nil {
			t.Fatalf("Wait %d: %v", i, err)
		}
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 35 * time.Millisecond, 35 * time.Millisecond}
	if fmt.Sprint(caps) != fmt.Sprint(want) {
		t.Errorf("caps = %v, want %v", caps, want)
	}
	start := time.Now()
	if err := r.Wait(context.Background()); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Wait after the last retry = %v, want ErrExhausted", err)
	}
	if d := time.Since(start); d > 5*time.Millisecond {
		t.Errorf("Wait after the last retry took %v, want no wait", d)
	}
	if r.Attempts() != 6 || len(caps) != 5 {
		t.Errorf("Attempts = %d, waits drawn = %d, want 6 and 5", r.Attempts(), len(caps))
	}
}

func TestBackoffJitter(t *testing.T) {
	b := Backoff{Retries: 1000, Initial: 8, Max: 64, Multiplier: 2}
	r := b.Start()
	seen := map[time.Duration]bool{}
	for i := 0; i < 1000; i++ {
		capBefore := r.cap
		d := r.next()
		cp := r.cap
		if want := min(max(capBefore*2, 8), 64); cp != want {
			t.Fatalf("cap %v after %v, want %v", cp, capBefore, want)
		}
		if d <= 0 || d > cp {
			t.Fatalf("wait %v outside (0, %v]", d, cp)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Errorf("%d distinct waits of 1000: no jitter", len(seen))
	}
}

func TestBackoffCancel(t *testing.T) {
	b := Backoff{Retries: 3, Initial: time.Hour, Max: time.Hour, Multiplier: 2}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	if err := b.Start().Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Wait returned after %v", d)
	}
	if err := b.Start().Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a done context = %v", err)
	}
}

func TestBackoffNoWait(t *testing.T) {
	r := Backoff{Retries: 2}.Start()
	for i := 0; i < 2; i++ {
		if err := r.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Wait(context.Background()); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Wait = %v", err)
	}
	r.Reset()
	if err := r.Wait(context.Background()); err != nil || r.Attempts() != 2 {
		t.Fatalf("after Reset: %v, %d attempts", err, r.Attempts())
	}
}

func TestDo(t *testing.T) {
	b := Backoff{Retries: 3}
	n := 0
	err := Do(context.Background(), b, NotIdempotent, "Commit of key k", func(context.Context) error {
		n++
		return status.Error(codes.DeadlineExceeded, "late")
	})
	if n != 1 || status.Code(err) != codes.DeadlineExceeded || err.Error() != "Commit of key k (attempt 1): rpc error: code = DeadlineExceeded desc = late" {
		t.Errorf("not idempotent DEADLINE_EXCEEDED: %d calls, %v", n, err)
	}
	n = 0
	err = Do(context.Background(), b, Idempotent, "RunQuery of range r", func(context.Context) error {
		n++
		return status.Error(codes.Unavailable, "down")
	})
	if n != 4 || status.Code(err) != codes.Unavailable || err.Error() != "RunQuery of range r: 4 attempts: rpc error: code = Unavailable desc = down" {
		t.Errorf("UNAVAILABLE throughout: %d calls, %v", n, err)
	}
	n = 0
	err = Do(context.Background(), b, Idempotent, "x", func(context.Context) error {
		if n++; n < 3 {
			return status.Error(codes.Unknown, "reset")
		}
		return nil
	})
	if n != 3 || err != nil {
		t.Errorf("UNKNOWN twice, then success: %d calls, %v", n, err)
	}
}
