package filesource

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// Termination says when a watch stops polling for new files (Java's
// Watch.Growth.TerminationCondition). The zero value is Never. Files found
// by the last poll are still read.
type Termination struct {
	total, idle       time.Duration
	hasTotal, hasIdle bool
}

// Never polls for ever: the watch's PCollection never ends (unless the
// pipeline is drained or cancelled).
func Never() Termination { return Termination{} }

// AfterDuration stops polling once more than d has passed since the watch
// of the pattern began (Java's afterTotalOf).
func AfterDuration(d time.Duration) Termination {
	if d < 0 {
		panic(fmt.Sprintf("filesource.AfterDuration: negative duration %v", d))
	}
	return Termination{total: d, hasTotal: true}
}

// AfterNoNewFilesFor stops polling once more than d has passed without a
// poll finding a new or changing file: since the last one, or since the
// watch began if none came yet. (Java's afterTimeSinceNewOutput counts
// only from the first output and so never stops a watch that finds
// nothing; here a pattern that stays empty for d ends the watch too.)
func AfterNoNewFilesFor(d time.Duration) Termination {
	if d < 0 {
		panic(fmt.Sprintf("filesource.AfterNoNewFilesFor: negative duration %v", d))
	}
	return Termination{idle: d, hasIdle: true}
}

// EitherOf stops polling as soon as any of the conditions holds (Java's
// eitherOf). EitherOf() is Never.
func EitherOf(conditions ...Termination) Termination {
	var t Termination
	for _, c := range conditions {
		if c.hasTotal && (!t.hasTotal || c.total < t.total) {
			t.total, t.hasTotal = c.total, true
		}
		if c.hasIdle && (!t.hasIdle || c.idle < t.idle) {
			t.idle, t.hasIdle = c.idle, true
		}
	}
	return t
}

func (t Termination) String() string {
	var parts []string
	if t.hasTotal {
		parts = append(parts, fmt.Sprintf("AfterDuration(%v)", t.total))
	}
	if t.hasIdle {
		parts = append(parts, fmt.Sprintf("AfterNoNewFilesFor(%v)", t.idle))
	}
	switch len(parts) {
	case 0:
		return "Never()"
	case 1:
		return parts[0]
	}
	return "EitherOf(" + strings.Join(parts, ", ") + ")"
}

func (t Termination) condition() termination {
	c := termination{Total: -1, Idle: -1}
	if t.hasTotal {
		c.Total = t.total
	}
	if t.hasIdle {
		c.Idle = t.idle
	}
	return c
}

// WatchForNewFiles reads the files that filepattern matches with format,
// and goes on polling it every pollInterval for new ones until the
// termination condition holds (Java's FileBasedSource read with
// watchForNewFiles). The result is an unbounded PCollection of records;
// each record has the event time of the poll that found its file, and the
// watch's watermark is the time of its last poll. Run it as a streaming
// pipeline.
//
// # When a file is read
//
// A file is read once it is stable: two polls in a row saw it with the
// same size and modification time, and it is not empty. A file still
// being written when a poll first sees it is thus read when it stopped
// growing for a poll interval, and an empty file (created, not yet
// written) waits until it has bytes. Files are read as the poll that found
// them stable saw them: up to that size (ChangeReadAsMatched). When the
// watch ends, the files still changing are read as the last poll saw them;
// files still empty are not read (there is nothing to read) and are
// counted in watch_empty_files_skipped.
//
// # Files that change after they were read
//
// A file is identified by its path. Without WithMatchUpdatedFiles, a file is
// read once: if its size or modification time changes after it was read
// (records appended, the file rewritten under the same name, or deleted
// and written anew), the change is ignored, logged, and counted in
// watch_changed_files_ignored. With WithMatchUpdatedFiles (Java's
// matchUpdatedFiles) such a file is new again: once it is stable it is
// read again, whole, from its first byte, as Java does. Records it held
// before the change are then read twice (an appended file's first records
// come again, followed by the new ones); a pipeline that must not see
// them twice should write new files instead of changing old ones (as
// avroio.Write does: a temporary name, then a rename), or drop duplicates
// by key.
//
// # A restarted job
//
// The files a watch has read are in its restriction, the job's state: a
// job started anew (a failed streaming job submitted again, rather than
// updated or restored from a snapshot) knows none of them, and reads
// every file again, as Beam Java's watch does. WithSkipOlderThan (files
// modified before a time) and WithSkipListed (files named in a list the
// user keeps) skip them; the files each poll skips are counted in
// watch_files_skipped.
//
// A pattern that matches no file is never an error here: the watch waits
// (WithEmptyMatch and WithMatchesManyFiles are not watch options). WatchForNewFiles panics
// if pollInterval is not positive or the options are invalid.
func WatchForNewFiles[T any, F Format[T]](s beam.Scope, filepattern string, format F, pollInterval time.Duration, until Termination, opts ...WatchOption) beam.PCollection {
	s = s.Scope("filesource.WatchForNewFiles")
	if strings.TrimSpace(filepattern) == "" {
		panic("filesource.WatchForNewFiles: empty file pattern")
	}
	filesystem.ValidateScheme(filepattern)
	return watchAndRead[T, F](s, "filesource.WatchForNewFiles", beam.Create(s, filepattern), format, pollInterval, until, opts)
}

