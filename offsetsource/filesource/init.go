package filesource

import (
	"context"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/internal/beamreg"
)

// The package's one init: the watch's DoFn, emitter and types. The reads'
// DoFns depend on the format and are registered by Register.
func init() {
	beamreg.DoFn5x2[context.Context, *watchWatermark, *watchTracker, string, func(beam.EventTime, fileio.FileMetadata), beamsdf.ProcessContinuation, error](&watchFn{})
	register.Emitter2[beam.EventTime, fileio.FileMetadata]()
	registerWatch()
}
