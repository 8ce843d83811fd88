package filesource

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseSkipList(t *testing.T) {
	listed, err := parseSkipList(strings.NewReader("# read by job 1\n/data/in/a.avro\n\n  /data/in/./b.avro  \ngs://bucket/in/c.avro\n#/data/in/d.avro\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"/data/in/a.avro": true, "/data/in/b.avro": true, "gs://bucket/in/c.avro": true}
	if !reflect.DeepEqual(listed, want) {
		t.Errorf("listed %v, want %v", listed, want)
	}
	if _, err := parseSkipList(strings.NewReader("/a\n" + strings.Repeat("x", maxSkipListLine+1) + "\n")); err == nil || !strings.Contains(err.Error(), "a line over") {
		t.Errorf("a line too long: %v", err)
	}
}

// TestWatchSkip drives the watch's filter: files modified before the time
// and files in the list are left out of each poll and counted; a file
// without a modification time is kept; the list is read once per DoFn.
func TestWatchSkip(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "read.txt")
	if err := os.WriteFile(list, []byte("/in/listed.avro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cut := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	files := []watchFile{
		{Path: "/in/old.avro", Size: 1, LastModified: cut.Add(-time.Second).UnixNano()},
		{Path: "/in/at.avro", Size: 1, LastModified: cut.UnixNano()},
		{Path: "/in/new.avro", Size: 1, LastModified: cut.Add(time.Hour).UnixNano()},
		{Path: "/in/untimed.avro", Size: 1},
		{Path: "/in/listed.avro", Size: 1, LastModified: cut.Add(time.Hour).UnixNano()},
	}
	o := options{}
	WithSkipOlderThan(cut)(&o)
	WithSkipListed(list)(&o)
	if o.err != nil {
		t.Fatal(o.err)
	}
	fn := &watchFn{SkipOlderThan: o.skipOlderThan, SkipListed: o.skipListed}
	kept, skipped, err := fn.skipFiles(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := paths(kept), []string{"/in/at.avro", "/in/new.avro", "/in/untimed.avro"}; !reflect.DeepEqual(got, want) || skipped != 2 {
		t.Errorf("kept %v, skipped %d; want %v, 2", got, skipped, want)
	}
	// Read once: a change to the list is not seen by this instance.
	if err := os.WriteFile(list, []byte("/in/new.avro\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if kept, _, _ := fn.skipFiles(context.Background(), files); len(kept) != 3 {
		t.Errorf("the list was read again: kept %v", paths(kept))
	}
	// Without options, nothing is skipped.
	if kept, skipped, _ := (&watchFn{}).skipFiles(context.Background(), files); len(kept) != len(files) || skipped != 0 {
		t.Errorf("no options: kept %d of %d", len(kept), len(files))
	}
	// A list that is gone when the watch starts fails the watch, naming it.
	fn2 := &watchFn{SkipListed: filepath.Join(dir, "gone.txt")}
	if _, _, err := fn2.skipFiles(context.Background(), files); err == nil || !strings.Contains(err.Error(), "gone.txt") {
		t.Errorf("a missing list: %v", err)
	}
	// A list that cannot be read when the pipeline is built is refused
	// then.
	o = options{}
	WithSkipListed(filepath.Join(dir, "gone.txt"))(&o)
	if o.err == nil || !strings.Contains(o.err.Error(), "WithSkipListed") {
		t.Errorf("WithSkipListed of a missing file: %v", o.err)
	}
	o = options{}
	WithSkipOlderThan(time.Time{})(&o)
	if o.skipOlderThan != 0 {
		t.Errorf("the zero time skips files before %d", o.skipOlderThan)
	}
}
