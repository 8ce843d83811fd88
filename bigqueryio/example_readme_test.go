package bigqueryio_test

// The README's bigqueryio snippets, compiled; the second runs against an
// in-process bqtest server. internal/readme checks that README.md quotes
// this file verbatim.

import (
	"context"
	"fmt"
	"log"
	"reflect"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/stats"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqquery"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

type Word struct {
	Word      string `bigquery:"word"`
	WordCount int64  `bigquery:"word_count"`
	Corpus    string `bigquery:"corpus"`
}

func init() {
	bigqueryio.RegisterType(reflect.TypeOf((*Word)(nil)).Elem())
	register.Function1x1(wordCount)
	register.Function1x0(printTotal)
}

func wordCount(w Word) int64 { return w.WordCount }

func printTotal(n int64) { fmt.Println(n, "words") }

// Read a public table (needs a Google Cloud project to run).
func Example_readme() {
	p, s := beam.NewPipelineWithRoot()
	words := bigqueryio.Read(s, "bigquery-public-data:samples.shakespeare", reflect.TypeOf(Word{}),
		bigqueryio.WithBillingProject("my-project"),
		bigqueryio.WithSelectedFields("word", "word_count", "corpus"),
		bigqueryio.WithRowRestriction("word_count > 10"),
		bigqueryio.WithDataFormat(bigqueryio.Arrow)) // Avro by default
	_, _ = p, words
}

// Read generic rows (needs a Google Cloud project to run).
func Example_rows() {
	p, s := beam.NewPipelineWithRoot()
	rows := bigqueryio.Read(s, "bigquery-public-data:samples.shakespeare", reflect.TypeOf(bigqueryio.Row{}),
		bigqueryio.WithBillingProject("my-project")) // PCollection<bigqueryio.Row>: row["word"].(string)
	_, _ = p, rows
}

// Read the result of a query (needs a Google Cloud project to run).
func Example_query() {
	p, s := beam.NewPipelineWithRoot()
	words := bqquery.Query(s, `SELECT word, SUM(word_count) AS word_count, "all" AS corpus
		FROM `+"`bigquery-public-data.samples.shakespeare`"+` GROUP BY word`, reflect.TypeOf(Word{}),
		bigqueryio.WithBillingProject("my-project")) // runs the job, holds its temporary table
	_, _ = p, words
}

// Test a pipeline against bqtest.
func Example_bqtest() {
	schema := bigquery.Schema{
		{Name: "word", Type: bigquery.StringFieldType},
		{Name: "word_count", Type: bigquery.IntegerFieldType},
		{Name: "corpus", Type: bigquery.StringFieldType},
	}
	rows := [][]bigquery.Value{{"to", int64(3), "hamlet"}, {"be", int64(2), "hamlet"}}

	srv, _ := bqtest.NewServer()
	defer srv.Close()
	srv.AddTable("p.d.words", bqtest.Table{Schema: schema, Rows: rows})
	p, s := beam.NewPipelineWithRoot()
	words := bigqueryio.Read(s, "p.d.words", reflect.TypeOf(Word{}),
		bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
	beam.ParDo0(s, printTotal, stats.Sum(s, beam.ParDo(s, wordCount, words)))
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	// Output: 5 words
}

// Test a query pipeline against bqtest: the query's result is a table the
// test defines.
func Example_queryBqtest() {
	srv, _ := bqtest.NewServer()
	defer srv.Close()
	srv.AddQuery("SELECT * FROM d.words", bqtest.QueryResult{Table: bqtest.Table{
		Schema: bigquery.Schema{
			{Name: "word", Type: bigquery.StringFieldType},
			{Name: "word_count", Type: bigquery.IntegerFieldType},
			{Name: "corpus", Type: bigquery.StringFieldType},
		},
		Rows: [][]bigquery.Value{{"to", int64(3), "all"}, {"be", int64(4), "all"}},
	}})
	p, s := beam.NewPipelineWithRoot()
	words := bqquery.Query(s, "SELECT * FROM d.words", reflect.TypeOf(Word{}),
		bigqueryio.WithBillingProject("p"), bigqueryio.WithEndpoint(srv.Addr()),
		bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()), bigqueryio.WithInsecure())
	beam.ParDo0(s, printTotal, stats.Sum(s, beam.ParDo(s, wordCount, words)))
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	fmt.Println("temporary tables left:", len(srv.Tables()))
	// Output:
	// 7 words
	// temporary tables left: 0
}

func printResult(r bqwrite.TableResult) { fmt.Println(r.Table, r.Rows, "rows committed") }

func init() { register.Function1x0(printResult) }

// Write a table exactly once, against bqtest.
func Example_write() {
	srv, _ := bqtest.NewServer()
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	p, s := beam.NewPipelineWithRoot()
	words := beam.Create(s, Word{"to", 3, "hamlet"}, Word{"be", 2, "hamlet"})
	res := bqwrite.Write(s, "p.d.counts", words, // CreateIfNeeded: the schema inferred from Word
		bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithRESTEndpoint(srv.RESTEndpoint()), bqwrite.WithInsecure())
	beam.ParDo0(s, printResult, res.Results) // after the commit; res.FailedRows: rows refused
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	// Output: p.d.counts 2 rows committed
}
