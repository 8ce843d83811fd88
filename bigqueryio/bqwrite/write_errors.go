package bqwrite

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/internal/retry"
)

// What the write does with the Storage Write API's answers, in every mode
// (bounded, at least once, streaming):
//   - row_errors: the rows named are refused (FailedRows, or the write
//     fails WithFailOnRowErrors), the others are appended again. Rows that
//     cannot be encoded in the table's schema are refused the same way
//     before they are sent. Nothing else ever goes to FailedRows.
//   - the transient codes of internal/retry's rule: the call again, after
//     a backoff, up to WithRetries.
//   - NOT_FOUND and PERMISSION_DENIED about the table (not about a stream),
//     while the table is new (made less than DefaultTableSettle ago, as
//     tables.get's creationTime says): the service answers so for a while
//     after a table is made (CreateIfNeeded) and while a new grant
//     propagates. The call again, after the write's backoff, uncounted,
//     until the table is that old.
//   - anything else (PERMISSION_DENIED and NOT_FOUND of a table that is
//     not new, INVALID_ARGUMENT without row_errors, a code the write does
//     not know): the write fails, its error naming the table, the stream
//     and offset, the code and the service's message first.

// DefaultTableSettle is how long after a table is made the write takes
// the Storage Write API's NOT_FOUND and PERMISSION_DENIED answers about it
// for transient (see docs/BIGQUERY.md, "Errors").
const DefaultTableSettle = 2 * time.Minute

// writeError is an error that ends a write: its text puts the cause
// first (the table, the stream and offset, the service's code and
// message), then what the write was doing; it wraps the service's error,
// whose text it does not repeat.
type writeError struct {
	text string
	err  error
}

func (e *writeError) Error() string { return e.text }
func (e *writeError) Unwrap() error { return e.err }

// serviceError is the error of a call about table spec that the service
// answered err: "bqwrite.Write to <spec>: stream <stream> at offset
// <offset>: <CODE>: <message> (<doing>)". stream "" and offset < 0 are
// left out.
func serviceError(spec, stream string, offset int64, err error, doing string) error {
	var b strings.Builder
	b.WriteString("bqwrite.Write to ")
	b.WriteString(spec)
	if stream != "" {
		b.WriteString(": stream ")
		b.WriteString(stream)
		if offset >= 0 {
			b.WriteString(" at offset ")
			b.WriteString(strconv.FormatInt(offset, 10))
		}
	}
	b.WriteString(": ")
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
		b.WriteString(codeName(st.Code()))
		if sc := storageCode(err); sc != 0 {
			b.WriteString(" (")
			b.WriteString(sc.String())
			b.WriteString(")")
		}
		b.WriteString(": ")
		b.WriteString(st.Message())
	} else {
		b.WriteString(err.Error())
	}
	if doing != "" {
		b.WriteString(" (")
		b.WriteString(doing)
		b.WriteString(")")
	}
	return &writeError{text: b.String(), err: err}
}

// codeName is a gRPC code as the API docs spell it: PERMISSION_DENIED.
func codeName(c codes.Code) string {
	s := c.String()
	if !strings.ContainsFunc(s, unicode.IsLower) {
		return s // OK, or Code(n)
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// settleCode reports the answers a new table may get for a while: NOT_FOUND
// and PERMISSION_DENIED about the table, not about a stream.
func settleCode(err error) bool {
	st, ok := status.FromError(err)
	if !ok || storageCode(err) == storagepb.StorageError_STREAM_NOT_FOUND {
		return false
	}
	return st.Code() == codes.NotFound || st.Code() == codes.PermissionDenied
}

// settler waits out the NOT_FOUND and PERMISSION_DENIED answers of a call
// about a table while the table is new (see DefaultTableSettle). One
// settler serves one call's attempts.
type settler struct {
	cfg   writeConfig
	res   string    // the table's resource name
	until time.Time // when the table is no longer new; zero before it was read
	read  bool
	why   string // why the answer was not waited out, for the error
	r     *retry.Retrier
}

func newSettler(cfg writeConfig, res string) *settler {
	base, _ := splitDecorator(res)
	return &settler{cfg: cfg, res: base}
}

// wait reports whether err is an answer the table's youth explains, and
// then waits (the write's backoff) before the call is made again. It
// returns false, without waiting, for any other answer, once the table is
// no longer new, and when ctx is done.
func (s *settler) wait(ctx context.Context, err error) bool {
	if s == nil || !settleCode(err) {
		return false
	}
	if !s.read {
		s.read = true
		created, gerr := s.cfg.tableCreated(ctx, s.res)
		if gerr != nil {
			s.why = fmt.Sprintf("the table's creation time could not be read: %v", gerr)
			return false
		}
		s.until = created.Add(s.cfg.settle())
	}
	left := time.Until(s.until)
	if left <= 0 {
		s.why = fmt.Sprintf("the table was made over %v ago", s.cfg.settle())
		return false
	}
	if s.r == nil {
		s.r = retry.Backoff{Retries: math.MaxInt32, Initial: s.cfg.RetryBase, Max: 10 * time.Second, Multiplier: 2}.Start()
	}
	return s.r.Wait(ctx) == nil
}

// note is what the error of an answer not waited out says of the table's
// youth ("" when nothing was asked).
func (s *settler) note() string {
	if s == nil || s.why == "" {
		return ""
	}
	return "; not taken for the delay of a new table: " + s.why
}

// settle is how long a table stays new for the write.
func (cfg writeConfig) settle() time.Duration {
	if cfg.Settle > 0 {
		return cfg.Settle
	}
	return DefaultTableSettle
}

// tableCreated is when table res was made (tables.get's creationTime).
func (cfg writeConfig) tableCreated(ctx context.Context, res string) (time.Time, error) {
	c, err := cfg.rest(ctx, projectOf(res))
	if err != nil {
		return time.Time{}, err
	}
	defer c.Close()
	t, err := c.Table(res).Metadata(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if t.CreationTime.IsZero() {
		return time.Time{}, fmt.Errorf("tables.get answered no creationTime for %s", res)
	}
	return t.CreationTime, nil
}
