// Package retry is the module's one rule of which errors a retry may cure
// and its one backoff between the attempts of a call. bigqueryio and
// datastoreio both use it; each package's doc lists, per RPC, whether it
// is retried and why.
//
// # The rule
//
// Transient judges an error by its gRPC code (found through wrapping, as
// status.FromError does), or for the REST calls by the HTTP status of a
// *googleapi.Error, and by whether the call is idempotent: whether sending
// it twice has the effect of sending it once (a read; an append at an
// offset, which the service refuses as ALREADY_EXISTS the second time; an
// upsert). The codes follow AIP-194 and what the BigQuery Storage and
// Datastore docs say of their RPCs:
//
//	code                 idempotent  not idempotent  why
//	UNAVAILABLE          retry       retry           the service did not take the request (AIP-194)
//	RESOURCE_EXHAUSTED   retry       retry           quota or throttling, refused before any effect; not gRPC's own message-size limit, which the same request meets again
//	ABORTED              retry       retry           a concurrency conflict, the request undone (Datastore commits)
//	DEADLINE_EXCEEDED    retry       no              the request may have taken effect after the deadline
//	INTERNAL             retry       no              the Storage and Datastore docs say retry; the effect is unknown
//	UNKNOWN              retry       no              a connection reset mid-call surfaces so; the effect is unknown
//	any other code       no          no              the request is wrong (INVALID_ARGUMENT, NOT_FOUND, ...) or the caller gave up (CANCELLED)
//
// HTTP statuses map as gRPC does: 429 is RESOURCE_EXHAUSTED, 500
// INTERNAL, 502 and 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED. A REST error's
// reason (the first of its errors, as cloud.google.com/go/bigquery's
// retryableError reads it), when it is one of these, decides before its
// status, whatever the status:
//
//	reason                 code                why
//	rateLimitExceeded      RESOURCE_EXHAUSTED  a short-term rate limit (BigQuery answers 403): refused before any effect; the official client retries it on every call
//	jobRateLimitExceeded   RESOURCE_EXHAUSTED  a rate limit of the jobs updating a table: refused before any effect; the official client retries it on job calls
//	backendError           UNAVAILABLE         the service unavailable for the moment (BigQuery answers 500, 503 or 504); the official client retries it on every call, tabledata.insertAll included
//	internalError          INTERNAL            the official client retries it only on job calls, made idempotent by their job id: the effect is unknown
//
// Other reasons (accessDenied, quotaExceeded: a quota of a day, which a
// retry does not outwait; notFound, invalid, ...) fall to the status,
// and a 403 carries no code: it is not transient.
//
// A dropped connection carries UNKNOWN: io.EOF or io.ErrUnexpectedEOF (an
// append's stream), a connection reset (syscall.ECONNRESET, or an error
// that says "connection reset by peer"), a connection closed under the
// call (net.ErrClosed, "use of closed network connection") and HTTP/2's
// "http2: stream closed" and "http2: client connection lost". The request
// may have been sent, and taken effect, before the connection went (a
// peer resets a connection whose request it has read as readily as one
// it has not): the effect is unknown, and only an idempotent call is
// retried (the official client retries these on every call; a call that
// is not idempotent here would apply twice). context.Canceled and
// context.DeadlineExceeded are never transient: the caller's context is
// done, and a retry would fail the same way. Any other error (a decoding
// error, nil) is not transient.
//
// # The backoff
//
// Backoff waits from Initial, growing Multiplier times each retry up to
// Max, each wait drawn at random in (0, cap] (full jitter, as gax's
// Backoff), for at most Retries retries after the first attempt; it
// returns at once when the context is done, and never waits after the
// last attempt.
//
// # The loop
//
// A call's retries are one loop: Start a Retrier, make the attempt, and
// give its error to Retrier.Retry, which waits and returns nil when the
// call is to be made again, or returns the call's error (*Error), in one
// of three shapes:
//
//	<what> (attempt <n>): <error>                          the error is not transient
//	<what>: <n> attempts: <last error>                      every retry was spent
//	<what>: after <n> attempts: <ctx error> (last error: <last error>)  the context was done during a wait
//
// Do is that loop for a call with nothing else to do between attempts.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Idempotency is whether sending a call twice has the effect of sending it
// once.
type Idempotency bool

