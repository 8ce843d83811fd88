package benchdata

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sdfio/sdfio/avroio/container"
)

func readAll(t *testing.T, f File) []Record {
	t.Helper()
	r, err := container.OpenReader[Record](f.Path, container.FileOpener(f.Path), 0, container.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if c := r.Header().Codec; c != Codec {
		t.Fatalf("%s: codec %q, want %q", f.Path, c, Codec)
	}
	var out []Record
	for {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
}

func TestEnsure(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{LargeBytes: 300_000, SmallFiles: 3, SmallRecords: 1000}
	set, err := Ensure(dir, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if set.Large.Bytes < cfg.LargeBytes {
		t.Fatalf("large file has %d bytes, want at least %d", set.Large.Bytes, cfg.LargeBytes)
	}
	recs := readAll(t, set.Large)
	if int64(len(recs)) != set.Large.Records {
		t.Fatalf("large file: read %d records, sidecar says %d", len(recs), set.Large.Records)
	}
	for i, r := range recs {
		if want := Make(int64(i)); !reflect.DeepEqual(r, want) {
			t.Fatalf("record %d: %+v, want %+v", i, r, want)
		}
	}
	if len(set.Small) != 3 || set.SmallRecords() != 3000 {
		t.Fatalf("small files: %d files, %d records", len(set.Small), set.SmallRecords())
	}
	matches, _ := filepath.Glob(set.SmallPattern)
	if len(matches) != 3 {
		t.Fatalf("pattern %s matches %v", set.SmallPattern, matches)
	}
	for k, f := range set.Small {
		recs := readAll(t, f)
		if len(recs) != 1000 || !reflect.DeepEqual(recs[999], Make(int64(k)*1000+999)) {
			t.Fatalf("small file %d: %d records, last %+v", k, len(recs), recs[len(recs)-1])
		}
	}

	// A second Ensure reuses the files; a damaged one is generated again.
	before, _ := os.ReadFile(set.Small[1].Path)
	fi0, _ := os.Stat(set.Large.Path)
	if err := os.WriteFile(set.Small[2].Path, []byte("Obj\x01 truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	set2, err := Ensure(dir, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(set2.Small[1].Path)
	fi1, _ := os.Stat(set2.Large.Path)
	if !bytes.Equal(before, after) || !fi0.ModTime().Equal(fi1.ModTime()) {
		t.Fatal("Ensure rewrote files that were complete")
	}
	if recs := readAll(t, set2.Small[2]); len(recs) != 1000 {
		t.Fatalf("damaged file not regenerated: %d records", len(recs))
	}
}
