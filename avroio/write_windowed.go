package avroio

// Windowed writes (WithWindowedWrites) and dynamic destinations
// (WithDestination): see Write's documentation, "Windowed writes" and
// "Destinations".

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// WithWindowedWrites writes a set of files for each window and pane of
// the input, as Beam Java's AvroIO.write().withWindowedWrites(): the
// records are grouped by the input's windowing and trigger, and the files
// of a pane are committed when the pane fires, so an unbounded input (a
// watch, say) is written as it comes. Names carry the window and the pane
// (see "Windowed writes" at Write); each window has one file per
// destination unless WithNumShards says otherwise.
func WithWindowedWrites() WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.windowed = true })
}

// WithDestination routes each element to the destination fn returns for
// it, a string appended to Write's prefix: with the prefix "/out/" and
// the destination "eu/events", the files are /out/eu/events-00000-of-00002
// and so on; with the prefix "/out/events-" and "eu", /out/events-eu-...
// (Beam Java's FileIO.writeDynamic). Each destination has its own files,
// shards and shard numbering. T must be the element type of the write; fn
// must be a top-level function registered with Beam
// (register.Function1x1(fn) in an init function), so that workers find it.
// A destination with a ".." path element or a "://" fails the write, as a
// record the schema cannot hold does.
func WithDestination[T any](fn func(T) string) WriteOption {
	call := fmt.Sprintf("WithDestination(%T)", fn)
	return writeOnlyOption(func(o *writeOptions) {
		o.destCall = call
		if fn == nil {
			o.fail("%s: a nil function", call)
			return
		}
		o.dest = &destFunc{Fn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fn)}}
		o.destType = reflect.TypeFor[T]()
	})
}

// destFunc is WithDestination's function, carried to the workers.
type destFunc struct {
	Fn beam.EncodedFunc

	call reflectx.Func1x1
}

// check refuses, at construction, a function of another element type
// than elem, or one that cannot travel to the workers.
func (d *destFunc) check(call string, t, elem reflect.Type) error {
	if t != elem {
		return fmt.Errorf("%s: the function takes %v, but the elements are %v", call, t, elem)
	}
	b, err := json.Marshal(d.Fn)
	if err == nil {
		var back beam.EncodedFunc
		err = json.Unmarshal(b, &back)
	}
	if err != nil {
		return fmt.Errorf("%s: the function cannot be sent to the workers (register it with register.Function1x1 in an init function): %v", call, err)
	}
	return nil
}

// of is the destination of elem, checked.
func (d *destFunc) of(elem any) (string, error) {
	if d.call == nil {
		d.call = reflectx.ToFunc1x1(d.Fn.Fn)
	}
	dest := d.call.Call1x1(elem).(string)
	if strings.Contains(dest, "://") {
		return "", fmt.Errorf("WithDestination: destination %q of a %T has a \"://\": it must be a path under the prefix", dest, elem)
	}
	// A ".." path element, found without splitting (this runs per record).
	if dest == ".." || strings.HasPrefix(dest, "../") || strings.HasSuffix(dest, "/..") || strings.Contains(dest, "/../") {
		return "", fmt.Errorf("WithDestination: destination %q of a %T has a \"..\" element: it must not leave the prefix", dest, elem)
	}
	return dest, nil
}

// destPrefix is the prefix of the files of destination dest.
func (c writeConfig) destPrefix(dest string) string { return c.Prefix + dest }

// destShardName is the final name of shard i of n of destination dest.
func (c writeConfig) destShardName(dest string, i, n int) string {
	return c.destPrefix(dest) + expandTemplate(c.Template, i, n) + c.Suffix
}

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
	fn.Config.counter("files_written").Inc(ctx, 0)
	fn.Config.counter("temp_files_removed").Inc(ctx, 0)
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

