package avroio

// The finalize step of a non-windowed write: the evidence that no bundle
// is missing, the renames, and the removal of what is left.

import (
	"context"
	"fmt"
	"sort"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// finalizeFn runs once, after every writing bundle committed: it gets the
// committed temporary files as a side input, renames them to their final
// names, writes the empty file of an empty input, and removes what is left
// in the temporary directory; or, when the results show that the write
// failed, removes every temporary file and fails (see finalize).
type finalizeFn struct {
	Config writeConfig
}

func (fn *finalizeFn) ProcessElement(ctx context.Context, _ []byte, results func(*fileResult) bool, emit func(string)) error {
	all := collect(results)
	return runFinalize(ctx, fn.Config, emit, func(fs filesystem.Interface) (finalizeStats, error) {
		return finalize(ctx, fs, fn.Config, all)
	})
}

// collect is every value of a side input.
func collect[T any](iter func(*T) bool) []T {
	var all []T
	var v T
	for iter(&v) {
		all = append(all, v)
	}
	return all
}

// runFinalize runs a finalize step's commit (fin) on the temporary
// directory's filesystem, then removes what writes no longer running left
// beside it (write_temp.go), counts and emits the files committed.
func runFinalize(ctx context.Context, cfg writeConfig, emit func(string), fin func(filesystem.Interface) (finalizeStats, error)) error {
	fs, err := openTempFS(ctx, cfg)
	if err != nil {
		return err
	}
	defer fs.Close()
	st, err := fin(fs)
	sweepStaleTempDirs(ctx, fs, cfg)
	if st.removed > 0 {
		cfg.counter("temp_files_removed").Inc(ctx, int64(st.removed))
	}
	if err != nil {
		return err
	}
	cfg.counter("files_written").Inc(ctx, int64(len(st.files)))
	if st.emptyBytes > 0 {
		cfg.counter("bytes_written").Inc(ctx, st.emptyBytes)
	}
	for _, f := range st.files {
		emit(f)
	}
	return nil
}

type finalizeStats struct {
	files      []string // final names, in shard order
	removed    int      // leftover temporary files removed
	emptyBytes int64    // bytes of the empty file written here
}

// finalize renames the committed temporary files to their final names. It
// is idempotent: run again after a failure part way (a retried finalize
// step), it finds the files renamed before in place and finishes the rest.
//
// It commits only what shows the write succeeded, since a runner may run
// it after a writing bundle failed (Prism v2.77 and v2.78 do, now and then, with
// the results of the bundles that committed): no result may carry an
// error (a record that could not be written); under fixed sharding every
// shard must have its file (WriteShards writes one for each, records or
// not); and with runner-determined sharding, no result at all is an empty
// input only if Begin's marker is still there (a failing bundle attempt
// removes it) and no bundle attempt left a file. Otherwise nothing is
// committed: every temporary file is removed (see failWrite), and the
// error says why.
func finalize(ctx context.Context, fs filesystem.Interface, cfg writeConfig, results []fileResult) (finalizeStats, error) {
	var st finalizeStats
	results, failed := splitFailures(results)
	if why := bundleFailures(failed); why != "" {
		return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: %s", cfg.Prefix, why))
	}
	marker := cfg.TempDir + begunMarker
	var moves []string // temporary names, in shard order
	emptyInput := false
	if cfg.NumShards > 0 {
		placed, fault := placeShards(shardFiles(results), []string{""}, cfg.NumShards)
		switch {
		case fault == nil:
			moves = placed[""]
		case fault.kind == faultBadShard:
			return st, fmt.Errorf("avroio.Write to %s: temporary file %s has shard %d, want one of [0, %d)", cfg.Prefix, fault.temp, fault.shard, cfg.NumShards)
		case fault.kind == faultTwice:
			return st, fmt.Errorf("avroio.Write to %s: shard %d was written twice (%s and %s)", cfg.Prefix, fault.shard, fault.other, fault.temp)
		default:
			return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: shard %d of %d has no file (its writing failed, and the runner ran the finalize step all the same)", cfg.Prefix, fault.shard, cfg.NumShards))
		}
	} else {
		sort.Slice(results, func(i, j int) bool { return results[i].Temp < results[j].Temp })
		for _, r := range results {
			moves = append(moves, r.Temp)
		}
		emptyInput = len(moves) == 0
	}
	n := max(len(moves), 1)
	finals := make([]string, n)
	seen := map[string]int{}
	for i := range finals {
		finals[i] = cfg.shardName(i, n)
		if j, dup := seen[finals[i]]; dup {
			return st, fmt.Errorf("avroio.Write to %s: shards %d and %d of %d would both be named %s (shard name template %q)", cfg.Prefix, j, i, n, finals[i], cfg.Template)
		}
		seen[finals[i]] = i
	}
	if emptyInput {
		left, err := tempFiles(ctx, fs, cfg)
		if err != nil {
			return st, err
		}
		_, merr := fs.Size(ctx, marker)
		if merr != nil && len(left) == 0 {
			if _, ferr := fs.Size(ctx, finals[0]); ferr == nil {
				// A finalize step retried after it wrote the file and
				// removed the marker.
				st.files = finals
				removeLocalDir(cfg.TempDir)
				return st, nil
			}
		}
		if merr != nil || len(left) > 0 {
			why := "the temporary directory's marker is gone (a bundle attempt failed)"
			if merr == nil {
				why = fmt.Sprintf("bundle attempts that had records left %s", left[0])
			}
			return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: no bundle committed a file, but the input was not empty: %s", cfg.Prefix, why))
		}
		// The one empty file of an empty input, written like the others.
		path := fmt.Sprintf("%sempty-0-%s", cfg.TempDir, randomID())
		f, err := openTempFile(ctx, fs, cfg, path)
		if err != nil {
			return st, err
		}
		res, err := f.finish()
		if err != nil {
			// Remove what this attempt wrote (a retry makes a new name).
			if rm, ok := fs.(filesystem.Remover); ok {
				rm.Remove(ctx, path)
			}
			return st, err
		}
		moves = []string{path}
		st.emptyBytes = res.Bytes
	}
	return commitMoves(ctx, fs, cfg, st, moves, finals)
}

// commitMoves renames each temporary file moves[i] to finals[i], then
// removes what is left in the temporary directory (the files of failed
// or retried attempts, and Begin's marker) and the directory. A rename
// found done (a retried finalize step) is skipped.
func commitMoves(ctx context.Context, fs filesystem.Interface, cfg writeConfig, st finalizeStats, moves, finals []string) (finalizeStats, error) {
	marker := cfg.TempDir + begunMarker
	for i, m := range moves {
		if err := makeLocalDir(finals[i]); err != nil {
			return st, fmt.Errorf("avroio.Write: making the directory of %s: %w", finals[i], err)
		}
		if err := filesystem.Rename(ctx, fs, m, finals[i]); err != nil {
			// A finalize step retried after this rename succeeded finds the
			// temporary file gone and the final one in place.
			_, terr := fs.Size(ctx, m)
			_, ferr := fs.Size(ctx, finals[i])
			if terr == nil || ferr != nil {
				return st, fmt.Errorf("avroio.Write: renaming %s to %s: %w", m, finals[i], err)
			}
		}
	}
	st.files = finals
	// What is left are the files of failed or retried bundle attempts,
	// and (last, see the retried case above) Begin's marker.
	left, err := tempFiles(ctx, fs, cfg)
	if err != nil {
		return st, err
	}
	if err := removeAll(ctx, fs, cfg, left, &st.removed); err != nil {
		return st, err
	}
	if _, err := fs.Size(ctx, marker); err == nil {
		if err := removeAll(ctx, fs, cfg, []string{marker}, nil); err != nil {
			return st, err
		}
	}
	removeLocalDir(cfg.TempDir)
	return st, nil
}

// failWrite removes everything in the temporary directory of a write that
// failed (the files of every bundle, committed or not, and Begin's
// marker), and the directory, and returns err: nothing of the write is
// left, and no final file was made.
func failWrite(ctx context.Context, fs filesystem.Interface, cfg writeConfig, st finalizeStats, err error) (finalizeStats, error) {
	left, lerr := fs.List(ctx, cfg.TempDir+"*")
	if lerr == nil {
		lerr = removeAll(ctx, fs, cfg, left, &st.removed)
	}
	removeLocalDir(cfg.TempDir)
	if lerr != nil {
		return st, fmt.Errorf("%w; and removing its temporary files: %v", err, lerr)
	}
	return st, err
}

// finalizeDestsFn is finalizeFn for a write with destinations: the
// second side input holds the destinations destShardFn saw (none under
// runner sharding).
type finalizeDestsFn struct {
	Config writeConfig
}

func (fn *finalizeDestsFn) ProcessElement(ctx context.Context, _ []byte, results func(*fileResult) bool, destIter func(*string) bool, emit func(string)) error {
	all, dests := collect(results), collect(destIter)
	return runFinalize(ctx, fn.Config, emit, func(fs filesystem.Interface) (finalizeStats, error) {
		return finalizeDests(ctx, fs, fn.Config, all, dests)
	})
}

// finalizeDests is finalize for a write with destinations. Each
// destination's files are numbered on their own. Under fixed sharding,
// every destination in dests must have a file for each shard (destShardFn
// gave each a group); under runner sharding, no file at all is an empty
// input (no file is written) only on Begin's evidence, as in finalize.
// Otherwise nothing is committed and every temporary file is removed.
func finalizeDests(ctx context.Context, fs filesystem.Interface, cfg writeConfig, results []fileResult, dests []string) (finalizeStats, error) {
	var st finalizeStats
	ok, failed := splitFailures(results)
	fail := func(format string, args ...any) (finalizeStats, error) {
		return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: %s", cfg.Prefix, fmt.Sprintf(format, args...)))
	}
	if why := bundleFailures(failed); why != "" {
		return fail("%s", why)
	}
	byDest := map[string][]string{} // temporary names, in shard order
	if cfg.NumShards > 0 {
		placed, fault := placeShards(shardFiles(ok), dests, cfg.NumShards)
		switch {
		case fault == nil:
			byDest = placed
		case fault.kind == faultUnknownGroup:
			return fail("temporary file %s of destination %q, which no bundle reported", fault.temp, fault.group)
		case fault.kind == faultBadShard:
			return st, fmt.Errorf("avroio.Write to %s: temporary file %s has shard %d, want one of [0, %d)", cfg.destPrefix(fault.group), fault.temp, fault.shard, cfg.NumShards)
		case fault.kind == faultTwice:
			return st, fmt.Errorf("avroio.Write to %s: shard %d was written twice (%s and %s)", cfg.destPrefix(fault.group), fault.shard, fault.other, fault.temp)
		default:
			return fail("shard %d of %d of destination %q has no file (its writing failed, and the runner ran the finalize step all the same)", fault.shard, cfg.NumShards, fault.group)
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

// The evidence a finalize step commits on, as pure decisions over what the
// committed bundles reported: no Beam, no filesystem and no type of this
// package's files beyond the three below, so that another IO's "commit
// once every bundle is done" (bigqueryio's) can share it from an internal
// package. The rule: a report of a bundle that could not write its
// records fails the write (bundleFailures); under fixed sharding every
// shard of every group expected has exactly one file (placeShards); under
// runner sharding, the files are committed in the order of their names,
// and no file at all needs Begin's evidence (see finalize).

// splitFailures separates the results that carry an error (their errors)
// from those that carry a file.
func splitFailures(results []fileResult) (files []fileResult, failed []string) {
	files = results[:0:0]
	for _, r := range results {
		if r.Err != "" {
			failed = append(failed, r.Err)
		} else {
			files = append(files, r)
		}
	}
	return files, failed
}

// bundleFailures is why a write some of whose bundles reported records
// they could not write (errs, one per bundle) fails: the first error in
// order and how many more there were; "" for none.
func bundleFailures(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	sort.Strings(errs)
	if len(errs) > 1 {
		return fmt.Sprintf("%s (and %d more bundles failed)", errs[0], len(errs)-1)
	}
	return errs[0]
}

// shardFile is a committed temporary file Temp of shard Shard of group
// Group (a destination; "" without destinations).
type shardFile struct {
	Group string
	Shard int
	Temp  string
}

// shardFiles is results as shardFiles.
func shardFiles(results []fileResult) []shardFile {
	out := make([]shardFile, len(results))
	for i, r := range results {
		out[i] = shardFile{Group: r.Dest, Shard: r.Shard, Temp: r.Temp}
	}
	return out
}

// faultKind is how committed files fail to show that every shard of
// every group was written once.
type faultKind int

const (
	faultUnknownGroup faultKind = iota + 1 // a file of a group not expected
	faultBadShard                          // a shard outside [0, n)
	faultTwice                             // two files of one shard
	faultMissing                           // a shard without a file
)

// evidenceFault is the first fault placeShards found: its kind, the group
// and shard, the file at fault, and (faultTwice) the shard's other file.
type evidenceFault struct {
	kind        faultKind
	group       string
	shard       int
	temp, other string
}

// placeShards checks the evidence of a write of n fixed shards per group:
// every group of groups (duplicates allowed) has exactly one file for
// each shard in [0, n), and no file belongs elsewhere. It returns each
// group's temporary files in shard order, or the first fault: of the
// files in the order given, then the first missing shard of the groups in
// sorted order.
func placeShards(files []shardFile, groups []string, n int) (map[string][]string, *evidenceFault) {
	placed := map[string][]string{}
	for _, g := range groups {
		if placed[g] == nil {
			placed[g] = make([]string, n)
		}
	}
	for _, f := range files {
		slots, known := placed[f.Group]
		switch {
		case !known:
			return nil, &evidenceFault{kind: faultUnknownGroup, group: f.Group, shard: f.Shard, temp: f.Temp}
		case f.Shard < 0 || f.Shard >= n:
			return nil, &evidenceFault{kind: faultBadShard, group: f.Group, shard: f.Shard, temp: f.Temp}
		case slots[f.Shard] != "":
			return nil, &evidenceFault{kind: faultTwice, group: f.Group, shard: f.Shard, temp: f.Temp, other: slots[f.Shard]}
		}
		slots[f.Shard] = f.Temp
	}
	names := make([]string, 0, len(placed))
	for g := range placed {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, g := range names {
		for i, t := range placed[g] {
			if t == "" {
				return nil, &evidenceFault{kind: faultMissing, group: g, shard: i}
			}
		}
	}
	return placed, nil
}
