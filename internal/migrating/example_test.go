package migrating_test

import (
	"encoding/json"
	"reflect"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	beamavroio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/avroio"
	beambigqueryio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/bigqueryio"
	beamdatastoreio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/datastoreio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"google.golang.org/api/option"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqquery"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/datastoreio"
)

// BeamGoEvent is the element type as a Beam Go pipeline has it: Beam Go's
// avroio decodes each record to JSON and then into the type, so it reads
// `json` tags (and matches names case-insensitively, as encoding/json does).
type BeamGoEvent struct {
	ID   int64     `json:"id" bigquery:"id" datastore:"id"`
	Name string    `json:"name" bigquery:"name" datastore:"name"`
	At   time.Time `json:"at" bigquery:"at" datastore:"at"`
}

// Event is the same type for sdfio: `avro` tags (or the exact Avro field
// names); `json` tags are not read.
type Event struct {
	ID   int64     `avro:"id" bigquery:"id" datastore:"id"`
	Name string    `avro:"name" bigquery:"name" datastore:"name"`
	At   time.Time `avro:"at" bigquery:"at" datastore:"at"`
}

const eventSchema = `{"type":"record","name":"Event","fields":[
	{"name":"id","type":"long"},
	{"name":"name","type":"string"},
	{"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}}]}`

func init() {
	beam.RegisterType(reflect.TypeFor[Event]())
	beam.RegisterType(reflect.TypeFor[BeamGoEvent]())
	register.Function1x2(stampEvent)
	register.Function1x3(stampJSON)
}

// stampEvent gives an event its own time as its element timestamp.
func stampEvent(e Event) (beam.EventTime, Event) { return mtime.FromTime(e.At), e }

// stampJSON does the same for Beam Go's JSON text of a record.
func stampJSON(line string) (beam.EventTime, string, error) {
	var e BeamGoEvent
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		return 0, "", err
	}
	return mtime.FromTime(e.At), line, nil
}

// hourlyBeamGo is the Avro -> Avro program as Beam Go has it: events in
// hourly windows.
func hourlyBeamGo(s beam.Scope, in, out string) {
	// Beam Go: each file read whole on one worker; Write takes JSON text,
	// not structs, so the records stay JSON all the way. Its files are
	// named by shard alone: every window writes the same name.
	lines := beamavroio.Read(s, in, reflect.TypeFor[string]())
	stamped := beam.ParDo(s, stampJSON, lines)
	byHour := beam.WindowInto(s, window.NewFixedWindows(time.Hour), stamped)
	beamavroio.Write(s, out, eventSchema, byHour)
}

// hourly is the same program on sdfio.
func hourly(s beam.Scope, in, out string) beam.PCollection {
	// sdfio: files split at sync markers and rebalanced while read; Write
	// takes the structs, and WithWindowedWrites gives each window (and
	// pane) files of its own, named by the window.
	events := avroio.Read(s, in, reflect.TypeFor[Event]())
	stamped := beam.ParDo(s, stampEvent, events)
	byHour := beam.WindowInto(s, window.NewFixedWindows(time.Hour), stamped)
	return avroio.Write(s, out, eventSchema, byHour,
		avroio.WithWindowedWrites(), avroio.WithSuffix(".avro"))
}

func Example_avroio() {
	_, s := beam.NewPipelineWithRoot()
	hourlyBeamGo(s.Scope("beam"), "gs://bucket/events/*.avro", "gs://bucket/out/events")
	hourly(s, "gs://bucket/events/*.avro", "gs://bucket/out/events")
}

// copyBeamGo is the BigQuery -> BigQuery program as Beam Go has it.
func copyBeamGo(s beam.Scope) {
	// Beam Go: the project to bill, then project:dataset.table; Read runs
	// a legacy SQL query of the struct's columns and reads its result on
	// one worker; Write uses streaming inserts.
	events := beambigqueryio.Read(s, "my-project", "my-project:events.raw", reflect.TypeFor[BeamGoEvent]())
	beambigqueryio.Write(s, "my-project", "my-project:events.copy", events)
}

// Where copyEvents connects: nothing for Google Cloud; a test points it at
// bqtest's endpoints (see TestMigratedBigQuery).
type bqConn struct {
	Read  []bigqueryio.ReadOption
	Write []bqwrite.WriteOption
}

