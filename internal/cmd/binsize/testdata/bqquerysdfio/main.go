// Command bqquerysdfio runs a BigQuery query with sdfio's bqquery and
// prints its rows: the program TestBigQueryProgramLinks checks links
// bqquery and the REST client that testdata/bqreadsdfio must not.
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
	"github.com/sdfio/sdfio/bigqueryio/bqquery"
)

var sql = flag.String("sql", "SELECT id, name FROM p.d.events", "the query to read")

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
	debug.Print(s, bqquery.Query(s, *sql, reflect.TypeFor[Event](), bigqueryio.WithBillingProject("p")))
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}
