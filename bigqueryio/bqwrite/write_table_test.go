package bqwrite_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/workertest"
)

// Sale is the row type of the table-spec tests.
type Sale struct {
	ID     int64      `bigquery:"id"`
	Day    civil.Date `bigquery:"day"`
	At     time.Time  `bigquery:"at"`
	Shop   string     `bigquery:"shop"`
	Amount float64    `bigquery:"amount"`
	Tags   []string   `bigquery:"tags"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeFor[Sale]())
	register.Function1x1(saleTable)
	register.Function1x1(saleSpec)
	register.Function1x1(badSaleSpec)
}

// sales are n sales over the days from 2026-12-01 and three shops.
func sales(n int) []Sale {
	out := make([]Sale, n)
	for i := range out {
		day := civil.Date{Year: 2026, Month: 12, Day: 1 + i%3}
		out[i] = Sale{ID: int64(i), Day: day, At: day.In(time.UTC).Add(time.Duration(i) * time.Minute),
			Shop: fmt.Sprintf("shop%d", i%3), Amount: float64(i) / 4}
	}
	return out
}

// saleTable routes sales by parity of ID.
func saleTable(s Sale) string { return fmt.Sprintf("p.d.by%d", s.ID%2) }

// saleSpec clusters p.d.by0 by shop and partitions p.d.by1 by the hour of
// at.
func saleSpec(table string) bqwrite.TableSpec {
	if table == "p.d.by0" {
		return bqwrite.TableSpec{Clustering: []string{"shop"}, Labels: map[string]string{"parity": "even"}}
	}
	return bqwrite.TableSpec{TimePartitioning: &bqwrite.TimePartitioning{Unit: bqwrite.PartitionByHour, Column: "at"}}
}

// badSaleSpec clusters by a column the schema lacks.
func badSaleSpec(string) bqwrite.TableSpec {
	return bqwrite.TableSpec{Clustering: []string{"region"}}
}

// TestWriteTableSpecConstruction: a spec that cannot fit the schema, or
// that contradicts the other options, is refused when the pipeline is
// built, naming the option and what is wrong.
func TestWriteTableSpecConstruction(t *testing.T) {
	day := func(col string) bqwrite.WriteOption {
		return bqwrite.WithTimePartitioning(bqwrite.TimePartitioning{Unit: bqwrite.PartitionByDay, Column: col})
	}
	rng := bqwrite.WithRangePartitioning(bqwrite.RangePartitioning{Column: "id", Start: 0, End: 100, Interval: 10})
	rowSchema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "f", Type: bigquery.FloatFieldType}}
	for _, tc := range []struct {
		elem any
		tbl  string
		opts []bqwrite.WriteOption
		want string
	}{
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithClustering("shop", "region")}, `WithClustering("shop", "region"): column "region" is not a top-level column of the schema (the columns are id, day, at, shop, amount, tags)`},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithClustering("shop", "id", "day", "at", "amount")}, "5 columns, a table is clustered by at most 4"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithClustering("amount")}, "column amount is FLOAT, which a table cannot be clustered by"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithClustering("tags")}, "column tags is REPEATED STRING"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithClustering("shop", "SHOP")}, "column SHOP named twice"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{day("shop")}, `WithTimePartitioning({Unit:DAY Column:shop Expiration:0s}): column shop is STRING: a table is partitioned by time on a DATE, DATETIME or TIMESTAMP column`},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{day("nosuch")}, `column "nosuch" is not a top-level column`},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithTimePartitioning(bqwrite.TimePartitioning{Unit: bqwrite.PartitionByHour, Column: "day"})}, "column day is a DATE, which is not partitioned by hour"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithTimePartitioning(bqwrite.TimePartitioning{Unit: "WEEK"})}, `unit "WEEK"`},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{day(""), rng}, "a table is partitioned by time or by a range, not both"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithRangePartitioning(bqwrite.RangePartitioning{Column: "amount", Start: 0, End: 10, Interval: 1})}, "column amount is FLOAT: a range partitions an INTEGER column"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithRangePartitioning(bqwrite.RangePartitioning{Column: "id", Start: 10, End: 10, Interval: 1})}, "want Start < End and an Interval > 0"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithTableLabels(map[string]string{"Team": "x"})}, `label "Team"`},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithKMSKey("my-key")}, `WithKMSKey("my-key"): want projects/p/locations/l/keyRings/r/cryptoKeys/k`},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithClustering("shop"), bqwrite.WithCreateDisposition(bqwrite.CreateNever)}, `WithCreateDisposition(1): the table's spec (WithClustering("shop")) only applies to a table CreateIfNeeded creates`},
		{Sale{}, "p.d.t$20261203", []bqwrite.WriteOption{bqwrite.WithTimePartitioning(bqwrite.TimePartitioning{Unit: bqwrite.PartitionByMonth})}, `partition "20261203" is not a partition of a table partitioned by MONTH`},
		{Sale{}, "p.d.t$55", []bqwrite.WriteOption{rng}, `partition "55" is not the start of a partition of the range [0, 100) by 10`},
		{Sale{}, "p.d.t$dec", nil, `partition decorator "dec"`},
		{Sale{}, "", []bqwrite.WriteOption{bqwrite.WithTableFunc(saleTable), bqwrite.WithTableSpecFunc(saleTable)}, "want a func(string) bqwrite.TableSpec"},
		{Sale{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithTableSpecFunc(saleSpec)}, "is given without WithTableFunc"},
		{Sale{}, "", []bqwrite.WriteOption{bqwrite.WithTableFunc(saleTable), bqwrite.WithTableSpecFunc(saleSpec), bqwrite.WithClustering("shop")}, "cannot be given with the options of a fixed spec"},
		{bqwrite.Row{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithSchema(rowSchema), bqwrite.WithClustering("f")}, "column f is FLOAT"},
	} {
		_, s := beam.NewPipelineWithRoot()
		col := beam.Create(s, tc.elem)
		_, err := bqwrite.TryWrite(s, tc.tbl, col, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bqwrite.Write") {
			t.Errorf("%T %q: error %v, want %q", tc.elem, tc.tbl, err, tc.want)
		}
	}
	// And what fits is taken.
	_, s := beam.NewPipelineWithRoot()
	col := beam.Create(s, Sale{})
	if _, err := bqwrite.TryWrite(s, "p.d.t$20261203", col, day("at"), bqwrite.WithClustering("SHOP", "id", "day", "at"),
		bqwrite.WithTableLabels(map[string]string{"team": "sales-1", "empty": ""}), bqwrite.WithKMSKey("projects/p/locations/eu/keyRings/r/cryptoKeys/k")); err != nil {
		t.Errorf("a spec that fits: %v", err)
	}
}

