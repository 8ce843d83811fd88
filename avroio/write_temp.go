package avroio

// Temporary files and directories: a bundle's file under a name of its
// own, the filesystem calls every step shares, and the removal of what
// writes no longer running left.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/sdfio/sdfio/avroio/container"
)

// tempFile is a container file being written to a temporary name.
type tempFile struct {
	path string
	wc   *ioRecorder
	cw   *container.Writer
}

// ioRecorder keeps the first error of the file it writes, so that a
// failed Append can be told apart: the filesystem's fault (a failed
// write), which a runner may retry, or the record's.
type ioRecorder struct {
	io.WriteCloser
	err error
}

func (w *ioRecorder) Write(p []byte) (int, error) {
	n, err := w.WriteCloser.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// dataFault reports whether err, from appending to f, is a fault of the
// record (it cannot be encoded, or exceeds a limit) rather than of the
// filesystem: the same record fails the same way on every attempt.
func (f *tempFile) dataFault(err error) bool { return err != nil && f.wc.err == nil }

func openTempFile(ctx context.Context, fs filesystem.Interface, cfg writeConfig, path string) (*tempFile, error) {
	fwc, err := fs.OpenWrite(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("avroio.Write: creating temporary file %s: %w", path, err)
	}
	wc := &ioRecorder{WriteCloser: fwc}
	cw, err := container.NewWriter(wc, cfg.Schema, cfg.writerOptions())
	if err != nil {
		// The header could not be written: remove what was.
		wc.Close()
		if rm, ok := fs.(filesystem.Remover); ok {
			rm.Remove(ctx, path)
		}
		return nil, fmt.Errorf("avroio.Write: temporary file %s: %w", path, err)
	}
	return &tempFile{path: path, wc: wc, cw: cw}, nil
}

// finish writes the last block and closes the file, which commits it on
// object stores.
func (f *tempFile) finish() (fileResult, error) {
	err := f.cw.Close()
	if cerr := f.wc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileResult{}, fmt.Errorf("avroio.Write: finishing temporary file %s: %w", f.path, err)
	}
	return fileResult{Temp: f.path, Shard: -1, Records: f.cw.Records(), Bytes: f.cw.Offset()}, nil
}

// abandon closes a file of a bundle that failed and tries to remove it;
// whatever is left, the finalize step removes.
func (f *tempFile) abandon(ctx context.Context, fs filesystem.Interface) {
	f.cw.Close()
	f.wc.Close()
	if rm, ok := fs.(filesystem.Remover); ok {
		rm.Remove(ctx, f.path)
	}
}

// openTempFS opens the filesystem of the write's temporary directory, for
// the write's DoFns.
func openTempFS(ctx context.Context, cfg writeConfig) (filesystem.Interface, error) {
	fs, err := filesystem.New(ctx, cfg.TempDir)
	if err != nil {
		return nil, fmt.Errorf("avroio.Write: %w", err)
	}
	return fs, nil
}

// closeFS closes fs, if Setup opened it.
func closeFS(fs filesystem.Interface) error {
	if fs != nil {
		return fs.Close()
	}
	return nil
}

// tempFiles lists the files in the temporary directory other than Begin's
// marker and the lease.
func tempFiles(ctx context.Context, fs filesystem.Interface, cfg writeConfig) ([]string, error) {
	all, err := fs.List(ctx, cfg.TempDir+"*")
	if err != nil {
		return nil, fmt.Errorf("avroio.Write: listing the temporary directory %s: %w", cfg.TempDir, err)
	}
	marker, lease := cfg.TempDir+begunMarker, cfg.TempDir+leaseFile
	left := all[:0]
	for _, p := range all {
		if p != marker && p != lease {
			left = append(left, p)
		}
	}
	return left, nil
}

// removeAll removes the temporary files paths, counting them in n.
func removeAll(ctx context.Context, fs filesystem.Interface, cfg writeConfig, paths []string, n *int) error {
	if len(paths) == 0 {
		return nil
	}
	rm, ok := fs.(filesystem.Remover)
	if !ok {
		return fmt.Errorf("avroio.Write: %T cannot remove the %d leftover temporary files in %s", fs, len(paths), cfg.TempDir)
	}
	for _, p := range paths {
		if err := rm.Remove(ctx, p); err != nil {
			return fmt.Errorf("avroio.Write: removing leftover temporary file %s: %w", p, err)
		}
		if n != nil {
			*n++
		}
	}
	return nil
}

