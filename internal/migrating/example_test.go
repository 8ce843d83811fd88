package migrating_test

import (
	"reflect"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamavroio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/avroio"
	beambigqueryio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/bigqueryio"
	beamdatastoreio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/datastoreio"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/datastoreio"
)

type Event struct {
	ID   int64  `avro:"id" bigquery:"id" datastore:"id"`
	Name string `avro:"name" bigquery:"name" datastore:"name"`
}

func init() { beam.RegisterType(reflect.TypeFor[Event]()) }

const eventSchema = `{"type":"record","name":"Event","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}]}`

func Example_avroio() {
	p, s := beam.NewPipelineWithRoot()
	t := reflect.TypeFor[Event]()

	// Beam Go: one file per worker, no splitting inside a file.
	before := beamavroio.Read(s, "gs://bucket/events/*.avro", t)
	beamavroio.Write(s.Scope("beam"), "gs://bucket/out/events", eventSchema, before, beamavroio.WithNumShards(4))

	// sdfio: files split at sync markers and rebalanced while read.
	events := avroio.Read(s, "gs://bucket/events/*.avro", t,
		avroio.WithDesiredBundleSize(64<<20))
	avroio.Write(s, "gs://bucket/out/events", eventSchema, events,
		avroio.WithNumShards(4), avroio.WithSuffix(".avro"))
	_ = p
}

func Example_bigqueryio() {
	p, s := beam.NewPipelineWithRoot()
	t := reflect.TypeFor[Event]()

	// Beam Go: the project to bill, then project:dataset.table; queries
	// are legacy SQL unless UseStandardSQL is given.
	before := beambigqueryio.Read(s, "my-project", "my-project:events.raw", t)
	_ = beambigqueryio.Query(s, "my-project", "SELECT id, name FROM `my-project.events.raw`", t,
		beambigqueryio.UseStandardSQL())
	beambigqueryio.Write(s, "my-project", "my-project:events.copy", before)

	// sdfio: the table names its project; the Storage Read API, one
	// restriction per stream, split again while read; standard SQL by
	// default (WithLegacySQL for the other); writes exactly once through
	// the Storage Write API.
	events := bigqueryio.Read(s, "my-project.events.raw", t,
		bigqueryio.WithSelectedFields("id", "name"))
	_ = bigqueryio.Query(s, "SELECT id, name FROM `my-project.events.raw` WHERE id > @min", t,
		bigqueryio.WithBillingProject("my-project"),
		bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "min", Value: 100}))
	res := bigqueryio.Write(s, "my-project.events.copy", events,
		bigqueryio.WithCreateDisposition(bigqueryio.CreateIfNeeded))
	_ = res.FailedRows // rows the service refused, with its error
	_ = p
}

func Example_datastoreio() {
	p, s := beam.NewPipelineWithRoot()
	t := reflect.TypeFor[Event]()

	// Beam Go: a kind, a number of shards, the type and its kind's name.
	_ = beamdatastoreio.Read(s, "my-project", "Event", 8, t, "Event")

	// sdfio: a query (a kind, filters, GQL) split on __scatter__ keys in the
	// service's key order, read at one snapshot, split again while read;
	// and writes, which Beam Go does not have.
	events := datastoreio.Read(s, "my-project", datastoreio.NewQuery("Event"), t,
		datastoreio.WithNamespace("prod"), datastoreio.WithReadTime(time.Now().Add(-time.Minute)))
	_ = events
	_ = p
}
