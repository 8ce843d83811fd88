package avroio

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/avroio/container"
)

// TestFinalizeJoinsOneShard: under WithNumShards(1) each bundle writes a
// file of its own and the finalize step joins them, in order, into the one
// file: blocks copied as they are from files with the write's sync marker,
// decompressed and written again from one without (a file of another
// writer). The bundles' files go, and are not counted as leftovers; the
// bytes saved (their headers) are reported; a finalize step retried after
// the join finds the joined file, or the final one, in place.
func TestFinalizeJoinsOneShard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(t, dir, 1)
	if !cfg.concatShard() {
		t.Fatal("WithNumShards(1) does not join")
	}
	fs, _ := filesystem.New(ctx, cfg.TempDir)
	begin(t, cfg)
	other := cfg
	other.Sync = [container.SyncSize]byte{1, 2, 3}
	results := []fileResult{
		tempFileWith(t, fs, cfg, cfg.TempDir+"b1", 0, 1000),
		tempFileWith(t, fs, other, cfg.TempDir+"b2", 1000, 1500),
		tempFileWith(t, fs, cfg, cfg.TempDir+"b3", 1500, 4000),
	}
	var sum int64
	for _, r := range results {
		sum += r.Bytes
	}
	st, err := finalize(ctx, fs, cfg, results)
	if err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(dir, "out-00000-of-00001.avro")
	if !reflect.DeepEqual(st.files, []string{final}) || st.removed != 0 {
		t.Fatalf("finalize: %+v; want the one file %s and no leftovers", st, final)
	}
	fi, err := os.Stat(final)
	if err != nil {
		t.Fatal(err)
	}
	if st.joinedBytes >= 0 || sum+st.joinedBytes != fi.Size() {
		t.Errorf("bundles counted %d bytes, finalize %d: want %d in all", sum, st.joinedBytes, fi.Size())
	}
	got := readRecs(t, final)
	if len(got) != 4000 {
		t.Fatalf("%d records, want 4000", len(got))
	}
	for i, v := range got {
		if v != int64(i) {
			t.Fatalf("record %d is %d", i, v)
		}
	}
	if names := namesIn(t, dir); !reflect.DeepEqual(names, []string{"out-00000-of-00001.avro"}) {
		t.Fatalf("directory holds %v", names)
	}
	h, err := container.ReadHeader(final, mustOpen(t, final), container.Limits{})
	if err != nil || h.Codec != "deflate" || h.Sync != cfg.Sync {
		t.Fatalf("%s: %+v, %v", final, h, err)
	}
	// Retried after it succeeded: nothing changes.
	before, _ := os.ReadFile(final)
	if _, err := finalize(ctx, fs, cfg, results); err != nil {
		t.Fatalf("retried finalize: %v", err)
	}
	if after, _ := os.ReadFile(final); !reflect.DeepEqual(before, after) {
		t.Fatal("a retried finalize step changed the file")
	}

	// Retried after joining and removing some of the bundles' files,
	// before the rename.
	dir2 := t.TempDir()
	cfg2 := testConfig(t, dir2, 1)
	begin(t, cfg2)
	res2 := []fileResult{
		tempFileWith(t, fs, cfg2, cfg2.TempDir+"b1", 0, 10),
		tempFileWith(t, fs, cfg2, cfg2.TempDir+"b2", 10, 20),
	}
	joined, _, err := joinFiles(ctx, fs, cfg2, []string{res2[0].Temp, res2[1].Temp}, res2)
	if err != nil || joined != cfg2.TempDir+joinedFile {
		t.Fatalf("join: %q, %v", joined, err)
	}
	st2, err := finalize(ctx, fs, cfg2, res2)
	if err != nil {
		t.Fatalf("finalize after the join: %v", err)
	}
	if got := readRecs(t, st2.files[0]); len(got) != 20 || got[19] != 19 {
		t.Fatalf("%s holds %v", st2.files[0], got)
	}
}