// metadata reads a table's metadata back with the official client.
func metadata(t *testing.T, srv *bqtest.Server, table string) *bigquery.TableMetadata {
	t.Helper()
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", srv.RESTClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	md, err := c.DatasetInProject("p", "d").Table(table).Metadata(ctx)
	if err != nil {
		t.Fatalf("tables.get of %s: %v", table, err)
	}
	return md
}

// TestWriteCreatesTableAsSpecified: CreateIfNeeded makes each table as its
// spec says — partitioned by a column's day with an expiration, clustered,
// described, labelled, encrypted with a KMS key; by an integer range;
// partitioned by ingestion time and written through a partition decorator
// into that partition; and, with WithTableFunc, by WithTableSpecFunc per
// table — as the official client's Metadata reads them back, and the rows
// are where the partitioning puts them.
func TestWriteCreatesTableAsSpecified(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	rows := sales(30)
	p, s := beam.NewPipelineWithRoot()
	col := beam.Create(s, anys(rows)...)
	kms := "projects/p/locations/us/keyRings/r/cryptoKeys/k"
	day := &bqwrite.TimePartitioning{Unit: bqwrite.PartitionByDay, Column: "day", Expiration: 90 * 24 * time.Hour}
	res := bqwrite.Write(s.Scope("byday"), "p.d.byday", col, writeOpts(srv, bqwrite.WithTimePartitioning(*day),
		bqwrite.WithClustering("shop", "id"), bqwrite.WithTableDescription("sales by day"),
		bqwrite.WithTableLabels(map[string]string{"team": "sales"}), bqwrite.WithKMSKey(kms))...)
	passert.Empty(s, res.FailedRows)
	res = bqwrite.Write(s.Scope("ranged"), "p.d.ranged", col, writeOpts(srv,
		bqwrite.WithRangePartitioning(bqwrite.RangePartitioning{Column: "id", Start: 0, End: 20, Interval: 5}))...)
	passert.Empty(s, res.FailedRows)
	res = bqwrite.Write(s.Scope("ingestion"), "p.d.ing$20251103", col, writeOpts(srv,
		bqwrite.WithTimePartitioning(bqwrite.TimePartitioning{Unit: bqwrite.PartitionByDay}))...)
	passert.Empty(s, res.FailedRows)
	passert.Equals(s, beam.ParDo(s, resultText, res.Results), "p.d.ing$20251103 30 rows")
	res = bqwrite.Write(s.Scope("dynamic"), "", col, writeOpts(srv, bqwrite.WithTableFunc(saleTable), bqwrite.WithTableSpecFunc(saleSpec))...)
	passert.Empty(s, res.FailedRows)
	run(t, p)

	md := metadata(t, srv, "byday")
	want := &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType, Field: "day", Expiration: 90 * 24 * time.Hour}
	if !reflect.DeepEqual(md.TimePartitioning, want) || !reflect.DeepEqual(md.Clustering, &bigquery.Clustering{Fields: []string{"shop", "id"}}) ||
		md.Description != "sales by day" || !reflect.DeepEqual(md.Labels, map[string]string{"team": "sales"}) ||
		md.EncryptionConfig == nil || md.EncryptionConfig.KMSKeyName != kms || md.RangePartitioning != nil {
		t.Errorf("p.d.byday: %+v %+v %q %v %+v", md.TimePartitioning, md.Clustering, md.Description, md.Labels, md.EncryptionConfig)
	}
	for d, want := range map[string]int{"20261201": 10, "20261202": 10, "20261203": 10} {
		if got, err := srv.PartitionRows("p.d.byday", d); err != nil || len(got) != want {
			t.Errorf("p.d.byday partition %s: %d rows (%v), want %d", d, len(got), err, want)
		}
	}
	md = metadata(t, srv, "ranged")
	if r := md.RangePartitioning; r == nil || r.Field != "id" || r.Range == nil || *r.Range != (bigquery.RangePartitioningRange{Start: 0, End: 20, Interval: 5}) || md.TimePartitioning != nil {
		t.Errorf("p.d.ranged: %+v %+v", md.RangePartitioning, md.TimePartitioning)
	}
	for part, want := range map[string]int{"0": 5, "15": 5, bqtest.UnpartitionedPartition: 10} {
		if got, err := srv.PartitionRows("p.d.ranged", part); err != nil || len(got) != want {
			t.Errorf("p.d.ranged partition %s: %d rows (%v), want %d", part, len(got), err, want)
		}
	}
	md = metadata(t, srv, "ing")
	if md.TimePartitioning == nil || md.TimePartitioning.Field != "" || md.TimePartitioning.Type != bigquery.DayPartitioningType {
		t.Errorf("p.d.ing: %+v", md.TimePartitioning)
	}
	if got, err := srv.PartitionRows("p.d.ing", "20251103"); err != nil || len(got) != 30 {
		t.Errorf("p.d.ing$20251103 holds %d rows (%v), want 30", len(got), err)
	}
	md = metadata(t, srv, "by0")
	if !reflect.DeepEqual(md.Clustering, &bigquery.Clustering{Fields: []string{"shop"}}) || md.TimePartitioning != nil || md.Labels["parity"] != "even" {
		t.Errorf("p.d.by0: %+v %+v %v", md.Clustering, md.TimePartitioning, md.Labels)
	}
	md = metadata(t, srv, "by1")
	if tp := md.TimePartitioning; tp == nil || tp.Type != bigquery.HourPartitioningType || tp.Field != "at" || md.Clustering != nil {
		t.Errorf("p.d.by1: %+v %+v", md.TimePartitioning, md.Clustering)
	}
	for _, tbl := range []string{"p.d.by0", "p.d.by1"} {
		if got, err := srv.TableRows(tbl); err != nil || len(got) != 15 {
			t.Errorf("%s holds %d rows (%v), want 15", tbl, len(got), err)
		}
	}
}