const (
	// Idempotent calls are retried on every transient code.
	Idempotent Idempotency = true
	// NotIdempotent calls are retried only where the service did not act
	// on the request: UNAVAILABLE, RESOURCE_EXHAUSTED and ABORTED.
	NotIdempotent Idempotency = false
)

// Code is the gRPC code the rule judges err by, and whether err carries
// one (a gRPC status, an HTTP status of a *googleapi.Error, or a dropped
// connection). Context errors and other errors carry none.
func Code(err error) (codes.Code, bool) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return codes.OK, false
	}
	if st, ok := status.FromError(err); ok {
		return st.Code(), true
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		if len(ge.Errors) > 0 {
			if c, ok := reasonCodes[ge.Errors[0].Reason]; ok {
				return c, true
			}
		}
		switch ge.Code {
		case http.StatusTooManyRequests:
			return codes.ResourceExhausted, true
		case http.StatusInternalServerError:
			return codes.Internal, true
		case http.StatusBadGateway, http.StatusServiceUnavailable:
			return codes.Unavailable, true
		case http.StatusGatewayTimeout:
			return codes.DeadlineExceeded, true
		}
		return codes.Unknown, false
	}
	if dropped(err) {
		return codes.Unknown, true
	}
	return codes.Unknown, false
}

// reasonCodes are the REST errors' reasons the rule knows, and their codes
// (see the package doc).
var reasonCodes = map[string]codes.Code{
	"rateLimitExceeded":    codes.ResourceExhausted,
	"jobRateLimitExceeded": codes.ResourceExhausted,
	"backendError":         codes.Unavailable,
	"internalError":        codes.Internal,
}

// droppedTexts are what a dropped connection says where it does not wrap
// its cause (HTTP/2's errors are plain strings, and some transports flatten
// a reset into text).
var droppedTexts = []string{
	"connection reset by peer",
	"use of closed network connection",
	"http2: stream closed",
	"http2: client connection lost",
}

// dropped reports a connection lost under a call (see the package doc).
func dropped(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		return true
	}
	msg := err.Error()
	for _, t := range droppedTexts {
		if strings.Contains(msg, t) {
			return true
		}
	}
	return false
}

// Transient reports whether a retry of a call, idempotent or not, may cure
// err (see the package doc's table).
func Transient(err error, idem Idempotency) bool {
	code, ok := Code(err)
	if !ok {
		return false
	}
	switch code {
	case codes.Unavailable, codes.Aborted:
		return true
	case codes.ResourceExhausted:
		return !MessageTooLarge(err)
	case codes.DeadlineExceeded, codes.Internal, codes.Unknown:
		return bool(idem)
	}
	return false
}

// MessageTooLarge reports gRPC's refusal of a request or response over its
// size limit ("grpc: received message larger than max (5000000 vs.
// 4194304)", "trying to send message larger than max"): RESOURCE_EXHAUSTED,
// but the same request meets it again.
func MessageTooLarge(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}

// Backoff is the waits between the attempts of one call: at most Retries
// retries after the first attempt, the first wait drawn up to Initial, each
// cap Multiplier times the last, at most Max. An Initial of 0 retries
// without waiting. Sleep, when set, waits instead of a timer (a package's
// own clock); it must return ctx's error when ctx is done.
type Backoff struct {
	Retries    int
	Initial    time.Duration
	Max        time.Duration
	Multiplier float64
	Sleep      func(ctx context.Context, d time.Duration) error
}

// ErrExhausted is what Retrier.Wait returns when every retry is spent.
var ErrExhausted = errors.New("retries exhausted")

// Retrier runs one call's retries by a Backoff: Wait before each retry.
type Retrier struct {
	b       Backoff
	retries int
	cap     time.Duration
	rand    func(n int64) int64
}

// Start begins the retries of one call.
func (b Backoff) Start() *Retrier {
	return &Retrier{b: b, rand: rand.Int64N}
}

// Retries is how many retries Wait has allowed so far.
func (r *Retrier) Retries() int { return r.retries }

