// Command bqwritesdfio writes generated rows to a BigQuery table with
// sdfio's bqwrite: TestBigQueryProgramLinks checks that it links nothing
// of the read path (package bigqueryio).
package main

import (
	"context"
	"flag"
	"log"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

var output = flag.String("output", "p.d.copy", "the table to write")

// Event is one row.
type Event struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

func event(id int) Event { return Event{ID: int64(id), Name: "e"} }

func init() {
	beam.RegisterType(reflect.TypeFor[Event]())
	register.Function1x1(event)
}

func main() {
	flag.Parse()
	beam.Init()
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, *output, beam.ParDo(s, event, beam.Create(s, 1, 2, 3)))
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}
