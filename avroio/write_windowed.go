package avroio

// Windowed writes (WithWindowedWrites): see Write's documentation,
// "Windowed writes".

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/internal/runnerfix"
)

// windowTimeLayout is how window bounds appear in file names: UTC, to the
// millisecond, with no character a filesystem or object store treats
// specially (no ':').
const windowTimeLayout = "20060102T150405.000Z"

// windowTime is t in file names.
func windowTime(t mtime.Time) string {
	return time.UnixMilli(int64(t)).UTC().Format(windowTimeLayout)
}

// windowName is the window's part of a file name: "<start>-<end>" for an
// interval window (fixed, sliding or session), "global" for the global
// window.
func windowName(w typex.Window) (string, error) {
	switch w := w.(type) {
	case window.IntervalWindow:
		return windowTime(w.Start) + "-" + windowTime(w.End), nil
	case *window.IntervalWindow:
		return windowTime(w.Start) + "-" + windowTime(w.End), nil
	case window.GlobalWindow, *window.GlobalWindow:
		return "global", nil
	}
	return "", fmt.Errorf("windows of type %T have no name in a file name", w)
}

// windowedName is the final name of shard i of n of destination dest in
// window w and pane: prefix, destination, "-", window, "-pane-", the
// pane's index, the shard name template expanded, suffix.
func (c writeConfig) windowedName(dest string, w typex.Window, pane typex.PaneInfo, i, n int) (string, error) {
	wn, err := windowName(w)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s-%s-pane-%d%s%s", c.destPrefix(dest), wn, pane.Index, expandTemplate(c.Template, i, n), c.Suffix), nil
}

// windowShards is the number of files of each window and destination.
func (c writeConfig) windowShards() int { return max(c.NumShards, 1) }

// shardKey is the key by which the records of shard of dest are grouped.
func shardKey(dest string, shard int) string { return strconv.Itoa(shard) + "/" + dest }

// parseShardKey is the destination and shard of key.
func parseShardKey(key string) (string, int, error) {
	n, dest, ok := strings.Cut(key, "/")
	shard, err := strconv.Atoi(n)
	if !ok || err != nil {
		return "", 0, fmt.Errorf("avroio.Write: %q is not a shard key", key)
	}
	return dest, shard, nil
}

// writeWindowed is Write with WithWindowedWrites: each record, encoded,
// is keyed by its destination and shard and grouped under the input's
// windowing, and each group (the records of one shard of one destination
// in one pane of one window) is written to a temporary file and renamed to
// its final name. No step needs the whole input.
func writeWindowed(s beam.Scope, cfg writeConfig, dest *destFunc, col beam.PCollection) beam.PCollection {
	keyed := beam.ParDo(s.Scope("EncodeAndShard"), &windowShardFn{Config: cfg, Dest: dest}, col)
	grouped := beam.GroupByKey(s, keyed)
	return beam.ParDo(s.Scope("WriteWindows"), &writeWindowFn{Config: cfg}, grouped)
}

// windowShardFn encodes each record and keys it by its destination and
// shard, round-robin from a random shard for each destination in every
// bundle. A record it cannot encode, or whose destination is refused,
// fails the bundle, before any file of it is written.
type windowShardFn struct {
	Config writeConfig
	Dest   *destFunc

	enc  *elementEncoder
	next map[string]int
}

func (fn *windowShardFn) Setup() (err error) {
	fn.enc, err = openEncoder(fn.Config)
	return err
}

func (fn *windowShardFn) StartBundle(_ context.Context, _ func(string, []byte)) {
	fn.next = map[string]int{}
}

func (fn *windowShardFn) ProcessElement(ctx context.Context, elem beam.X, emit func(string, []byte)) error {
	dest := ""
	if fn.Dest != nil {
		var err error
		if dest, err = fn.Dest.of(elem); err != nil {
			return fmt.Errorf("avroio.Write to %s: %w", fn.Config.Prefix, err)
		}
	}
	d, err := fn.enc.encode(elem)
	if err != nil {
		return fmt.Errorf("avroio.Write to %s: %w", fn.Config.destPrefix(dest), err)
	}
	n := fn.Config.windowShards()
	shard, ok := fn.next[dest]
	if !ok {
		shard = mrand.IntN(n)
	}
	fn.next[dest] = (shard + 1) % n
	emit(shardKey(dest, shard), append([]byte(nil), d...))
	return nil
}

