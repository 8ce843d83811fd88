package demo

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	// The runners the examples run on, registered by import: Prism (the
	// default, in this process), the portable runner (universal, flink)
	// and Dataflow; and Beam's local filesystem. Beam's gcs filesystem
	// comes with every Beam program that can be a worker (Beam's harness
	// imports it). beamx imports these and also the direct, dot and spark
	// runners and exec/optimized (Beam's generated reflection shims, 1 MB
	// of source; every function of the examples is registered, so no call
	// goes through reflection), which no example uses and which cost
	// `make demo` about 10 s of CPU from a cold build cache.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

// Execute runs p on the runner the --runner flag names (Prism when it is
// empty) and returns its result, as beamx.RunWithMetrics does.
func Execute(ctx context.Context, p *beam.Pipeline) (beam.PipelineResult, error) {
	r := *runners.Runner
	if r == "" {
		r = "prism"
	}
	return beam.Run(ctx, r, p)
}