// TestWriteTableSpecFuncRefused: a spec of WithTableSpecFunc that does not
// fit the schema fails the write, naming the table and the field, and no
// table is made.
func TestWriteTableSpecFuncRefused(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "", beam.Create(s, anys(sales(4))...), writeOpts(srv, bqwrite.WithTableFunc(saleTable), bqwrite.WithTableSpecFunc(badSaleSpec))...)
	err := workertest.RunFailing(t, p)
	if err == nil {
		t.Fatal("the write succeeded")
	}
	for _, want := range []string{"bqwrite.Write to p.d.by", `WithTableSpecFunc: TableSpec.Clustering: column "region" is not a top-level column`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want %q in it", err, want)
		}
	}
	if tables := srv.Tables(); len(tables) != 0 {
		t.Errorf("tables made: %v", tables)
	}
}

// TestWriteDecoratorNeedsPartitionedTable: a write to a partition of a
// table that does not exist, with no partitioning to create it with,
// fails naming the decorator; one to a partition of an existing
// partitioned table, with no spec, lands in it.
func TestWriteDecoratorNeedsPartitionedTable(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "name", Type: bigquery.StringFieldType}}
	if err := srv.AddTable("p.d.have", bqtest.Table{Schema: schema, TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.MonthPartitioningType}}); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.have$202511", beam.Create(s, anys(simpleRows(7))...), writeOpts(srv)...)
	passert.Empty(s, res.FailedRows)
	run(t, p)
	if got, err := srv.PartitionRows("p.d.have", "202511"); err != nil || len(got) != 7 {
		t.Errorf("p.d.have$202511 holds %d rows (%v), want 7", len(got), err)
	}

	p, s = beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.missing$20251103", beam.Create(s, anys(simpleRows(3))...), writeOpts(srv)...)
	err := workertest.RunFailing(t, p)
	if err == nil || !strings.Contains(err.Error(), "bqwrite.Write to p.d.missing$20251103") || !strings.Contains(err.Error(), "needs a partitioned table") {
		t.Errorf("error %v: want the decorator named and a partitioned table asked for", err)
	}
}
