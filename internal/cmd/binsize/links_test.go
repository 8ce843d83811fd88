package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBigQueryProgramLinks holds the structure of issue 38: a program that
// only reads BigQuery (testdata/bqreadsdfio) links no symbol of the write
// package (bigqueryio/bqwrite) nor the Storage Write client
// (managedwriter), and a program that only writes (testdata/bqwritesdfio)
// links no symbol of the read package (bigqueryio); the read-only program
// links no symbol of the query package (bigqueryio/bqquery) nor the
// official REST client's (bigquery.Client), which a query's job needs;
// the read-and-write program (testdata/bqsdfio) and the query program
// (testdata/bqquerysdfio) link them, which shows the check sees them.
// Beam's reflection keeps every method of a reached type, so one
// registration of a Write or query DoFn in the read package's init, or one
// import of bigqueryio from bqwrite, fails here.
func TestBigQueryProgramLinks(t *testing.T) {
	out := t.TempDir()
	args := []string{"build", "-o", out + string(filepath.Separator)}
	if raceEnabled {
		// As the test is built: make test's packages are compiled with
		// -race, and a plain build would compile Beam again (minutes).
		args = append(args, "-race")
	}
	progs := []string{"./testdata/bqreadsdfio", "./testdata/bqwritesdfio", "./testdata/bqsdfio", "./testdata/bqquerysdfio"}
	if b, err := exec.Command("go", append(args, progs...)...).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	const (
		read    = "github.com/sdfio/sdfio/bigqueryio."
		write   = "github.com/sdfio/sdfio/bigqueryio/bqwrite."
		writeMW = "cloud.google.com/go/bigquery/storage/managedwriter."
		query   = "github.com/sdfio/sdfio/bigqueryio/bqquery."
		rest    = "cloud.google.com/go/bigquery.(*Client)."
	)
	for _, c := range []struct {
		prog            string
		want, forbidden []string
	}{
		{"bqreadsdfio", []string{read}, []string{write, writeMW, query, rest}},
		{"bqwritesdfio", []string{write, writeMW, rest}, []string{read, query}},
		{"bqsdfio", []string{read, write, writeMW, rest}, []string{query}},
		{"bqquerysdfio", []string{read, query, rest}, []string{write, writeMW}},
	} {
		nm, err := exec.Command("go", "tool", "nm", filepath.Join(out, c.prog)).Output()
		if err != nil {
			t.Fatalf("go tool nm %s: %v", c.prog, err)
		}
		found := map[string]int{}
		for _, line := range strings.Split(string(nm), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			name := f[len(f)-1]
			for _, prefix := range append(append([]string(nil), c.want...), c.forbidden...) {
				if strings.HasPrefix(name, prefix) {
					found[prefix]++
				}
			}
		}
		for _, p := range c.forbidden {
			if found[p] > 0 {
				t.Errorf("%s links %d symbols of %s", c.prog, found[p], strings.TrimSuffix(p, "."))
			}
		}
		for _, p := range c.want {
			if found[p] == 0 {
				t.Errorf("%s links no symbol of %s: the check cannot see it", c.prog, strings.TrimSuffix(p, "."))
			}
		}
	}
}