// writeWindowFn writes the records of one shard of one destination in
// one pane of one window to a temporary file of its own, in a directory
// of its own beside the write's (so that no other bundle's cleanup can
// remove it under it), and renames it to its final name once whole. The
// final name depends only on the group, which a runner hands again, whole,
// to a retried bundle: a retry writes the same file under the same name,
// never a second one. A bundle that fails removes its temporary file and
// directory; a file is visible only once whole.
type writeWindowFn struct {
	Config writeConfig

	fs filesystem.Interface
}

func (fn *writeWindowFn) Setup(ctx context.Context) (err error) {
	fn.fs, err = openTempFS(ctx, fn.Config)
	return err
}

func (fn *writeWindowFn) ProcessElement(ctx context.Context, pane typex.PaneInfo, w typex.Window, key string, datums func(*[]byte) bool, emit func(string)) error {
	// Every counter this step may add to, known to the runner from the
	// first report on (see touchWriteCounters).
	touchWriteCounters(ctx, fn.Config)
	runnerfix.TouchCounters(ctx, fn.Config.counter("files_written"), fn.Config.counter("temp_files_removed"))
	cfg := fn.Config
	dest, shard, err := parseShardKey(key)
	if err != nil {
		return err
	}
	final, err := cfg.windowedName(dest, w, pane, shard, cfg.windowShards())
	if err != nil {
		return fmt.Errorf("avroio.Write to %s: %w", cfg.destPrefix(dest), err)
	}
	var d []byte
	if !datums(&d) {
		return nil // a pane that fired with no records of this shard: no file
	}
	dir := strings.TrimSuffix(cfg.TempDir, "/") + "-" + randomID() + "/"
	path := dir + final[strings.LastIndex(final, "/")+1:]
	if err := makeLocalDir(path); err != nil {
		return fmt.Errorf("avroio.Write: making the temporary directory %s: %w", dir, err)
	}
	f, err := openTempFile(ctx, fn.fs, cfg, path)
	if err != nil {
		removeLocalDir(dir)
		return fmt.Errorf("%w (for %s)", err, final)
	}
	for more := true; more; more = datums(&d) {
		if err := f.cw.AppendEncoded(d); err != nil {
			f.abandon(ctx, fn.fs)
			fn.removed(ctx, path)
			removeLocalDir(dir)
			return fmt.Errorf("avroio.Write to %s (temporary file %s): record %d: %w", final, path, f.cw.Records(), err)
		}
	}
	res, err := f.finish()
	if err == nil {
		if err = makeLocalDir(final); err != nil {
			err = fmt.Errorf("avroio.Write: making the directory of %s: %w", final, err)
		} else if err = filesystem.Rename(ctx, fn.fs, path, final); err != nil {
			err = fmt.Errorf("avroio.Write: renaming %s to %s: %w", path, final, err)
			if _, renamer := fn.fs.(filesystem.Renamer); !renamer {
				// A rename by copy may have stopped part way, on a
				// filesystem whose writes are not atomic: remove what may
				// be a half file (a retry writes it again).
				if rm, ok := fn.fs.(filesystem.Remover); ok {
					rm.Remove(ctx, final)
				}
			}
		}
	}
	if err != nil {
		if rm, ok := fn.fs.(filesystem.Remover); ok {
			if rm.Remove(ctx, path) == nil {
				fn.removed(ctx, path)
			}
		}
		removeLocalDir(dir)
		return err
	}
	removeLocalDir(dir)
	cfg.counter("records_written").Inc(ctx, res.Records)
	cfg.counter("bytes_written").Inc(ctx, res.Bytes)
	cfg.counter("files_written").Inc(ctx, 1)
	emit(final)
	return nil
}

// removed counts a temporary file of a failed attempt removed.
func (fn *writeWindowFn) removed(ctx context.Context, _ string) {
	fn.Config.counter("temp_files_removed").Inc(ctx, 1)
}

func (fn *writeWindowFn) Teardown() error { return closeFS(fn.fs) }
