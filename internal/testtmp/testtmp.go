// Package testtmp gives a test binary a temporary directory of its own and
// checks that the tests leave nothing in it.
//
// Main, called from TestMain around the rest of it, points TMPDIR (TMP and
// TEMP on Windows) at a new directory under the temporary directory the
// binary was given, runs the tests, and removes the directory. Everything
// that asks the operating system's usual place for temporary files —
// os.TempDir, os.MkdirTemp(""), t.TempDir, Beam's runners, the processes the
// tests start (SDK workers, Python and Avro tools, the Datastore emulator's
// working directory) — then writes there.
//
// Before removing it, Main lists what is left. Files that Beam (v2.77.0, v2.78.0)
// creates and never removes are expected and only removed:
// runnerlib.Execute creates an empty file beamloopbackworker-* for every
// pipeline run in LOOPBACK mode (ptest on Prism) and forgets it. Anything
// else left is a test that does not clean up after itself: Main prints it
// and turns a passing exit code into 1.
//
//	func TestMain(m *testing.M) {
//		os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
//	}
//
// In an SDK worker process (started with --worker=true, as
// internal/workertest and Beam's container boot loaders start them) and in a
// fuzzing worker (-test.fuzzworker) Main only calls run: such a process is
// killed rather than returning, or works for a test process that owns the
// directory it inherited.
package testtmp

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// beamLeftovers are the name patterns of what Beam itself leaves behind.
var beamLeftovers = []string{"beamloopbackworker-*"}

// Main runs run (the body of a TestMain, returning the exit code) with a
// temporary directory of its own, and returns run's code, or 1 if run
// passed but left anything unexpected in that directory. It returns 2 if the
// directory cannot be created.
func Main(run func() int) int {
	if isWorker(os.Args[1:]) || isFuzzWorker(os.Args[1:]) {
		return run()
	}
	vars := []string{"TMPDIR"}
	if runtime.GOOS == "windows" {
		vars = []string{"TMP", "TEMP"}
	}
	dir, err := os.MkdirTemp("", "sdfio-test-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testtmp: creating the tests' temporary directory: %v\n", err)
		return 2
	}
	saved := map[string]string{}
	for _, v := range vars {
		if old, ok := os.LookupEnv(v); ok {
			saved[v] = old
		}
		os.Setenv(v, dir)
	}
	code := run()
	for _, v := range vars {
		if old, ok := saved[v]; ok {
			os.Setenv(v, old)
		} else {
			os.Unsetenv(v)
		}
	}
	left, err := Leftovers(dir)
	if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testtmp: cleaning the tests' temporary directory %s: %v\n", dir, err)
		if code == 0 {
			code = 1
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testtmp: the tests left %d entries in their temporary directory %s (removed now):\n\t%s\n",
			len(left), dir, strings.Join(left, "\n\t"))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Leftovers lists what is in dir apart from what Beam is known to leave:
// the paths relative to dir of its top-level entries, with the files under
// a directory counted ("d/ (3 files)"), sorted.
func Leftovers(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var left []string
	for _, e := range entries {
		if slices.ContainsFunc(beamLeftovers, func(p string) bool { ok, _ := filepath.Match(p, e.Name()); return ok }) {
			continue
		}
		if !e.IsDir() {
			left = append(left, e.Name())
			continue
		}
		n := 0
		filepath.WalkDir(filepath.Join(dir, e.Name()), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		left = append(left, fmt.Sprintf("%s/ (%d files)", e.Name(), n))
	}
	slices.Sort(left)
	return left, nil
}

// isWorker reports whether the arguments are those of an SDK worker process.
func isWorker(args []string) bool {
	for _, a := range args {
		if a == "--worker=true" || a == "-worker=true" {
			return true
		}
	}
	return false
}

// isFuzzWorker reports whether the arguments are those of a worker process
// of go test's fuzzing coordinator.
func isFuzzWorker(args []string) bool {
	for _, a := range args {
		if a == "-test.fuzzworker" || a == "-test.fuzzworker=true" || a == "--test.fuzzworker" {
			return true
		}
	}
	return false
}
