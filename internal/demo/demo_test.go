package demo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryCounterExplained reads the module's production sources for the
// counters they make (beam.NewCounter(ns, "name") and the IOs' counter helpers) and fails for any name the demo would print without saying what
// it counts.
func TestEveryCounterExplained(t *testing.T) {
	re := regexp.MustCompile(`(?:NewCounter|[cC]ounters?)\((?:[^,()"]+,\s*)?"([a-z_]+)"`)
	found := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "../..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.Contains(path, "internal/cmd") || strings.Contains(path, "examples") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 20 {
		t.Fatalf("found %d counter names in the module's sources, want at least 20 (is the pattern stale?): %v", len(found), found)
	}
	for name, path := range found {
		if Explain(name) == "" {
			t.Errorf("counter %q (%s) has no explanation in internal/demo", name, path)
		}
	}
}
