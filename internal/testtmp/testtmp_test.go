//go:build unix

package testtmp

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Main gives run a directory of its own as TMPDIR, removes it afterwards,
// restores TMPDIR, removes Beam's loopback files silently and fails a
// passing run that left anything else.
func TestMain_(t *testing.T) {
	if os.Getenv("TMPDIR") == "" {
		t.Setenv("TMPDIR", os.TempDir())
	}
	outer := os.Getenv("TMPDIR")
	for _, c := range []struct {
		name  string
		files []string
		code  int
		want  int
	}{
		{"nothing left", nil, 0, 0},
		{"only Beam's loopback files", []string{"beamloopbackworker-123", "beamloopbackworker-9"}, 0, 0},
		{"a file left", []string{"beamloopbackworker-1", "stray.txt"}, 0, 1},
		{"a directory left", []string{"d/e/f"}, 0, 1},
		{"failing run keeps its code", []string{"stray"}, 3, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			var inner string
			got := Main(func() int {
				inner = os.Getenv("TMPDIR")
				if inner == outer || filepath.Dir(inner) != outer || os.TempDir() != inner {
					t.Errorf("TMPDIR in run = %q (os.TempDir %q), want a new directory under %q", inner, os.TempDir(), outer)
				}
				for _, f := range c.files {
					p := filepath.Join(inner, f)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return c.code
			})
			if got != c.want {
				t.Errorf("Main = %d, want %d", got, c.want)
			}
			if _, err := os.Stat(inner); !os.IsNotExist(err) {
				t.Errorf("directory %s still there after Main (stat: %v)", inner, err)
			}
			if v := os.Getenv("TMPDIR"); v != outer {
				t.Errorf("TMPDIR after Main = %q, want %q restored", v, outer)
			}
		})
	}
}

func TestLeftovers(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"beamloopbackworker-77", "b.txt", "a/x", "a/y/z"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Leftovers(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/ (2 files)", "b.txt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Leftovers = %q, want %q", got, want)
	}
}

// A worker process does not get a directory of its own: an SDK worker is
// killed, and would leave its directory inside the test process's.
func TestWorkerRunsInPlace(t *testing.T) {
	if !isWorker([]string{"--worker=true", "--id=w1"}) || isWorker([]string{"-test.run=^$"}) {
		t.Fatal("isWorker misreads the arguments")
	}
	if !isFuzzWorker([]string{"-test.paniconexit0", "-test.fuzzworker", "-test.run=^FuzzX$"}) || isFuzzWorker([]string{"-test.fuzz=FuzzX"}) {
		t.Fatal("isFuzzWorker misreads the arguments")
	}
}
