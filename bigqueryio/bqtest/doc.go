// Package bqtest is an in-process BigQuery Storage Read API server for tests:
// it implements storagepb.BigQueryReadServer on a loopback gRPC listener, for
// tables the test defines, and Google's own client
// (cloud.google.com/go/bigquery/storage/apiv1) talks to it over the wire. No
// emulator of the Storage Read API exists; this one serves what a reader
// needs to be tested for real:
//
//   - sessions of several streams (max_stream_count, or a default), the
//     table's rows assigned to streams in blocks, an empty table giving a
//     session without streams;
//   - ReadRows from any offset, in responses of a configurable number of
//     rows, each with StreamStats.Progress (at_response_start,
//     at_response_end, as fractions of the stream's rows before filtering);
//     an offset past the end is FAILED_PRECONDITION; a stream of a table
//     deleted (or replaced) since its session was created is NOT_FOUND;
//   - selected fields (top-level columns, in table order) and row
//     restrictions: comparisons, [NOT] IN, IS [NOT] NULL on top-level
//     columns, AND, OR, NOT and parentheses; anything else is
//     INVALID_ARGUMENT, an unknown table NOT_FOUND, a Denied table
//     PERMISSION_DENIED;
//   - Avro (the service's schema: a __root__ record, nullable columns as
//     unions with null, NUMERIC and BIGNUMERIC as decimal bytes, DATE, TIME and
//     TIMESTAMP as logical types, DATETIME, GEOGRAPHY and JSON as strings
//     marked with logicalType datetime, sqlType GEOGRAPHY and sqlType JSON;
//     WithAvroDateTimeSQLType marks DATETIME with sqlType DATETIME, as
//     BigQuery's Avro exports do) and
//     Arrow (IPC schema and record batch messages, as the service frames them);
//   - SplitReadStream with the service's semantics: the original stream stays
//     readable in full; primary[0, j) = original[0, j) and remainder[0, m) =
//     original[j, n), the split falling on the block boundary nearest the
//     fraction of the original's rows; a stream too small to split (or a
//     split refused at random, Faults.SplitRefuseShare) gets the empty
//     response;
//   - faults: UNAVAILABLE after N rows on a share of ReadRows calls, slow
//     responses, slow splits, row counts that disagree with the rows sent
//     (or only the deprecated count, as old servers sent it), bytes after
//     the rows (Faults).
//
// # Testing your own pipeline
//
// Start a server, define a table, and point the reader at the server with its
// ClientOptions. With sdfio's bigqueryio:
//
//	func TestMyPipeline(t *testing.T) {
//		srv, err := bqtest.NewServer()
//		if err != nil {
//			t.Fatal(err)
//		}
//		defer srv.Close()
//		err = srv.AddTable("my-project.sales.orders", bqtest.Table{
//			Schema: bigquery.Schema{
//				{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
//				{Name: "amount", Type: bigquery.FloatFieldType},
//			},
//			Rows: [][]bigquery.Value{{int64(1), 9.5}, {int64(2), nil}},
//		})
//		if err != nil {
//			t.Fatal(err)
//		}
//		p, s := beam.NewPipelineWithRoot()
//		orders := bigqueryio.Read(s, "my-project.sales.orders", reflect.TypeOf(Order{}),
//			bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
//		// ... the transforms under test, passert on their output ...
//		ptest.RunAndValidate(t, p)
//	}
//
// With Google's client directly:
//
//	c, err := bqstorage.NewBigQueryReadClient(ctx, srv.ClientOptions()...)
//
// # Testing a query
//
// RESTEndpoint serves the few calls of the BigQuery REST API that the
// official client (cloud.google.com/go/bigquery) makes for a query job into a
// destination table: datasets insert, get and delete, jobs insert (dry runs
// included) and get, getQueryResults, tables get, patch and delete. The
// result of a query is a table the test defines for its SQL text (AddQuery),
// or computes from the job (SetQueryFunc); the job writes it into its
// destination table, which the Storage Read server then serves like any
// table. QueryResult.Location is where the query's tables are: a dry run
// reports it, and a job sent to another location fails as the service's
// would; QueryResult.Err fails the query with the service's kind of
// message. A job's parameters are in QueryJob.Parameters (a SetQueryFunc
// can answer from them); a job whose SQL refers to a parameter it was not
// given, or whose parameters mix names and positions, fails as the
// service's would. Jobs, Datasets and Tables show what the code under test
// did, so a test can check that its temporary tables were removed:
//
//	srv.AddQuery("SELECT * FROM sales.orders WHERE amount > 100", bqtest.QueryResult{
//		Table:    bqtest.Table{Schema: schema, Rows: big},
//		Location: "EU",
//	})
//	orders := bigqueryio.Query(s, "SELECT * FROM sales.orders WHERE amount > 100", reflect.TypeOf(Order{}),
//		bigqueryio.WithBillingProject("my-project"),
//		bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithRESTEndpoint(srv.RESTEndpoint()),
//		bigqueryio.WithInsecure())
//	// ... passert on orders ...
//	ptest.RunAndValidate(t, p)
//	if tables := srv.Tables(); len(tables) != 0 || len(srv.Datasets()) != 0 {
//		t.Errorf("left behind: %v", tables)
//	}
//	if jobs := srv.Jobs(); jobs[len(jobs)-1].Location != "EU" {
//		t.Errorf("the job ran in %s", jobs[len(jobs)-1].Location)
//	}
//
// A stream of a table deleted since its session was created fails with
// NOT_FOUND, so a temporary table removed too early fails the read.
//
// The server runs in the test's process and listens on 127.0.0.1, so
// workers that are other processes on the same machine (Prism with a process
// or external environment) reach it too: the address travels in the read's
// options. Clients of your own in those workers can use Endpoint(addr).
//
// Stats counts what the server did (sessions, rows sent, splits accepted and
// refused, injected failures), so a test can check that a split happened.
package bqtest
