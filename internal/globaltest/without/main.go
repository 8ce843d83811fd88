// Command without prints package probe's report and pipeline result in a
// program that imports nothing of sdfio: what package globaltest's test
// binary, which imports all of sdfio's IOs, must print too.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/internal/globaltest/probe"
)

func main() {
	flag.Parse()
	beam.Init()
	fmt.Print(probe.Report())
	out, err := probe.RunPipeline(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "without:", err)
		os.Exit(1)
	}
	fmt.Print("pipeline:\n" + out)
}
