package avroio_test

// The README's avroio pipeline, compiled and run. internal/readme checks that
// README.md quotes this file verbatim.

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/filter"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/sdfio/sdfio/avroio"
)

// Event is a record of avroio/testdata/events.avsc; fields are matched by
// their avro tags.
type Event struct {
	ID    int64   `avro:"id"`
	Name  string  `avro:"name"`
	Score float64 `avro:"score"`
	Note  *string `avro:"note"` // ["null", "string"]
}

const readmeSchema = `{"type": "record", "name": "Event", "fields": [
  {"name": "id", "type": "long"},
  {"name": "name", "type": "string"},
  {"name": "score", "type": "double"},
  {"name": "note", "type": ["null", "string"]}]}`

func init() {
	avroio.RegisterType(reflect.TypeOf((*Event)(nil)).Elem())
	register.Function1x1(highScore)
	register.Function1x1(countOne)
	register.Function1x0(printFiles)
}

func highScore(e Event) bool { return e.Score >= 50 }

func countOne(string) int { return 1 }

func printFiles(n int) { fmt.Println(n, "files written") }

// Read every codec's copy of the test file, keep the high scores and write
// them back as 2 files.
func Example_readme() {
	out, err := os.MkdirTemp("", "readme-avro")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(out)

	p, s := beam.NewPipelineWithRoot()
	events := avroio.Read(s, "testdata/events-*.avro", reflect.TypeOf(Event{})) // PCollection<Event>
	high := filter.Include(s, events, highScore)
	files := avroio.Write(s, filepath.Join(out, "high"), readmeSchema, high,
		avroio.WithNumShards(2), avroio.WithSuffix(".avro")) // PCollection<string>: the files written
	beam.ParDo0(s, printFiles, stats.Sum(s, beam.ParDo(s, countOne, files)))
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	// Output: 2 files written
}
