package datastoreio_test

import (
	"flag"
	"os"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/sdfio/sdfio/datastoreio/dstest"
)

// TestMain shares one emulator across the test binary and runs pipelines
// on Prism. (Temporary: the read side's main_test.go takes over.)
func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	os.Exit(dstest.RunShared(m))
}