// copyEvents is the same program on sdfio.
func copyEvents(s beam.Scope, src, dst string, conn bqConn) bqwrite.WriteResult {
	// sdfio: the table names its project; the Storage Read API, one
	// restriction per stream, split again while read; writes exactly once
	// through the Storage Write API. WithFailOnRowErrors fails the job on
	// a refused row, as Beam Go does; without it such rows go to
	// FailedRows, and are lost if nothing reads it.
	read := []bigqueryio.ReadOption{bigqueryio.WithSelectedFields("id", "name", "at")}
	events := bigqueryio.Read(s, src, reflect.TypeFor[Event](), append(read, conn.Read...)...)
	write := []bqwrite.WriteOption{bqwrite.WithFailOnRowErrors()}
	return bqwrite.Write(s, dst, events, append(write, conn.Write...)...)
}

func Example_bigqueryio() {
	_, s := beam.NewPipelineWithRoot()
	copyBeamGo(s.Scope("beam"))
	res := copyEvents(s, "my-project.events.raw", "my-project.events.copy", bqConn{})
	_ = res.Results // per table: the rows and streams committed

	// Queries: standard SQL by default (Beam Go's are legacy SQL unless
	// UseStandardSQL is given), with named or positional parameters.
	_ = beambigqueryio.Query(s, "my-project", "SELECT id, name, at FROM `my-project.events.raw`",
		reflect.TypeFor[BeamGoEvent](), beambigqueryio.UseStandardSQL())
	_ = bqquery.Query(s, "SELECT id, name, at FROM `my-project.events.raw` WHERE id > @min",
		reflect.TypeFor[Event](), bigqueryio.WithBillingProject("my-project"),
		bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "min", Value: 100}))

	// Beam Go's WithQuotaProject (Read and Query) is WithQuotaProject, of
	// Read and Query here and of Write in bqwrite (bqwrite.WithQuotaProject).
	// Other client options (credentials,
	// impersonation) are registered by name in an init function, which
	// every worker process runs too, and named by WithClientOptions.
	_ = beambigqueryio.Query(s, "my-project", "SELECT id FROM `my-project.events.raw`",
		reflect.TypeFor[BeamGoEvent](), beambigqueryio.UseStandardSQL(), beambigqueryio.WithQuotaProject("my-quota-project"))
	_ = bigqueryio.Read(s, "my-project.events.raw", reflect.TypeFor[Event](),
		bigqueryio.WithQuotaProject("my-quota-project"), bigqueryio.WithClientOptions("etl-account"))
}

// The client options of WithClientOptions("etl-account"): a service
// account's key file, for every client of the transforms that name it.
func init() {
	bigqueryio.RegisterClientOptions("etl-account", func() []option.ClientOption {
		return []option.ClientOption{option.WithAuthCredentialsFile(option.ServiceAccount, "/secrets/etl.json")}
	})
}

// exportBeamGo is the Datastore -> Avro program as Beam Go has it.
func exportBeamGo(s beam.Scope, project, out string) {
	// Beam Go: a kind, a number of shards, the type and its kind's name;
	// the entities become JSON text for Beam Go's avroio.Write.
	events := beamdatastoreio.Read(s, project, "Event", 8, reflect.TypeFor[BeamGoEvent](), "Event")
	beamavroio.Write(s, out, eventSchema, beam.ParDo(s, toJSON, events))
}

func toJSON(e BeamGoEvent) (string, error) { b, err := json.Marshal(e); return string(b), err }

func init() { register.Function1x2(toJSON) }

// export is the same program on sdfio.
func export(s beam.Scope, project, out string) beam.PCollection {
	// sdfio: a query (a kind, filters, GQL) split on __scatter__ keys in
	// the service's key order, split again while read; the client finds
	// the emulator through DATASTORE_EMULATOR_HOST, as Google's client does.
	events := datastoreio.Read(s, project, datastoreio.NewQuery("Event"), reflect.TypeFor[Event](),
		datastoreio.WithNumQuerySplits(8))
	return avroio.Write(s, out, eventSchema, events,
		avroio.WithNumShards(1), avroio.WithSuffix(".avro"))
}

func Example_datastoreio() {
	_, s := beam.NewPipelineWithRoot()
	exportBeamGo(s.Scope("beam"), "my-project", "gs://bucket/export/events")
	export(s, "my-project", "gs://bucket/export/events")
}
