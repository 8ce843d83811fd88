package filesource

// The watch's restriction, coder and tracker, and its DoFn driven the way
// Beam Go's runtime drives it (process, checkpoint on resume, resume the
// residual after a coder round trip) over a real directory, with an
// injected clock.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"

	"github.com/sdfio/sdfio/sdf"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

var watchEpoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func wf(path string) watchFile { return watchFile{Path: path, Size: int64(len(path))} }

func wfs(paths ...string) []watchFile {
	out := make([]watchFile, len(paths))
	for i, p := range paths {
		out[i] = wf(p)
	}
	return out
}

func paths(files []watchFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}

func claimAll(t *testing.T, rt *watchTracker) []string {
	t.Helper()
	var got []string
	for {
		f, ok := rt.nextPending()
		if !ok || !rt.TryClaim(f.Path) {
			return got
		}
		got = append(got, f.Path)
	}
}

// stablePoll polls twice with the same files, as two polls of files that
// did not change, and returns how many files became pending.
func stablePoll(rt *watchTracker, files []watchFile, now time.Time) int {
	rt.addPoll(files, now)
	return rt.addPoll(files, now).added
}

func seenKeys(seen []seenFile) []fileKey {
	out := make([]fileKey, len(seen))
	for i, s := range seen {
		out[i] = s.Key
	}
	return out
}

// mustPanic runs f and returns what it panicked with, failing t if it did
// not panic.
func mustPanic(t *testing.T, what string, f func()) (msg string) {
	t.Helper()
	defer func() {
		p := recover()
		if p == nil {
			t.Fatalf("%s did not panic", what)
		}
		msg = fmt.Sprint(p)
	}()
	f()
	return ""
}

func roundTrip(t *testing.T, r watchRestriction) watchRestriction {
	t.Helper()
	got, err := decodeWatchRestriction(encodeWatchRestriction(r))
	if err != nil {
		t.Fatalf("decoding %v: %v", r, err)
	}
	return got
}

func TestWatchRestrictionCoder(t *testing.T) {
	rs := []watchRestriction{
		{},
		{Start: watchEpoch.UnixNano(), Done: true},
		{
			Seen:     []seenFile{{Key: keyOf("/a/1.avro"), Size: 10, LastModified: 3}, {Key: keyOf("gs://b/2.avro")}},
			Unstable: []watchFile{{Path: "/a/5.avro", Size: 7, LastModified: 9}},
			Pending:  []watchFile{{Path: "/a/3.avro", Size: 123, LastModified: watchEpoch.UnixNano(), Found: watchEpoch.UnixNano() + 5}, {Path: "memfs://ü/ñ 4.avro", Size: 0, Found: -1}},
			Start:    watchEpoch.UnixNano(),
			LastNew:  watchEpoch.UnixNano() + 1e9,
		},
	}
	for _, r := range rs {
		if got := roundTrip(t, r); !reflect.DeepEqual(got, r) {
			t.Errorf("round trip of %v:\n got %#v\nwant %#v", r, got, r)
		}
	}

	// Beam picks the registered coder for the restriction type.
	if cc := coder.LookupCustomCoder(reflect.TypeFor[watchRestriction]()); cc == nil {
		t.Error("no custom coder registered for watchRestriction")
	}

	// Every truncation of an encoding, and trailing bytes, are errors.
	full := encodeWatchRestriction(rs[2])
	for n := 0; n < len(full); n++ {
		if _, err := decodeWatchRestriction(full[:n]); err == nil {
			t.Errorf("decoding the first %d of %d bytes: no error", n, len(full))
		}
	}
	if _, err := decodeWatchRestriction(append(full, 0)); err == nil {
		t.Error("decoding with a trailing byte: no error")
	}
	if _, err := decodeWatchRestriction([]byte{9}); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("decoding version 9: %v, want a version error", err)
	}
	// A count of 2^60 keys fails before allocating.
	hostile := []byte{watchRestrictionVersion, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10}
	if _, err := decodeWatchRestriction(hostile); err == nil || !strings.Contains(err.Error(), "a count of") {
		t.Errorf("decoding a count of 2^60: %v, want a count error", err)
	}
}