// destShardFn is shardFn for a write with destinations and a fixed
// number of shards: records are keyed by destination and shard
// (shardKey), and at the end of the bundle every destination it saw gets
// a marker in each of its shards (so that each has a group, and a file,
// records or not) and goes to its second output, from which the finalize
// step knows the destinations whose files it must find.
type destShardFn struct {
	Config writeConfig
	Dest   *destFunc

	enc    *elementEncoder
	next   map[string]int
	order  []string
	failed bool
}

// errorKey is the key of record errors in destShardFn's output.
var errorKey = shardKey("", errorShard)

func (fn *destShardFn) Setup() (err error) {
	fn.enc, err = openEncoder(fn.Config)
	return err
}

func (fn *destShardFn) StartBundle(_ context.Context, _ func(string, []byte), _ func(string)) {
	fn.next, fn.order, fn.failed = map[string]int{}, nil, false
}

func (fn *destShardFn) ProcessElement(ctx context.Context, elem beam.X, emit func(string, []byte), _ func(string)) error {
	if fn.failed {
		return nil
	}
	dest, err := fn.Dest.of(elem)
	if err != nil {
		fn.failed = true
		emit(errorKey, append([]byte{tagError}, fmt.Sprintf("avroio.Write to %s: %v", fn.Config.Prefix, err)...))
		return nil
	}
	d, err := fn.enc.encode(elem)
	if err != nil {
		fn.failed = true
		emit(errorKey, append([]byte{tagError}, fmt.Sprintf("avroio.Write to %s: %v", fn.Config.destPrefix(dest), err)...))
		return nil
	}
	shard, ok := fn.next[dest]
	if !ok {
		shard = mrand.IntN(fn.Config.NumShards)
		fn.order = append(fn.order, dest)
	}
	fn.next[dest] = (shard + 1) % fn.Config.NumShards
	emit(shardKey(dest, shard), append([]byte{tagDatum}, d...))
	return nil
}

func (fn *destShardFn) FinishBundle(_ context.Context, emit func(string, []byte), dests func(string)) {
	for _, dest := range fn.order {
		for i := 0; i < fn.Config.NumShards; i++ {
			emit(shardKey(dest, i), []byte{tagMarker})
		}
		dests(dest)
	}
	fn.order = nil
}

// writeDestShardFn is writeShardFn for destShardFn's groups.
type writeDestShardFn struct {
	Config writeConfig

	fs filesystem.Interface
}

func (fn *writeDestShardFn) Setup(ctx context.Context) (err error) {
	fn.fs, err = openTempFS(ctx, fn.Config)
	return err
}

func (fn *writeDestShardFn) ProcessElement(ctx context.Context, key string, datums func(*[]byte) bool, emit func(fileResult)) error {
	dest, shard, err := parseShardKey(key)
	if err != nil {
		return err
	}
	return writeShard(ctx, fn.fs, fn.Config, shard, dest, datums, emit)
}

func (fn *writeDestShardFn) Teardown() error { return closeFS(fn.fs) }

// finalizeDestsFn is finalizeFn for a write with destinations: the
// second side input holds the destinations destShardFn saw (none under
// runner sharding).
type finalizeDestsFn struct {
	Config writeConfig
}

func (fn *finalizeDestsFn) ProcessElement(ctx context.Context, _ []byte, results func(*fileResult) bool, destIter func(*string) bool, emit func(string)) error {
	var all []fileResult
	var r fileResult
	for results(&r) {
		all = append(all, r)
	}
	var dests []string
	var d string
	for destIter(&d) {
		dests = append(dests, d)
	}
	fs, err := openTempFS(ctx, fn.Config)
	if err != nil {
		return err
	}
	defer fs.Close()
	st, err := finalizeDests(ctx, fs, fn.Config, all, dests)
	sweepStaleTempDirs(ctx, fs, fn.Config)
	if st.removed > 0 {
		fn.Config.counter("temp_files_removed").Inc(ctx, int64(st.removed))
	}
	if err != nil {
		return err
	}
	fn.Config.counter("files_written").Inc(ctx, int64(len(st.files)))
	for _, f := range st.files {
		emit(f)
	}
	return nil
}