// WatchAllForNewFiles is WatchForNewFiles for every pattern of a
// PCollection of strings. Each pattern is watched on its own, with its own
// termination: a file that two patterns match is read twice.
func WatchAllForNewFiles[T any, F Format[T]](s beam.Scope, patterns beam.PCollection, format F, pollInterval time.Duration, until Termination, opts ...WatchOption) beam.PCollection {
	s = s.Scope("filesource.WatchAllForNewFiles")
	return watchAndRead[T, F](s, "filesource.WatchAllForNewFiles", patterns, format, pollInterval, until, opts)
}

func watchAndRead[T any, F Format[T]](s beam.Scope, name string, patterns beam.PCollection, format F, pollInterval time.Duration, until Termination, opts []WatchOption) beam.PCollection {
	o := mustParse(name, opts, WatchOption.applyWatch, EmptyMatchAllow)
	files := matchNewFiles(s, name, patterns, pollInterval, until, o)
	// The watch finds files in one place; spread them over workers before
	// reading. Only file names are shuffled, never records.
	files = beam.Reshuffle(s, files)
	srcs := beam.ParDo(s, &watchedFileFn[T, F]{Format: format, Namespace: o.namespace}, files)
	return readSources[T, F](s, srcs, o)
}

// MatchNewFiles watches every file pattern of a PCollection of strings:
// it lists each pattern at once and then every pollInterval until the
// termination condition holds, and emits the fileio.FileMetadata (path,
// size, modification time) of each file once it is stable (see
// WatchForNewFiles: never again, or again after each change with
// WithMatchUpdatedFiles; Java's FileIO.match().continuously()). The result is
// an unbounded PCollection; each file has the event time of the poll that
// found it stable. Compose it with fileio.ReadMatches and ReadFiles, or
// use WatchForNewFiles, which reads each file as the watch saw it.
// MatchNewFiles panics if pollInterval is not positive. Its options are
// WithMatchUpdatedFiles, WithSkipOlderThan, WithSkipListed and
// WithMetricsNamespace.
func MatchNewFiles(s beam.Scope, patterns beam.PCollection, pollInterval time.Duration, until Termination, opts ...MatchOption) beam.PCollection {
	s = s.Scope("filesource.MatchNewFiles")
	o := mustParse("filesource.MatchNewFiles", opts, MatchOption.applyMatch, EmptyMatchAllow)
	return matchNewFiles(s, "filesource.MatchNewFiles", patterns, pollInterval, until, o)
}

