package filesource_test

import (
	"testing"

	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
)

// TestMain runs the package's pipeline tests on Prism unless -runner says
// otherwise.
func TestMain(m *testing.M) {
	ptest.MainWithDefault(m, "prism")
}