func TestWatchTrackerCheckpoint(t *testing.T) {
	clock := &fakeClock{t: watchEpoch}
	start := watchRestriction{Start: watchEpoch.UnixNano()}
	rt := newWatchTracker(start, termination{Total: -1, Idle: -1}, false, clock.Now)
	if rt.IsBounded() {
		t.Error("IsBounded() = true")
	}
	if !rt.shouldPoll() {
		t.Fatal("a new watch does not poll")
	}
	if n := stablePoll(rt, wfs("c", "a", "b", "a"), clock.Now()); n != 3 {
		t.Fatalf("addPoll found %d new files, want 3", n)
	}
	if rt.shouldPoll() {
		t.Error("shouldPoll with files pending")
	}
	if n := rt.addPoll(wfs("d"), clock.Now()).added; n != 0 {
		t.Errorf("addPoll while files are pending added %d", n)
	}
	if done, rem := rt.GetProgress(); done != 0 || rem != 4 {
		t.Errorf("progress = %v, %v; want 0, 4 (3 files and polling)", done, rem)
	}
	if !rt.TryClaim("a") {
		t.Fatal("claim of the first file refused")
	}
	// Only the checkpoint splits a watch.
	for _, f := range []float64{0.5, 0.01, 1} {
		if p, r, err := rt.TrySplit(f); r != nil || err != nil || !reflect.DeepEqual(p, start) {
			t.Errorf("TrySplit(%v) = %v, %v, %v; want refused", f, p, r, err)
		}
	}
	p, r, err := rt.TrySplit(0)
	if err != nil || r == nil {
		t.Fatalf("checkpoint refused: %v, %v", r, err)
	}
	prim, res := p.(watchRestriction), r.(watchRestriction)
	if !prim.Done || !slices.Equal(paths(prim.Pending), []string{"a"}) {
		t.Errorf("primary = %v %v, want done with pending [a]", prim, paths(prim.Pending))
	}
	if res.Done || !slices.Equal(paths(res.Pending), []string{"b", "c"}) || !slices.Equal(seenKeys(res.Seen), []fileKey{keyOf("a")}) {
		t.Errorf("residual = %v %v, want pending [b c], seen {a}, not done", res, paths(res.Pending))
	}
	if res.Start != start.Start || res.LastNew != watchEpoch.UnixNano() {
		t.Errorf("residual timing start %d last new %d, want %d %d", res.Start, res.LastNew, start.Start, watchEpoch.UnixNano())
	}
	if !rt.IsDone() || rt.TryClaim("b") || rt.GetError() != nil {
		t.Errorf("after the checkpoint: done %v, err %v; want done, claims refused", rt.IsDone(), rt.GetError())
	}
	if _, r, _ := rt.TrySplit(0); r != nil {
		t.Error("a second checkpoint succeeded")
	}
	if got := rt.GetRestriction().(watchRestriction); !reflect.DeepEqual(got, prim) {
		t.Errorf("GetRestriction after the checkpoint = %v, want the primary %v", got, prim)
	}
	if done, rem := rt.GetProgress(); done != 1 || rem != 0 {
		t.Errorf("progress after checkpoint = %v, %v; want 1, 0", done, rem)
	}

	// The residual emits its pending files before polling again, and then a
	// poll finds only what it never emitted.
	clock.Advance(time.Second)
	rt2 := newWatchTracker(roundTrip(t, res), termination{Total: -1, Idle: -1}, false, clock.Now)
	if rt2.shouldPoll() {
		t.Error("the residual polls before emitting its pending files")
	}
	if got := claimAll(t, rt2); !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("residual claimed %v, want [b c]", got)
	}
	if !rt2.shouldPoll() || !rt2.pollMore() {
		t.Fatal("the residual does not poll on")
	}
	// A file seen before with another size (rewritten) is not new without
	// matchUpdated: the change is reported, once.
	rewritten := watchFile{Path: "a", Size: 999, LastModified: 7}
	if st := rt2.addPoll(append(wfs("b", "d", "c"), rewritten), clock.Now()); !slices.Equal(st.ignored, []string{"a"}) || st.waiting != 1 {
		t.Errorf("first poll of the residual: %+v, want a ignored, d waiting", st)
	}
	if st := rt2.addPoll(append(wfs("b", "d", "c"), rewritten), clock.Now()); st.added != 1 || len(st.ignored) != 0 {
		t.Errorf("second poll: %+v, want 1 new file (d) and nothing ignored", st)
	}
	if got := claimAll(t, rt2); !slices.Equal(got, []string{"d"}) {
		t.Errorf("second poll claimed %v, want [d]", got)
	}
	_, r2, _ := rt2.TrySplit(0)
	res2 := r2.(watchRestriction)
	want := []fileKey{keyOf("a"), keyOf("b"), keyOf("c"), keyOf("d")}
	slices.SortFunc(want, func(a, b fileKey) int { return strings.Compare(string(a[:]), string(b[:])) })
	if !slices.Equal(seenKeys(res2.Seen), want) || len(res2.Pending) != 0 {
		t.Errorf("second residual seen %d keys, pending %v; want a b c d, none pending", len(res2.Seen), paths(res2.Pending))
	}
	if res2.LastNew != clock.Now().UnixNano() {
		t.Errorf("last new = %d, want the second poll %d", res2.LastNew, clock.Now().UnixNano())
	}

	// A checkpoint before anything was claimed is allowed: empty primary.
	rt3 := newWatchTracker(res2, termination{Total: -1, Idle: -1}, false, clock.Now)
	p3, r3, _ := rt3.TrySplit(0)
	if pr := p3.(watchRestriction); !pr.Done || len(pr.Pending) != 0 || !reflect.DeepEqual(r3, res2) {
		t.Errorf("checkpoint of an untouched tracker: primary %v, residual %v; want empty done, unchanged", p3, r3)
	}
	// Polls after a checkpoint are ignored: the residual polls itself.
	if n := rt3.addPoll(wfs("e"), clock.Now()).added; n != 0 || rt3.shouldPoll() {
		t.Errorf("poll after checkpoint added %d", n)
	}
}

