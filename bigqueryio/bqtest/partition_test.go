package bqtest_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// TestTableMetadataRoundTrip: tables.insert through the official client
// keeps time partitioning, range partitioning, clustering, description,
// labels, the KMS key and the expiration time, and tables.get (the
// client's Metadata) reports them back; specs the service refuses are
// refused with HTTP 400.
func TestTableMetadataRoundTrip(t *testing.T) {
	e := newWriteEnv(t)
	e.srv.AddDataset("proj", "ds", "EU")
	schema := bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType},
		{Name: "ts", Type: bigquery.TimestampFieldType},
		{Name: "day", Type: bigquery.DateFieldType},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "f", Type: bigquery.FloatFieldType},
		{Name: "tags", Type: bigquery.StringFieldType, Repeated: true},
	}
	ds := e.bq.DatasetInProject("proj", "ds")
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	want := &bigquery.TableMetadata{
		Schema:           schema,
		TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.HourPartitioningType, Field: "ts", Expiration: 48 * time.Hour},
		Clustering:       &bigquery.Clustering{Fields: []string{"name", "id"}},
		Description:      "sales by hour",
		Labels:           map[string]string{"team": "sales", "env": "test"},
		EncryptionConfig: &bigquery.EncryptionConfig{KMSKeyName: "projects/proj/locations/eu/keyRings/r/cryptoKeys/k"},
		ExpirationTime:   exp,
	}
	if err := ds.Table("hourly").Create(e.ctx, want); err != nil {
		t.Fatal(err)
	}
	md, err := ds.Table("hourly").Metadata(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(md.TimePartitioning, want.TimePartitioning) || !reflect.DeepEqual(md.Clustering, want.Clustering) ||
		md.Description != want.Description || !reflect.DeepEqual(md.Labels, want.Labels) ||
		!reflect.DeepEqual(md.EncryptionConfig, want.EncryptionConfig) || !md.ExpirationTime.Equal(exp) || md.RangePartitioning != nil {
		t.Errorf("tables.get: %+v %+v %v %v %+v %v, want %+v %+v %v %v %+v %v", md.TimePartitioning, md.Clustering, md.Description, md.Labels,
			md.EncryptionConfig, md.ExpirationTime, want.TimePartitioning, want.Clustering, want.Description, want.Labels, want.EncryptionConfig, exp)
	}
	rng := &bigquery.RangePartitioning{Field: "id", Range: &bigquery.RangePartitioningRange{Start: 0, End: 100, Interval: 10}}
	if err := ds.Table("ranged").Create(e.ctx, &bigquery.TableMetadata{Schema: schema, RangePartitioning: rng}); err != nil {
		t.Fatal(err)
	}
	if md, err := ds.Table("ranged").Metadata(e.ctx); err != nil || !reflect.DeepEqual(md.RangePartitioning, rng) || md.TimePartitioning != nil {
		t.Errorf("tables.get of the ranged table: %+v %v", md, err)
	}
	for name, bad := range map[string]*bigquery.TableMetadata{
		"partition column missing":   {TimePartitioning: &bigquery.TimePartitioning{Field: "nosuch"}},
		"partition column a STRING":  {TimePartitioning: &bigquery.TimePartitioning{Field: "name"}},
		"DATE by hour":               {TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.HourPartitioningType, Field: "day"}},
		"range on a TIMESTAMP":       {RangePartitioning: &bigquery.RangePartitioning{Field: "ts", Range: rng.Range}},
		"both partitionings":         {TimePartitioning: &bigquery.TimePartitioning{}, RangePartitioning: rng},
		"five clustering columns":    {Clustering: &bigquery.Clustering{Fields: []string{"id", "ts", "day", "name", "id"}}},
		"clustering column missing":  {Clustering: &bigquery.Clustering{Fields: []string{"nosuch"}}},
		"clustering by a FLOAT":      {Clustering: &bigquery.Clustering{Fields: []string{"f"}}},
		"clustering by a REPEATED":   {Clustering: &bigquery.Clustering{Fields: []string{"tags"}}},
		"empty range of partitions":  {RangePartitioning: &bigquery.RangePartitioning{Field: "id", Range: &bigquery.RangePartitioningRange{Start: 5, End: 5, Interval: 1}}},
		"a partition decorator name": nil,
	} {
		tbl := ds.Table("bad")
		if bad == nil {
			bad, tbl = &bigquery.TableMetadata{}, ds.Table("bad$20251103")
		}
		bad.Schema = schema
		if err := tbl.Create(e.ctx, bad); apiCode(err) != http.StatusBadRequest {
			t.Errorf("%s: tables.insert answered %v, want HTTP 400", name, err)
		}
	}
	if tables := e.srv.Tables(); len(tables) != 2 {
		t.Errorf("tables %v: want the two made", tables)
	}
}

