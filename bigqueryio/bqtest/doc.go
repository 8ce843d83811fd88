// Package bqtest is an in-process BigQuery Storage Read API server for tests
// (and Write API: see "Serving the Storage Write API" below):
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
//	orders := bqquery.Query(s, "SELECT * FROM sales.orders WHERE amount > 100", reflect.TypeOf(Order{}),
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
// # Serving the Storage Write API
//
// The same listener serves storagepb.BigQueryWriteServer for the same
// tables, so a test writes with managedwriter (or sdfio's writer) and reads
// back with any reader. What is served, with the service's semantics and
// error codes (a StorageError in the status details where the service
// sends one):
//
//   - CreateWriteStream (COMMITTED, PENDING, BUFFERED; the answer carries
//     the table schema) and each table's implicit _default stream
//     (…/streams/_default, or …/_default), committed, without offsets;
//     GetWriteStream (type, create time, commit time, location, and the
//     table schema in the FULL view; _default has neither time, as the
//     service reports it); FinalizeWriteStream (the row count; finalizing
//     again answers it again, or STREAM_FINALIZED with
//     WriteFaults.FinalizeAgainRefused; _default cannot be finalized);
//     BatchCommitWriteStreams (all streams of a request or none: a stream
//     that is not a finalized, uncommitted PENDING stream of the parent
//     table gets a stream error — INVALID_STREAM_STATE, INVALID_STREAM_TYPE,
//     STREAM_ALREADY_COMMITTED, STREAM_NOT_FOUND, TABLE_NOT_FOUND — and then
//     nothing is committed; a stream named twice is committed once);
//     FlushRows (rows of a BUFFERED stream up to and including the offset;
//     ALREADY_EXISTS for an offset already flushed, OUT_OF_RANGE past the
//     end).
//   - AppendRows, bidirectional, answered in order. The first request names
//     the stream and carries the writer schema (a DescriptorProto as
//     adapt.NormalizeDescriptor makes it, read with proto2 semantics);
//     later ones may omit both, and may name other streams (multiplexing),
//     carrying the schema when the table changes. Rows are decoded with
//     dynamicpb and converted by the service's table of supported protocol
//     buffer types (below). With an offset, an append at the stream's end
//     is written, below it ALREADY_EXISTS ("The offset is within stream,
//     expected offset N, received M"), above it OUT_OF_RANGE; an offset on
//     _default is INVALID_ARGUMENT; an append to a finalized stream is
//     INVALID_ARGUMENT with STREAM_FINALIZED. Rows that break the table's
//     schema (a REQUIRED field missing, a value out of range, a string over
//     its max_length, invalid UTF-8 or JSON, a field number the writer
//     schema does not declare, bytes that do not parse) come back in
//     row_errors (index, FIELDS_ERROR, message) and nothing of the request
//     is written. A writer schema with a field the table lacks is refused
//     with SCHEMA_MISMATCH_EXTRA_FIELDS, one whose type does not fit its
//     column with INVALID_ARGUMENT, a request over 10 MB with
//     INVALID_ARGUMENT. These errors come in the response and the
//     connection stays open; only a first request naming no stream ends
//     the RPC. Rows of COMMITTED and _default streams are visible on
//     append, of BUFFERED streams on flush, of PENDING streams on commit.
//   - CDC (change data capture): a writer schema may declare the
//     pseudo-columns _CHANGE_TYPE and _CHANGE_SEQUENCE_NUMBER (proto
//     strings). Such rows are taken only on the _default stream (on
//     another stream: INVALID_ARGUMENT) of a table with a primary key
//     (Table.PrimaryKey; tables.insert's tableConstraints.primaryKey,
//     which tables.get reports; 1 to 16 top-level columns, neither
//     REPEATED nor RECORD; a table without one: INVALID_ARGUMENT), and
//     are applied as they are written, by key: UPSERT inserts the row or
//     replaces the key's row, DELETE removes it. A sequence number is 1
//     to 4 sections of 1 to 16 hexadecimal digits separated by '/',
//     compared section by section, left to right, as unsigned numbers (a
//     number that is a prefix of another is the smaller, an assumption:
//     the service documents numbers of as many sections). A change whose
//     number is below the one its key was last changed by, a delete's
//     included, is ignored; between equal numbers the later written wins,
//     as the service uses its ingestion time then; a change without one,
//     or to a key last changed without one, is applied in the order of
//     arrival. A change type other than UPSERT or DELETE (case
//     insensitive), a missing one or a malformed sequence number is a row
//     error. Reads return the applied state, as the service's do with
//     max_staleness 0 (bqtest does not model max_staleness or the
//     background apply). Tables partitioned by ingestion time are not
//     served CDC rows (UNIMPLEMENTED).
//   - A read session reads the table as it was when the session was made
//     (later commits do not change it); a table deleted or redefined by
//     AddTable makes its old write streams NOT_FOUND.
//   - Partitions: a write stream made on a partition decorator
//     (…/tables/t$20261203; CreateWriteStream's parent, or a _default
//     stream's table) is named under it and writes into that partition, as
//     the service documents decorators: for a table partitioned by
//     ingestion time its rows land in that partition (without a decorator,
//     in the partition of the time they become visible); for one
//     partitioned by a column or a range, rows of another partition are
//     refused in row_errors. A decorator on a table that is not
//     partitioned, or naming no partition of its kind (yyyymmdd, yyyymmddhh,
//     yyyymm, yyyy, a range's start, __NULL__, __UNPARTITIONED__), is
//     INVALID_ARGUMENT. BatchCommitWriteStreams takes the streams of a
//     partition with the table or the decorated table as parent.
//     PartitionRows shows the rows of a partition.
//   - REST: tables.insert (a table with the request's schema, time or
//     range partitioning, clustering, description, labels, KMS key and
//     expiration time, which tables.get reports back with the table's
//     creationTime (Table.Created, WriteFaults.CreatedAgo); a partitioning or
//     clustering the service refuses — a column missing or of the wrong
//     type, more than four clustering columns, both partitionings, DATE by
//     hour — is HTTP 400; in its dataset's location; notFound for a missing
//     dataset, duplicate for an existing table; Table's fields of the same
//     names define them with AddTable), copy jobs (jobs.insert with
//     configuration.copy, jobs.get: one source; WRITE_EMPTY, WRITE_APPEND,
//     WRITE_TRUNCATE, which replaces the rows and schema at once and keeps
//     the destination's metadata; CREATE_IF_NEEDED makes the destination
//     like the source, CREATE_NEVER refuses a missing one; a destination
//     partitioned otherwise is refused; WriteFaults.CopyJobError fails
//     them; errors end the job DONE with an error result), datasets.get of a dataset that only holds AddTable's
//     tables, and tabledata.insertAll (Beam Go's bigqueryio.Write): rows
//     visible at once; a row that does not fit is in insertErrors and,
//     without skipInvalidRows, the request writes nothing (the others are
//     "stopped"); at most 10 MB and 50,000 rows a request. Beam Go's
//     bqwrite.Write, which takes no endpoint, reaches it through
//     RouteGoogleAPIs (process-wide: http.DefaultTransport and
//     GOOGLE_APPLICATION_CREDENTIALS) or RESTHandler behind a TLS server of
//     your own.
//
// Proto types each column takes (as the service documents them):
//
//	INTEGER     int32, int64, uint32 (and sint, sfixed, fixed32), enum (its number), Int64Value-like wrappers
//	FLOAT       double, float
//	BOOLEAN     bool, any integer (non-zero is true)
//	STRING      string (UTF-8, max_length in characters), enum (its name)
//	BYTES       bytes, string (max_length in bytes)
//	NUMERIC,    bytes (BigDecimalByteStringEncoder: little-endian two's complement of the value times
//	BIGNUMERIC  10^9 or 10^38), string (a decimal literal), integers, double and float (shortest
//	            decimal form); rounded half away from zero to the scale, out of range refused
//	DATE        int32 or int64 days since 1970-01-01 (-719162..2932896), string YYYY-[M]M-[D]D
//	DATETIME    int64 packed as CivilTimeEncoder packs it, string date[( |T)[H]H:[M]M:[S]S[.ffffff]]
//	            (at most six fractional digits: "01:02:03.1000000" is refused, as the service does)
//	TIME        int64 packed, string [H]H:[M]M:[S]S[.ffffff], as DATETIME's time
//	TIMESTAMP   int64, int32 or uint32 microseconds since the epoch, google.protobuf.Timestamp
//	            (nanoseconds truncated); years 1 to 9999
//	GEOGRAPHY   string, WKT (by its keyword) or GeoJSON; the geometry is not checked
//	JSON        string, valid JSON, stored as sent
//	RECORD      a message (wrappers and Timestamp too, if the column is a RECORD)
//	REPEATED    a repeated field of the item's type (packed or not)
//
// A proto2 field not set is NULL, or its declared default if it has one
// (so the defaults NormalizeDescriptor declares for proto3 fields give
// their zero values); an unset repeated field is an empty array. A field
// writes the column of its name (case-insensitive) or of its
// google.cloud.bigquery.storage.v1.column_name option.
//
// tables.patch changes a table's schema as the service allows it
// (NULLABLE or REPEATED columns added at the end, REQUIRED relaxed to
// NULLABLE; columns removed, retyped or made stricter, REQUIRED ones
// added, and columns added inside a RECORD are HTTP 400): rows already
// there, and rows of streams appended before and made visible after, read
// NULL in the new columns.
//
// Not served: Arrow rows, updated_schema in AppendRows answers, default value
// expressions (missing_value_interpretations DEFAULT_VALUE is refused),
// RANGE and INTERVAL columns, proto maps, NUMERIC/BIGNUMERIC precision and
// scale parameters, expiry of uncommitted streams, quotas and throttling,
// insertId de-duplication and templateSuffix of tabledata.insertAll,
// partition expiration and require_partition_filter (kept, not enforced),
// copies of several sources, snapshots or into a partition decorator.
//
// Tests see what happened through TableRows (the rows readers see),
// WriteStreams and PendingStreams (streams holding rows not visible, e.g.
// to assert that nothing is visible before a commit), WriteStats, and
// inject faults with SetWriteFaults: AppendRows failing with UNAVAILABLE on
// a share of requests, before or after the rows were written (after: a
// retry with the offset gets ALREADY_EXISTS, one without writes the rows
// again), in the response or by ending the RPC; a permanent error code
// (INVALID_ARGUMENT, PERMISSION_DENIED, ...) for every request after a
// number of them; a hook called with each request (to hold it, or to end
// the RPC before it is written); RPCs ended after a number of answers;
// slow commits, and commits failing before or after they applied; a
// hook called as each commit arrives and once it applied, before its
// answer (WriteFaults.OnCommit: to hold it, or to stop its client in
// between); FinalizeWriteStream failing with a code (UNAVAILABLE, INTERNAL, ...)
// before or after it finalized the stream, and a finalize of a finalized
// stream answered STREAM_FINALIZED instead of its row count; FlushRows
// failing with a code (UNAVAILABLE, RESOURCE_EXHAUSTED for throttling,
// ...) before or after it flushed (after: a retry is answered
// ALREADY_EXISTS); CreateWriteStream failing with a code before or after
// it made the stream (after: a stream nobody was told of, which stays
// empty). Throttling of appends is a hook (WriteFaults.OnAppend) returning
// RESOURCE_EXHAUSTED. Streaming writes' tests (BUFFERED streams appended
// with offsets, flushed up to an offset, finalized) use these hooks.
// AppendAttempts counts the requests naming each stream and offset, so a
// test can check that a client did not send an append again.
//
// The server runs in the test's process and listens on 127.0.0.1, so
// workers that are other processes on the same machine (Prism with a process
// or external environment) reach it too: the address travels in the read's
// options. Clients of your own in those workers can use Endpoint(addr).
//
// Stats counts what the server did (sessions, rows sent, splits accepted and
// refused, injected failures), so a test can check that a split happened.
package bqtest
