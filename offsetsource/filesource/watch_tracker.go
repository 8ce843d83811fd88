package filesource

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"

	"github.com/sdfio/sdfio/internal/wire"
	"github.com/sdfio/sdfio/sdf"
)

// fileKey identifies a file a watch has emitted: the first 128 bits of the
// SHA-256 of its path. Like Java's Watch, the restriction keeps hashes of
// emitted outputs, not the outputs, so that it stays small (16 bytes a
// file, plus its size and modification time); a collision between two
// distinct paths has probability about n²/2¹²⁹.
type fileKey [16]byte

func keyOf(path string) fileKey {
	sum := sha256.Sum256([]byte(path))
	var k fileKey
	copy(k[:], sum[:])
	return k
}

func compareKeys(a, b fileKey) int { return bytes.Compare(a[:], b[:]) }

// seenFile is a file the watch emitted, as it was when emitted (or when a
// later change was ignored).
type seenFile struct {
	Key          fileKey
	Size         int64
	LastModified int64
}

// watchFile is a file a poll found.
type watchFile struct {
	// Path is the file's full path, with its filesystem's scheme.
	Path string
	// Size is its size in bytes when the poll found it.
	Size int64
	// LastModified is its modification time in Unix nanoseconds, 0 when
	// its filesystem does not tell.
	LastModified int64
	// Found is when the poll that found it stable ran, in Unix
	// nanoseconds: the event time the file is emitted with.
	Found int64
}

func (f watchFile) metadata() fileio.FileMetadata {
	return Metadata{Path: f.Path, Size: f.Size, LastModified: f.LastModified}.FileMetadata()
}

// sameState reports whether two observations of a file agree on its size
// and (to the millisecond, where known) its modification time.
func sameState(size, mod int64, f watchFile) bool {
	return size == f.Size && !(mod != 0 && f.LastModified != 0 && millis(mod) != millis(f.LastModified))
}

// watchRestriction is the restriction of the watch's splittable DoFn: the
// state of the growth of one pattern's set of files (Java's
// Watch.GrowthState). It has its own coder (encodeWatchRestriction).
type watchRestriction struct {
	// Seen holds the files already emitted, sorted by key, with the size
	// and modification time they were emitted with.
	Seen []seenFile
	// Unstable holds the files the last poll saw that are not emitted yet
	// (or changed since): a file is emitted when the next poll sees it
	// with the same size and modification time, and not empty.
	Unstable []watchFile
	// Pending holds the files a poll found stable that are still to be
	// emitted, in the order they will be.
	Pending []watchFile
	// Start is when the watch began, in Unix nanoseconds.
	Start int64
	// LastNew is when a poll last found a new or changing file, in Unix
	// nanoseconds; 0 before the first.
	LastNew int64
	// Done means polling is over: only Pending remains to be emitted. A
	// checkpoint's primary is done.
	Done bool
}

func (r watchRestriction) String() string {
	return fmt.Sprintf("watch{%d files seen, %d unstable, %d pending, started %s, last new file %s, done %v}",
		len(r.Seen), len(r.Unstable), len(r.Pending), fmtNanos(r.Start), fmtNanos(r.LastNew), r.Done)
}

