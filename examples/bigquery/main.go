// Command bigquery reads a BigQuery table through the Storage Read API with
// bigqueryio and prints, per corpus, the number of distinct words and their
// total count, then the read's metrics (rows, streams, splits). It then
// writes those statistics to a second table with bqwrite.Write (the
// Storage Write API, exactly once: nothing is visible before the commit)
// and reads that table back.
//
// The table has the schema of bigquery-public-data.samples.shakespeare
// (word STRING, word_count INTEGER, corpus STRING, corpus_date INTEGER). By
// default the command starts an in-process bqtest server with a generated
// table of --rows rows and reads that; with --table it reads a real table,
// billed to --project (Beam's flag; default: the table's project).
//
//	go run ./examples/bigquery                                    # bqtest, Prism in-process
//	go run ./examples/bigquery --streams=1 --rows=60 --row_delay=120ms   # slow rows: watch Prism split the stream
//	go run ./examples/bigquery --table=bigquery-public-data:samples.shakespeare --project=my-project
//	go run ./examples/bigquery --query='SELECT * FROM samples.shakespeare'     # bqtest answers with the generated table
//	go run ./examples/bigquery --project=my-project --query='SELECT * FROM `bigquery-public-data.samples.shakespeare`'
//	go run ./examples/bigquery --table=bigquery-public-data:samples.shakespeare --project=my-project --write_to=my-project.demo.corpus_stats
//
// On bqtest the statistics go to demo-project.samples.corpus_stats; on a
// real table only with --write_to (created if missing, from CorpusStats),
// which needs roles/bigquery.dataEditor on its dataset. Reading a real table needs Application Default Credentials with
// roles/bigquery.readSessionUser on --project and roles/bigquery.dataViewer on
// the table; a query also needs roles/bigquery.jobUser and
// roles/bigquery.dataEditor on --project, where its temporary table lives.
package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/gcpopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqquery"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"

	// The runners this program runs on, registered by import: Prism (the
	// default, in this process), the portable runner (universal, flink) and
	// Dataflow.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/dataflow"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/flink"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal"
)

var (
	table       = flag.String("table", "", "table to read (project.dataset.table or project:dataset.table); empty: a generated table on an in-process bqtest server")
	streams     = flag.Int("streams", 4, "maximum number of streams (0: the service chooses)")
	format      = flag.String("format", "avro", "wire format: avro or arrow")
	restriction = flag.String("restriction", "", "row restriction, e.g. \"word_count > 10\"")
	rows        = flag.Int("rows", 200000, "rows of the generated table")
	rowDelay    = flag.Duration("row_delay", 0, "sleep after each row, so that the runner splits the running stream read")
	query       = flag.String("query", "", "a standard SQL query to read instead of a table (with --project); on bqtest its result is the generated table")
	writeTo     = flag.String("write_to", "", "table to write the per-corpus statistics to, then read back; on bqtest by default demo-project.samples.corpus_stats")
)

// CorpusStats is a row of the table the statistics are written to: its
// schema is inferred from the struct (CreateIfNeeded).
type CorpusStats struct {
	Corpus string `bigquery:"corpus"`
	Words  int64  `bigquery:"words"`
	Count  int64  `bigquery:"total_count"`
}

// Word is a row of the shakespeare table.
type Word struct {
	Word       string `bigquery:"word"`
	WordCount  int64  `bigquery:"word_count"`
	Corpus     string `bigquery:"corpus"`
	CorpusDate int64  `bigquery:"corpus_date"`
}

// Agg is the statistics of one corpus.
type Agg struct{ Words, Count int64 }

// slowFn passes rows on after sleeping Delay: per-row work the runner sees
// as a stalled bundle.
type slowFn struct{ Delay time.Duration }

func (fn *slowFn) ProcessElement(w Word, emit func(Word)) {
	time.Sleep(fn.Delay)
	emit(w)
}

func toKV(w Word) (string, Agg) { return w.Corpus, Agg{Words: 1, Count: w.WordCount} }

func mergeAgg(a, b Agg) Agg { return Agg{Words: a.Words + b.Words, Count: a.Count + b.Count} }

func formatCorpus(corpus string, a Agg) string {
	return fmt.Sprintf("%-22s %7d words %9d occurrences", corpus, a.Words, a.Count)
}

