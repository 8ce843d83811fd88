// Package bqwrite writes PCollections of Go structs, or of Row, to
// BigQuery tables through the BigQuery Storage Write API, as Beam Java's
// BigQueryIO does with STORAGE_WRITE_API and STORAGE_API_AT_LEAST_ONCE.
// It is the writing half of package github.com/sdfio/sdfio/bigqueryio,
// apart so that a program that only writes links no read, and one that
// only reads links no write; Row, RegisterType and RegisterClientOptions
// are the same as bigqueryio's.
//
// Write writes exactly once by default, in batch and in streaming. Bounded
// input goes to PENDING streams that one commit per table makes visible
// once every bundle is done: no row before the commit, all after it.
// Unbounded input (a source that never ends) is written as it comes,
// exactly once by default: its rows are batched by table and shard, each
// batch appended at its shard's next offset of a BUFFERED stream and made
// visible by FlushRows, about a triggering frequency after it came.
// WithAtLeastOnce appends every row to each table's _default stream
// instead: rows are visible as they are appended, nothing is committed,
// and a retried append or bundle may write rows twice. WithRowMutation
// writes change data capture (CDC): each element is an upsert or a delete
// of the row with its primary key, which BigQuery applies itself; CDC goes
// through the _default stream, so it is given with WithAtLeastOnce. Rows
// the service refuses go to WriteResult.FailedRows (FailedRow), or fail the
// write WithFailOnRowErrors; any other answer of the service is retried
// or fails the write, so rows are never missing from a job that succeeds.
//
//	type Total struct {
//		Customer string  `bigquery:"customer"`
//		Amount   float64 `bigquery:"amount"`
//	}
//
//	func init() { bqwrite.RegisterType(reflect.TypeFor[Total]()) }
//
//	func main() {
//		beam.Init()
//		p, s := beam.NewPipelineWithRoot()
//		totals := beam.Create(s, Total{"a", 1.5}, Total{"b", 2})
//		res := bqwrite.Write(s, "my-project.sales.totals", totals)
//		debug.Print(s, res.FailedRows) // rows the service refused
//		if err := beamx.Run(context.Background(), p); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Options are WriteOptions, checked when the pipeline is built: Write
// panics, TryWrite returns the error. The contract is in docs/BIGQUERY.md,
// in the module's repository, under "Writing: bqwrite": exactly once in
// batch, the encoding of values, appends and refused rows, at least once,
// windows, tables, the streaming write ("Streaming"), CDC ("Change data
// capture"), table features, schema changes, WriteTruncate ("Replacing a
// table"), errors, metrics and permissions; and "Retries".
package bqwrite
