// Command benchreport turns `go test -bench` output into docs/BENCHMARKS.md.
//
// It reads the benchmark output on standard input and writes Markdown on
// standard output: the median of every metric of every benchmark, and for
// each group of sub-benchmarks that has an "sdfio" member and one or more
// anchors (any other member, e.g. "beam_offsetrange"), the ratio of sdfio to
// each anchor measured in the same run. Time per operation is compared as
// anchor/sdfio (above 1 means sdfio is faster), rates (units ending in "/s")
// as sdfio/anchor (above 1 means sdfio is faster).
//
// Two kinds of lines besides benchmark results are understood, so that a
// benchmark program can describe its run and state its targets:
//
//	note: free text
//	goal: A unit >= Kx B    # description
//	goal: A unit <= V       # description   (also >= V)
//	goal: A unit / B        # description   (a ratio shown without a target)
//
// A and B name benchmarks of the package whose "pkg:" line came last.
// A benchmark's name is taken without its -GOMAXPROCS suffix and without
// the #NN that go test appends to a sub-benchmark run again under the same
// name (b.Run called once per round, as internal/flinksuite/flinkbench
// interleaves its runs): BenchmarkX/sdfio#01-2 is another run of
// BenchmarkX/sdfio. Notes
// are listed under the header; goals are checked against the medians and
// shown first, as met, NOT MET, or not measured.
//
// With -keep FILE (make bench gives it docs/BENCHMARKS.md), everything of
// FILE from the line KeepMarker on is copied after the generated part:
// the hand-run sections (binary sizes, the BigQuery write benchmarks, the
// memory probes), which a run of make bench must not erase.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// sample holds all values of one metric of one benchmark.
type bench struct {
	pkg     string
	name    string // without the -GOMAXPROCS suffix
	metrics map[string][]float64
	order   []string
}

var (
	procSuffix   = regexp.MustCompile(`-\d+$`)
	repeatSuffix = regexp.MustCompile(`#\d+$`)
)

// benchName is a result line's benchmark name without its -GOMAXPROCS
// suffix and go test's #NN of a repeated sub-benchmark name.
func benchName(field string) string {
	return repeatSuffix.ReplaceAllString(procSuffix.ReplaceAllString(field, ""), "")
}

// goal is one "goal:" line.
type goal struct {
	pkg, text string
	a, unit   string
	op        string  // ">=", "<=", "/"
	k         float64 // the factor (ratio goals) or the value (absolute goals)
	b         string  // the other benchmark; empty for absolute goals
	desc      string
	err       error // the line could not be parsed
}

func parseGoal(pkg, line string) goal {
	g := goal{pkg: pkg, text: line}
	expr, desc, _ := strings.Cut(line, "#")
	g.desc = strings.TrimSpace(desc)
	f := strings.Fields(expr)
	bad := func() goal {
		g.err = fmt.Errorf("cannot parse goal %q", line)
		return g
	}
	switch {
	case len(f) == 4 && f[2] == "/":
		g.a, g.unit, g.op, g.b = f[0], f[1], f[2], f[3]
	case len(f) == 4 && (f[2] == ">=" || f[2] == "<="):
		v, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			return bad()
		}
		g.a, g.unit, g.op, g.k = f[0], f[1], f[2], v
	case len(f) == 5 && (f[2] == ">=" || f[2] == "<=") && strings.HasSuffix(f[3], "x"):
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[3], "x"), 64)
		if err != nil {
			return bad()
		}
		g.a, g.unit, g.op, g.k, g.b = f[0], f[1], f[2], v, f[4]
	default:
		return bad()
	}
	return g
}

type input struct {
	list   []*bench
	header map[string]string
	notes  []string
	goals  []goal
}