func init() {
	register.Combiner3[[]string, string, []string](&sortFn{}) // printSorted
	register.Function1x0(printLines)
	register.DoFn2x0[Word, func(Word)](&slowFn{})
	register.Emitter1[Word]()
	register.Function1x2(toKV)
	register.Function2x1(mergeAgg)
	register.Function2x1(formatCorpus)
	bigqueryio.RegisterType(reflect.TypeFor[Word]())
	beam.RegisterType(reflect.TypeFor[Agg]())
	beam.RegisterType(reflect.TypeFor[CorpusStats]())
	register.Function2x1(toStats)
	register.Function1x1(formatStats)
	register.Function1x0(printResult)
	register.Function1x0(printFailed)
}

func toStats(corpus string, a Agg) CorpusStats {
	return CorpusStats{Corpus: corpus, Words: a.Words, Count: a.Count}
}

func formatStats(c CorpusStats) string {
	return fmt.Sprintf("%-14s %6d words %8d in all", c.Corpus, c.Words, c.Count)
}

// printResult runs once the table's rows are committed.
func printResult(r bqwrite.TableResult) {
	fmt.Printf("committed %d rows to %s in %d stream(s) at %s\n", r.Rows, r.Table, len(r.Streams), r.CommitTime.Format(time.RFC3339))
}

func printFailed(f bqwrite.FailedRow) {
	fmt.Printf("refused by %s: %s: %s\n", f.Table, f.Row, f.Error)
}

var corpora = []string{"hamlet", "kinglear", "macbeth", "othello", "tempest", "twelfthnight", "sonnets", "juliuscaesar"}

// serveGenerated starts a bqtest server with a generated shakespeare table.
func serveGenerated(n int) (*bqtest.Server, string, error) {
	srv, err := bqtest.NewServer(bqtest.WithBlockRows(1), bqtest.WithResponseRows(1000))
	if err != nil {
		return nil, "", err
	}
	rows := make([][]bigquery.Value, n)
	for i := range rows {
		c := i % len(corpora)
		rows[i] = []bigquery.Value{fmt.Sprintf("w%d", i/len(corpora)), int64(1 + (i*7919)%97), corpora[c], int64(1590 + c)}
	}
	const name = "demo-project.samples.shakespeare"
	tbl := bqtest.Table{Schema: bigquery.Schema{
		{Name: "word", Type: bigquery.StringFieldType, Required: true},
		{Name: "word_count", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "corpus", Type: bigquery.StringFieldType, Required: true},
		{Name: "corpus_date", Type: bigquery.IntegerFieldType, Required: true},
	}, Rows: rows}
	// Any query gives the generated table.
	srv.SetQueryFunc(func(bqtest.QueryJob) bqtest.QueryResult { return bqtest.QueryResult{Table: tbl} })
	if err := srv.AddTable(name, tbl); err != nil {
		srv.Close()
		return nil, "", err
	}
	return srv, name, nil
}

func main() {
	flag.Parse()
	beam.Init()
	ctx := context.Background()

	name := *table
	var opts []bigqueryio.SessionOption // Read's and Query's
	var queryOpts []bigqueryio.QueryOption
	var writeOpts []bqwrite.WriteOption
	out := *writeTo
	if name == "" {
		srv, n, err := serveGenerated(*rows)
		if err != nil {
			log.Exitf(ctx, "starting bqtest: %v", err)
		}
		defer srv.Close()
		name = n
		opts = append(opts, bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
		writeOpts = append(writeOpts, bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithInsecure(), bqwrite.WithRESTEndpoint(srv.RESTEndpoint()))
		if out == "" {
			out = "demo-project.samples.corpus_stats"
		}
		if *query != "" {
			queryOpts = append(queryOpts, bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()))
			if *gcpopts.Project == "" {
				opts = append(opts, bigqueryio.WithBillingProject("demo-project"))
			}
		}
		fmt.Printf("reading %s: %d generated rows on an in-process bqtest server at %s\n", name, *rows, srv.Addr())
	}
	if *gcpopts.Project != "" { // Beam's --project: the billing project
		opts = append(opts, bigqueryio.WithBillingProject(*gcpopts.Project))
	}
	if *restriction != "" {
		opts = append(opts, bigqueryio.WithRowRestriction(*restriction))
	}
	switch *format {
	case "avro":
	case "arrow":
		opts = append(opts, bigqueryio.WithDataFormat(bigqueryio.Arrow))
	default:
		log.Exitf(ctx, "--format=%s: want avro or arrow", *format)
	}
	opts = append(opts, bigqueryio.WithMaxStreams(*streams), bigqueryio.WithSplitTimeout(2*time.Second))

	p, s := beam.NewPipelineWithRoot()
	var words beam.PCollection
	if *query != "" {
		name = "the query " + *query
		for _, o := range opts {
			queryOpts = append(queryOpts, o)
		}
		words = bqquery.Query(s, *query, reflect.TypeFor[Word](), queryOpts...)
	} else {
		var readOpts []bigqueryio.ReadOption
		for _, o := range opts {
			readOpts = append(readOpts, o)
		}
		words = bigqueryio.Read(s, name, reflect.TypeFor[Word](), readOpts...)
	}
	if *rowDelay > 0 {
		words = beam.ParDo(s, &slowFn{Delay: *rowDelay}, words)
	}
	stats := beam.CombinePerKey(s, mergeAgg, beam.ParDo(s, toKV, words))
	printSorted(s, beam.ParDo(s, formatCorpus, stats))
	if out != "" {
		res := bqwrite.Write(s, out, beam.ParDo(s, toStats, stats), writeOpts...)
		beam.ParDo0(s, printResult, res.Results)
		beam.ParDo0(s, printFailed, res.FailedRows)
	}
	if out != "" {
		name += " and wrote " + out
	}
	run(ctx, p, name, bigqueryio.Namespace)
	if out == "" {
		return
	}

	// A second pipeline reads back what the first committed.
	var backOpts []bigqueryio.ReadOption
	for _, o := range opts {
		backOpts = append(backOpts, o)
	}
	p, s = beam.NewPipelineWithRoot()
	back := bigqueryio.Read(s, out, reflect.TypeFor[CorpusStats](), backOpts...)
	printSorted(s, beam.ParDo(s, formatStats, back))
	fmt.Printf("\nreading back %s:\n", out)
	if _, err := execute(ctx, p); err != nil {
		log.Exitf(ctx, "reading back %s failed: %v", out, err)
	}
}

