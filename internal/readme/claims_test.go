package readme

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

// The streaming write's claims. Each document that speaks of writing
// unbounded input to BigQuery must say what the code does, and none may
// say the opposite (issue 37: MIGRATING said streaming writes were "not
// there yet" and README that unbounded input was refused without
// WithAtLeastOnce, while the code wrote it exactly once). The code's side
// of each claim is checked here by building the pipeline; the documents'
// side by the phrases below, over README.md, docs/MIGRATING.md,
// docs/DESIGN.md, docs/BIGQUERY.md and the doc comments of bigqueryio and
// bigqueryio/bqwrite, where Write is (CHANGELOG.md is history: it may say
// what an older version did). bqwrite's package doc, what a user of Write
// reads first, must state the claims itself.

// StreamRow is the row type of the claims' pipelines.
type StreamRow struct {
	ID int64 `bigquery:"id"`
}

func streamRowOf(i int64) StreamRow { return StreamRow{ID: i} }

func init() {
	bigqueryio.RegisterType(reflect.TypeFor[StreamRow]())
	register.Function1x1(streamRowOf)
}

// claimDocs are the documents the claims are checked in, each as one text
// with its lines joined by spaces (Go files: their comments only; a
// package doc: the comment before its package clause).
func claimDocs(t *testing.T) map[string]string {
	t.Helper()
	root := "../.."
	docs := map[string]string{}
	for _, name := range []string{"README.md", "docs/MIGRATING.md", "docs/DESIGN.md", "docs/BIGQUERY.md"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		docs[name] = joinLines(strings.Split(string(b), "\n"))
	}
	for _, pkg := range []string{"bigqueryio", "bigqueryio/bqwrite"} {
		docs[pkg+" (doc comments)"] = joinLines(goComments(t, filepath.Join(root, pkg)))
		docs[pkg+" (package doc)"] = joinLines(packageDoc(t, filepath.Join(root, pkg)))
	}
	return docs
}

// goComments are the comment lines of the Go files of dir (not its tests).
func goComments(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var comments []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(l), "//"); ok {
				comments = append(comments, c)
			}
		}
	}
	return comments
}

// packageDoc is the package doc of the package in dir, in lines: the doc
// comments of its package clauses (go/doc's), not of its tests.
func packageDoc(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if af.Doc != nil {
			lines = append(lines, strings.Split(af.Doc.Text(), "\n")...)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s has no package doc", dir)
	}
	return lines
}

func joinLines(lines []string) string {
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
}

// writeSteps builds Write on an unbounded input with opts and returns the
// names of the pipeline's DoFns.
func writeSteps(t *testing.T, opts ...bqwrite.WriteOption) []string {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	start := time.Now()
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(time.Second), 100*time.Millisecond)))
	rows := beam.ParDo(s, streamRowOf, seq)
	opts = append([]bqwrite.WriteOption{bqwrite.WithEndpoint("localhost:1"), bqwrite.WithInsecure()}, opts...)
	bqwrite.Write(s, "p.d.t", rows, opts...)
	edges, _, err := p.Build()
	if err != nil {
		t.Fatalf("building Write on unbounded input: %v", err)
	}
	var names []string
	for _, e := range edges {
		if e.DoFn != nil {
			names = append(names, e.DoFn.Name())
		}
	}
	return names
}

func hasStep(names []string, sub string) bool {
	for _, n := range names {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

// streamContradictions are what no document may say of the streaming
// write.
var streamContradictions = []*regexp.Regexp{
	regexp.MustCompile(`(?i)streaming writes? (are|is) not (there|supported|available|possible)`),
	regexp.MustCompile(`(?i)unbounded (input|inputs|pcollections?) (is|are) refused`),
	regexp.MustCompile(`(?i)refuses? (an )?unbounded (input|pcollection)`),
	regexp.MustCompile(`(?i)unbounded[^.]{0,80}(needs|requires|only with) .?WithAtLeastOnce`),
	regexp.MustCompile(`(?i)Write takes (only )?bounded input`),
}

// TestStreamingClaims checks the streaming write's claims in every
// document against the code.
func TestStreamingClaims(t *testing.T) {
	// The code: unbounded input is taken by default, and written by the
	// exactly-once steps (appends to BUFFERED streams, flushes after a
	// shuffle); WithAtLeastOnce takes it too, without them.
	def := writeSteps(t)
	if !hasStep(def, "streamAppendFn") || !hasStep(def, "streamFlushFn") {
		t.Fatalf("Write on unbounded input with its defaults has no exactly-once streaming steps (DoFns: %v): the documents' claims below no longer hold; change them with the code", def)
	}
	alo := writeSteps(t, bqwrite.WithAtLeastOnce())
	if hasStep(alo, "streamAppendFn") {
		t.Fatalf("Write on unbounded input WithAtLeastOnce runs the exactly-once steps (DoFns: %v): the documents' claims below no longer hold", alo)
	}

	// The documents: none may say the opposite.
	contradictions := streamContradictions
	docs := claimDocs(t)
	for name, text := range docs {
		for _, re := range contradictions {
			if m := re.FindStringIndex(text); m != nil {
				t.Errorf("%s contradicts the streaming write (%s): %q", name, re, context(text, m))
			}
		}
	}
	// And each user-facing one says it: unbounded input, exactly once by
	// default, WithAtLeastOnce the _default stream.
	affirm := []*regexp.Regexp{
		regexp.MustCompile(`(?i)unbounded[^.]{0,120}exactly once`),
		regexp.MustCompile("(?i)WithAtLeastOnce[^.]{0,120}_default"),
	}
	for _, name := range []string{"README.md", "docs/MIGRATING.md", "docs/BIGQUERY.md", "bigqueryio/bqwrite (package doc)"} {
		for _, re := range affirm {
			if !re.MatchString(docs[name]) {
				t.Errorf("%s does not say what Write does with unbounded input (no match of %s)", name, re)
			}
		}
	}
	// bigqueryio's package doc, where Write was documented, sends a
	// writer to Write's package.
	if !strings.Contains(docs["bigqueryio (package doc)"], "bigqueryio/bqwrite") {
		t.Errorf("bigqueryio's package doc does not name bigqueryio/bqwrite, where Write is")
	}
}

// TestStreamingClaimsCatch: the contradiction check finds what issue 37
// found in the documents.
func TestStreamingClaimsCatch(t *testing.T) {
	for _, bad := range []string{
		"Re-window a windowed PCollection first; streaming writes are not there yet.",
		"all committed together; an unbounded input is refused when the pipeline is built unless `WithAtLeastOnce`, which writes it as it comes",
	} {
		caught := false
		for _, re := range streamContradictions {
			caught = caught || re.MatchString(bad)
		}
		if !caught {
			t.Errorf("not caught: %q", bad)
		}
	}
}

// context is the text around m.
func context(text string, m []int) string {
	from, to := max(0, m[0]-60), min(len(text), m[1]+60)
	return text[from:to]
}
