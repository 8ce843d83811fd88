package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `goos: linux
pkg: example.com/p
BenchmarkRead/sdfio-2 	1	900000 records/s	120 peak-RSS-MB
BenchmarkRead/sdfio-2 	1	1100000 records/s	140 peak-RSS-MB
BenchmarkRead/sdfio-2 	1	1000000 records/s	400 peak-RSS-MB
BenchmarkRead/beam-2 	1	100000 records/s	80 peak-RSS-MB
note: files of 1 GiB
goal: BenchmarkRead/sdfio records/s >= 10x BenchmarkRead/beam # ten times Beam
goal: BenchmarkRead/sdfio records/s >= 11x BenchmarkRead/beam # eleven times Beam
goal: BenchmarkRead/sdfio peak-RSS-MB <= 300 # memory
goal: BenchmarkRead/sdfio peak-RSS-MB <= 100
goal: BenchmarkRead/sdfio records/s / BenchmarkRead/beam # plain ratio
goal: BenchmarkMissing/sdfio records/s >= 2 # absent
goal: this is not a goal
`

func TestGoals(t *testing.T) {
	in, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(in.notes) != 1 || in.notes[0] != "files of 1 GiB" {
		t.Fatalf("notes %q", in.notes)
	}
	if len(in.goals) != 7 {
		t.Fatalf("%d goals", len(in.goals))
	}
	var b bytes.Buffer
	writeGoals(&b, in)
	rows := map[string]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(l, "| ") || strings.HasPrefix(l, "| goal") {
			continue
		}
		cells := strings.Split(l, " | ")
		rows[strings.TrimPrefix(cells[0], "| ")] = strings.TrimSuffix(cells[len(cells)-1], " |")
	}
	want := map[string]string{
		"ten times Beam (`BenchmarkRead/sdfio records/s` against `BenchmarkRead/beam`)":    "met", // median 1 M / 100 k = 10x
		"eleven times Beam (`BenchmarkRead/sdfio records/s` against `BenchmarkRead/beam`)": "**NOT MET**",
		"memory (`BenchmarkRead/sdfio peak-RSS-MB`)":                                       "met", // median 140
		"BenchmarkRead/sdfio peak-RSS-MB (`BenchmarkRead/sdfio peak-RSS-MB`)":              "**NOT MET**",
		"plain ratio (`BenchmarkRead/sdfio records/s` against `BenchmarkRead/beam`)":       "(no target)",
		"absent (`BenchmarkMissing/sdfio records/s`)":                                      "not measured",
		"`this is not a goal`": "cannot parse",
	}
	for k, v := range want {
		if got, ok := rows[k]; !ok || got != v {
			t.Errorf("row %q: status %q, want %q\n%s", k, got, v, b.String())
		}
	}
	if !strings.Contains(b.String(), "10.00x (1 M / 100 k)") {
		t.Errorf("ratio not shown:\n%s", b.String())
	}
}

// TestRepeatedNames: go test's #NN of a sub-benchmark run again under the
// same name (flinkbench's interleaved rounds) makes more runs of that
// benchmark, with or without the -GOMAXPROCS suffix.
func TestRepeatedNames(t *testing.T) {
	const out = `pkg: example.com/f
BenchmarkF/sdfio-2 	1	300 records/s
BenchmarkF/beamgo-2 	1	100 records/s
BenchmarkF/sdfio#01-2 	1	500 records/s
BenchmarkF/beamgo#01-2 	1	50 records/s
BenchmarkF/sdfio#02 	1	400 records/s
BenchmarkF/beamgo#02 	1	200 records/s
BenchmarkF/sdfio#10-16 	1	450 records/s
goal: BenchmarkF/sdfio records/s / BenchmarkF/beamgo # ratio
`
	in, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(in.list) != 2 {
		t.Fatalf("%d benchmarks, want 2 (sdfio, beamgo): %+v", len(in.list), in.list)
	}
	for _, b := range in.list {
		want := map[string]int{"BenchmarkF/sdfio": 4, "BenchmarkF/beamgo": 3}[b.name]
		if got := len(b.metrics["records/s"]); got != want {
			t.Errorf("%s: %d runs, want %d", b.name, got, want)
		}
	}
	var b bytes.Buffer
	writeGoals(&b, in)
	// medians 425 and 100
	if !strings.Contains(b.String(), "4.25x (425 / 100)") {
		t.Errorf("ratio of the medians not shown:\n%s", b.String())
	}
}

// TestKept: -keep copies the hand-run part from its marker on, refuses a
// file without the marker (its sections would be lost), and takes a
// missing file as nothing to keep.
func TestKept(t *testing.T) {
	dir := t.TempDir()
	with := filepath.Join(dir, "with.md")
	if err := os.WriteFile(with, []byte("# Benchmarks\n\nold tables\n\n"+KeepMarker+"\n\n## Binary size, hand-run\n\n85.9 MB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := kept(with)
	if err != nil {
		t.Fatal(err)
	}
	if want := KeepMarker + "\n\n## Binary size, hand-run\n\n85.9 MB\n"; got != want {
		t.Errorf("kept %q, want %q", got, want)
	}
	without := filepath.Join(dir, "without.md")
	if err := os.WriteFile(without, []byte("# Benchmarks\n\n## Binary size, hand-run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := kept(without); err == nil || !strings.Contains(err.Error(), "would be lost") {
		t.Errorf("a file without the marker: %v, want an error", err)
	}
	if got, err := kept(filepath.Join(dir, "missing.md")); err != nil || got != "" {
		t.Errorf("a missing file: %q, %v", got, err)
	}
}

// TestBenchmarksKeepsHandRun: the repository's docs/BENCHMARKS.md has the
// marker, so make bench keeps its hand-run sections.
func TestBenchmarksKeepsHandRun(t *testing.T) {
	got, err := kept("../../../docs/BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "## Binary size of a BigQuery program") {
		t.Errorf("the kept part of docs/BENCHMARKS.md lacks its hand-run sections")
	}
}
