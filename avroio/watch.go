package avroio

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// The watch's metrics, in Namespace: polls of a pattern, and files found
// new (each is emitted once).
var (
	watchPolls    = beam.NewCounter(Namespace, "watch_polls")
	watchNewFiles = beam.NewCounter(Namespace, "watch_new_files")
)

func init() {
	register.DoFn5x2[context.Context, *watchWatermark, *watchTracker, string, func(beam.EventTime, fileio.FileMetadata), beamsdf.ProcessContinuation, error](&watchFn{})
	register.Emitter2[beam.EventTime, fileio.FileMetadata]()
}

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
		panic(fmt.Sprintf("avroio.AfterDuration: negative duration %v", d))
	}
	return Termination{total: d, hasTotal: true}
}

// AfterNoNewFilesFor stops polling once more than d has passed without a
// poll finding a new file: since the last new file, or since the watch
// began if none came yet. (Java's afterTimeSinceNewOutput counts only from
// the first output and so never stops a watch that finds nothing; here a
// pattern that stays empty for d ends the watch too.)
func AfterNoNewFilesFor(d time.Duration) Termination {
	if d < 0 {
		panic(fmt.Sprintf("avroio.AfterNoNewFilesFor: negative duration %v", d))
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

// WatchForNewFiles reads the Avro files that filepattern matches, and goes
// on polling it every pollInterval for new ones until the termination
// condition holds, reading each new file once (Java's
// AvroIO.read().watchForNewFiles). The result is an unbounded PCollection of
// records of type t (RecordType for generic records); each record has the
// event time of the poll that found its file, and the watch's watermark is
// the time of its last poll. Run it as a streaming pipeline.
//
// A file is identified by its path: a file is read once, as it was when a
// poll first saw it (up to the size seen then), and is never read again,
// even if it later changes, or is deleted and written anew. Files must
// therefore appear whole, as avroio.Write's do (written under a temporary
// name and renamed): a file still being written when a poll sees it is read
// as far as it went, which fails the read if it ends inside a block and
// silently misses the blocks appended after the poll otherwise.
//
// A pattern that matches no file is never an error here: the watch waits
// (EmptyMatch and MatchesManyFiles do not apply). The other options are
// those of ReadFiles. WatchForNewFiles panics if pollInterval is not
// positive or the options are invalid.
func WatchForNewFiles(s beam.Scope, filepattern string, t reflect.Type, pollInterval time.Duration, until Termination, opts ...ReadOption) beam.PCollection {
	s = s.Scope("avroio.WatchForNewFiles")
	if strings.TrimSpace(filepattern) == "" {
		panic("avroio.WatchForNewFiles: empty file pattern")
	}
	filesystem.ValidateScheme(filepattern)
	return watchAndRead(s, "avroio.WatchForNewFiles", beam.Create(s, filepattern), t, pollInterval, until, opts)
}

// WatchAllForNewFiles is WatchForNewFiles for every pattern of a
// PCollection of strings (Java's AvroIO.readAll().watchForNewFiles). Each
// pattern is watched on its own, with its own termination: a file that two
// patterns match is read twice.
func WatchAllForNewFiles(s beam.Scope, patterns beam.PCollection, t reflect.Type, pollInterval time.Duration, until Termination, opts ...ReadOption) beam.PCollection {
	s = s.Scope("avroio.WatchAllForNewFiles")
	return watchAndRead(s, "avroio.WatchAllForNewFiles", patterns, t, pollInterval, until, opts)
}

func watchAndRead(s beam.Scope, name string, patterns beam.PCollection, t reflect.Type, pollInterval time.Duration, until Termination, opts []ReadOption) beam.PCollection {
	if _, err := parseReadOptions(opts, EmptyMatchAllow); err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	checkType(name, t)
	files := matchNewFiles(s, name, patterns, pollInterval, until)
	// The watch finds files in one place; spread them over workers before
	// reading. Only file names are shuffled, never records.
	files = beam.Reshuffle(s, files)
	readable := fileio.ReadMatches(s, files, fileio.ReadUncompressed())
	return ReadFiles(s, readable, t, opts...)
}

// MatchNewFiles watches every file pattern of a PCollection of strings:
// it lists each pattern at once and then every pollInterval until the
// termination condition holds, and emits the fileio.FileMetadata (path,
// size, modification time) of each file the first time a poll finds it,
// never again (Java's FileIO.match().continuously()). The result is an
// unbounded PCollection; each file has the event time of the poll that
// found it. Compose it with fileio.ReadMatches and ReadFiles, as
// WatchAllForNewFiles does. MatchNewFiles panics if pollInterval is not
// positive.
func MatchNewFiles(s beam.Scope, patterns beam.PCollection, pollInterval time.Duration, until Termination) beam.PCollection {
	s = s.Scope("avroio.MatchNewFiles")
	return matchNewFiles(s, "avroio.MatchNewFiles", patterns, pollInterval, until)
}

func matchNewFiles(s beam.Scope, name string, patterns beam.PCollection, pollInterval time.Duration, until Termination) beam.PCollection {
	if pollInterval <= 0 {
		panic(fmt.Sprintf("%s: poll interval %v: must be positive", name, pollInterval))
	}
	return beam.ParDo(s, &watchFn{PollInterval: pollInterval, Termination: until.condition()}, patterns)
}

// watchFn is the splittable DoFn of the watch (Java's WatchGrowthFn): its
// element is a file pattern, its restriction the growth of the pattern's
// set of files (watchRestriction). Each call polls the pattern (unless files
// of an earlier poll are still to be emitted), claims and emits the files
// not seen before, then resumes after PollInterval, or stops when the
// termination condition holds. Its state is exported so that Beam can
// serialise it.
type watchFn struct {
	// PollInterval is the time between two polls.
	PollInterval time.Duration
	// Termination says when polling stops.
	Termination termination
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
	return newWatchTracker(rest, fn.Termination, time.Now)
}

// TruncateRestriction, when a pipeline is drained, stops polling but still
// emits the files already found.
func (fn *watchFn) TruncateRestriction(rt *watchTracker, pattern string) watchRestriction {
	rest := rt.GetRestriction().(watchRestriction)
	return watchRestriction{Pending: rest.Pending, Start: rest.Start, LastNew: rest.LastNew, Done: true}
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

// ProcessElement polls the pattern, emits each new file once with the poll's
// time as its event time, and asks to resume after PollInterval unless the
// watch is over.
func (fn *watchFn) ProcessElement(ctx context.Context, we *watchWatermark, rt *watchTracker, pattern string, emit func(beam.EventTime, fileio.FileMetadata)) (beamsdf.ProcessContinuation, error) {
	if rt.shouldPoll() {
		now := rt.now()
		files, err := listWatched(ctx, pattern, rt.known)
		if err != nil {
			return nil, fmt.Errorf("avroio: watching %q: %w", pattern, err)
		}
		watchPolls.Inc(ctx, 1)
		watchNewFiles.Inc(ctx, int64(rt.addPoll(files, now)))
		// Files found later get later event times.
		we.UpdateWatermark(now)
	}
	for {
		f, ok := rt.nextPending()
		if !ok || !rt.TryClaim(f.Path) {
			break
		}
		emit(mtime.FromTime(time.Unix(0, f.Found)), f.metadata())
	}
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
	rt.finish()
	if err := rt.GetError(); err != nil {
		return nil, err
	}
	return beamsdf.StopProcessing(), nil
}

// listWatched lists pattern on its filesystem and returns the files that
// known does not know, with their sizes and modification times. Local
// directories are skipped; a file that vanishes between the listing and
// the size is skipped (a later poll finds it if it comes back).
func listWatched(ctx context.Context, pattern string, known func(string) bool) ([]watchFile, error) {
	fsys, err := filesystem.New(ctx, pattern)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	names, err := fsys.List(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("listing: %w", err)
	}
	lm, _ := fsys.(filesystem.LastModifiedGetter)
	var files []watchFile
	for _, name := range names {
		if known(name) {
			continue
		}
		f := watchFile{Path: name}
		if !strings.Contains(name, "://") {
			// The local filesystem: one stat says it all.
			fi, err := os.Stat(name)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if fi.IsDir() {
				continue
			}
			f.Size, f.LastModified = fi.Size(), fi.ModTime().UnixNano()
			files = append(files, f)
			continue
		}
		if f.Size, err = fsys.Size(ctx, name); err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrObjectNotExist) {
				continue
			}
			return nil, fmt.Errorf("size of %s: %w", name, err)
		}
		if lm != nil {
			if t, err := lm.LastModified(ctx, name); err == nil {
				f.LastModified = t.UnixNano()
			}
		}
		files = append(files, f)
	}
	return files, nil
}
