package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBigQueryProgramLinks: the BigQuery read-and-write program
// (testdata/bqsdfio) links none of what made it larger than Beam Go's
// (docs/BENCHMARKS.md, issue 30): the official client's bigquery.Client and
// the generated REST client it reaches, managedwriter/adapt with protodesc
// and dynamicpb. (arrow/ipc and its zstd and lz4 codecs, about 0.95 MB, are
// linked again since issue 38: bigqueryio reads Arrow with arrow/ipc, the
// well-kept library, rather than a reader of its own.) Each is reachable by
// one call (Beam's reflection keeps every method of a reached type), so a
// change that calls one again fails here, not only in make bench's sizes.
func TestBigQueryProgramLinks(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bqsdfio")
	args := []string{"build", "-o", out}
	if raceEnabled {
		// As the test is built: make test's packages are compiled with
		// -race, and a plain build would compile Beam again (minutes).
		args = append(args, "-race")
	}
	if b, err := exec.Command("go", append(args, "./testdata/bqsdfio")...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	nm, err := exec.Command("go", "tool", "nm", out).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	forbidden := map[string]string{
		"cloud.google.com/go/bigquery.(*Client).":                   "bigquery.Client (bigqueryio has its own REST client, rest.go)",
		"google.golang.org/api/bigquery/v2.(*TablesService)":        "the generated REST client",
		"cloud.google.com/go/bigquery/storage/managedwriter/adapt.": "managedwriter/adapt (write_descriptor.go)",
		"google.golang.org/protobuf/reflect/protodesc.":             "protodesc, which adapt brings",
		"google.golang.org/protobuf/types/dynamicpb.":               "dynamicpb",
	}
	found := map[string]int{}
	for _, line := range strings.Split(string(nm), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		name := f[len(f)-1]
		for prefix := range forbidden {
			if strings.HasPrefix(name, prefix) {
				found[prefix]++
			}
		}
	}
	for prefix, n := range found {
		t.Errorf("the program links %d symbols of %s", n, forbidden[prefix])
	}
}
