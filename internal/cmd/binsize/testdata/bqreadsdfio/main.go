// Command bqreadsdfio reads a BigQuery table with sdfio's bigqueryio and
// prints its rows: the read-only program internal/cmd/binsize measures
// against testdata/bqreadbeam, the same program on Beam Go's bigqueryio.
package main

import (
	"context"
	"flag"
	"log"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/debug"

	"github.com/sdfio/sdfio/bigqueryio"
)

var input = flag.String("input", "p.d.events", "the table to read")

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
	debug.Print(s, bigqueryio.Read(s, *input, reflect.TypeFor[Event]()))
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}
