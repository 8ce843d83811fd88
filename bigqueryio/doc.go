// Package bigqueryio reads BigQuery tables, and the results of queries,
// into PCollections of Go structs (or Row) through the BigQuery Storage
// Read API: one splittable restriction per read stream, split further
// while it runs through SplitReadStream, so that a runner can rebalance a
// read. Writing is in package github.com/sdfio/sdfio/bigqueryio/bqwrite,
// and queries in github.com/sdfio/sdfio/bigqueryio/bqquery, so that a
// program that only reads tables links neither the Storage Write client
// nor the REST client a query job needs.
//
// Read reads a table; bqquery.Query runs a query when the pipeline runs
// and reads its result as Read reads a table, with this package's
// QueryOptions. A column goes into the struct field
// whose `bigquery` tag, or name, matches it, as the official client's
// RowIterator fills structs. Element types must be registered with
// RegisterType (or beam.RegisterType for a type without NUMERIC or DATE
// fields).
//
//	type Order struct {
//		ID     int64                `bigquery:"id"`
//		Amount bigquery.NullFloat64 `bigquery:"amount"`
//		Placed time.Time            `bigquery:"placed"`
//	}
//
//	func init() { bigqueryio.RegisterType(reflect.TypeFor[Order]()) }
//
//	func main() {
//		beam.Init()
//		p, s := beam.NewPipelineWithRoot()
//		orders := bigqueryio.Read(s, "my-project.sales.orders", reflect.TypeFor[Order](),
//			bigqueryio.WithSelectedFields("id", "amount", "placed"),
//			bigqueryio.WithRowRestriction("amount > 100"))
//		debug.Print(s, orders)
//		if err := beamx.Run(context.Background(), p); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Options are typed by transform: a SessionOption goes to Read and
// bqquery.Query alike, a ReadOption to Read alone, a QueryOption to Query
// alone; one given to the wrong transform does not compile. Values that
// cannot work, and an option given twice with different values, are
// refused when the pipeline is built: Read and Query panic, TryRead and
// TryQuery return the error.
//
// The contract is in docs/BIGQUERY.md, in the module's repository: how a
// read runs and retries ("How a read runs"), how a query runs and what it
// leaves behind ("Queries"), how streams split ("Dynamic splits"), the Go
// types each column fills ("Output"), throughput, metrics, testing with
// package bqtest, the permissions needed, and every call that is retried
// and why ("Retries").
package bigqueryio
