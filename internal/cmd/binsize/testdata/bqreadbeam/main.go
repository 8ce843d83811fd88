// Command bqreadbeam reads a BigQuery table with Beam Go's bigqueryio and
// prints its rows: the program internal/cmd/binsize measures
// testdata/bqreadsdfio, the same program on sdfio's bigqueryio, against.
package main

import (
	"context"
	"flag"
	"log"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/bigqueryio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/debug"
)

var (
	project = flag.String("project", "p", "the project")
	input   = flag.String("input", "p:d.events", "the table to read")
)

// Event is one row.
type Event struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

func init() { beam.RegisterType(reflect.TypeFor[Event]()) }

func main() {
	flag.Parse()
	beam.Init()
	p, s := beam.NewPipelineWithRoot()
	debug.Print(s, bigqueryio.Read(s, *project, *input, reflect.TypeFor[Event]()))
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}
