package offsetsource_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

func init() {
	register.Function1x0(printCount)
}

func printCount(n int64) { fmt.Println(n, "records") }

// Read a file of fixed-width records with FixedSource, the sample source of
// this package's tests (sample_test.go): a struct with exported fields that
// implements Source[string], registered in init with
// offsetsource.Register[string, FixedSource]().
func Example() {
	dir, err := os.MkdirTemp("", "offsetsource-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "records.txt")
	f, _ := os.Create(path)
	for i := range 1000 {
		fmt.Fprintf(f, "rec%08d\n", i) // 12 bytes a record
	}
	f.Close()

	p, s := beam.NewPipelineWithRoot()
	src := FixedSource{Path: path, Width: 12, End: sdf.Unbounded} // the whole file
	records := offsetsource.Read(s, src, offsetsource.WithDesiredBundleSize(1200))
	beam.ParDo0(s, printCount, beam.Combine(s, &countFn{}, records))
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	// Output: 1000 records
}