func parse(r io.Reader) (*input, error) {
	byName := map[string]*bench{}
	var list []*bench
	header := map[string]string{}
	in := &input{header: header}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "Benchmark") {
			switch k {
			case "pkg":
				pkg = v
			case "cpu", "goos", "goarch":
				header[k] = v
			case "note":
				in.notes = append(in.notes, v)
			case "goal":
				in.goals = append(in.goals, parseGoal(pkg, v))
			}
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		name := benchName(f[0])
		key := pkg + " " + name
		b := byName[key]
		if b == nil {
			b = &bench{pkg: pkg, name: name, metrics: map[string][]float64{}}
			byName[key] = b
			list = append(list, b)
		}
		// f[1] is the iteration count; then value unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			u := f[i+1]
			if _, seen := b.metrics[u]; !seen {
				b.order = append(b.order, u)
			}
			b.metrics[u] = append(b.metrics[u], v)
		}
	}
	in.list = list
	return in, sc.Err()
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func format(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1e9:
		return fmt.Sprintf("%.3g G", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.3g M", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3g k", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func isRate(unit string) bool { return strings.HasSuffix(unit, "/s") }

// KeepMarker starts the hand-run part of docs/BENCHMARKS.md (see -keep).
const KeepMarker = "<!-- Hand-run sections: make bench keeps everything from this line on. -->"

// kept is FILE's part from KeepMarker on ("" if FILE or the marker is
// missing).
func kept(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	i := strings.Index(string(b), KeepMarker)
	if i < 0 {
		return "", fmt.Errorf("%s has no line %q: its hand-run sections would be lost; add the line before them", file, KeepMarker)
	}
	return string(b[i:]), nil
}

func main() {
	keep := flag.String("keep", "", "copy this file's part from the hand-run marker on after the report")
	flag.Parse()
	hand, err := kept(*keep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	in, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	list, header := in.list, in.header
	if len(list) == 0 {
		fmt.Fprintln(os.Stderr, "benchreport: no benchmark lines on standard input")
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()

	goVersion := runtime.Version()
	if out, err := exec.Command("go", "version").Output(); err == nil {
		goVersion = strings.TrimSpace(string(out))
	}
	fmt.Fprintf(w, "# Benchmarks\n\nWritten by `make bench` on %s. Medians of every run; ratios compare sdfio with its anchors measured in the same run.\n\n",
		time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(w, "- machine: %d cores, %s, %s/%s\n- %s\n", runtime.NumCPU(), header["cpu"], header["goos"], header["goarch"], goVersion)
	for _, n := range in.notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)
	writeGoals(w, in)

	// Ratios first: they are what the goals are stated in.
	type group struct {
		ours    *bench
		anchors []*bench
	}
	groups := map[string]*group{}
	var groupOrder []string
	for _, b := range list {
		parent, leaf, ok := cutLast(b.name, "/")
		if !ok {
			continue
		}
		key := b.pkg + " " + parent
		g := groups[key]
		if g == nil {
			g = &group{}
			groups[key] = g
			groupOrder = append(groupOrder, key)
		}
		if leaf == "sdfio" {
			g.ours = b
		} else {
			g.anchors = append(g.anchors, b)
		}
	}
	fmt.Fprintf(w, "## Ratios (sdfio against its anchors)\n\nAbove 1 means sdfio is faster.\n\n| benchmark | anchor | metric | sdfio | anchor | ratio |\n|---|---|---|---|---|---|\n")
	for _, key := range groupOrder {
		g := groups[key]
		if g.ours == nil || len(g.anchors) == 0 {
			continue
		}
		parent, _, _ := cutLast(g.ours.name, "/")
		for _, a := range g.anchors {
			_, leaf, _ := cutLast(a.name, "/")
			for _, unit := range g.ours.order {
				if unit != "ns/op" && !isRate(unit) {
					continue
				}
				av, ok := a.metrics[unit]
				if !ok {
					continue
				}
				o, an := median(g.ours.metrics[unit]), median(av)
				if o == 0 || an == 0 {
					continue
				}
				ratio := an / o
				if isRate(unit) {
					ratio = o / an
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2fx |\n", parent, leaf, unit, format(o), format(an), ratio)
			}
		}
	}

	fmt.Fprintf(w, "\n## All medians\n\n| package | benchmark | runs | metrics |\n|---|---|---|---|\n")
	for _, b := range list {
		var parts []string
		runs := 0
		for _, u := range b.order {
			parts = append(parts, format(median(b.metrics[u]))+" "+u)
			if len(b.metrics[u]) > runs {
				runs = len(b.metrics[u])
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s |\n", strings.TrimPrefix(b.pkg, "github.com/sdfio/sdfio/"), b.name, runs, strings.Join(parts, ", "))
	}
	if hand != "" {
		fmt.Fprintf(w, "\n%s", hand)
	}
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// writeGoals checks the goals against the medians.
func writeGoals(w io.Writer, in *input) {
	if len(in.goals) == 0 {
		return
	}
	find := func(pkg, name string) *bench {
		for _, b := range in.list {
			if b.pkg == pkg && b.name == name {
				return b
			}
		}
		return nil
	}
	value := func(pkg, name, unit string) (float64, bool) {
		b := find(pkg, name)
		if b == nil || len(b.metrics[unit]) == 0 {
			return 0, false
		}
		return median(b.metrics[unit]), true
	}
	fmt.Fprintf(w, "## Goals\n\nChecked against the medians of this run.\n\n| goal | measured | target | status |\n|---|---|---|---|\n")
	for _, g := range in.goals {
		if g.err != nil {
			fmt.Fprintf(w, "| `%s` | | | cannot parse |\n", g.text)
			continue
		}
		what := g.desc
		if what == "" {
			what = fmt.Sprintf("%s %s", g.a, g.unit)
		}
		what = fmt.Sprintf("%s (`%s %s`", what, g.a, g.unit)
		if g.b != "" {
			what += " against `" + g.b + "`"
		}
		what += ")"
		a, okA := value(g.pkg, g.a, g.unit)
		measured, target, status := "", "", ""
		if g.b == "" {
			target = g.op + " " + format(g.k)
			if !okA {
				status = "not measured"
			} else {
				measured = format(a)
				status = verdict(g.op, a, g.k)
			}
		} else {
			b, okB := value(g.pkg, g.b, g.unit)
			if g.op != "/" {
				target = fmt.Sprintf("%s %.3gx", g.op, g.k)
			}
			switch {
			case !okA || !okB:
				status = "not measured"
				if okA || okB {
					measured = "only one side measured"
				}
			case b == 0:
				status = "anchor is 0"
			default:
				r := a / b
				measured = fmt.Sprintf("%.2fx (%s / %s)", r, format(a), format(b))
				if g.op == "/" {
					status = "(no target)"
				} else {
					status = verdict(g.op, r, g.k)
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", what, measured, target, status)
	}
	fmt.Fprintln(w)
}

func verdict(op string, v, target float64) string {
	if op == ">=" && v >= target || op == "<=" && v <= target {
		return "met"
	}
	return "**NOT MET**"
}
