// Package windowing holds what the module's sinks need of a PCollection's
// windowing and boundedness when the pipeline is built.
package windowing

import (
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window/trigger"

	"github.com/sdfio/sdfio/internal/beamreg"
)

func init() {
	beamreg.DoFn2x1[beam.Window, beam.X, beam.X](&explodeFn{})
}

// Unbounded reports whether col is unbounded. Beam Go (v2.77, v2.78) keeps a
// PCollection's boundedness (set when the graph is built: a splittable
// DoFn that returns a ProcessContinuation makes an unbounded output, and
// so does every transform downstream of one) in its graph node, which
// PCollection exposes only through String, as ":unbounded" at its end.
// The test of this package holds Beam to that.
func Unbounded(col beam.PCollection) bool {
	return strings.HasSuffix(col.String(), ":unbounded}")
}

// Global puts every element of col, once per window it is in, into the
// global window with the default trigger: an element of three sliding
// windows becomes three elements, as the model counts it (Beam's own
// WindowInto assigns by timestamp only and would make it one). A
// PCollection already in the global window with the default trigger is
// returned as it is.
func Global(s beam.Scope, col beam.PCollection) beam.PCollection {
	ws := col.WindowingStrategy()
	if ws.Fn.Kind == window.GlobalWindows {
		if _, ok := ws.Trigger.(trigger.DefaultTrigger); ok {
			return col
		}
		if _, ok := ws.Trigger.(*trigger.DefaultTrigger); ok {
			return col
		}
	} else {
		col = beam.ParDo(s.Scope("perWindow"), &explodeFn{}, col)
	}
	return beam.WindowInto(s.Scope("toGlobalWindow"), window.NewGlobalWindows(), col)
}

// explodeFn outputs each element once per window it is in: a DoFn that
// takes the window is called once per window.
type explodeFn struct{}

func (*explodeFn) ProcessElement(_ beam.Window, x beam.X) beam.X { return x }
