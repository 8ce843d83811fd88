package bqwrite_test

// The README's snippets of Write's table features, compiled and run
// against an in-process bqtest server.

import (
	"context"
	"fmt"
	"log"
	"reflect"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

type DailyCount struct {
	Day   civil.Date `bigquery:"day"`
	Word  string     `bigquery:"word"`
	Count int64      `bigquery:"count"`
}

// Word is a row of a word count.
type Word struct {
	Word      string `bigquery:"word"`
	WordCount int64  `bigquery:"word_count"`
	Corpus    string `bigquery:"corpus"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeOf((*DailyCount)(nil)).Elem())
	bqwrite.RegisterType(reflect.TypeFor[Word]())
}

// Create a partitioned, clustered table, against bqtest.
func Example_writeTableSpec() {
	srv, _ := bqtest.NewServer()
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	day := civil.Date{Year: 2026, Month: 12, Day: 3}
	p, s := beam.NewPipelineWithRoot()
	counts := beam.Create(s, DailyCount{day, "to", 3}, DailyCount{day, "be", 2})
	bqwrite.Write(s, "p.d.daily", counts, // CreateIfNeeded makes the table as asked
		bqwrite.WithTimePartitioning(bqwrite.TimePartitioning{
			Unit: bqwrite.PartitionByDay, Column: "day", Expiration: 365 * 24 * time.Hour}),
		bqwrite.WithClustering("word"),
		bqwrite.WithTableDescription("word counts by day"),
		bqwrite.WithTableLabels(map[string]string{"team": "words"}),
		bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithRESTEndpoint(srv.RESTEndpoint()), bqwrite.WithInsecure())
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	c, _ := bigquery.NewClient(context.Background(), "p", srv.RESTClientOptions()...)
	md, _ := c.Dataset("d").Table("daily").Metadata(context.Background())
	rows, _ := srv.PartitionRows("p.d.daily", "20261203")
	fmt.Println(md.TimePartitioning.Type, md.TimePartitioning.Field, md.Clustering.Fields, len(rows), "rows in 20261203")
	// Output: DAY day [word] 2 rows in 20261203
}

// Replace a table's rows, against bqtest.
func Example_writeTruncate() {
	srv, _ := bqtest.NewServer()
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	p, s := beam.NewPipelineWithRoot()
	words := beam.Create(s, Word{"to", 3, "hamlet"}, Word{"be", 2, "hamlet"})
	write := func(words beam.PCollection) {
		bqwrite.Write(s, "p.d.latest", words,
			bqwrite.WithWriteDisposition(bqwrite.WriteTruncate), // stage, then copy over the table
			bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithRESTEndpoint(srv.RESTEndpoint()), bqwrite.WithInsecure())
	}
	write(words)
	for range 2 { // the second run replaces the first's rows
		if _, err := beam.Run(context.Background(), "prism", p); err != nil {
			log.Fatal(err)
		}
	}
	rows, _ := srv.TableRows("p.d.latest")
	fmt.Println(len(rows), "rows,", len(srv.Tables()), "table")
	// Output: 2 rows, 1 table
}
