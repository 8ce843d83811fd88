// Command bqbeam reads a BigQuery table and writes its rows to another
// with Beam Go's bigqueryio: the program internal/cmd/binsize measures
// testdata/bqsdfio, the same program on sdfio's bigqueryio, against.
package main

import (
	"context"
	"flag"
	"log"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/bigqueryio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
)

var (
	project = flag.String("project", "p", "the project")
	input   = flag.String("input", "p:d.events", "the table to read")
	output  = flag.String("output", "p:d.copy", "the table to write")
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
	events := bigqueryio.Read(s, *project, *input, reflect.TypeFor[Event]())
	bigqueryio.Write(s, *project, *output, events)
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}