// makeLocalDir makes the directory of a local file where it is missing
// (a WithTempDirectory elsewhere leaves the prefix's directory unmade); object
// stores need none.
func makeLocalDir(path string) error {
	if strings.Contains(path, "://") {
		return nil
	}
	return os.MkdirAll(filepath.Dir(path), 0o755)
}

// removeLocalDir removes the temporary directory of a write to the local
// filesystem, which Beam's filesystem interface cannot do (object stores
// have no directories to remove). It fails harmlessly when the directory is
// not empty or not local.
func removeLocalDir(dir string) {
	if strings.Contains(dir, "://") {
		return
	}
	os.Remove(strings.TrimSuffix(dir, "/"))
}

// Temporary directories of writes that are no longer running.
//
// A write whose job fails in another step (a DoFn before Write that
// returns an error, in the writing bundle's stage or in a stage of its
// own) cannot remove what it left: Beam Go's harness drops a failed
// bundle's plan without calling any method of its DoFns (harness.go,
// handleInstruction), and the runner tells no other step. In the writing
// stage that leaves the attempt's temporary file, Begin's marker and the
// lease; in a stage before it, Begin's marker and the lease. When the job
// goes on (a runner retries the bundle), the finalize step removes the
// attempt's files with every other leftover; when the job fails, they
// stay. A later write beside them removes them instead: a directory named
// .temp-sdfio-<id>/ (or .temp-sdfio-<id>-<id>/, a windowed write's) in
// the directory where this write makes its own, other than its own, is a
// write that is no longer running, and its files and the directory are
// removed, when
//
//   - it holds a lease (write_lease.go) that is released (its workers were
//     stopped: the job ended) or was not renewed for leaseTTL (5 minutes:
//     its workers were killed);
//   - it holds no lease and its newest file was last modified more than
//     StaleTempAge ago (7 days by default).
//
// Removing nothing else (no final file, nothing named otherwise) keeps it
// safe where several jobs write beside each other, as on Dataflow: a
// running write renews its lease (or, without one, adds or changes a file
// of its directory as its bundles finish), and one whose directory was
// removed all the same (every worker that renews its lease gone while
// the job runs on, or a lease-less write that went StaleTempAge without a
// change) fails, naming the missing file (a rename of a temporary file
// that is gone, or Begin's marker), rather than writing anything wrong.
// The age is that of the files themselves (the filesystem's
// LastModified), so workers' clocks do not matter beyond the time this
// one compares with.

// DefaultStaleTempAge is how long another write's temporary directory
// without a lease must have gone unmodified for a write to remove it
// (WithStaleTempAge): longer than a batch write runs between two of its
// bundles committing.
const DefaultStaleTempAge = 7 * 24 * time.Hour

// tempDirPrefix starts the name of every write's temporary directory.
const tempDirPrefix = ".temp-sdfio-"

// isTempDirName reports whether name is that of a write's temporary
// directory: tempDirPrefix and one or two random IDs (randomID).
func isTempDirName(name string) bool {
	rest, ok := strings.CutPrefix(name, tempDirPrefix)
	if !ok {
		return false
	}
	isID := func(s string) bool { return len(s) == 32 && strings.Trim(s, "0123456789abcdef") == "" }
	a, b, two := strings.Cut(rest, "-")
	return isID(a) && (!two || isID(b))
}

// staleSweep is what removeStaleTempDirs did.
type staleSweep struct {
	dirs    []string // the directories removed
	removed int      // their files
}

