package avroio

// The runner-sharded write (the default): Begin's marker, then a
// temporary file per bundle.

import (
	"context"
	"fmt"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/internal/runnerfix"
)

// writeBundleFn writes each bundle's records to a temporary file of its
// own and, when the bundle finishes, emits the file's description.
//
// It takes no side input: a bundle may run before Begin (see giveUp for
// the evidence a failing one leaves then). A side input only to wait for
// Begin cost the write a third of its speed on Prism (v2.77, v2.78),
// whose watermark loop spins on a core while a stage with a side input
// runs (docs/UPSTREAM.md, 10).
//
// A record it cannot write (not encodable by the schema, or past a limit)
// does not fail the bundle: the bundle drops its file, skips the rest of
// its records and emits the error instead (fileResult.Err), so that the
// write fails in its finalize step, which then removes every temporary
// file and commits nothing. (A failed bundle cannot do that: other
// bundles may still write; and Prism (v2.77, v2.78) may run the finalize step
// after a bundle failed, with the bundles that did commit.) The same
// record fails every attempt, so a runner's retry could not have helped.
// A fault of the filesystem fails the bundle, for the runner to retry.
type writeBundleFn struct {
	Config writeConfig
	// Dest is WithDestination's function, nil without one: the bundle
	// then writes one file per destination.
	Dest *destFunc

	fs     filesystem.Interface
	files  map[string]*tempFile // by destination
	order  []string             // the destinations of files, in order
	enc    *elementEncoder
	failed string // the record error of this bundle, if any
}

func (fn *writeBundleFn) Setup(ctx context.Context) (err error) {
	if fn.fs, err = openTempFS(ctx, fn.Config); err != nil {
		return err
	}
	if fn.enc, err = openEncoder(fn.Config); err != nil {
		return err
	}
	fn.files = map[string]*tempFile{}
	return nil
}

// touchWriteCounters makes the runner know the write counters from a
// bundle's first report on (runnerfix.TouchCounters says why; it lost a
// bundle's records_written under load).
func touchWriteCounters(ctx context.Context, cfg writeConfig) {
	runnerfix.TouchCounters(ctx, cfg.counter("records_written"), cfg.counter("bytes_written"))
}

// StartBundle drops the file of a bundle that failed on this instance
// (in another DoFn of its stage, since this one did not see it fail).
func (fn *writeBundleFn) StartBundle(ctx context.Context, _ func(fileResult)) {
	touchWriteCounters(ctx, fn.Config)
	// This worker renews the write's lease from now on (write_lease.go).
	holdLease(ctx, fn.Config.TempDir)
	fn.failed = ""
	if len(fn.files) > 0 {
		fn.giveUp(ctx)
	}
}

func (fn *writeBundleFn) ProcessElement(ctx context.Context, elem beam.X, _ func(fileResult)) error {
	if fn.failed != "" {
		return nil // the write fails; its finalize step says why
	}
	dest := ""
	if fn.Dest != nil {
		var err error
		if dest, err = fn.Dest.of(elem); err != nil {
			fn.dropFiles(ctx)
			fn.failed = fmt.Sprintf("avroio.Write to %s: %v", fn.Config.Prefix, err)
			return nil
		}
	}
	cur := fn.files[dest]
	if cur == nil {
		// A new name for every bundle attempt.
		f, err := openTempFile(ctx, fn.fs, fn.Config, fn.Config.TempDir+randomID())
		if err != nil {
			fn.giveUp(ctx)
			return err
		}
		cur = f
		fn.files[dest] = f
		fn.order = append(fn.order, dest)
	}
	if err := fn.enc.append(cur.cw, elem); err != nil {
		err = fmt.Errorf("avroio.Write to %s (temporary file %s): %w", fn.Config.destPrefix(dest), cur.path, err)
		if cur.dataFault(err) {
			fn.dropFiles(ctx)
			fn.failed = err.Error()
			return nil
		}
		// The attempt failed: remove what it wrote.
		fn.giveUp(ctx)
		return err
	}
	return nil
}

func (fn *writeBundleFn) FinishBundle(ctx context.Context, emit func(fileResult)) error {
	if fn.failed != "" {
		emit(fileResult{Shard: -1, Err: fn.failed})
		fn.failed = ""
		return nil
	}
	if len(fn.order) == 0 {
		return nil // no records, no file
	}
	var done []fileResult
	for _, dest := range fn.order {
		res, err := fn.files[dest].finish()
		if err != nil {
			// Remove this attempt's files, the finished ones too: none is
			// committed.
			for _, r := range done {
				if rm, ok := fn.fs.(filesystem.Remover); ok {
					rm.Remove(ctx, r.Temp)
				}
			}
			fn.giveUp(ctx)
			return err
		}
		delete(fn.files, dest)
		res.Dest = dest
		done = append(done, res)
	}
	fn.order = nil
	for _, res := range done {
		fn.Config.counter("records_written").Inc(ctx, res.Records)
		fn.Config.counter("bytes_written").Inc(ctx, res.Bytes)
		emit(res)
	}
	return nil
}

// dropFiles abandons the bundle's files.
func (fn *writeBundleFn) dropFiles(ctx context.Context) {
	for _, f := range fn.files {
		f.abandon(ctx, fn.fs)
	}
	clear(fn.files)
	fn.order = nil
}

