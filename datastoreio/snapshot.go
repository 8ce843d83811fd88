package datastoreio

import (
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clock, when set, is a test's fake clock for the snapshot read at one read
// time: reads of other snapshots running meanwhile (in other tests of the
// process) keep the real time.
var clock atomic.Pointer[snapshotClock]

type snapshotClock struct {
	at  time.Time
	now func() time.Time
}

// now is the time a snapshot read at `at` checks its snapshot's age
// against: time.Now, or the fake clock set for that snapshot.
func now(at time.Time) time.Time {
	if c := clock.Load(); c != nil && c.at.Equal(at) {
		return c.now()
	}
	return time.Now()
}

// snapshot is the read time of a snapshot read and what its expiry check
// needs: how long the database keeps versions and the option call that
// made the read a snapshot read (for messages). A zero at reads the latest
// data and never expires.
type snapshot struct {
	at        time.Time
	retention time.Duration
	option    string
}

func (r Range) snapshot() snapshot {
	ret := r.Retention
	if ret <= 0 {
		ret = DefaultVersionRetention
	}
	return snapshot{at: r.ReadTime(), retention: ret, option: r.SnapshotOption}
}

// check refuses a query of the snapshot at t when the snapshot is then
// older than its retention less SnapshotMargin: the service would refuse
// it, or the next page, and the read fails here instead, naming the options
// that fix it.
func (s snapshot) check(t time.Time) error {
	if s.at.IsZero() || t.Before(s.at.Add(s.retention-SnapshotMargin)) {
		return nil
	}
	return fmt.Errorf("the snapshot at %s (%s) is %v old at %s, and the database keeps old versions for %v "+
		"(WithVersionRetention; an hour unless point-in-time recovery is on): its queries fail from %s, so the read stops %v before; "+
		"leave %s out to read the latest data (the default, which never expires), or, with point-in-time recovery on, give WithVersionRetention(7*24*time.Hour)",
		stamp(s.at), s.option, t.Sub(s.at).Round(time.Second), stamp(t), s.retention,
		stamp(s.at.Add(s.retention)), SnapshotMargin, s.option)
}

// refusal explains err, a query of the snapshot refused at t, when it may
// be the service refusing a snapshot it no longer keeps: a snapshot older
// than DefaultVersionRetention less SnapshotMargin (the check passed, so
// WithVersionRetention promised more) refused with FAILED_PRECONDITION,
// INVALID_ARGUMENT or OUT_OF_RANGE. It returns "" otherwise.
func (s snapshot) refusal(err error, t time.Time) string {
	if s.at.IsZero() || t.Before(s.at.Add(DefaultVersionRetention-SnapshotMargin)) {
		return ""
	}
	switch status.Code(err) {
	case codes.FailedPrecondition, codes.InvalidArgument, codes.OutOfRange:
	default:
		return ""
	}
	return fmt.Sprintf(" (the snapshot at %s (%s) is %v old: if the database no longer keeps it, %s is more than its point-in-time recovery keeps; "+
		"leave %s out to read the latest data)", stamp(s.at), s.option, t.Sub(s.at).Round(time.Second), retentionCall(s.retention), s.option)
}

func retentionCall(d time.Duration) string { return fmt.Sprintf("WithVersionRetention(%v)", d) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// describe names the snapshot a read reads, and until when, for the plan's
// log.
func (s snapshot) describe() string {
	if s.at.IsZero() {
		return "reading the latest data"
	}
	return fmt.Sprintf("reading the snapshot at %s (%s), which must be read by %s (%s less SnapshotMargin)",
		stamp(s.at), s.option, stamp(s.at.Add(s.retention-SnapshotMargin)), retentionCall(s.retention))
}
