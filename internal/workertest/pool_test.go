package workertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The worker artifact Run stages names the test binary; the pool runs the
// binary it names and refuses anything else, such as the binary itself.
func TestWorkerPointer(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		t.Helper()
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}

	ptr := workerPointer(self)
	if len(ptr) > 4096 {
		t.Errorf("worker artifact is %d bytes", len(ptr))
	}
	if got, err := readWorkerPointer(write("ok", ptr)); err != nil || got != self {
		t.Errorf("readWorkerPointer(workerPointer(%q)) = %q, %v", self, got, err)
	}

	for name, tc := range map[string]struct {
		data []byte
		want string
	}{
		"binary":   {[]byte("\x7fELF\x02\x01\x01\x00"), "is not a workertest pointer"},
		"empty":    {nil, "is not a workertest pointer"},
		"relative": {workerPointer("workertest.test"), `names "workertest.test", not an absolute path`},
		"missing":  {workerPointer(filepath.Join(dir, "nothing")), "nothing named by the worker artifact"},
		"dir":      {workerPointer(dir), "is not a regular file"},
		"trailing": {append(workerPointer(self), "extra\n"...), "is not a workertest pointer"},
		"huge":     {append(workerPointer(self), make([]byte, maxPointer)...), "is not a workertest pointer"},
	} {
		f := write(name, tc.data)
		got, err := readWorkerPointer(f)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%s: readWorkerPointer = %q, %v; want an error naming the file and containing %q", name, got, err, tc.want)
		}
	}
}
