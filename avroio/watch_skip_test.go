package avroio

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
)

// TestWatchRestartSkips is a streaming job submitted again after a
// failure, on Prism. The directory holds a (read by the failed job, listed
// in the user's list), b (modified before the time the user gives) and c
// (new); d comes while the job runs. A watch started anew reads a, b and c
// again (Beam's model, documented); with WithSkipOlderThan and
// WithSkipListed it reads c and d alone, each once, and counts the skipped
// files in every poll.
func TestWatchRestartSkips(t *testing.T) {
	dir := t.TempDir()
	glob := watchScheme + "://" + filepath.Join(dir, "*.avro")
	now := time.Now()
	cut := now.Add(-time.Hour)
	for i, f := range []struct {
		name string
		mod  time.Time
	}{{"a.avro", now}, {"b.avro", now.Add(-2 * time.Hour)}, {"c.avro", now}} {
		path, err := writeWatchFile(dir, f.name, i, 5)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, f.mod, f.mod); err != nil {
			t.Fatal(err)
		}
	}
	list := filepath.Join(t.TempDir(), "read-by-the-failed-job.txt")
	if err := os.WriteFile(list, []byte("# files the failed job read\n"+watchScheme+"://"+filepath.Join(dir, "a.avro")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeFor[watchEvent]()

	// Started anew without the options: every file again.
	p, s := beam.NewPipelineWithRoot()
	recs := WatchForNewFiles(s, glob, typ, 100*time.Millisecond, AfterNoNewFilesFor(time.Second))
	passert.Equals(s, beam.ParDo(s, watchEventID, recs), append(append(watchFileIDs(0, 5), watchFileIDs(1, 5)...), watchFileIDs(2, 5)...)...)
	if _, err := watchRun(p, watchTimeout); err != nil {
		t.Fatalf("watch without skips: %v", err)
	}

	// With the options: c, and d that comes while it runs.
	p, s = beam.NewPipelineWithRoot()
	recs = WatchForNewFiles(s, glob, typ, 100*time.Millisecond, AfterNoNewFilesFor(2*time.Second),
		WithSkipOlderThan(cut), WithSkipListed(list))
	passert.Equals(s, beam.ParDo(s, watchEventID, recs), append(watchFileIDs(2, 5), watchFileIDs(3, 4)...)...)
	watchListsMu.Lock()
	lists := watchLists[glob]
	watchListsMu.Unlock()
	writerErr := make(chan error, 1)
	go func() {
		if _, err := waitLists(glob, lists+2, time.Minute); err != nil {
			writerErr <- err
			return
		}
		_, err := writeWatchFile(dir, "d.avro", 3, 4)
		writerErr <- err
	}()
	res, err := watchRun(p, watchTimeout)
	if err != nil {
		t.Fatalf("watch with skips: %v", err)
	}
	if err := <-writerErr; err != nil {
		t.Fatal(err)
	}
	polls, skipped := watchCounter(t, res, "watch_polls"), watchCounter(t, res, "watch_files_skipped")
	if polls < 3 || skipped != 2*polls {
		t.Errorf("watch_files_skipped = %d in %d polls, want 2 a poll", skipped, polls)
	}
	if n := watchCounter(t, res, "watch_new_files"); n != 2 {
		t.Errorf("watch_new_files = %d, want 2 (c and d)", n)
	}
}

func TestWatchSkipConstruction(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	typ := reflect.TypeFor[watchEvent]()
	missing := filepath.Join(t.TempDir(), "missing.txt")
	msg := mustPanic(t, "WithSkipListed of a missing list", func() {
		WatchForNewFiles(s, "/tmp/*.avro", typ, time.Second, Never(), WithSkipListed(missing))
	})
	for _, w := range []string{"avroio.WatchForNewFiles", "WithSkipListed", missing} {
		if !strings.Contains(msg, w) {
			t.Errorf("the panic does not say %q: %s", w, msg)
		}
	}
	mustPanic(t, "WithSkipListed of an empty path", func() {
		WatchForNewFiles(s, "/tmp/*.avro", typ, time.Second, Never(), WithSkipListed(" "))
	})
	mustPanic(t, "MatchNewFiles WithSkipListed of a missing list", func() {
		MatchNewFiles(s, beam.Create(s, "/tmp/*.avro"), time.Second, Never(), WithSkipListed(missing))
	})
}