func matchNewFiles(s beam.Scope, name string, patterns beam.PCollection, pollInterval time.Duration, until Termination, o options) beam.PCollection {
	if pollInterval <= 0 {
		panic(fmt.Sprintf("%s: poll interval %v: must be positive", name, pollInterval))
	}
	return beam.ParDo(s, &watchFn{PollInterval: pollInterval, Termination: until.condition(), MatchUpdated: o.matchUpdated, Namespace: o.namespace,
		SkipOlderThan: o.skipOlderThan, SkipListed: o.skipListed}, patterns)
}

// watchFn is the splittable DoFn of the watch (Java's WatchGrowthFn): its
// element is a file pattern, its restriction the growth of the pattern's
// set of files (watchRestriction). Each call polls the pattern (unless files
// of an earlier poll are still to be emitted), claims and emits the files
// that became stable, then resumes after PollInterval, or stops when the
// termination condition holds. Its state is exported so that Beam can
// serialise it.
type watchFn struct {
	// PollInterval is the time between two polls.
	PollInterval time.Duration
	// Termination says when polling stops.
	Termination termination
	// MatchUpdated makes a file whose size or modification time changed
	// after it was emitted new again.
	MatchUpdated bool
	// Namespace is the metrics namespace; Namespace when empty.
	Namespace string
	// SkipOlderThan, when not 0, skips the files modified before it, in
	// Unix nanoseconds (WithSkipOlderThan).
	SkipOlderThan int64
	// SkipListed, when set, is the path of a list of files to skip
	// (WithSkipListed).
	SkipListed string

	skip watchSkip // the list, read once per instance
}

// CreateInitialRestriction starts the watch of a pattern now, with no file
// seen.
func (fn *watchFn) CreateInitialRestriction(pattern string) watchRestriction {
	return watchRestriction{Start: time.Now().UnixNano()}
}

// SplitRestriction keeps one restriction per pattern: a watch is split only
// by checkpoints.
func (fn *watchFn) SplitRestriction(pattern string, rest watchRestriction) []watchRestriction {
	return []watchRestriction{rest}
}

// RestrictionSize counts files: those pending, plus one while polling goes
// on.
func (fn *watchFn) RestrictionSize(pattern string, rest watchRestriction) float64 {
	n := float64(len(rest.Pending))
	if !rest.Done {
		n++
	}
	return n
}

// CreateTracker tracks the restriction with the wall clock.
func (fn *watchFn) CreateTracker(rest watchRestriction) *watchTracker {
	return newWatchTracker(rest, fn.Termination, fn.MatchUpdated, time.Now)
}

// TruncateRestriction, when a pipeline is drained, stops polling but still
// emits the files already found, those still changing as the last poll
// saw them.
func (fn *watchFn) TruncateRestriction(rt *watchTracker, pattern string) watchRestriction {
	rest := rt.GetRestriction().(watchRestriction)
	pending, _ := flushUnstable(rest.Pending, rest.Unstable, rest.Start)
	return watchRestriction{Pending: pending, Start: rest.Start, LastNew: rest.LastNew, Done: true}
}

// InitialWatermarkEstimatorState is the pattern's event time.
func (fn *watchFn) InitialWatermarkEstimatorState(et beam.EventTime, rest watchRestriction, pattern string) int64 {
	return int64(et)
}

// CreateWatermarkEstimator restores the watermark of an earlier call.
func (fn *watchFn) CreateWatermarkEstimator(state int64) *watchWatermark {
	return &watchWatermark{State: state}
}

// WatermarkEstimatorState is the watermark, carried to the residual.
func (fn *watchFn) WatermarkEstimatorState(e *watchWatermark) int64 { return e.State }

