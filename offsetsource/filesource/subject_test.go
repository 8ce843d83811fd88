package filesource_test

import (
	"testing"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/offsetsource/filesource"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

func offsetsourceSubject(t *testing.T, src filesource.Source[string, Lines]) (sdftest.Subject[string], error) {
	t.Helper()
	return offsetsource.SplitSubject[string](t.Context(), src)
}
