package datastoreio_test

import (
	"context"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/internal/logtest"
)

// The tests of this file model Cloud Datastore's refusal of a snapshot it
// no longer keeps in the hook (keep, ahead: the emulator reads any read
// time, days old, as the latest data), and a read that has run for a long
// time with the fake clocks of the hook's service and of datastoreio.

// readsAt returns the read times the hook saw, the requests without one
// and the requests it refused as expired.
func readsAt() (times []time.Time, noTime, refused int) {
	hook.mu.Lock()
	defer hook.mu.Unlock()
	return append([]time.Time(nil), hook.readTimes...), hook.noTime, hook.refused
}

// TestLongReadLatestByDefault: a read planned, then read after the service
// has moved on more than the hour it keeps old versions, reads every
// entity, because by default no query carries a read time. (Before: the
// plan fixed a snapshot, and every query of the ranges was refused as too
// old: a read longer than an hour failed at its end.)
func TestLongReadLatestByDefault(t *testing.T) {
	project := loadMedium(t)
	hook.reset()
	l := logtest.Capture(t)
	hook.set(func(h *hookState) { h.keep = time.Hour })
	ctx := context.Background()
	q := datastoreio.NewQuery("Item")
	ranges, err := datastoreio.Plan(ctx, project, q, datastoreio.WithNamespace(medium.ns),
		datastoreio.WithNumQuerySplits(4), datastoreio.WithKeysPerSplit(1), datastoreio.WithClientOptions("hook"))
	if err != nil {
		t.Fatal(err)
	}
	l.Has(t, "datastoreio: planned the read of kind Item", "reading the latest data")
	hook.set(func(h *hookState) { h.ahead = time.Hour + time.Minute }) // the read has run for an hour
	got := readAll(t, ranges)
	sameMultiset(t, "read of the latest data after an hour", ids(got), ids(medium.items))
	times, noTime, refused := readsAt()
	if len(times) != 0 || refused != 0 || noTime == 0 {
		t.Errorf("%d queries carried a read time (%v), %d were refused, %d carried none; want none, none, all", len(times), head2(times), refused, noTime)
	}
	for _, r := range ranges {
		if !r.ReadTime().IsZero() {
			t.Errorf("range %d reads at %v, want the latest data", r.Index, r.ReadTime())
		}
	}
}