// ProcessElement polls the pattern, emits each file that became stable
// with the poll's time as its event time, and asks to resume after
// PollInterval unless the watch is over.
func (fn *watchFn) ProcessElement(ctx context.Context, we *watchWatermark, rt *watchTracker, pattern string, emit func(beam.EventTime, fileio.FileMetadata)) (beamsdf.ProcessContinuation, error) {
	if rt.shouldPoll() {
		now := rt.now()
		files, err := listWatched(ctx, pattern)
		if err != nil {
			return nil, fmt.Errorf("filesource: watching %q: %w", pattern, err)
		}
		files, skipped, err := fn.skipFiles(ctx, files)
		if err != nil {
			return nil, fmt.Errorf("filesource: watching %q: %w", pattern, err)
		}
		st := rt.addPoll(files, now)
		counter(fn.Namespace, "watch_polls").Inc(ctx, 1)
		counter(fn.Namespace, "watch_files_skipped").Inc(ctx, int64(skipped))
		counter(fn.Namespace, "watch_new_files").Inc(ctx, int64(st.added))
		counter(fn.Namespace, "watch_updated_files").Inc(ctx, int64(st.updated))
		counter(fn.Namespace, "watch_files_waiting").Inc(ctx, int64(st.waiting))
		if len(st.ignored) > 0 {
			counter(fn.Namespace, "watch_changed_files_ignored").Inc(ctx, int64(len(st.ignored)))
			log.Warnf(ctx, "filesource: watching %q: %d files changed after they were read, and are not read again (WithMatchUpdatedFiles would): %s",
				pattern, len(st.ignored), strings.Join(st.ignored[:min(len(st.ignored), 5)], ", "))
		}
		// Files found later get later event times.
		we.UpdateWatermark(now)
	}
	fn.emitPending(rt, emit)
	if err := rt.GetError(); err != nil {
		return nil, err
	}
	if rt.wasCheckpointed() {
		// The runner took the rest of the work while we emitted.
		return beamsdf.StopProcessing(), nil
	}
	if rt.pollMore() {
		return beamsdf.ResumeProcessingIn(fn.PollInterval), nil
	}
	// The watch is over: the files still changing are read as last seen.
	if skipped := rt.flush(); skipped > 0 {
		counter(fn.Namespace, "watch_empty_files_skipped").Inc(ctx, int64(skipped))
	}
	fn.emitPending(rt, emit)
	if rt.wasCheckpointed() {
		return beamsdf.StopProcessing(), nil
	}
	rt.finish()
	if err := rt.GetError(); err != nil {
		return nil, err
	}
	return beamsdf.StopProcessing(), nil
}

func (fn *watchFn) emitPending(rt *watchTracker, emit func(beam.EventTime, fileio.FileMetadata)) {
	for {
		f, ok := rt.nextPending()
		if !ok || !rt.TryClaim(f.Path) {
			return
		}
		emit(mtime.FromTime(time.Unix(0, f.Found)), f.metadata())
	}
}

// listWatched lists pattern (braces matched, as Match does) and returns
// its files with their sizes and modification times. Directories are
// skipped; a file that vanishes between the listing and its size is
// skipped (a later poll finds it if it comes back).
func listWatched(ctx context.Context, pattern string) ([]watchFile, error) {
	fsys, err := filesystem.New(ctx, pattern)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	names, err := listBraces(ctx, fsys, pattern)
	if err != nil {
		return nil, err
	}
	var files []watchFile
	for _, name := range names {
		m, err := statListed(ctx, fsys, name)
		if err != nil {
			if notExist(err) || isDir(err) {
				continue
			}
			return nil, err
		}
		files = append(files, watchFile{Path: m.Path, Size: m.Size, LastModified: m.LastModified})
	}
	return files, nil
}

func isDir(err error) bool {
	fe, ok := err.(*Error)
	return ok && fe.Kind == ErrIsDirectory
}

// The watch's restriction has its own coder; its tracker and watermark
// estimator are registered types.
func registerWatch() {
	beam.RegisterCoder(reflect.TypeFor[watchRestriction](), encodeWatchRestriction, decodeWatchRestriction)
	beam.RegisterType(reflect.TypeFor[watchTracker]())
	beam.RegisterType(reflect.TypeFor[watchWatermark]())
}
