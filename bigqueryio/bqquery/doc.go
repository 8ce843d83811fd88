// Package bqquery runs a BigQuery query when the pipeline runs and reads
// its result through the Storage Read API, as bigqueryio.Read reads a
// table: the rows of the query, split into streams that rebalance, into a
// PCollection of a struct type or bigqueryio.Row.
//
// Query takes bigqueryio's QueryOptions: the SessionOptions it shares with
// Read (WithBillingProject, which it requires, WithSelectedFields,
// WithFormat, WithEndpoint, WithClientOptions, ...) and those of a query
// alone (WithLegacySQL, WithQueryParameters, WithQueryLocation,
// WithQueryPriority, WithQueryTempDataset, WithRESTEndpoint):
//
//	rows := bqquery.Query(s, "SELECT word, word_count FROM `p.d.words` WHERE corpus = @c",
//		reflect.TypeOf(Word{}),
//		bigqueryio.WithBillingProject("my-project"),
//		bigqueryio.WithQueryParameters(bigquery.QueryParameter{Name: "c", Value: "hamlet"}))
//
// A query runs as Beam Java's BigQueryIO.read().fromQuery() runs it: a job
// writes the result into a temporary table (in a temporary dataset of its
// own, or in WithQueryTempDataset's), the table is read, and removed once
// the read is done; a table the pipeline never removes (a failed run)
// expires after TempExpiration. docs/BIGQUERY.md ("Query") has the details.
//
// Query is a package of its own, apart from bigqueryio, because its steps
// call BigQuery's REST API through the official bigquery.Client: a program
// that only reads tables does not link that client.
package bqquery