// TestLongReadLatestByDefaultPipeline is TestLongReadLatestByDefault on
// Prism: the service keeps versions an hour and its clock is an hour and a
// minute ahead from the start, so any snapshot the read fixed would be
// refused; the default read reads all 1,000 entities. (Before: the
// pipeline failed.)
func TestLongReadLatestByDefaultPipeline(t *testing.T) {
	project := loadMedium(t)
	hook.reset()
	hook.set(func(h *hookState) { h.keep, h.ahead = time.Hour, time.Hour+time.Minute })
	p, s := beam.NewPipelineWithRoot()
	items := datastoreio.Read(s, project, datastoreio.NewQuery("Item"), reflect.TypeFor[item](),
		datastoreio.WithNamespace(medium.ns), datastoreio.WithNumQuerySplits(4), datastoreio.WithClientOptions("hook"))
	passert.Equals(s, beam.ParDo(s, itemID, items), anySlice(ids(medium.items))...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	if times, _, refused := readsAt(); len(times) != 0 || refused != 0 {
		t.Errorf("%d queries carried a read time, %d were refused; want none", len(times), refused)
	}
}

// planMedium plans the read of the medium data set in splits initial
// splits through the hook, whose service keeps versions for keep, with
// opts.
func planMedium(t *testing.T, keep time.Duration, splits int, opts ...datastoreio.ReadOption) []datastoreio.Range {
	t.Helper()
	project := loadMedium(t)
	hook.reset()
	hook.set(func(h *hookState) { h.keep = keep })
	ranges, err := datastoreio.Plan(context.Background(), project, datastoreio.NewQuery("Item"), append([]datastoreio.ReadOption{
		datastoreio.WithNamespace(medium.ns), datastoreio.WithNumQuerySplits(splits), datastoreio.WithKeysPerSplit(1),
		datastoreio.WithClientOptions("hook")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return ranges
}

// readAll reads every range with a RangeReader, failing t on an error.
func readAll(t *testing.T, ranges []datastoreio.Range) []item {
	t.Helper()
	got, err := readEach(ranges, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// readEach reads the ranges in order with RangeReaders, calling before(i)
// before range i when it is not nil, and stops at the first error.
func readEach(ranges []datastoreio.Range, before func(i int)) ([]item, error) {
	ctx := context.Background()
	var out []item
	for i, r := range ranges {
		if before != nil {
			before(i)
		}
		rr, err := datastoreio.NewRangeReader(ctx, r)
		if err != nil {
			return out, err
		}
		err = rr.Read(ctx, r, datastoreio.NewKeyRangeTracker(r.Restriction()).Tracker, reflect.TypeFor[item](), func(v any) { out = append(out, v.(item)) })
		rr.Close()
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

func head2(ts []time.Time) []time.Time {
	if len(ts) > 2 {
		return ts[:2]
	}
	return ts
}

// containsAll fails t unless err says every string of want.
func containsAll(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// TestSnapshotExpiryDetected: a WithSnapshot read whose snapshot is a
// minute from expiring stops before its next query is sent, naming the
// snapshot, its age, the sub-range and the options that fix it; a minute
// and a second before, it still reads.
func TestSnapshotExpiryDetected(t *testing.T) {
	ranges := planMedium(t, time.Hour, 4, datastoreio.WithSnapshot())
	if len(ranges) < 2 {
		t.Fatalf("%d ranges, want at least 2", len(ranges))
	}
	at := ranges[0].ReadTime()
	if at.IsZero() {
		t.Fatal("WithSnapshot planned no read time")
	}
	var fake atomic.Int64 // UnixNano of the fake clock
	defer datastoreio.SetClock(at, func() time.Time { return time.Unix(0, fake.Load()) })()
	got, err := readEach(ranges, func(i int) {
		// Range 0 is read 59m59s after the snapshot, the others 59m after.
		age := datastoreio.DefaultVersionRetention - datastoreio.SnapshotMargin - time.Second
		if i > 0 {
			age += time.Second
		}
		fake.Store(at.Add(age).UnixNano())
		hook.set(func(h *hookState) { h.ahead = age })
	})
	containsAll(t, err, "sub-range 0 ", "of split 2/", "the snapshot at "+at.Format(time.RFC3339Nano)+" (WithSnapshot()) is 59m0s old",
		"keeps old versions for 1h0m0s (WithVersionRetention", "leave WithSnapshot() out to read the latest data",
		"WithVersionRetention(7*24*time.Hour)")
	if len(got) == 0 || len(got) >= len(medium.items) {
		t.Errorf("read %d entities before the failure, want range 0's, some but not all", len(got))
	}
	if _, _, refused := readsAt(); refused != 0 {
		t.Errorf("the service refused %d queries: the read should have stopped before it sent one", refused)
	}
}

// TestReadTimeExpiredAtStart: a WithReadTime older than the retention less
// the margin fails when the read starts, before any query, naming the
// option; with WithVersionRetention of point-in-time recovery the same
// read time (a whole minute) is read.
func TestReadTimeExpiredAtStart(t *testing.T) {
	project := loadMedium(t)
	hook.reset()
	old := time.Now().Add(-2 * time.Hour).Truncate(time.Minute)
	_, err := datastoreio.Plan(context.Background(), project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(medium.ns),
		datastoreio.WithClientOptions("hook"), datastoreio.WithReadTime(old))
	containsAll(t, err, "the read of kind Item", "(WithReadTime("+old.Format(time.RFC3339Nano)+"))", "leave WithReadTime(")
	hook.mu.Lock()
	calls := hook.calls
	hook.mu.Unlock()
	if calls != 0 {
		t.Errorf("%d queries sent, want none before the read time is checked", calls)
	}

	hook.set(func(h *hookState) { h.keep = 7 * 24 * time.Hour })
	ranges, err := datastoreio.Plan(context.Background(), project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(medium.ns),
		datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(1), datastoreio.WithClientOptions("hook"),
		datastoreio.WithReadTime(old), datastoreio.WithVersionRetention(7*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	sameMultiset(t, "point-in-time read", ids(readAll(t, ranges)), ids(medium.items))
}

// TestSnapshotPointInTimeRecovery: WithSnapshot with a retention of seven
// days takes its snapshot at a whole minute and reads it two hours later.
func TestSnapshotPointInTimeRecovery(t *testing.T) {
	ranges := planMedium(t, 7*24*time.Hour, 2,
		datastoreio.WithSnapshot(), datastoreio.WithVersionRetention(7*24*time.Hour))
	at := ranges[0].ReadTime()
	if at.IsZero() || !at.Equal(at.Truncate(time.Minute)) || time.Since(at) > 2*time.Minute {
		t.Fatalf("snapshot at %v, want the last whole minute", at)
	}
	defer datastoreio.SetClock(at, func() time.Time { return at.Add(2 * time.Hour) })()
	hook.set(func(h *hookState) { h.ahead = 2 * time.Hour })
	sameMultiset(t, "point-in-time snapshot read two hours later", ids(readAll(t, ranges)), ids(medium.items))
	times, _, refused := readsAt()
	if len(times) == 0 || refused != 0 {
		t.Errorf("%d queries at the snapshot, %d refused; want some, none", len(times), refused)
	}
	for _, rt := range times {
		if !rt.Equal(at) {
			t.Fatalf("a query read at %v, want %v", rt, at)
		}
	}
}

// TestSnapshotRefusedNamesOptions: a WithVersionRetention longer than the
// database keeps (no point-in-time recovery) passes the read's own check,
// and the service's refusal comes back naming the snapshot, the retention
// given and the option to leave out.
func TestSnapshotRefusedNamesOptions(t *testing.T) {
	ranges := planMedium(t, time.Hour, 2,
		datastoreio.WithSnapshot(), datastoreio.WithVersionRetention(2*time.Hour))
	at := ranges[0].ReadTime()
	defer datastoreio.SetClock(at, func() time.Time { return at.Add(time.Hour + time.Minute) })()
	hook.set(func(h *hookState) { h.ahead = time.Hour + time.Minute })
	_, err := readEach(ranges, nil)
	containsAll(t, err, "(FailedPrecondition)", "is 1h1m0s old: if the database no longer keeps it, WithVersionRetention(2h0m0s) is more than",
		"leave WithSnapshot() out to read the latest data", "too old")
	if _, _, refused := readsAt(); refused != 1 {
		t.Errorf("the service refused %d queries, want 1 (not retried)", refused)
	}
}
