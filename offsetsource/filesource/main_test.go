package filesource_test

import (
	"os"
	"testing"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/internal/testtmp"
)

// TestMain runs the package's pipeline tests on Prism unless -runner says
// otherwise.
func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}