func TestWatchTrackerErrors(t *testing.T) {
	never := termination{Total: -1, Idle: -1}
	rt := newWatchTracker(watchRestriction{Pending: wfs("x", "y")}, never, false, nil)
	if rt.TryClaim("y") || rt.GetError() == nil || !strings.Contains(rt.GetError().Error(), "next pending file is x") || !errors.Is(rt.GetError(), sdf.ErrClaimOrder) {
		t.Errorf("claim out of order: err %v, want one naming x and wrapping sdf.ErrClaimOrder", rt.GetError())
	}
	if rt.TryClaim("x") {
		t.Error("a failed tracker accepted a claim")
	}
	if rt.IsDone() {
		t.Error("a failed tracker is done")
	}
	if _, r, _ := rt.TrySplit(0); r != nil {
		t.Error("a failed tracker checkpointed")
	}

	rt = newWatchTracker(watchRestriction{}, never, false, nil)
	if rt.TryClaim(int64(3)) || rt.GetError() == nil {
		t.Error("TryClaim(int64) accepted")
	}
	rt = newWatchTracker(watchRestriction{}, never, false, nil)
	if rt.TryClaim("z") || rt.GetError() == nil {
		t.Error("claim with nothing pending accepted")
	}
	rt = newWatchTracker(watchRestriction{Pending: wfs("x")}, never, false, nil)
	rt.finish()
	if rt.GetError() == nil || rt.IsDone() {
		t.Error("finish with a file pending did not fail")
	}
	rt = newWatchTracker(watchRestriction{Pending: wfs("x"), Done: true}, never, false, nil)
	if rt.shouldPoll() || rt.pollMore() {
		t.Error("a done restriction polls")
	}
	claimAll(t, rt)
	if rt.IsDone() {
		t.Error("done before finish")
	}
	rt.finish()
	if !rt.IsDone() || rt.GetError() != nil {
		t.Errorf("after finish: done %v err %v", rt.IsDone(), rt.GetError())
	}
	if _, r, _ := rt.TrySplit(0); r != nil {
		t.Error("a finished tracker checkpointed")
	}
	// A claim after finish is refused without an error, as after a
	// checkpoint.
	if rt.TryClaim("x") || rt.GetError() != nil || !rt.IsDone() {
		t.Errorf("claim after finish: err %v, done %v; want refused, no error, done", rt.GetError(), rt.IsDone())
	}
	if s := rt.String(); !strings.Contains(s, "filesource.watchTracker") || !strings.Contains(s, "1 claimed") || !strings.Contains(s, "stopped") {
		t.Errorf("String() = %q", s)
	}
}