// giveUp removes what a failing bundle attempt wrote, and leaves the
// evidence that it failed: an attempt that had records and commits
// nothing must not let the finalize step take the input for empty (see
// finalize). With Begin's marker there, the evidence is its removal; a
// bundle may run before Begin (nothing orders them but the finalize step,
// which waits for both), so without the marker the attempt leaves a
// tombstone file instead (failedPrefix), which the finalize step finds
// whenever Begin ran. The evidence is only ever consulted when no bundle
// committed a file, which on a runner that does not run the finalize step
// after a failure means the input was empty and no attempt ran at all; so
// it cannot fail a write that a retried attempt completes. With the
// marker, it removes the lease too, so that the directory goes when its
// files do; a write whose bundle a runner retries goes on without one (a
// directory without a lease is only removed by another write after
// WithStaleTempAge). With a tombstone, the directory keeps its lease: a
// job that fails leaves the tombstone and a released lease, which the
// next write beside it removes at once. The tombstone is written through
// the same filesystem whose fault may be failing the attempt: if it cannot
// be written either, an attempt that failed before Begin leaves no
// evidence, and only a runner that runs the finalize step after a failed
// bundle with no result at all (Prism, now and then) would take its input
// for empty; the bundle's own error still fails the job everywhere else.
func (fn *writeBundleFn) giveUp(ctx context.Context) {
	fn.dropFiles(ctx)
	dir := fn.Config.TempDir
	if _, err := fn.fs.Size(ctx, dir+begunMarker); err != nil {
		// No marker: Begin has not run yet, or another attempt removed
		// it. A tombstone says so whatever runs next; the directory
		// keeps a lease, which this worker holds and releases when the
		// runner stops it, so that the next write beside it removes the
		// directory at once if this job fails (write_lease.go).
		if w, err := fn.fs.OpenWrite(ctx, dir+failedPrefix+randomID()); err == nil {
			w.Close()
		}
		if err := writeLease(ctx, dir, "", true); err == nil {
			holdLease(ctx, dir)
		}
		return
	}
	dropLease(dir)
	if rm, ok := fn.fs.(filesystem.Remover); ok {
		rm.Remove(ctx, dir+begunMarker)
		rm.Remove(ctx, dir+leaseFile)
	}
	removeLocalDir(dir)
}

func (fn *writeBundleFn) Teardown(ctx context.Context) error {
	if len(fn.files) > 0 {
		fn.giveUp(ctx)
	}
	if fn.fs != nil {
		return fn.fs.Close()
	}
	return nil
}

// begunMarker names Begin's marker file in the temporary directory.
const begunMarker = "begun"

// failedPrefix begins the name of the tombstone a failing bundle attempt
// leaves in the temporary directory when Begin's marker is not there to
// remove (see writeBundleFn.giveUp).
const failedPrefix = "failed-attempt-"

// beginFn makes the temporary directory's marker file, which the finalize
// step waits for (Begin's output is its input): the evidence the finalize
// step needs to write the empty file of an empty input, since no bundle
// ran to say so. A bundle attempt that fails removes it, or leaves a
// tombstone when it fails before Begin made the marker (see
// writeBundleFn.giveUp), so that a finalize step run after the failure
// (Prism v2.77 and v2.78 do, now and then) does not take the lost records
// for an empty input; the finalize step removes it on success. Before the marker
// it makes the write's lease, which tells other writes beside it that
// this one is running (write_lease.go); after it, it removes what writes
// no longer running left beside it (write_temp.go).
type beginFn struct {
	Config writeConfig
}

func (fn *beginFn) ProcessElement(ctx context.Context, _ []byte, emit func([]byte)) error {
	fs, err := openTempFS(ctx, fn.Config)
	if err != nil {
		return err
	}
	defer fs.Close()
	dir := fn.Config.TempDir
	path := dir + begunMarker
	if err := makeLocalDir(path); err != nil {
		return fmt.Errorf("avroio.Write: making the temporary directory %s: %w", dir, err)
	}
	// The lease first: a directory with Begin's marker and no lease is
	// never taken for a running write's by the faster rule.
	if err := writeLease(ctx, dir, "", true); err != nil {
		fn.undo(ctx, fs)
		return fmt.Errorf("avroio.Write: writing %s: %w", dir+leaseFile, err)
	}
	w, err := fs.OpenWrite(ctx, path)
	if err != nil {
		fn.undo(ctx, fs)
		return fmt.Errorf("avroio.Write: writing %s: %w", path, err)
	}
	if err := w.Close(); err != nil {
		fn.undo(ctx, fs)
		return fmt.Errorf("avroio.Write: writing %s: %w", path, err)
	}
	holdLease(ctx, dir)
	// What writes that died left beside this one goes now, whatever
	// becomes of this write.
	sweepStaleTempDirs(ctx, fs, fn.Config)
	emit([]byte(path))
	return nil
}

// undo removes what a failed Begin made.
func (fn *beginFn) undo(ctx context.Context, fs filesystem.Interface) {
	if rm, ok := fs.(filesystem.Remover); ok {
		rm.Remove(ctx, fn.Config.TempDir+begunMarker)
		rm.Remove(ctx, fn.Config.TempDir+leaseFile)
	}
	removeLocalDir(fn.Config.TempDir)
}
