package demo

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// PrintSorted prints the strings of lines, sorted, one a line, once the
// pipeline has them all (they are gathered into one slice: for the small
// results of the examples).
func PrintSorted(s beam.Scope, lines beam.PCollection) {
	beam.ParDo0(s, printLines, beam.Combine(s, &sortFn{}, lines))
}

// Run runs p on the runner of the flags, exits naming what it read when it
// fails, and prints how long it took and the counters of namespace.
func Run(ctx context.Context, p *beam.Pipeline, what, namespace string) {
	start := time.Now()
	res, err := Execute(ctx, p)
	if err != nil {
		log.Exitf(ctx, "pipeline reading %s failed: %v", what, err)
	}
	fmt.Printf("\nread %s in %v\n", what, time.Since(start).Round(time.Millisecond))
	PrintMetrics(os.Stdout, res, namespace)
}

// sortFn gathers strings into one sorted slice.
type sortFn struct{}

func (sortFn) CreateAccumulator() []string              { return nil }
func (sortFn) AddInput(acc []string, s string) []string { return append(acc, s) }
func (sortFn) MergeAccumulators(a, b []string) []string { return append(a, b...) }
func (sortFn) ExtractOutput(acc []string) []string      { sort.Strings(acc); return acc }

func printLines(lines []string) { fmt.Println(strings.Join(lines, "\n")) }

func init() {
	register.Function1x0(printLines)
	register.Combiner3[[]string, string, []string](&sortFn{})
}