// Attempts is how many attempts were made, the first included, once the
// attempt after the last Wait has run.
func (r *Retrier) Attempts() int { return r.retries + 1 }

// Reset starts the waits and the count anew (after a call made progress,
// as a read that received rows).
func (r *Retrier) Reset() { r.retries, r.cap = 0, 0 }

// Wait waits before the next retry and counts it. It returns ErrExhausted,
// without waiting, when Retries retries were made, and ctx's error (at
// once) when ctx is done.
func (r *Retrier) Wait(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.retries >= r.b.Retries {
		return ErrExhausted
	}
	r.retries++
	d := r.next()
	if d <= 0 {
		return nil
	}
	if r.b.Sleep != nil {
		return r.b.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

// Sleep waits d, or until ctx is done (its error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next is the next wait: drawn in (0, cap], cap growing from Initial.
func (r *Retrier) next() time.Duration {
	if r.b.Initial <= 0 {
		return 0
	}
	switch {
	case r.cap == 0:
		r.cap = r.b.Initial
	default:
		m := r.b.Multiplier
		if m < 1 {
			m = 1
		}
		r.cap = time.Duration(float64(r.cap) * m)
	}
	if mx := max(r.b.Max, r.b.Initial); r.cap > mx || r.cap <= 0 {
		r.cap = mx
	}
	return time.Duration(1 + r.rand(int64(r.cap)))
}

// Retry ends the attempt that failed with err, which transient says a
// retry may cure (the rule's Transient, or a package's own judgement):
// then it waits before the next attempt and returns nil, and the caller
// makes the attempt again. Otherwise it returns the error the call fails
// with, an *Error naming what (the call and its subject) and the attempts
// made: err not transient; every retry spent; ctx done during the wait.
func (r *Retrier) Retry(ctx context.Context, err error, transient bool, what string) error {
	if !transient {
		return &Error{What: what, Attempts: r.Attempts(), Err: err}
	}
	if werr := r.Wait(ctx); werr != nil {
		e := &Error{What: what, Attempts: r.Attempts(), Err: err, Exhausted: true}
		if !errors.Is(werr, ErrExhausted) {
			e.Exhausted, e.Stopped = false, werr
		}
		return e
	}
	return nil
}

// Error is a call's failure, as Retrier.Retry returns it: the last
// attempt's error Err, not transient (Exhausted false, Stopped nil), or
// transient with every retry spent (Exhausted), or transient and cut
// short by the context's error Stopped during the wait.
type Error struct {
	What      string
	Attempts  int
	Err       error
	Exhausted bool
	Stopped   error
}

// Error is "<what> (attempt <n>): <err>", "<what>: <n> attempts: <err>",
// or "<what>: after <n> attempts: <ctx error> (last error: <err>)".
func (e *Error) Error() string {
	if e.Stopped != nil {
		return e.Doing() + " (last error: " + e.Err.Error() + ")"
	}
	return e.Doing() + ": " + e.Err.Error()
}

// Doing is the error without the last attempt's error, for an error that
// puts the cause first: "<what> (attempt <n>)", "<what>: <n> attempts",
// or "<what>: after <n> attempts: <ctx error>".
func (e *Error) Doing() string {
	switch {
	case e.Stopped != nil:
		return fmt.Sprintf("%s: after %d attempts: %v", e.What, e.Attempts, e.Stopped)
	case e.Exhausted:
		return fmt.Sprintf("%s: %d attempts", e.What, e.Attempts)
	}
	return fmt.Sprintf("%s (attempt %d)", e.What, e.Attempts)
}

// Unwrap is the context's error when it stopped the retries, else the
// last attempt's error.
func (e *Error) Unwrap() error {
	if e.Stopped != nil {
		return e.Stopped
	}
	return e.Err
}

// Do runs call until it succeeds, fails with an error the rule does not
// call transient for idem, or the retries are spent, waiting by b between
// attempts: Retrier.Retry's loop, its error an *Error.
func Do(ctx context.Context, b Backoff, idem Idempotency, what string, call func(context.Context) error) error {
	r := b.Start()
	for {
		err := call(ctx)
		if err == nil {
			return nil
		}
		if err := r.Retry(ctx, err, Transient(err, idem), what); err != nil {
			return err
		}
	}
}