// finalizeDests is finalize for a write with destinations. Each
// destination's files are numbered on their own. Under fixed sharding,
// every destination in dests must have a file for each shard (destShardFn
// gave each a group); under runner sharding, no file at all is an empty
// input (no file is written) only on Begin's evidence, as in finalize.
// Otherwise nothing is committed and every temporary file is removed.
func finalizeDests(ctx context.Context, fs filesystem.Interface, cfg writeConfig, results []fileResult, dests []string) (finalizeStats, error) {
	var st finalizeStats
	var failed []string
	ok := results[:0:0]
	for _, r := range results {
		if r.Err != "" {
			failed = append(failed, r.Err)
		} else {
			ok = append(ok, r)
		}
	}
	fail := func(format string, args ...any) (finalizeStats, error) {
		return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: %s", cfg.Prefix, fmt.Sprintf(format, args...)))
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		more := ""
		if len(failed) > 1 {
			more = fmt.Sprintf(" (and %d more bundles failed)", len(failed)-1)
		}
		return fail("%s%s", failed[0], more)
	}
	byDest := map[string][]string{} // temporary names, in shard order
	if cfg.NumShards > 0 {
		for _, d := range dests {
			if byDest[d] == nil {
				byDest[d] = make([]string, cfg.NumShards)
			}
		}
		for _, r := range ok {
			moves, known := byDest[r.Dest]
			if !known {
				return fail("temporary file %s of destination %q, which no bundle reported", r.Temp, r.Dest)
			}
			if r.Shard < 0 || r.Shard >= cfg.NumShards {
				return st, fmt.Errorf("avroio.Write to %s: temporary file %s has shard %d, want one of [0, %d)", cfg.destPrefix(r.Dest), r.Temp, r.Shard, cfg.NumShards)
			}
			if moves[r.Shard] != "" {
				return st, fmt.Errorf("avroio.Write to %s: shard %d was written twice (%s and %s)", cfg.destPrefix(r.Dest), r.Shard, moves[r.Shard], r.Temp)
			}
			moves[r.Shard] = r.Temp
		}
		for d, moves := range byDest {
			for i, m := range moves {
				if m == "" {
					return fail("shard %d of %d of destination %q has no file (its writing failed, and the runner ran the finalize step all the same)", i, cfg.NumShards, d)
				}
			}
		}
	} else {
		sort.Slice(ok, func(i, j int) bool { return ok[i].Temp < ok[j].Temp })
		for _, r := range ok {
			byDest[r.Dest] = append(byDest[r.Dest], r.Temp)
		}
		if len(ok) == 0 {
			left, err := tempFiles(ctx, fs, cfg)
			if err != nil {
				return st, err
			}
			if _, merr := fs.Size(ctx, cfg.TempDir+begunMarker); merr != nil {
				return fail("no bundle committed a file, and the temporary directory's marker is gone (a bundle attempt failed)")
			}
			if len(left) > 0 {
				return fail("no bundle committed a file, but bundle attempts that had records left %s", left[0])
			}
		}
	}
	names := make([]string, 0, len(byDest))
	for d := range byDest {
		names = append(names, d)
	}
	sort.Strings(names)
	var moves, finals []string
	seen := map[string]string{}
	for _, d := range names {
		n := len(byDest[d])
		for i, m := range byDest[d] {
			final := cfg.destShardName(d, i, n)
			if other, dup := seen[final]; dup {
				return st, fmt.Errorf("avroio.Write to %s: %s and %s would both be named %s (destinations %q; shard name template %q)", cfg.Prefix, other, m, final, names, cfg.Template)
			}
			seen[final] = m
			moves = append(moves, m)
			finals = append(finals, final)
		}
	}
	return commitMoves(ctx, fs, cfg, st, moves, finals)
}
