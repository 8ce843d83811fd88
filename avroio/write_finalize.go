package avroio

// The finalize step of a non-windowed write: the evidence that no bundle
// is missing (checked by internal/commitplan, which bigqueryio's commit
// shares), the renames, and the removal of what is left.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/internal/commitplan"
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
	if st.emptyBytes+st.joinedBytes != 0 {
		cfg.counter("bytes_written").Inc(ctx, st.emptyBytes+st.joinedBytes)
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
	// joinedBytes is what joining the bundles' files of WithNumShards(1)
	// changed of the bytes they counted (less than 0: their headers).
	joinedBytes int64
}

// finalize renames the committed temporary files to their final names. It
// is idempotent: run again after a failure part way (a retried finalize
// step), it finds the files renamed before in place and finishes the rest.
//
// It commits only what shows the write succeeded, since a runner may run
// it after a writing bundle failed (Prism v2.77 and v2.78 do, now and then, with
// the results of the bundles that committed), by internal/commitplan's
// rule: no result may carry an error (a record that could not be
// written); under fixed sharding every shard must have its file
// (WriteShards writes one for each, records or not); and with
// runner-determined sharding, no result at all is an empty input only if
// Begin's marker is still there (a failing bundle attempt removes it) and
// no bundle attempt left a file. Otherwise nothing is committed: every
// temporary file is removed (see failWrite), and the error says why.
func finalize(ctx context.Context, fs filesystem.Interface, cfg writeConfig, results []fileResult) (finalizeStats, error) {
	var st finalizeStats
	want := commitplan.Expect{}
	if cfg.NumShards > 0 && !cfg.concatShard() {
		want.Shards, want.Groups = cfg.NumShards, []string{""}
	}
	reports := reportsOf(results)
	plan, err := commitplan.Make(reports, want)
	if err != nil {
		return refused(ctx, fs, cfg, st, err)
	}
	moves := plan.Items[""] // temporary names, in shard order or by name
	if cfg.concatShard() && len(moves) > 1 {
		joined, saved, err := joinFiles(ctx, fs, cfg, moves, results)
		if err != nil {
			return st, err
		}
		moves, st.joinedBytes = []string{joined}, saved
	}
	emptyInput := len(moves) == 0
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
		why, retried, err := beginEvidence(ctx, fs, cfg, finals[0])
		switch {
		case err != nil:
			return st, err
		case retried:
			// A finalize step retried after it wrote the file and
			// removed the marker (and, maybe, not the lease).
			st.files = finals
			if err := removeLease(ctx, fs, cfg); err != nil {
				return st, err
			}
			removeLocalDir(cfg.TempDir)
			return st, nil
		case why != "":
			want.Began = map[string]string{"": why}
			if _, err := commitplan.Make(reports, want); err != nil {
				return refused(ctx, fs, cfg, st, err)
			}
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

// beginEvidence is, for a runner-sharded write to which no bundle
// committed a file, the evidence that its input was not empty, as a
// phrase for commitplan.Expect.Began ("" for none): Begin's marker is gone
// (a failing bundle attempt removed it), an attempt that failed before
// Begin left its tombstone, or an attempt left its file. With
// final given (the name of the empty input's file), retried is a finalize
// step run again after it committed: the marker gone, nothing left, and
// final in place.
func beginEvidence(ctx context.Context, fs filesystem.Interface, cfg writeConfig, final string) (why string, retried bool, err error) {
	left, err := tempFiles(ctx, fs, cfg)
	if err != nil {
		return "", false, err
	}
	_, merr := fs.Size(ctx, cfg.TempDir+begunMarker)
	if merr != nil && len(left) == 0 && final != "" {
		if _, ferr := fs.Size(ctx, final); ferr == nil {
			return "", true, nil
		}
	}
	for _, p := range left {
		if strings.HasPrefix(p, cfg.TempDir+failedPrefix) {
			return fmt.Sprintf("a bundle attempt failed before the write's Begin step ran (it left %s)", p), false, nil
		}
	}
	switch {
	case merr != nil:
		return "the temporary directory's marker is gone (a bundle attempt failed)", false, nil
	case len(left) > 0:
		return fmt.Sprintf("bundle attempts that had records left %s", left[0]), false, nil
	}
	return "", false, nil
}

// reportsOf is results as the reports of commitplan.
func reportsOf(results []fileResult) []commitplan.Report {
	out := make([]commitplan.Report, len(results))
	for i, r := range results {
		out[i] = commitplan.Report{Group: r.Dest, Shard: r.Shard, Item: r.Temp, Count: r.Records, Err: r.Err}
		if r.Err != "" {
			out[i].Item = ""
		}
	}
	return out
}

// refused is the error of a finalize step that commitplan refused (err).
// A write that failed (a bundle's error, a missing shard or bundle, a
// file of a destination no bundle reported) commits nothing and removes
// every temporary file (failWrite); results that cannot come of this
// write's bundles (a shard out of range, or written twice) fail as they
// are.
func refused(ctx context.Context, fs filesystem.Interface, cfg writeConfig, st finalizeStats, err error) (finalizeStats, error) {
	var r *commitplan.Refusal
	if !errors.As(err, &r) {
		return st, fmt.Errorf("avroio.Write to %s: %w", cfg.Prefix, err)
	}
	prefix := cfg.Prefix
	dest := ""
	if cfg.Dynamic {
		prefix = cfg.destPrefix(r.Group)
		dest = fmt.Sprintf(" of destination %q", r.Group)
	}
	fail := func(format string, args ...any) (finalizeStats, error) {
		return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: %s", cfg.Prefix, fmt.Sprintf(format, args...)))
	}
	switch r.Kind {
	case commitplan.Failed:
		return fail("%s", r.Error())
	case commitplan.Unknown:
		return fail("temporary file %s of destination %q, which no bundle reported", r.Item, r.Group)
	case commitplan.BadShard:
		return st, fmt.Errorf("avroio.Write to %s: temporary file %s has shard %d, want one of [0, %d)", prefix, r.Item, r.Shard, r.Shards)
	case commitplan.Twice:
		return st, fmt.Errorf("avroio.Write to %s: shard %d was written twice (%s and %s)", prefix, r.Shard, r.Other, r.Item)
	case commitplan.Missing:
		if r.Shard == commitplan.Unsharded {
			return fail("no bundle committed a file, but the input was not empty: %s", r.Evidence)
		}
		return fail("shard %d of %d%s has no file (its writing failed, and the runner ran the finalize step all the same)", r.Shard, r.Shards, dest)
	}
	return st, fmt.Errorf("avroio.Write to %s: %v", cfg.Prefix, r)
}

// commitMoves renames each temporary file moves[i] to finals[i], then
// removes what is left in the temporary directory (the files of failed
// or retried attempts, Begin's marker, and the lease) and the directory.
// A rename found done (a retried finalize step) is skipped.
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
	// and (last, see the retried case above) Begin's marker, then the
	// lease.
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
	if err := removeLease(ctx, fs, cfg); err != nil {
		return st, err
	}
	removeLocalDir(cfg.TempDir)
	return st, nil
}

// removeLease stops this process's renewal of the write's lease and
// removes it: the write is over.
func removeLease(ctx context.Context, fs filesystem.Interface, cfg writeConfig) error {
	dropLease(cfg.TempDir)
	lease := cfg.TempDir + leaseFile
	if _, err := fs.Size(ctx, lease); err != nil {
		return nil
	}
	return removeAll(ctx, fs, cfg, []string{lease}, nil)
}

// failWrite removes everything in the temporary directory of a write that
// failed (the files of every bundle, committed or not, and Begin's
// marker), and the directory, and returns err: nothing of the write is
// left, and no final file was made.
func failWrite(ctx context.Context, fs filesystem.Interface, cfg writeConfig, st finalizeStats, err error) (finalizeStats, error) {
	dropLease(cfg.TempDir)
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
	cfg.Dynamic = true
	want := commitplan.Expect{}
	if cfg.NumShards > 0 {
		want.Shards, want.Groups = cfg.NumShards, dests
	}
	reports := reportsOf(results)
	plan, err := commitplan.Make(reports, want)
	if err != nil {
		return refused(ctx, fs, cfg, st, err)
	}
	if cfg.NumShards == 0 && len(plan.Groups) == 0 {
		why, _, err := beginEvidence(ctx, fs, cfg, "")
		if err != nil {
			return st, err
		}
		if why != "" {
			want.Began = map[string]string{"": why}
			if _, err := commitplan.Make(reports, want); err != nil {
				return refused(ctx, fs, cfg, st, err)
			}
		}
	}
	var moves, finals []string
	seen := map[string]string{}
	for _, d := range plan.Groups {
		n := len(plan.Items[d])
		for i, m := range plan.Items[d] {
			final := cfg.destShardName(d, i, n)
			if other, dup := seen[final]; dup {
				return st, fmt.Errorf("avroio.Write to %s: %s and %s would both be named %s (destinations %q; shard name template %q)", cfg.Prefix, other, m, final, plan.Groups, cfg.Template)
			}
			seen[final] = m
			moves = append(moves, m)
			finals = append(finals, final)
		}
	}
	return commitMoves(ctx, fs, cfg, st, moves, finals)
}