// TestWritePartitionDecorator: a write stream made on a partition
// decorator (table$20251103) of a table partitioned by ingestion time puts
// its rows in that partition, PENDING (committed with the decorated or
// the plain parent) and _default alike; rows written without one land in
// the current partition. On a table partitioned by a column, rows outside
// the decorator's partition are refused in row_errors, nothing of the
// request written. A decorator on a table that is not partitioned, or one
// that names no partition of the table's kind, is INVALID_ARGUMENT.
func TestWritePartitionDecorator(t *testing.T) {
	e := newWriteEnv(t)
	if err := e.srv.AddTable("proj.ds.ing", bqtest.Table{Schema: simpleSchema,
		TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType}}); err != nil {
		t.Fatal(err)
	}
	md, dp := schemaDescriptor(t, simpleSchema)
	base := "projects/proj/datasets/ds/tables/ing"
	for i, parent := range []string{base + "$20251103", base} {
		ms := pendingStream(t, e, base+"$20251103", md, dp, 10*i, 3, true)
		if !strings.HasPrefix(ms.StreamName(), base+"$20251103/streams/") {
			t.Errorf("stream %s: want it named under its decorated parent", ms.StreamName())
		}
		resp, err := e.mw.BatchCommitWriteStreams(e.ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: parent, WriteStreams: []string{ms.StreamName()}})
		if err != nil || len(resp.GetStreamErrors()) > 0 {
			t.Fatalf("commit with parent %s: %v %v", parent, resp, err)
		}
	}
	def := e.stream(t, base+"$20251102", managedwriter.DefaultStream, dp)
	if r, err := def.AppendRows(e.ctx, simpleRows(t, md, 100, 2)); err != nil {
		t.Fatal(err)
	} else if _, err := r.GetResult(e.ctx); err != nil {
		t.Fatal(err)
	}
	now := e.stream(t, base, managedwriter.DefaultStream, dp)
	if r, err := now.AppendRows(e.ctx, simpleRows(t, md, 200, 1)); err != nil {
		t.Fatal(err)
	} else if _, err := r.GetResult(e.ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]string{
		"20251103":                          {"r0", "r1", "r2", "r10", "r11", "r12"},
		"20251102":                          {"r100", "r101"},
		time.Now().UTC().Format("20060102"): {"r200"},
		time.Now().UTC().Add(-72 * time.Hour).Format("20060102"): nil,
	} {
		rows, err := e.srv.PartitionRows("proj.ds.ing", id)
		if err != nil || !reflect.DeepEqual(names(rows), want) {
			t.Errorf("partition %s: %v (%v), want %v", id, names(rows), err, want)
		}
	}
	if got := names(e.read(t, "ing")); len(got) != 9 {
		t.Errorf("the table reads %v: want all 9 rows", got)
	}

	// By a column: the decorator must match the rows.
	schema := bigquery.Schema{{Name: "name", Type: bigquery.StringFieldType}, {Name: "value", Type: bigquery.IntegerFieldType}}
	if err := e.srv.AddTable("proj.ds.rng", bqtest.Table{Schema: schema,
		RangePartitioning: &bigquery.RangePartitioning{Field: "value", Range: &bigquery.RangePartitioningRange{Start: 0, End: 100, Interval: 10}}}); err != nil {
		t.Fatal(err)
	}
	md, dp = schemaDescriptor(t, schema)
	ms := e.stream(t, "projects/proj/datasets/ds/tables/rng$10", managedwriter.CommittedStream, dp)
	r, err := ms.AppendRows(e.ctx, simpleRows(t, md, 8, 4), managedwriter.WithOffset(0)) // values 8..11
	if err != nil {
		t.Fatal(err)
	}
	full, err := r.FullResponse(e.ctx)
	if errs := full.GetRowErrors(); len(errs) != 2 || errs[0].GetIndex() != 0 || errs[1].GetIndex() != 1 || !strings.Contains(errs[0].GetMessage(), "partition 0") {
		t.Errorf("append across partitions: %v %v, want rows 0 and 1 refused", full, err)
	}
	r, err = ms.AppendRows(e.ctx, simpleRows(t, md, 10, 2), managedwriter.WithOffset(0))
	if err == nil {
		_, err = r.GetResult(e.ctx)
	}
	if rows, perr := e.srv.PartitionRows("proj.ds.rng", "10"); err != nil || perr != nil || !reflect.DeepEqual(names(rows), []string{"r10", "r11"}) {
		t.Errorf("partition 10: %v (%v, %v), want r10 r11", names(rows), err, perr)
	}

	e.table(t, "plain", simpleSchema)
	for _, parent := range []string{"projects/proj/datasets/ds/tables/plain$20251103", base + "$2026120", base + "$20261399", "projects/proj/datasets/ds/tables/rng$15"} {
		_, err := e.mw.NewManagedStream(e.ctx, managedwriter.WithDestinationTable(parent), managedwriter.WithType(managedwriter.PendingStream), managedwriter.WithSchemaDescriptor(dp))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("a stream on %s: %v, want INVALID_ARGUMENT", parent, err)
		}
	}
}
