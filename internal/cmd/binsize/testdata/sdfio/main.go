// Command sdfio reads Avro files with sdfio's avroio: the program
// internal/cmd/binsize measures against testdata/beam, the same program on
// Beam Go's avroio.
package main

import (
	"context"
	"flag"
	"log"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/debug"

	"github.com/sdfio/sdfio/avroio"
)

var input = flag.String("input", "/tmp/events/*.avro", "Avro files to read")

// Event is one record.
type Event struct {
	ID   int64  `avro:"id" json:"id"`
	Name string `avro:"name" json:"name"`
}

func init() { beam.RegisterType(reflect.TypeFor[Event]()) }

func main() {
	flag.Parse()
	beam.Init()
	p, s := beam.NewPipelineWithRoot()
	events := avroio.Read(s, *input, reflect.TypeFor[Event]())
	debug.Print(s, events)
	if err := beamx.Run(context.Background(), p); err != nil {
		log.Fatal(err)
	}
}
