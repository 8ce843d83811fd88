// Command bqfloor is what testdata/bqsdfio and testdata/bqbeam share
// whatever their IO does: a Beam program (beamx, all its runners) that
// imports cloud.google.com/go/bigquery for its types, as both IOs do, and
// uses no client. internal/cmd/binsize reports each IO's cost over it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"reflect"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
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
	schema, err := bigquery.InferSchema(Event{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(schema))
	p, _ := beam.NewPipelineWithRoot()
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}