func fmtNanos(ns int64) string {
	if ns == 0 {
		return "never"
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// watchRestrictionVersion is the first byte of an encoded restriction.
// Version 1 (avroio's, before this package) had no sizes nor unstable
// files; it is not read.
const watchRestrictionVersion = 2

func appendFiles(b []byte, files []watchFile) []byte {
	b = binary.AppendUvarint(b, uint64(len(files)))
	for _, f := range files {
		b = binary.AppendUvarint(b, uint64(len(f.Path)))
		b = append(b, f.Path...)
		b = binary.AppendVarint(b, f.Size)
		b = binary.AppendVarint(b, f.LastModified)
		b = binary.AppendVarint(b, f.Found)
	}
	return b
}

// encodeWatchRestriction encodes r: a version byte, the seen files (key,
// size, modification time), the unstable and pending files, then Start,
// LastNew and Done.
func encodeWatchRestriction(r watchRestriction) []byte {
	n := 1 + 4*binary.MaxVarintLen64 + 1 + len(r.Seen)*(len(fileKey{})+2*binary.MaxVarintLen64)
	for _, f := range r.Pending {
		n += len(f.Path) + 5*binary.MaxVarintLen64
	}
	for _, f := range r.Unstable {
		n += len(f.Path) + 5*binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = append(b, watchRestrictionVersion)
	b = binary.AppendUvarint(b, uint64(len(r.Seen)))
	for _, s := range r.Seen {
		b = append(b, s.Key[:]...)
		b = binary.AppendVarint(b, s.Size)
		b = binary.AppendVarint(b, s.LastModified)
	}
	b = appendFiles(b, r.Unstable)
	b = appendFiles(b, r.Pending)
	b = binary.AppendVarint(b, r.Start)
	b = binary.AppendVarint(b, r.LastNew)
	if r.Done {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return b
}

// decodeWatchRestriction decodes what encodeWatchRestriction encoded. It
// checks every count against the bytes left, so corrupt input is an error,
// never a huge allocation.
func decodeWatchRestriction(data []byte) (watchRestriction, error) {
	var r watchRestriction
	d := wire.NewReader(data)
	if v := d.Byte(); d.Err() == nil && v != watchRestrictionVersion {
		return r, fmt.Errorf("filesource: watch restriction of version %d, want %d", v, watchRestrictionVersion)
	}
	if n := d.Count(len(fileKey{}) + 2); n > 0 {
		r.Seen = make([]seenFile, n)
		for i := range r.Seen {
			s := &r.Seen[i]
			copy(s.Key[:], d.Fixed(len(fileKey{})))
			s.Size, s.LastModified = d.Varint(), d.Varint()
		}
	}
	r.Unstable = decodeFiles(d)
	r.Pending = decodeFiles(d)
	r.Start, r.LastNew = d.Varint(), d.Varint()
	switch d.Byte() {
	case 0:
	case 1:
		r.Done = true
	default:
		d.FailAt(d.Offset()-1, "bad done flag")
	}
	if err := d.Done("restriction"); err != nil {
		return watchRestriction{}, fmt.Errorf("filesource: corrupt watch restriction: %w", err)
	}
	return r, nil
}

func decodeFiles(d *wire.Reader) []watchFile {
	n := d.Count(4)
	if n == 0 {
		return nil
	}
	files := make([]watchFile, n)
	for i := range files {
		f := &files[i]
		f.Path = d.Str()
		f.Size, f.LastModified, f.Found = d.Varint(), d.Varint(), d.Varint()
	}
	return files
}

// termination is when a watch stops polling, as the DoFn carries it.
// Negative durations are unset.
type termination struct {
	// Total stops polling once this long has passed since the watch began
	// (Java's afterTotalOf).
	Total time.Duration
	// Idle stops polling once this long has passed without a new file
	// since the last new file, or since the watch began when none came
	// yet (Java's afterTimeSinceNewOutput, which instead never holds before
	// the first output).
	Idle time.Duration
}

// holds reports whether polling may stop at now. Like Java's conditions it
// holds when strictly more than the duration has passed.
func (c termination) holds(now time.Time, start, lastNew int64) bool {
	t := now.UnixNano()
	if c.Total >= 0 && t-start > int64(c.Total) {
		return true
	}
	if c.Idle >= 0 {
		ref := lastNew
		if ref == 0 {
			ref = start
		}
		if t-ref > int64(c.Idle) {
			return true
		}
	}
	return false
}

// watchTracker tracks a watchRestriction (Java's Watch.GrowthTracker). It
// implements Beam Go's sdf.RTracker and sdf.BoundableRTracker (unbounded).
//
// A claim is "emit this file": TryClaim takes the path of the next pending
// file. The only split is the checkpoint TrySplit(0): the primary becomes
// the files claimed so far, done, and the residual carries everything else
// (the unclaimed pending files, the unstable ones, every file emitted with
// its size and modification time, the timing of the termination
// condition), so that no file is emitted twice for one state and none is
// lost. Splits at other fractions are refused. All methods are safe for
// concurrent use.
//
// The claim state lives in an sdf.Core, as in every tracker of the module:
// the n-th file this tracker claims (from 0) is the split point at position
// n of an unbounded range [0, Unbounded). A checkpoint is the core's
// (Start stays 0, End becomes the number of files claimed), so the core's
// state answers the questions the watch asks: checkpointed (the restriction
// changed: its epoch is not 0), finished (stopped without error), failed.
type watchTracker struct {
	core sdf.Core[watchRestriction]

	cond         termination
	matchUpdated bool
	clock        func() time.Time

	// Under core's lock:
	seen     map[fileKey]seenFile // files emitted or pending; built by the first poll
	unstable []watchFile
	pending  []watchFile // unclaimed, in claim order
	claimed  []watchFile
	lastNew  int64
	flushed  bool // polling ended: the unstable files moved to pending
}

var (
	_ beamsdf.RTracker          = (*watchTracker)(nil)
	_ beamsdf.BoundableRTracker = (*watchTracker)(nil)
)

func newWatchTracker(rest watchRestriction, cond termination, matchUpdated bool, clock func() time.Time) *watchTracker {
	if clock == nil {
		clock = time.Now
	}
	t := &watchTracker{
		cond:         cond,
		matchUpdated: matchUpdated,
		clock:        clock,
		unstable:     slices.Clone(rest.Unstable),
		pending:      slices.Clone(rest.Pending),
		lastNew:      rest.LastNew,
	}
	t.core.Init("filesource.watchTracker", rest, 0, sdf.Unbounded, t.cutLocked)
	return t
}

func (t *watchTracker) String() string {
	t.core.Lock()
	defer t.core.Unlock()
	return fmt.Sprintf("%s, %d unstable, %d pending, %d claimed",
		t.core.StringLocked(), len(t.unstable), len(t.pending), len(t.claimed))
}

// stoppedLocked reports whether the tracker takes no more claims nor polls:
// it was checkpointed, finished or failed.
func (t *watchTracker) stoppedLocked() bool {
	return t.core.DoneLocked() || t.core.ErrLocked() != nil
}

// checkpointedLocked reports whether a checkpoint took the rest of the
// work: the checkpoint is the only change of the core's restriction.
func (t *watchTracker) checkpointedLocked() bool { return t.core.EpochLocked() > 0 }

// restLocked is the restriction this tracker is responsible for: the one it
// was created with, then the primary after a checkpoint.
func (t *watchTracker) restLocked() watchRestriction { return t.core.RestrictionLocked() }

// now is the tracker's clock.
func (t *watchTracker) now() time.Time { return t.clock() }

// shouldPoll reports whether the DoFn should list the pattern now: polling
// is not over, and the files of the last poll were all claimed.
func (t *watchTracker) shouldPoll() bool {
	t.core.Lock()
	defer t.core.Unlock()
	return !t.stoppedLocked() && !t.restLocked().Done && !t.flushed && len(t.pending) == 0
}

// buildSeenLocked builds the map of the files emitted or pending at the
// first poll of the tracker.
func (t *watchTracker) buildSeenLocked() {
	if t.seen != nil {
		return
	}
	rest := t.restLocked()
	t.seen = make(map[fileKey]seenFile, len(rest.Seen)+len(t.pending)+len(t.claimed))
	for _, s := range rest.Seen {
		t.seen[s.Key] = s
	}
	for _, f := range t.pending {
		k := keyOf(f.Path)
		t.seen[k] = seenFile{Key: k, Size: f.Size, LastModified: f.LastModified}
	}
	for _, f := range t.claimed {
		k := keyOf(f.Path)
		t.seen[k] = seenFile{Key: k, Size: f.Size, LastModified: f.LastModified}
	}
}

// pollStats is what one poll found.
type pollStats struct {
	added   int      // files that became pending
	updated int      // of those, files emitted before that changed since
	waiting int      // files not emitted yet: changing, or empty
	ignored []string // files that changed after they were emitted, ignored
}

// addPoll takes the files a poll at now found. A file neither emitted nor
// pending, or (with matchUpdated) one that changed since it was emitted,
// becomes pending if the previous poll saw it in the same state and it is
// not empty, and unstable otherwise. A file that changed since it was
// emitted, without matchUpdated, is ignored: the change is recorded, so
// that it is reported once. Pending files are sorted by path. When a poll
// adds a file or sees one change, the termination condition's idle time
// starts again. It does nothing once the tracker stopped (a checkpoint's
// residual polls again) or while files of an earlier poll are pending.
func (t *watchTracker) addPoll(files []watchFile, now time.Time) pollStats {
	t.core.Lock()
	defer t.core.Unlock()
	var st pollStats
	if t.stoppedLocked() || t.restLocked().Done || t.flushed || len(t.pending) > 0 {
		return st
	}
	t.buildSeenLocked()
	prev := make(map[string]watchFile, len(t.unstable))
	for _, f := range t.unstable {
		prev[f.Path] = f
	}
	var added, unstable []watchFile
	active := false
	for _, f := range files {
		k := keyOf(f.Path)
		s, emitted := t.seen[k]
		if emitted {
			if sameState(s.Size, s.LastModified, f) {
				continue
			}
			if !t.matchUpdated {
				t.seen[k] = seenFile{Key: k, Size: f.Size, LastModified: f.LastModified}
				st.ignored = append(st.ignored, f.Path)
				continue
			}
		}
		p, ok := prev[f.Path]
		if ok && sameState(p.Size, p.LastModified, f) && f.Size > 0 {
			f.Found = now.UnixNano()
			added = append(added, f)
			t.seen[k] = seenFile{Key: k, Size: f.Size, LastModified: f.LastModified}
			if emitted {
				st.updated++
			}
			continue
		}
		if !ok || !sameState(p.Size, p.LastModified, f) {
			active = true
		}
		f.Found = 0
		unstable = append(unstable, f)
	}
	t.unstable = unstable
	st.waiting = len(unstable)
	st.added = len(added)
	if len(added) > 0 || active {
		t.lastNew = now.UnixNano()
	}
	slices.SortFunc(added, func(a, b watchFile) int { return strings.Compare(a.Path, b.Path) })
	t.pending = added
	return st
}

// flushUnstable appends to pending the unstable files that are not empty,
// found at found, and returns how many empty ones it left out.
func flushUnstable(pending, unstable []watchFile, found int64) ([]watchFile, int) {
	out := slices.Clone(pending)
	var add []watchFile
	empty := 0
	for _, f := range unstable {
		if f.Size == 0 {
			empty++
			continue
		}
		if f.Found == 0 {
			f.Found = found
		}
		add = append(add, f)
	}
	slices.SortFunc(add, func(a, b watchFile) int { return strings.Compare(a.Path, b.Path) })
	return append(out, add...), empty
}

// flush ends polling: the unstable files that are not empty become
// pending, as the last poll saw them, found now. It returns how many empty
// files it left out.
func (t *watchTracker) flush() int {
	t.core.Lock()
	defer t.core.Unlock()
	if t.stoppedLocked() || t.flushed {
		return 0
	}
	t.flushed = true
	if len(t.unstable) == 0 {
		return 0
	}
	t.buildSeenLocked()
	var empty int
	t.pending, empty = flushUnstable(t.pending, t.unstable, t.clock().UnixNano())
	for _, f := range t.pending {
		k := keyOf(f.Path)
		t.seen[k] = seenFile{Key: k, Size: f.Size, LastModified: f.LastModified}
	}
	t.unstable = nil
	return empty
}

// nextPending returns the next file to claim.
func (t *watchTracker) nextPending() (watchFile, bool) {
	t.core.Lock()
	defer t.core.Unlock()
	if t.stoppedLocked() || len(t.pending) == 0 {
		return watchFile{}, false
	}
	return t.pending[0], true
}

// TryClaim claims the next pending file, given as its path (a string). It
// returns false once the tracker was checkpointed or finished, and fails
// the tracker when pos is not the next pending file (an error wrapping
// sdf.ErrClaimOrder) or not a string.
func (t *watchTracker) TryClaim(pos any) bool {
	t.core.Lock()
	defer t.core.Unlock()
	if t.stoppedLocked() {
		return false
	}
	path, ok := pos.(string)
	switch {
	case !ok:
		return t.core.FailLocked(fmt.Errorf("filesource: watch tracker: TryClaim got %T, want the path of the next pending file", pos))
	case len(t.pending) == 0:
		return t.core.FailLocked(fmt.Errorf("filesource: watch tracker: claim of %s with no file pending: %w", path, sdf.ErrClaimOrder))
	case t.pending[0].Path != path:
		return t.core.FailLocked(fmt.Errorf("filesource: watch tracker: claim of %s, but the next pending file is %s: %w", path, t.pending[0].Path, sdf.ErrClaimOrder))
	}
	// The core accepts it: the position is the next one, and the range is
	// unbounded until a checkpoint, after which stoppedLocked holds.
	if !t.core.ClaimSplitPointLocked(int64(len(t.claimed))) {
		return false
	}
	t.claimed = append(t.claimed, t.pending[0])
	t.pending = t.pending[1:]
	return true
}

// pollMore reports whether the watch goes on polling: the restriction is
// not done, no checkpoint took it over, and the termination condition does
// not hold at the tracker's clock.
func (t *watchTracker) pollMore() bool {
	t.core.Lock()
	defer t.core.Unlock()
	rest := t.restLocked()
	return !t.stoppedLocked() && !rest.Done && !t.flushed && !t.cond.holds(t.clock(), rest.Start, t.lastNew)
}

// finish ends the watch once every pending file was claimed: the tracker
// is then done. With files still pending it fails the tracker.
func (t *watchTracker) finish() {
	t.core.Lock()
	defer t.core.Unlock()
	if t.stoppedLocked() {
		return
	}
	if len(t.pending) > 0 {
		t.core.FailLocked(fmt.Errorf("filesource: watch tracker: finished with %d files pending, the first %s", len(t.pending), t.pending[0].Path))
		return
	}
	t.core.StopLocked()
}

// wasCheckpointed reports whether a checkpoint took the rest of the work.
func (t *watchTracker) wasCheckpointed() bool {
	t.core.Lock()
	defer t.core.Unlock()
	return t.checkpointedLocked()
}

// GetError returns the error that stopped the tracker, or nil.
func (t *watchTracker) GetError() error { return t.core.GetError() }

// IsDone reports whether the restriction is fully processed: a checkpoint
// took the rest of it, or the watch ended with every file claimed.
func (t *watchTracker) IsDone() bool { return t.core.IsDone() }

// IsBounded is false: a watch may poll forever.
func (t *watchTracker) IsBounded() bool { return false }

// GetRestriction returns the restriction the tracker is responsible for:
// the one it was created with, or the primary after a checkpoint.
func (t *watchTracker) GetRestriction() any { return t.core.Restriction() }

// GetProgress counts files: done is those claimed, remaining those pending
// plus one while polling may go on.
func (t *watchTracker) GetProgress() (done, remaining float64) {
	t.core.Lock()
	defer t.core.Unlock()
	done = float64(len(t.claimed))
	if t.stoppedLocked() {
		return done, 0
	}
	remaining = float64(len(t.pending))
	if !t.restLocked().Done && !t.flushed {
		remaining++
	}
	return done, remaining
}

// TrySplit(0) checkpoints: the primary is the files claimed so far, done;
// the residual is the unclaimed pending files, the unstable ones and the
// polling still to do, with every file emitted up to now in its seen set.
// The tracker is then done and refuses further claims. Any other fraction,
// or a split of a stopped tracker, is refused (nil residual).
func (t *watchTracker) TrySplit(fraction float64) (primary, residual any, err error) {
	t.core.Lock()
	defer t.core.Unlock()
	if fraction != 0 {
		t.core.CountLocked(false)
		return t.restLocked(), nil, nil
	}
	res, ok := t.core.CheckpointLocked()
	if !ok {
		return t.restLocked(), nil, nil
	}
	return t.restLocked(), res, nil
}

// cutLocked is the core's Cutter, called by the checkpoint at pos, the
// number of files claimed: it builds the primary and the residual from the
// tracker's state, and leaves nothing pending.
func (t *watchTracker) cutLocked(rest watchRestriction, pos int64) (primary, residual watchRestriction) {
	residual = watchRestriction{
		Seen:     t.seenLocked(),
		Unstable: slices.Clone(t.unstable),
		Pending:  slices.Clone(t.pending),
		Start:    rest.Start,
		LastNew:  t.lastNew,
		Done:     rest.Done || t.flushed,
	}
	// The primary only emits what was claimed: it needs no seen set.
	primary = watchRestriction{
		Pending: slices.Clone(t.claimed),
		Start:   rest.Start,
		LastNew: t.lastNew,
		Done:    true,
	}
	t.pending = nil
	return primary, residual
}

// seenLocked is the residual's seen set: the files emitted up to now (the
// restriction's, updated by the polls, and the files claimed), sorted by
// key. The pending files are not in it: the residual carries them.
func (t *watchTracker) seenLocked() []seenFile {
	if t.seen == nil {
		// No poll: the restriction's set plus the claimed files, merged
		// in time linear in the set.
		add := make([]seenFile, 0, len(t.claimed))
		for _, f := range t.claimed {
			add = append(add, seenFile{Key: keyOf(f.Path), Size: f.Size, LastModified: f.LastModified})
		}
		return mergeSeen(t.restLocked().Seen, add)
	}
	pending := make(map[fileKey]bool, len(t.pending))
	for _, f := range t.pending {
		pending[keyOf(f.Path)] = true
	}
	out := make([]seenFile, 0, len(t.seen))
	for k, s := range t.seen {
		if !pending[k] {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b seenFile) int { return compareKeys(a.Key, b.Key) })
	return out
}

// mergeSeen returns the union of the sorted seen and add (sorted here),
// an entry of add replacing one of seen with the same key.
func mergeSeen(seen, add []seenFile) []seenFile {
	slices.SortFunc(add, func(a, b seenFile) int { return compareKeys(a.Key, b.Key) })
	out := make([]seenFile, 0, len(seen)+len(add))
	i, j := 0, 0
	for i < len(seen) || j < len(add) {
		var s seenFile
		switch {
		case j == len(add) || i < len(seen) && compareKeys(seen[i].Key, add[j].Key) < 0:
			s = seen[i]
			i++
		default:
			s = add[j]
			j++
			if i < len(seen) && seen[i].Key == s.Key {
				i++
			}
		}
		if n := len(out); n > 0 && out[n-1].Key == s.Key {
			out[n-1] = s
			continue
		}
		out = append(out, s)
	}
	return out
}

// watchWatermark is the watch's watermark estimator: the time of the last
// poll (files found later get later timestamps). It only moves forward, and
// its state travels with checkpoints.
type watchWatermark struct {
	// State is the watermark in Unix milliseconds.
	State int64
}

// CurrentWatermark is the time of the last poll.
func (e *watchWatermark) CurrentWatermark() time.Time { return time.UnixMilli(e.State) }

// UpdateWatermark moves the watermark to t unless it is past it already.
func (e *watchWatermark) UpdateWatermark(t time.Time) {
	if ms := t.UnixMilli(); ms > e.State {
		e.State = ms
	}
}
