package migrating_test

// The migrated programs of docs/MIGRATING.md, run: each on Prism against
// local stand-ins for what it reads and writes on Google Cloud (files in a
// temporary directory, an in-process bqtest server, the Cloud Datastore
// emulator), and its output checked record by record.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/internal/testtmp"
)

func TestMain(m *testing.M) {
	os.Exit(testtmp.Main(func() int { return ptest.MainRetWithDefault(m, "prism") }))
}

// events are n events a minute apart from start, at microsecond precision
// (what Avro's timestamp-micros, BigQuery and Datastore keep).
func events(n int, start time.Time) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = Event{ID: int64(i), Name: fmt.Sprintf("event-%03d", i),
			At: start.Add(time.Duration(i)*time.Minute + time.Duration(i)*time.Microsecond).UTC()}
	}
	return out
}

func sortEvents(es []Event) {
	slices.SortFunc(es, func(a, b Event) int { return int(a.ID - b.ID) })
}

func sameEvents(t *testing.T, got, want []Event) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	sortEvents(got)
	sortEvents(want)
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Name != want[i].Name || !got[i].At.Equal(want[i].At) {
			t.Fatalf("event %d is %+v, want %+v", i, got[i], want[i])
		}
	}
}

// readFile reads every record of an Avro container file.
func readFile(t *testing.T, path string) []Event {
	t.Helper()
	r, err := container.OpenReader[Event](path, container.FileOpener(path), 0, container.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []Event
	for {
		e, _, _, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, e)
	}
}

func outputFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range ents {
		if e.IsDir() {
			t.Errorf("%s left behind in %s", e.Name(), dir)
			continue
		}
		files = append(files, filepath.Join(dir, e.Name()))
	}
	return files
}

// TestMigratedAvro runs the hourly Avro -> Avro program: 150 events a minute
// apart, over three hours, in two input files come out in one file per hour,
// each holding exactly that hour's events.
func TestMigratedAvro(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC)
	in := events(150, start) // 09:30 to 11:59: hours 09, 10 and 11
	p, s := beam.NewPipelineWithRoot()
	avroio.Write(s, filepath.Join(dir, "in", "events"), eventSchema, beam.CreateList(s, in),
		avroio.WithNumShards(2), avroio.WithSuffix(".avro"))
	ptest.RunAndValidate(t, p)

	p, s = beam.NewPipelineWithRoot()
	hourly(s, filepath.Join(dir, "in", "*.avro"), filepath.Join(dir, "out", "events"))
	ptest.RunAndValidate(t, p)

	var all []Event
	hours := map[string]bool{}
	for _, f := range outputFiles(t, filepath.Join(dir, "out")) {
		recs := readFile(t, f)
		if len(recs) == 0 {
			t.Fatalf("%s is empty", f)
		}
		hour := recs[0].At.Truncate(time.Hour)
		for _, e := range recs {
			if !e.At.Truncate(time.Hour).Equal(hour) {
				t.Fatalf("%s holds %v and %v, two hours", f, recs[0].At, e.At)
			}
		}
		name := hour.Format("20060102T150405.000Z")
		if !strings.Contains(filepath.Base(f), name) || !strings.HasSuffix(f, ".avro") {
			t.Errorf("%s holds the hour of %s: its name does not say so", f, name)
		}
		if hours[name] {
			t.Errorf("hour %s is in two files (one pane each expected)", name)
		}
		hours[name] = true
		all = append(all, recs...)
	}
	if len(hours) != 3 {
		t.Errorf("%d hourly files, want 3", len(hours))
	}
	sameEvents(t, all, in)
}

// TestMigratedBigQuery runs the BigQuery -> BigQuery program against bqtest:
// the copy holds exactly the source's rows.
func TestMigratedBigQuery(t *testing.T) {
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	in := events(500, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	rows := make([][]bigquery.Value, len(in))
	for i, e := range in {
		rows[i] = []bigquery.Value{e.ID, e.Name, e.At}
	}
	if err := srv.AddTable("my-project.events.raw", bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "at", Type: bigquery.TimestampFieldType},
	}, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	// The test's connection: bqtest's gRPC endpoint for both Storage APIs,
	// its REST endpoint for the table's creation.
	conn := bqConn{
		Read: []bigqueryio.ReadOption{bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure()},
		Write: []bqwrite.WriteOption{bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithInsecure(),
			bqwrite.WithRESTEndpoint(srv.RESTEndpoint())},
	}
	p, s := beam.NewPipelineWithRoot()
	copyEvents(s, "my-project.events.raw", "my-project.events.copy", conn)
	ptest.RunAndValidate(t, p)

	got, err := srv.TableRows("my-project.events.copy")
	if err != nil {
		t.Fatal(err)
	}
	var out []Event
	for _, r := range got {
		if len(r) != 3 {
			t.Fatalf("row %v: want 3 columns", r)
		}
		id, _ := r[0].(int64)
		name, _ := r[1].(string)
		at, _ := r[2].(time.Time)
		out = append(out, Event{ID: id, Name: name, At: at})
	}
	sameEvents(t, out, in)
}

// TestMigratedDatastore runs the Datastore -> Avro program against the
// emulator: one file with exactly the kind's entities.
func TestMigratedDatastore(t *testing.T) {
	e := dstest.Start(t)
	t.Setenv("DATASTORE_EMULATOR_HOST", e.Host())
	ctx := context.Background()
	c, err := e.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	in := events(300, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	keys := make([]*datastore.Key, len(in))
	for i, ev := range in {
		keys[i] = datastore.NameKey("Event", ev.Name, nil)
	}
	if _, err := c.PutMulti(ctx, keys, in); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteMulti(ctx, keys)

	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	export(s, e.Project(), filepath.Join(dir, "events"))
	ptest.RunAndValidate(t, p)

	files := outputFiles(t, dir)
	if len(files) != 1 || !strings.HasSuffix(files[0], "events-00000-of-00001.avro") {
		t.Fatalf("files %v, want one, events-00000-of-00001.avro", files)
	}
	sameEvents(t, readFile(t, files[0]), in)
}
