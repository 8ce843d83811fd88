// Package windowing holds what the module's sinks need of a PCollection's
// windowing and boundedness when the pipeline is built.
package windowing

import (
	"fmt"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core"
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
// PCollection exposes only through String: "{<id>: <type>/<coder>
// <windowing>}" for a bounded PCollection, the same with ":unbounded"
// before the closing brace for an unbounded one (graph.Node.String).
// Unbounded rebuilds both forms from what PCollection does expose (its
// type, coder and windowing strategy) and panics, naming the Beam
// version, when String is neither: a Beam release that changed the form
// would otherwise send unbounded input down a bounded path silently. The
// test of this package holds Beam to both forms.
func Unbounded(col beam.PCollection) bool { return unboundedOf(col.String(), body(col)) }

// unboundedOf is Unbounded of a PCollection whose String is s and whose
// type, coder and windowing print as body.
func unboundedOf(s, body string) bool {
	unbounded, err := parseBoundedness(s, body)
	if err != nil {
		panic(fmt.Sprintf("sdfio/internal/windowing: Beam Go %s: %v; sdfio reads a PCollection's boundedness from it and needs updating for this Beam version", core.SdkVersion, err))
	}
	return unbounded
}

// body is what graph.Node.String writes of col between its id and its
// boundedness: "<type>/<coder> <windowing>".
func body(col beam.PCollection) string {
	c := "<nil>" // graph.Node.String of a node without a coder
	if col.Coder().IsValid() {
		c = col.Coder().String()
	}
	return fmt.Sprintf("%v/%v %v", col.Type(), c, col.WindowingStrategy())
}

// parseBoundedness reads the boundedness from s, a PCollection's String,
// which must be "{<id>: <body>}" (bounded) or "{<id>: <body>:unbounded}",
// the id a decimal number.
func parseBoundedness(s, body string) (unbounded bool, err error) {
	rest, ok := strings.CutPrefix(s, "{")
	id, rest, found := strings.Cut(rest, ": ")
	if !ok || !found || id == "" || strings.Trim(id, "0123456789") != "" {
		return false, fmt.Errorf("PCollection.String() is %q, not \"{<id>: %s[:unbounded]}\"", s, body)
	}
	switch rest {
	case body + "}":
		return false, nil
	case body + ":unbounded}":
		return true, nil
	}
	return false, fmt.Errorf("PCollection.String() is %q, not \"{%s: %s}\" (bounded) or \"{%s: %s:unbounded}\"", s, id, body, id, body)
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