func TestWatchTermination(t *testing.T) {
	start := watchEpoch.UnixNano()
	at := func(d time.Duration) time.Time { return watchEpoch.Add(d) }
	never := Never().condition()
	total := AfterDuration(10 * time.Second).condition()
	idle := AfterNoNewFilesFor(3 * time.Second).condition()
	either := EitherOf(AfterDuration(10*time.Second), AfterNoNewFilesFor(3*time.Second), AfterDuration(20*time.Second)).condition()
	lastNew := at(8 * time.Second).UnixNano()
	for _, c := range []struct {
		name    string
		cond    termination
		now     time.Duration
		lastNew int64
		want    bool
	}{
		{"never", never, 1000 * time.Hour, 0, false},
		{"total at limit", total, 10 * time.Second, 0, false},
		{"total past limit", total, 10*time.Second + 1, 0, true},
		{"total ignores new files", total, 11 * time.Second, lastNew, true},
		{"idle from start", idle, 3 * time.Second, 0, false},
		{"idle from start past", idle, 3*time.Second + 1, 0, true},
		{"idle from last new", idle, 11 * time.Second, lastNew, false},
		{"idle from last new past", idle, 11*time.Second + 1, lastNew, true},
		{"either: idle", either, 5 * time.Second, 0, true},
		{"either: neither", either, 9 * time.Second, lastNew, false},
		{"either: total", either, 10*time.Second + 1, lastNew, true},
		{"zero total stops after one poll", AfterDuration(0).condition(), 1, 0, true},
	} {
		if got := c.cond.holds(at(c.now), start, c.lastNew); got != c.want {
			t.Errorf("%s: holds at +%v = %v, want %v", c.name, c.now, got, c.want)
		}
	}
	if got := EitherOf().condition(); got != never {
		t.Errorf("EitherOf() = %+v, want never", got)
	}
	if s := EitherOf(AfterDuration(time.Minute), AfterNoNewFilesFor(time.Second)).String(); s != "EitherOf(AfterDuration(1m0s), AfterNoNewFilesFor(1s))" {
		t.Errorf("String() = %q", s)
	}
	mustPanic(t, "AfterDuration(-1)", func() { AfterDuration(-1) })
	mustPanic(t, "AfterNoNewFilesFor(-1)", func() { AfterNoNewFilesFor(-1) })

	// Through the tracker: a poll finding a new file restarts the idle time.
	clock := &fakeClock{t: watchEpoch}
	rt := newWatchTracker(watchRestriction{Start: start}, idle, false, clock.Now)
	clock.Advance(2 * time.Second)
	rt.addPoll(wfs("a"), clock.Now())
	claimAll(t, rt)
	clock.Advance(3 * time.Second)
	if !rt.pollMore() {
		t.Error("stopped 3 s after the last new file")
	}
	clock.Advance(1)
	if rt.pollMore() {
		t.Error("polls on 3 s + 1 ns after the last new file")
	}
}

// watchHarness drives watchFn over a real directory the way Beam Go's
// runtime does: one ProcessElement per restriction; on resume the runtime
// checkpoints (TrySplit(0)) and the tracker must be done; the residual goes
// through the coder and is processed next.
type watchHarness struct {
	t       *testing.T
	fn      *watchFn
	clock   *fakeClock
	pattern string
	rest    watchRestriction
	wm      int64
	emitted map[string]int // path -> times emitted
	order   []string
	calls   int
	onEmit  func(fileio.FileMetadata)
}

func newWatchHarness(t *testing.T, pattern string, interval time.Duration, until Termination, clock *fakeClock) *watchHarness {
	fn := &watchFn{PollInterval: interval, Termination: until.condition()}
	return &watchHarness{
		t: t, fn: fn, clock: clock, pattern: pattern,
		rest:    watchRestriction{Start: clock.Now().UnixNano()},
		wm:      int64(mtime.MinTimestamp),
		emitted: map[string]int{},
	}
}

// step runs one ProcessElement; splitAfter > 0 checkpoints from inside the
// emitter after that many files, as a runner's split would. It returns
// whether the watch goes on.
func (h *watchHarness) step(splitAfter int) bool {
	t := h.t
	t.Helper()
	h.calls++
	rt := newWatchTracker(h.rest, h.fn.Termination, h.fn.MatchUpdated, h.clock.Now)
	we := h.fn.CreateWatermarkEstimator(h.wm)
	var residual any
	var callEmits []string
	emit := func(et beam.EventTime, m fileio.FileMetadata) {
		callEmits = append(callEmits, m.Path)
		if h.onEmit != nil {
			h.onEmit(m)
		}
		h.emitted[m.Path]++
		h.order = append(h.order, m.Path)
		if et.ToTime().After(h.clock.Now()) || et.Milliseconds() > we.State {
			t.Errorf("%s emitted at %v, after the poll (now %v, watermark %v)", m.Path, et.ToTime(), h.clock.Now(), we.CurrentWatermark())
		}
		fi, err := os.Stat(m.Path)
		if err != nil || fi.Size() != m.Size {
			t.Errorf("%s emitted with size %d, stat says %v, %v", m.Path, m.Size, fi, err)
		}
		if len(callEmits) == splitAfter {
			if _, r, err := rt.TrySplit(0); err != nil || r == nil {
				t.Fatalf("runner checkpoint refused: %v %v", r, err)
			} else {
				residual = r
			}
		}
	}
	polls := rt.shouldPoll()
	cont, err := h.fn.ProcessElement(context.Background(), we, rt, h.pattern, emit)
	if err != nil {
		t.Fatalf("call %d: %v", h.calls, err)
	}
	// A poll moves the watermark to its time; otherwise it stays.
	if wm := h.fn.WatermarkEstimatorState(we); polls && wm != h.clock.Now().UnixMilli() || !polls && wm != h.wm {
		t.Errorf("call %d (poll %v): watermark %d, was %d, clock %d", h.calls, polls, wm, h.wm, h.clock.Now().UnixMilli())
	}
	if residual != nil && cont.ShouldResume() {
		t.Errorf("call %d resumes after a runner checkpoint", h.calls)
	}
	if residual == nil && cont.ShouldResume() {
		if cont.ResumeDelay() != h.fn.PollInterval {
			t.Errorf("resume delay %v, want %v", cont.ResumeDelay(), h.fn.PollInterval)
		}
		p, r, err := rt.TrySplit(0)
		if err != nil || r == nil {
			t.Fatalf("call %d: checkpoint on resume refused: %v, %v", h.calls, r, err)
		}
		if prim := p.(watchRestriction); !slices.Equal(paths(prim.Pending), callEmits) {
			t.Errorf("call %d: primary holds %v, the call emitted %v", h.calls, paths(prim.Pending), callEmits)
		}
		residual = r
	}
	if !rt.IsDone() {
		t.Fatalf("call %d: tracker not done after the call: %v", h.calls, rt)
	}
	if residual == nil {
		return false
	}
	h.rest = roundTrip(t, residual.(watchRestriction))
	h.wm = h.fn.WatermarkEstimatorState(we)
	return true
}