// removeStaleTempDirs removes the temporary directories of writes that are
// no longer running beside cfg's own (see above), by now.
func removeStaleTempDirs(ctx context.Context, fs filesystem.Interface, cfg writeConfig, now time.Time) (staleSweep, error) {
	var sw staleSweep
	own := strings.TrimSuffix(cfg.TempDir, "/")
	base := own[:strings.LastIndex(own, "/")+1]
	age := cfg.StaleTempAge
	if age <= 0 {
		age = DefaultStaleTempAge
	}
	lm, ok := fs.(filesystem.LastModifiedGetter)
	if !ok {
		return sw, fmt.Errorf("avroio.Write: %T cannot say when files were modified: temporary directories of failed writes in %s are not removed", fs, base)
	}
	paths, err := fs.List(ctx, base+tempDirPrefix+"*/*")
	if err != nil {
		return sw, fmt.Errorf("avroio.Write: listing the temporary directories in %s: %w", base, err)
	}
	files := map[string][]string{} // by directory
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, base)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, "/")
		if !isTempDirName(name) || base+name == own {
			continue
		}
		files[base+name] = append(files[base+name], p)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		dead, err := deadTempDir(ctx, fs, lm, name, files[name], now, age)
		if err != nil {
			return sw, err
		}
		if !dead {
			continue
		}
		// The lease last: a removal that fails part way leaves a
		// directory that the next write still takes for dead.
		lease := name + "/" + leaseFile
		paths := slices.DeleteFunc(slices.Clone(files[name]), func(p string) bool { return p == lease })
		if len(paths) < len(files[name]) {
			paths = append(paths, lease)
		}
		if err := removeAll(ctx, fs, cfg, paths, &sw.removed); err != nil {
			return sw, err
		}
		removeLocalDir(name + "/")
		sw.dirs = append(sw.dirs, name+"/")
	}
	// Local directories left empty (their files removed, the directory
	// not): nothing to list in them, only their own age to go by.
	if !strings.Contains(base, "://") {
		empty, _ := filepath.Glob(base + tempDirPrefix + "*")
		for _, dir := range empty {
			fi, err := os.Stat(dir)
			if dir == own || !isTempDirName(filepath.Base(dir)) || err != nil || !fi.IsDir() || now.Sub(fi.ModTime()) <= age {
				continue
			}
			if os.Remove(dir) == nil {
				sw.dirs = append(sw.dirs, dir+"/")
			}
		}
	}
	return sw, nil
}

// deadTempDir reports whether the temporary directory dir, holding the
// files paths, is that of a write no longer running (see above).
func deadTempDir(ctx context.Context, fs filesystem.Interface, lm filesystem.LastModifiedGetter, dir string, paths []string, now time.Time, age time.Duration) (bool, error) {
	lease := dir + "/" + leaseFile
	if slices.Contains(paths, lease) {
		alive, gone, err := leaseAlive(ctx, fs, lm, lease, now)
		if err != nil || gone {
			// Gone since it was listed: its write finished, or removed
			// it; the next write looks again.
			return false, err
		}
		return !alive, nil
	}
	for _, p := range paths {
		t, err := lm.LastModified(ctx, p)
		if err != nil {
			if _, serr := fs.Size(ctx, p); serr != nil {
				continue // removed since it was listed
			}
			return false, fmt.Errorf("avroio.Write: when was %s modified: %w", p, err)
		}
		if now.Sub(t) <= age {
			return false, nil
		}
	}
	return true, nil
}

// sweepStaleTempDirs runs removeStaleTempDirs for Begin and the finalize
// step, counting the files removed in temp_files_removed and logging the
// directories. Its failure does not fail the write: it is logged, and the
// next write tries again.
func sweepStaleTempDirs(ctx context.Context, fs filesystem.Interface, cfg writeConfig) {
	sw, err := removeStaleTempDirs(ctx, fs, cfg, time.Now())
	if sw.removed > 0 {
		cfg.counter("temp_files_removed").Inc(ctx, int64(sw.removed))
	}
	if len(sw.dirs) > 0 {
		log.Infof(ctx, "avroio.Write to %s: removed %d temporary directories of writes no longer running (a lease released or not renewed for %v, or, without one, nothing modified for %v), %d files: %s", cfg.Prefix, len(sw.dirs), leaseTTL, cmp.Or(cfg.StaleTempAge, DefaultStaleTempAge), sw.removed, strings.Join(sw.dirs, ", "))
	}
	if err != nil {
		log.Warnf(ctx, "avroio.Write to %s: removing the temporary directories of writes no longer running: %v", cfg.Prefix, err)
	}
}
