package filesource

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// A restarted watch starts from nothing: it has no memory of the files an
// earlier job read (Beam's model: a new job has new state; Java's
// Watch does the same). The skip options let the user say which files
// an earlier job already read.

// WithSkipOlderThan makes the watch skip every file whose modification
// time is before t, as if it had been read already: for a job restarted
// after a failure, t is about when the failed job last read a file (a
// little earlier, to be sure: the files between are then read twice).
// A file whose filesystem gives no modification time is never skipped
// for its time. Mind copies that keep their modification time (cp -p,
// rsync -t, gsutil rsync): an old time on a new file skips it. A skipped
// file that is modified later (a time at or after t) is new, and read.
// The zero time skips nothing.
func WithSkipOlderThan(t time.Time) UpdatedOption {
	return func(o *options) {
		if t.IsZero() {
			o.skipOlderThan = 0
			return
		}
		o.skipOlderThan = t.UnixNano()
	}
}

// WithSkipListed makes the watch skip the files whose paths are listed in
// the text file at path (on any Beam filesystem), one per line, as the
// watch names them (the pattern's scheme and directories, local paths
// cleaned: /data/in/a.avro, gs://bucket/in/a.avro); blank lines and lines
// starting with # are ignored. The file is read when the pipeline is built
// (which fails, naming it, if it cannot be read) and again by the watch
// when it starts on a worker, so a list written between the two counts.
// It is read once per watch and worker: lines added while the watch runs
// are not seen. The list is held in memory: about the size of the file.
func WithSkipListed(path string) UpdatedOption {
	return func(o *options) {
		o.skipListed = path
		if strings.TrimSpace(path) == "" {
			o.fail("WithSkipListed(%q): an empty path", path)
			return
		}
		if _, err := readSkipList(context.Background(), path); err != nil {
			o.fail("WithSkipListed(%q): %w", path, err)
		}
	}
}

// maxSkipListLine is the longest line of a skip list: a path.
const maxSkipListLine = 64 << 10

// readSkipList reads the paths listed in the file at path.
func readSkipList(ctx context.Context, path string) (map[string]bool, error) {
	fsys, err := filesystem.New(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("opening its filesystem: %w", err)
	}
	defer fsys.Close()
	r, err := fsys.OpenRead(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("opening it: %w", err)
	}
	defer r.Close()
	return parseSkipList(r)
}

func parseSkipList(r io.Reader) (map[string]bool, error) {
	listed := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSkipListLine)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if isLocal(line) {
			line = filepath.Clean(line)
		}
		listed[line] = true
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("reading it: a line over %d bytes", maxSkipListLine)
		}
		return nil, fmt.Errorf("reading it: %w", err)
	}
	return listed, nil
}

// watchSkip is what the watch skips: the configuration travels in
// watchFn's fields, the list is read once per DoFn instance.
type watchSkip struct {
	listed map[string]bool
	loaded bool
}

// skipFiles returns files without those the skip options name, and how
// many it left out.
func (fn *watchFn) skipFiles(ctx context.Context, files []watchFile) ([]watchFile, int, error) {
	if fn.SkipOlderThan == 0 && fn.SkipListed == "" {
		return files, 0, nil
	}
	if fn.SkipListed != "" && !fn.skip.loaded {
		listed, err := readSkipList(ctx, fn.SkipListed)
		if err != nil {
			return nil, 0, fmt.Errorf("filesource: the skip list %s (WithSkipListed): %w", fn.SkipListed, err)
		}
		fn.skip = watchSkip{listed: listed, loaded: true}
	}
	kept := files[:0:0]
	for _, f := range files {
		if fn.SkipOlderThan != 0 && f.LastModified != 0 && f.LastModified < fn.SkipOlderThan || fn.skip.listed[f.Path] {
			continue
		}
		kept = append(kept, f)
	}
	return kept, len(files) - len(kept), nil
}