func writeWatchedFile(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("not read here: "+name), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWatchFnEmitsEachFileOnce grows a directory between polls and
// checkpoints at random points, also in the middle of a poll's files: each
// file is emitted exactly once, in the call after it appeared, and the
// watch stops exactly when no new file came for the idle time.
func TestWatchFnEmitsEachFileOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "dir.avro"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeWatchedFile(t, dir, "other.txt")
	clock := &fakeClock{t: watchEpoch}
	const interval, idle = time.Second, 5 * time.Second
	h := newWatchHarness(t, filepath.Join(dir, "*.avro"), interval, AfterNoNewFilesFor(idle), clock)
	rng := rand.New(rand.NewSource(1))
	var written []string
	lastNew := watchEpoch
	prevN := 0 // files written the round before: emitted this round
	for round := 0; round < 40; round++ {
		n := rng.Intn(4) // 0 to 3 new files this round
		if round == 0 {
			n = 0 // the watch starts on an empty match
		}
		for i := 0; i < n; i++ {
			written = append(written, writeWatchedFile(t, dir, fmt.Sprintf("f%03d-%d.avro", round, i)))
		}
		splitAfter := 0
		if prevN > 1 && rng.Intn(2) == 0 {
			splitAfter = 1 + rng.Intn(prevN-1)
		}
		before := len(h.order)
		if !h.step(splitAfter) {
			t.Fatalf("round %d: the watch stopped while files keep coming", round)
		}
		// A runner checkpoint leaves the rest of the poll to the residual,
		// which emits it before polling again.
		for h.rest.Pending != nil {
			if !h.step(0) {
				t.Fatal("the residual with pending files stopped")
			}
		}
		// A file is emitted by the second poll that sees it unchanged.
		if got := len(h.order) - before; got != prevN {
			t.Errorf("round %d: %d files emitted, %d written the round before", round, got, prevN)
		}
		if n > 0 || prevN > 0 {
			lastNew = clock.Now()
		}
		prevN = n
		// Touch every file emitted: without MatchUpdatedFiles, changed
		// times do not make a file new.
		for p := range h.emitted {
			if err := os.Chtimes(p, clock.Now(), clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(interval)
	}
	// No more files: the last ones are emitted, then the watch stops at
	// the first poll more than idle after the last new file.
	for {
		before := len(h.order)
		more := h.step(0)
		if len(h.order) > before {
			lastNew = clock.Now()
		}
		if !more {
			break
		}
		clock.Advance(interval)
		if clock.Now().Sub(lastNew) > idle+interval {
			t.Fatalf("still polling %v after the last new file", clock.Now().Sub(lastNew))
		}
	}
	if d := clock.Now().Sub(lastNew); d <= idle {
		t.Errorf("stopped %v after the last new file, before %v", d, idle)
	}
	for _, p := range written {
		if h.emitted[p] != 1 {
			t.Errorf("%s emitted %d times", p, h.emitted[p])
		}
	}
	if len(h.emitted) != len(written) {
		t.Errorf("%d distinct files emitted, %d written: %v", len(h.emitted), len(written), h.order)
	}
}

// TestWatchFnPrimaryRetry re-runs a checkpoint's primary, as a runner does
// when a bundle fails: it emits exactly its files again and does not poll.
func TestWatchFnPrimaryRetry(t *testing.T) {
	dir := t.TempDir()
	a := writeWatchedFile(t, dir, "a.avro")
	b := writeWatchedFile(t, dir, "b.avro")
	clock := &fakeClock{t: watchEpoch}
	fn := &watchFn{PollInterval: time.Second, Termination: Never().condition()}
	rt := newWatchTracker(watchRestriction{Start: watchEpoch.UnixNano()}, fn.Termination, false, clock.Now)
	var got []string
	emit := func(_ beam.EventTime, m fileio.FileMetadata) { got = append(got, m.Path) }
	cont, err := fn.ProcessElement(context.Background(), &watchWatermark{}, rt, filepath.Join(dir, "*.avro"), emit)
	if err != nil || !cont.ShouldResume() {
		t.Fatalf("first call: %v, resume %v", err, cont != nil && cont.ShouldResume())
	}
	// The first poll sees a and b; the second, in the residual, emits them.
	_, r, _ := rt.TrySplit(0)
	rt = newWatchTracker(roundTrip(t, r.(watchRestriction)), fn.Termination, false, clock.Now)
	cont, err = fn.ProcessElement(context.Background(), &watchWatermark{}, rt, filepath.Join(dir, "*.avro"), emit)
	if err != nil || !cont.ShouldResume() || !slices.Equal(got, []string{a, b}) {
		t.Fatalf("second call: %v, emitted %v", err, got)
	}
	p, _, _ := rt.TrySplit(0)
	writeWatchedFile(t, dir, "c.avro")

	prim := roundTrip(t, p.(watchRestriction))
	got = nil
	rt = newWatchTracker(prim, fn.Termination, false, clock.Now)
	cont, err = fn.ProcessElement(context.Background(), &watchWatermark{}, rt, filepath.Join(dir, "*.avro"), emit)
	if err != nil || cont.ShouldResume() || !rt.IsDone() {
		t.Fatalf("retried primary: err %v, resume %v, done %v", err, cont.ShouldResume(), rt.IsDone())
	}
	if !slices.Equal(got, []string{a, b}) {
		t.Errorf("retried primary emitted %v, want %v", got, []string{a, b})
	}

	// A drained watch emits what it found and stops polling.
	tr := fn.TruncateRestriction(newWatchTracker(watchRestriction{Pending: wfs(a), Seen: []seenFile{{Key: keyOf(b)}}}, fn.Termination, false, nil), "")
	if !tr.Done || !slices.Equal(paths(tr.Pending), []string{a}) {
		t.Errorf("truncated restriction %v, want done with [a]", tr)
	}
	if fn.RestrictionSize("", tr) != 1 || fn.RestrictionSize("", watchRestriction{}) != 1 || fn.RestrictionSize("", watchRestriction{Done: true}) != 0 {
		t.Error("RestrictionSize is wrong")
	}
}

func TestWatchListing(t *testing.T) {
	dir := t.TempDir()
	a := writeWatchedFile(t, dir, "a.avro")
	writeWatchedFile(t, dir, "b.txt")
	if err := os.Mkdir(filepath.Join(dir, "sub.avro"), 0o755); err != nil {
		t.Fatal(err)
	}
	mod := watchEpoch.Add(-time.Hour)
	if err := os.Chtimes(a, mod, mod); err != nil {
		t.Fatal(err)
	}
	files, err := listWatched(context.Background(), filepath.Join(dir, "*.avro"))
	if err != nil {
		t.Fatal(err)
	}
	want := []watchFile{{Path: a, Size: int64(len("not read here: a.avro")), LastModified: mod.UnixNano()}}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("listed %+v, want %+v", files, want)
	}
	if m := files[0].metadata(); m.Path != a || m.Size != want[0].Size || !m.LastModified.Equal(mod) {
		t.Errorf("metadata %+v", m)
	}
	if _, err := listWatched(context.Background(), "nosuchscheme://x/*.avro"); err == nil {
		t.Error("listing an unknown scheme: no error")
	}
}

// TestWatchTrackerConcurrentCheckpoint checkpoints from another goroutine
// while files are claimed, as a runner may: the primary holds exactly the
// files claimed, the residual exactly the others, with the claimed ones
// seen. Run it under -race.
func TestWatchTrackerConcurrentCheckpoint(t *testing.T) {
	var all []string
	for i := 0; i < 40; i++ {
		all = append(all, fmt.Sprintf("gs://b/%02d.avro", i))
	}
	rng := rand.New(rand.NewSource(2))
	never := Never().condition()
	splitAt := map[int]bool{}
	for iter := 0; iter < 300; iter++ {
		rt := newWatchTracker(watchRestriction{Start: 1}, never, false, func() time.Time { return watchEpoch })
		stablePoll(rt, wfs(all...), watchEpoch)
		spin := rng.Intn(len(all) * 3000)
		type split struct{ p, r any }
		got := make(chan split, 1)
		go func() {
			if spinWork(spin) == -1 {
				t.Log("impossible")
			}
			rt.GetProgress()
			p, r, err := rt.TrySplit(0)
			if err != nil {
				t.Error(err)
			}
			got <- split{p, r}
		}()
		var emitted []string
		for {
			f, ok := rt.nextPending()
			if !ok || !rt.TryClaim(f.Path) {
				break
			}
			emitted = append(emitted, f.Path)
			if spinWork(2000) == -1 { // emitting takes time
				t.Log("impossible")
			}
		}
		sp := <-got
		if sp.r == nil {
			t.Fatalf("iteration %d: checkpoint refused", iter)
		}
		prim, res := sp.p.(watchRestriction), sp.r.(watchRestriction)
		if !slices.Equal(paths(prim.Pending), emitted) {
			t.Fatalf("iteration %d: primary %v, emitted %v", iter, paths(prim.Pending), emitted)
		}
		if !slices.Equal(paths(res.Pending), all[len(emitted):]) || len(res.Seen) != len(emitted) {
			t.Fatalf("iteration %d: residual pending %v seen %d, after %d emitted", iter, paths(res.Pending), len(res.Seen), len(emitted))
		}
		for _, p := range emitted {
			if _, ok := slices.BinarySearchFunc(res.Seen, keyOf(p), func(a seenFile, b fileKey) int { return compareKeys(a.Key, b) }); !ok {
				t.Fatalf("iteration %d: %s emitted but not seen in the residual", iter, p)
			}
		}
		if !rt.IsDone() {
			t.Fatalf("iteration %d: not done after the checkpoint", iter)
		}
		splitAt[len(emitted)] = true
	}
	if len(splitAt) < 3 {
		t.Errorf("checkpoints landed at only %d distinct positions: %v", len(splitAt), splitAt)
	}
}

// spinWork burns CPU for a time proportional to n, without sleeping.
func spinWork(n int) (x int) {
	for i := 0; i < n; i++ {
		x += i ^ (x >> 3)
	}
	return x
}

// processCPU is the CPU time the test process has used (user and system).
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWatchTrackerManyFiles watches 50,000 files over two polls: each poll,
// claim and checkpoint costs time linear in the files (up to sorting the
// new ones), and the residual's seen set is sorted and complete.
func TestWatchTrackerManyFiles(t *testing.T) {
	const n = 50000
	all := make([]watchFile, n)
	for i := range all {
		all[i] = wf(fmt.Sprintf("gs://bucket/dir/part-%06d.avro", i))
	}
	never := Never().condition()
	start, cpu0 := time.Now(), processCPU(t)
	rest := watchRestriction{Start: 1}
	for _, batch := range [][]watchFile{all[:n/2], all} {
		rt := newWatchTracker(rest, never, false, nil)
		if got := stablePoll(rt, batch, watchEpoch); got != n/2 {
			t.Fatalf("poll found %d new, want %d", got, n/2)
		}
		if got := len(claimAll(t, rt)); got != n/2 {
			t.Fatalf("claimed %d", got)
		}
		_, r, _ := rt.TrySplit(0)
		rest = roundTrip(t, r.(watchRestriction))
	}
	keys := seenKeys(rest.Seen)
	if len(keys) != n || !slices.IsSortedFunc(keys, compareKeys) {
		t.Errorf("seen %d keys, sorted %v; want %d sorted", len(keys), slices.IsSortedFunc(keys, compareKeys), n)
	}
	if size := len(encodeWatchRestriction(rest)); size > 19*n+64 {
		t.Errorf("restriction of %d seen files encodes to %d bytes, want about 18 a file", n, size)
	}
	// CPU time, not wall time: CI runs beside other work, and a wall-clock
	// bound failed there at load 8 (13 s) with nothing wrong. The bound is
	// there to catch a quadratic poll, which at 50,000 files takes minutes
	// of CPU; linear, it takes 1-3 s under -race.
	if cpu := processCPU(t) - cpu0; cpu > 30*time.Second {
		t.Errorf("two polls of %d files took %v of CPU", n, cpu)
	}
	t.Logf("two polls of %d files: %v (%v of CPU)", n, time.Since(start), processCPU(t)-cpu0)
}

// changingHarness watches dir/*.log with or without matchUpdated, one
// poll a step, and records what each step emitted with which size.
func changingHarness(t *testing.T, dir string, matchUpdated bool) (*watchHarness, *fakeClock) {
	clock := &fakeClock{t: watchEpoch}
	h := newWatchHarness(t, filepath.Join(dir, "*.log"), time.Second, Never(), clock)
	h.fn.MatchUpdated = matchUpdated
	return h, clock
}

// stepSizes runs one step and returns the sizes of the files it emitted,
// by base name.
func stepSizes(h *watchHarness, clock *fakeClock) map[string]int64 {
	before := len(h.order)
	var got map[string]int64
	h.onEmit = func(m fileio.FileMetadata) {
		if got == nil {
			got = map[string]int64{}
		}
		got[filepath.Base(m.Path)] = m.Size
	}
	if !h.step(0) {
		h.t.Fatal("the watch stopped")
	}
	_ = before
	h.onEmit = nil
	clock.Advance(time.Second)
	return got
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestWatchChangingFiles: the regressions of files that change while they
// are watched. On the code before this package, an empty or header-only
// file seen by the first poll was emitted at once and never again, and
// appended records and rewritten files were never read, silently.
func TestWatchChangingFiles(t *testing.T) {
	t.Run("empty at the first poll", func(t *testing.T) {
		dir := t.TempDir()
		h, clock := changingHarness(t, dir, false)
		p := filepath.Join(dir, "e.log")
		appendTo(t, p, "")
		for i := 0; i < 3; i++ {
			if got := stepSizes(h, clock); got != nil {
				t.Fatalf("poll %d emitted an empty file: %v", i, got)
			}
		}
		appendTo(t, p, "header+records")
		if got := stepSizes(h, clock); got != nil {
			t.Fatalf("emitted while it just changed: %v", got)
		}
		if got := stepSizes(h, clock); got["e.log"] != 14 {
			t.Fatalf("emitted %v, want e.log with its 14 bytes", got)
		}
	})
	t.Run("header only, records before the next poll", func(t *testing.T) {
		dir := t.TempDir()
		h, clock := changingHarness(t, dir, false)
		p := filepath.Join(dir, "h.log")
		appendTo(t, p, "header")
		if got := stepSizes(h, clock); got != nil {
			t.Fatalf("first poll emitted %v", got)
		}
		appendTo(t, p, "+records")
		stepSizes(h, clock)
		if got := stepSizes(h, clock); got["h.log"] != 14 {
			t.Fatalf("emitted %v, want h.log with its 14 bytes", got)
		}
	})
	for _, updated := range []bool{false, true} {
		t.Run(fmt.Sprintf("appended and rewritten, matchUpdated %v", updated), func(t *testing.T) {
			dir := t.TempDir()
			h, clock := changingHarness(t, dir, updated)
			p := filepath.Join(dir, "a.log")
			appendTo(t, p, "header")
			stepSizes(h, clock)
			if got := stepSizes(h, clock); got["a.log"] != 6 {
				t.Fatalf("emitted %v, want the header-only a.log", got)
			}
			appendTo(t, p, "+records") // appended after it was read
			stepSizes(h, clock)
			got := stepSizes(h, clock)
			if updated && got["a.log"] != 14 {
				t.Fatalf("appended file: emitted %v, want a.log again, whole (14 bytes)", got)
			}
			if !updated && got != nil {
				t.Fatalf("appended file without matchUpdated: emitted %v", got)
			}
			// Rewritten under the same name, with the same size.
			tmp := filepath.Join(dir, "tmp")
			if err := os.WriteFile(tmp, []byte("HEADER+RECORDS"), 0o644); err != nil {
				t.Fatal(err)
			}
			later := clock.Now().Add(time.Minute)
			os.Chtimes(tmp, later, later)
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
			stepSizes(h, clock)
			got = stepSizes(h, clock)
			if updated && got["a.log"] != 14 {
				t.Fatalf("rewritten file: emitted %v, want a.log again", got)
			}
			if !updated && got != nil {
				t.Fatalf("rewritten file without matchUpdated: emitted %v", got)
			}
			want := 1
			if updated {
				want = 3
			}
			if h.emitted[p] != want {
				t.Errorf("a.log emitted %d times, want %d", h.emitted[p], want)
			}
		})
	}

	// Without matchUpdated the change is reported once per change; a file
	// still changing when the watch ends is read as last seen, and one
	// still empty is skipped.
	rt := newWatchTracker(watchRestriction{Start: 1}, Never().condition(), false, nil)
	if n := stablePoll(rt, wfs("x"), watchEpoch); n != 1 {
		t.Fatal(n)
	}
	claimAll(t, rt)
	grown := watchFile{Path: "x", Size: 100}
	if st := rt.addPoll([]watchFile{grown}, watchEpoch); len(st.ignored) != 1 {
		t.Errorf("change after emission: %+v, want it ignored", st)
	}
	if st := rt.addPoll([]watchFile{grown}, watchEpoch); len(st.ignored) != 0 {
		t.Errorf("the same change again: %+v, want nothing", st)
	}
	rt.addPoll([]watchFile{{Path: "y", Size: 5}, {Path: "z", Size: 0}}, watchEpoch)
	if skipped := rt.flush(); skipped != 1 {
		t.Errorf("flush skipped %d empty files, want 1", skipped)
	}
	if got := claimAll(t, rt); !slices.Equal(got, []string{"y"}) {
		t.Errorf("flushed %v, want [y]", got)
	}
}
