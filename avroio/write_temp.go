package avroio

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// Temporary directories of writes that are no longer running.
//
// A write whose job fails in another step of a writing bundle's stage
// (a DoFn before Write that returns an error, say) cannot remove what the
// failed bundle attempt wrote: Beam Go's harness drops the bundle's plan
// without calling any method of its DoFns (harness.go, handleInstruction),
// and the runner tells no other step. When the job goes on (a runner
// retries the bundle), the finalize step removes the attempt's files with
// every other leftover; when the job fails, they stay. A later write beside
// them removes them instead, by this rule: a directory named
// .temp-sdfio-<id>/ (or .temp-sdfio-<id>-<id>/, a windowed write's) in
// the directory where this write makes its own, other than its own, whose
// newest file was last modified more than StaleTempAge ago (7 days by
// default), is a write that is no longer running, and its files and the
// directory are removed. Removing nothing else (no final file, nothing
// named otherwise) keeps it safe where several jobs write beside each
// other, as on Dataflow: a running write adds or changes a file of its
// directory as its bundles finish, and one that went StaleTempAge without
// doing so and lost its directory fails, naming the missing file (a
// rename of a temporary file that is gone, or Begin's marker), rather
// than writing anything wrong. The age is that of the files themselves
// (the filesystem's LastModified), so workers' clocks do not matter
// beyond the time this one compares with.

// DefaultStaleTempAge is how long another write's temporary directory
// must have gone unmodified for a write to remove it (WithStaleTempAge):
// longer than a batch write runs between two of its bundles committing.
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
	type tempDir struct {
		files  []string
		newest time.Time
	}
	dirs := map[string]*tempDir{}
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, base)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, "/")
		if !isTempDirName(name) || base+name == own {
			continue
		}
		t, err := lm.LastModified(ctx, p)
		if err != nil {
			if _, serr := fs.Size(ctx, p); serr != nil {
				continue // removed since it was listed
			}
			return sw, fmt.Errorf("avroio.Write: when was %s modified: %w", p, err)
		}
		d := dirs[base+name]
		if d == nil {
			d = &tempDir{}
			dirs[base+name] = d
		}
		d.files = append(d.files, p)
		if t.After(d.newest) {
			d.newest = t
		}
	}
	names := make([]string, 0, len(dirs))
	for name, d := range dirs {
		if now.Sub(d.newest) > age {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if err := removeAll(ctx, fs, cfg, dirs[name].files, &sw.removed); err != nil {
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

// sweepStaleTempDirs runs removeStaleTempDirs for a finalize step, which
// counts the files removed in temp_files_removed and logs the directories.
// Its failure does not fail the write, whose own files are committed by
// then: it is logged, and the next write tries again.
func sweepStaleTempDirs(ctx context.Context, fs filesystem.Interface, cfg writeConfig) {
	sw, err := removeStaleTempDirs(ctx, fs, cfg, time.Now())
	if sw.removed > 0 {
		cfg.counter("temp_files_removed").Inc(ctx, int64(sw.removed))
	}
	if len(sw.dirs) > 0 {
		log.Infof(ctx, "avroio.Write to %s: removed %d temporary directories of writes no longer running (nothing modified in them for %v), %d files: %s", cfg.Prefix, len(sw.dirs), cfg.StaleTempAge, sw.removed, strings.Join(sw.dirs, ", "))
	}
	if err != nil {
		log.Warnf(ctx, "avroio.Write to %s: removing the temporary directories of writes no longer running: %v", cfg.Prefix, err)
	}
}