// counterHelp says in a line what each counter of the IO counts.
var counterHelp = map[string]string{
	"rows":               "rows read and emitted",
	"bytes":              "bytes of payload the reads received",
	"streams":            "Storage Read API streams the read session planned, one restriction each",
	"retries":            "requests retried after a transient error",
	"splits_accepted":    "runner split requests accepted while reading: work handed to another bundle (dynamic rebalancing)",
	"splits_refused":     "runner split requests refused (the split point was already read, or too little was left)",
	"rows_appended":      "rows appended to write streams",
	"bytes_appended":     "bytes of rows appended",
	"appends":            "AppendRows requests sent",
	"append_retries":     "appends retried after a transient error",
	"rows_refused":       "rows the service refused, sent to the failed-rows output",
	"streams_committed":  "write streams committed",
	"connections_closed": "write streams' connections closed after the idle time, or past 64 open in a worker",
}

// run runs p on the runner the --runner flag names (Prism, in this
// process, when it is empty), as beamx.RunWithMetrics does, and exits
// naming what it read if the pipeline fails. It then prints how long the
// run took and each counter of namespace with what it counts.
func run(ctx context.Context, p *beam.Pipeline, what, namespace string) {
	start := time.Now()
	res, err := execute(ctx, p)
	if err != nil {
		log.Exitf(ctx, "pipeline reading %s failed: %v", what, err)
	}
	fmt.Printf("\nread %s in %v\n", what, time.Since(start).Round(time.Millisecond))
	if res == nil { // a runner that reports no metrics
		return
	}
	totals := map[string]int64{}
	for _, c := range res.Metrics().AllMetrics().Counters() {
		if c.Namespace() == namespace {
			totals[c.Name()] += c.Result()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(totals)) {
		fmt.Printf("  %-18s %8d  %s\n", name, totals[name], counterHelp[name])
	}
}

// execute runs p on the runner of --runner, Prism by default, as
// beamx.RunWithMetrics does; beamx also links runners and Beam's reflection
// shims that this program does not use (every function it runs is
// registered).
func execute(ctx context.Context, p *beam.Pipeline) (beam.PipelineResult, error) {
	r := *runners.Runner
	if r == "" {
		r = "prism"
	}
	return beam.Run(ctx, r, p)
}

// printSorted prints the strings of lines, sorted, one a line, once the
// pipeline has them all (gathered into one slice: for small results).
func printSorted(s beam.Scope, lines beam.PCollection) {
	beam.ParDo0(s, printLines, beam.Combine(s, &sortFn{}, lines))
}

// sortFn gathers strings into one sorted slice.
type sortFn struct{}

func (sortFn) CreateAccumulator() []string              { return nil }
func (sortFn) AddInput(acc []string, s string) []string { return append(acc, s) }
func (sortFn) MergeAccumulators(a, b []string) []string { return append(a, b...) }
func (sortFn) ExtractOutput(acc []string) []string      { sort.Strings(acc); return acc }

func printLines(lines []string) { fmt.Println(strings.Join(lines, "\n")) }
