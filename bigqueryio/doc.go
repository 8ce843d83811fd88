// Package bigqueryio reads BigQuery tables, and the results of queries,
// into PCollections of Go structs (or bigqueryio.Row) through the BigQuery
// Storage Read API: one splittable restriction per read stream, split
// further while it runs through SplitReadStream, so that a runner can
// rebalance a read. Element types must be registered, with RegisterType
// (or beam.RegisterType for a type without NUMERIC or DATE fields); Read,
// Query and Write refuse one that is not when the pipeline is built.
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
// Options are typed by transform: a SessionOption (WithSelectedFields,
// WithMaxStreams, ...) goes to Read and Query alike, a ReadOption
// (WithSnapshotTime) to Read alone, a QueryOption (WithLegacySQL,
// WithQueryParameters, ...) to Query alone, a WriteOption (WithAtLeastOnce,
// WithCreateDisposition, ...) to Write alone; a CommonOption (WithEndpoint,
// WithInsecure, WithClientOptions, WithQuotaProject, WithRetries,
// WithMetricsNamespace) to all three, and
// WithRESTEndpoint to Query and Write. One given to the wrong transform does
// not compile. Values that cannot work are refused
// when the pipeline is built, the error naming the transform and the option
// (bigqueryio.Read: WithMaxStreams(-1): a negative stream count); Read and
// Query panic with it, TryRead and TryQuery return it. An option given twice
// with different values is refused naming both calls
// (WithRowRestriction("id >= 100") and WithRowRestriction("id < 10") are
// both given: give WithRowRestriction once), by every transform, for every
// option: the later would silently replace the earlier. The same call
// repeated with the same values is accepted, as it changes nothing.
// WithSelectedFields and WithQueryParameters are given once, with every
// column or parameter. A nil option is refused naming the transform and its
// position (bigqueryio.Write: option 2 of 3 is nil).
//
// # How a read runs
//
// Nothing is called when the pipeline is built. When it runs, a DoFn after an
// Impulse creates the read session (CreateReadSession, billed to the
// table's project or WithBillingProject), with the selected fields, the row
// restriction, the data format (Avro by default, or Arrow), the snapshot
// time and the stream count: WithMaxStreams(n), or WithDesiredBundleSize
// (the service's estimate of the bytes the session scans / the bundle size,
// between MinStreams and MaxStreams, as Beam Java sizes it), or 0 to let the
// service choose. Its streams become elements, spread over the workers by a
// Reshuffle of the stream names (rows are never shuffled). An empty session
// (an empty table) gives an empty PCollection. The wire is Google's own
// client, cloud.google.com/go/bigquery/storage/apiv1.
//
// Each stream is read by a splittable DoFn whose restriction
// (StreamRestriction) is the stream and a row offset; every row is claimed
// by its offset. A ReadRows that fails with a transient error (UNAVAILABLE,
// INTERNAL, ABORTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, UNKNOWN; see
// Retries) is retried with backoff (WithRetries), resuming at the next unread offset, so
// no row is lost or read twice; PERMISSION_DENIED, NOT_FOUND,
// INVALID_ARGUMENT (a bad row restriction, say) and every other error fail at
// once with the server's message. Errors name the table, the session, the
// stream and the offset.
//
// A response's rows are those its payload holds: the Avro rows decoded
// until its bytes end, or the lengths of its Arrow record batches. They
// must be as many as its row_count says (or, from a server that sets only
// that, the deprecated count inside its rows; both set and different is an
// error), and nothing may follow them. A response that disagrees with
// itself fails the read, naming the table, session, stream and offset and
// both counts, and none of its rows is emitted: a count is never trusted
// over the payload, nor the payload over the count.
//
// # Queries
//
// Query(s, sql, t, opts...) reads the result of a query into structs or
// bigqueryio.Row, as Read reads a table, and as Beam Java's BigQueryIO reads
// a query with the Storage Read API. WithQueryParameters gives the SQL its
// parameters (bigquery.QueryParameter, all named or all positional, as Beam
// Go's bigqueryio takes them): their values are turned into their BigQuery
// types and text when the pipeline is built, so that they reach the workers
// exactly and a value the client could not send fails at once. When the
// pipeline runs,
// a DoFn after an Impulse, through the BigQuery REST API (the package's own
// small client of it; see the REST calls under Retries):
//
//   - finds the query's location: WithQueryLocation (then no dry run), or
//     the location a dry run of the query reports (the dry run also fails a
//     bad query at once, with the service's message, before anything is
//     created), or, when it reports none, the location of the first table
//     it lists as read by the query; with none of them, the job and the
//     dataset name no location and the service places them (US);
//   - creates a temporary dataset sdfio_temp_<random> in the billing project
//     (WithBillingProject, required), in that location, whose default table
//     expiration is TempExpiration (a day); or, with WithQueryTempDataset,
//     checks that the new table does not exist in that dataset of yours;
//   - runs the query job (standard SQL with its parameters, or
//     WithLegacySQL; INTERACTIVE, or WithQueryPriority) in that location into a new table sdfio_query_<random>
//     (CREATE_IF_NEEDED, WRITE_TRUNCATE), and waits for it; in a dataset of
//     yours the table then gets an expiration time TempExpiration ahead;
//   - creates the read session of that table, with Read's options (selected
//     fields, row restriction, format, billing project, stream count; not a
//     snapshot time), and emits its streams, which are read exactly as
//     Read reads a table's.
//
// Once every stream is read, a last DoFn, which takes the read's output as a
// side input, deletes the temporary dataset with its table (or only the
// table, in a dataset of yours). A failing query job, or a read session
// that cannot be created, removes what the DoFn created before the pipeline
// fails, with the service's message. If the pipeline fails later (a stream
// read fails for good, a worker dies, the job is cancelled), nothing removes
// the table: it expires after TempExpiration, and a temporary dataset of
// Query's own stays behind, empty, until you delete it. A retried query
// bundle runs the query again into new temporary resources.
//
// A query also needs roles/bigquery.jobUser on the billing project and the
// right to create datasets there (roles/bigquery.dataEditor), or to create
// and delete tables in the WithQueryTempDataset dataset.
//
// # Dynamic splits
//
// The service splits a stream with SplitReadStream(original, fraction): the
// original stays readable in full, primary[0, j) = original[0, j) and
// remainder[0, m) = original[j, n), the fraction being of the whole
// original. StreamTracker keeps rule 9 of sdfio's split contract on
// sdf.Core's two-phase split:
//
//   - Beam Go's TrySplit(f) is a fraction of the remaining work: it becomes
//     p + f*(1-p) of the whole stream, p being the progress the server
//     reports (StreamStats.Progress at_response_start and at_response_end),
//     interpolated by the rows claimed in the current response;
//   - a split never holds the runner: Beam Go answers split requests on the
//     worker's control loop, so a split that waited for its RPCs would stall
//     every bundle of the worker, and Beam's splitAtFraction contract says a
//     split must not wait on I/O. TrySplit starts the split's RPCs
//     (SplitReadStream, then a read of the primary) on their own goroutine,
//     with a deadline (WithSplitTimeout), and waits for them at most
//     WithSplitWait (DefaultSplitWait, 10ms). Done by then, the split
//     commits at once; otherwise TrySplit refuses it and the RPCs go on in
//     the background, preparing the split for the runner's next request,
//     which commits it at once, under the tracker's lock, whatever fraction
//     it asks for, if the reader has not passed it meanwhile; a prepared
//     split the reader passed is dropped (its remainder never read) and a
//     new one started. GetProgress and claims never wait for the RPCs. A
//     runner that asks once per bundle and never again after a refusal
//     (Prism) splits only when the RPCs finish within the wait;
//   - an empty primary or remainder means the stream cannot be split: the
//     split is refused, and so is every later one on that stream;
//   - otherwise the primary is read (one response, as Beam Java confirms a
//     split) to learn rows it still holds: first half way from the reader to
//     the expected split row, so that a split prepared in the background
//     still holds when the reader has moved on, else at the reader's next
//     row. The split holds while the reader has not claimed the last of
//     those rows; committed, the reader switches to the primary at its next
//     offset and the residual restriction is the remainder from offset 0.
//     FAILED_PRECONDITION or OUT_OF_RANGE at the reader's next row means the
//     reader is already past j: the split is refused, the remainder is never
//     read, the reader goes on with the original.
//
// TrySplit(0) (a checkpoint) bounds the restriction at the next offset of
// the same stream; such a bounded restriction is not split again through the
// service. Beam Go's data source holds its own lock while it asks for a
// split, so its progress reports wait for the split too: at most the split
// wait. Refusals are counted by reason (StreamTracker.Refusals), those of
// the background as "background: <reason>".
//
// # Output
//
// Rows fill values of the struct type given to Read as the official client's
// RowIterator.Next fills structs: a column goes into the exported field whose
// `bigquery` tag, or name, matches it (exactly, or else ignoring case, the
// first such field); `bigquery:"-"` skips a field. The fields of an embedded
// struct (Base in type Order struct{ Base; ... }, by value or by pointer,
// exported or not) are fields of the outer struct, shadowed by shallower
// fields of the same name, unless the embedded field has a tag name (it is
// then one RECORD field); two fields of one name at the same depth, both or
// neither tagged, cancel each other, as in Go. A nil embedded pointer is
// allocated when a column fills it (the client panics there); a field
// reached through an unexported embedded pointer, which cannot be
// allocated, is refused when the pipeline is built.
//
// Every field must get a column: a field that matches no column of the read
// session (a misspelled tag, a column that WithSelectedFields did not
// select), at the top or in a RECORD, fails the read when the session is
// created (CreateReadSession), before any stream is read, naming the field
// and the columns there are; fields that cancel each other, and, with
// WithSelectedFields, a field whose column is not selected, are refused
// already when the pipeline is built. WithIgnoreUnknownFields leaves such
// fields zero instead, as the client does. Columns that no field takes are
// skipped.
//
// The types: INTEGER into int and int8-64, uint8-32 or bigquery.NullInt64, FLOAT
// into float32/64 or NullFloat64, BOOLEAN, STRING, BYTES into bool, string,
// []byte (and the Null types), NUMERIC and BIGNUMERIC into *big.Rat, DATE,
// TIME, DATETIME into civil.Date, civil.Time, civil.DateTime (or NullDate,
// NullTime, NullDateTime), TIMESTAMP into time.Time or NullTimestamp,
// GEOGRAPHY (WKT) and JSON into string or NullGeography, NullJSON, a RECORD
// into a struct or *struct, a repeated column into a slice. A NULL in a field
// that cannot hold it fails the read, naming the field. A column's Go type
// never depends on the data format: in Avro, a string column is DATETIME,
// GEOGRAPHY or JSON by its logicalType or its sqlType annotation (the
// Storage Read API marks DATETIME with logicalType "datetime", BigQuery's
// Avro exports with sqlType "DATETIME"; annotations naming two different
// types fail the read), and errors name the column's BigQuery type.
//
// Or Read(s, table, reflect.TypeOf(bigqueryio.Row{})) gives generic rows:
// Row is a map[string]bigquery.Value of the selected columns, filled as the
// client fills a map (NUMERIC as *big.Rat, DATE, TIME, DATETIME as civil
// types, TIMESTAMP as time.Time, a RECORD as a nested map, a repeated column
// as a []bigquery.Value), with a Beam coder of its own that keeps every value
// exactly.
//
// The struct is carried between stages by Beam's schema coder. Two field
// types above do not survive it: big.Rat, encoded as nothing (every
// decimal would arrive as 0), and civil.Date. Register a type holding
// either with RegisterType, which gives that type (only it) a coder of its
// own: Beam's row coder with big.Rat kept as its exact text, civil.Date as
// its three numbers and time.Time exact. Read, Query and Write refuse such
// a type registered only with beam.RegisterType, and a type that Beam's
// schema coder cannot encode, naming the field. Importing this package
// registers no coder or schema logical type for a type it does not own:
// the program's other PCollections of time.Time, *big.Rat and civil types
// are encoded as Beam encodes them, and a program may register logical
// types of its own for them.
//
// Avro rows are decoded by this package: the session's Avro schema is
// read with encoding/json (only what the Storage Read API sends: records,
// ["null", T] unions, arrays, primitives and BigQuery's logical types and
// sqlType annotations) and the rows with internal/wire's reader, so that a
// BigQuery program does not link hamba/avro, json-iterator, reflect2 and
// mapstructure (about 2 MB; docs/BENCHMARKS.md). Arrow record batches are
// read by github.com/apache/arrow/go/v15's ipc package, the Arrow line
// cloud.google.com/go/bigquery links, as that client reads them: per
// response, one reader over the session's schema message and the
// response's record batches, its memory from an arena the decoder reuses
// (a program pays for one Arrow library, and for v15's zstd and lz4
// codecs, about 0.95 MB; docs/BENCHMARKS.md). v15's reader trusts its
// input, so every payload is checked before it: the messages' metadata and
// body lengths and every record batch's buffers must lie within the
// payload, compressed batches (not asked for) are refused, as are schemas
// nested over 64 levels or of over 32,768 fields (a flatbuffer can name
// one table from many places); and after it each column's buffers must
// hold the values its length says, offsets in order (Arrow's arrays index
// their buffers without checks). A payload that fails fails the read with
// an error naming the stream, the offset and what is wrong, never a panic
// (a panic of the reader becomes that error), and costs no more memory
// than its own size (FuzzArrowDecode). A column of an Arrow type this
// package does not convert (one the service may send later) does not fail
// the read: its type in the session's schema is the Arrow type's name, its
// NULLs are NULL, a value of it fails naming the column and the type (as
// the official client's conversion does), and a struct field for it is
// refused when the read's plan is made. When the BigQuery client moves to
// a newer Arrow line, this package follows it. Rows are decoded straight
// into the fields: each column is compiled, once per session and
// type, to an operation that writes its field (an Arrow column is written
// for a whole batch at once), and the rows of a response fill new chunks
// of 32 structs, so that a row costs no allocation of its own beyond its
// strings (and RECORD, repeated, NUMERIC, BYTES, TIME and DATETIME values,
// which go through the client's value types; an Arrow string column is one
// string per chunk). A row is emitted as an interface value pointing into
// its chunk, without a copy; chunks are never reused, as a fused DoFn
// downstream may keep what it was given (a combine's accumulator, a
// buffer flushed at the bundle's end, a cache), and a row kept keeps the
// other rows of its chunk alive, not its whole response: keeping 1 row in
// 1,000 holds about 35-55 times those rows' own size (1,000 times before
// chunks; docs/BENCHMARKS.md). Each stream's responses are
// received and decoded one goroutine ahead of the claims and emissions, so
// the decoding overlaps the runner's per-row work.
//
// # Throughput
//
// On Prism, in internal/cmd/bqbench (docs/BENCHMARKS.md), Read takes 2.6x
// the rows per second of the official client's own Storage API reader on
// the same table and about the rate of a bare one-core ReadRows loop. Over
// half of its CPU per row is Beam Go's own delivery of each element to the
// next DoFn and the garbage collection of what that allocates; decoding is
// about a fifth. The collector's share falls when a worker may use more
// memory: with GOGC=400 the read spent 22% less CPU per row (the
// program's setting, GOGC or debug.SetGCPercent, which this package leaves
// alone).
//
// # Metrics
//
// In namespace Namespace ("sdfio/bigqueryio"), or WithMetricsNamespace's:
// rows, bytes (serialized rows received), streams (of sessions created),
// splits_accepted, splits_refused, retries. At INFO, the log says each read
// session planned (its streams, estimated rows and bytes) and each split
// accepted (its primary and residual).
//
// # Testing
//
// Package bqtest serves the Storage Read API in the test process; point Read
// at it with WithEndpoint(srv.Addr()) and WithInsecure(), and Query also
// with WithRESTEndpoint(srv.RESTEndpoint()), where bqtest answers the query
// job with a table the test defines (bqtest.Server.AddQuery).
// bqtest.Subject(t, sc) of a NewStreamCheck gives an sdftest.Subject of one
// stream, to check the split contract against it (or against the service);
// the harness is in bqtest, so that no user's binary links package testing.
//
// # Writing
//
// Write(s, table, col, opts...) writes a PCollection of structs (the
// types Read fills, matched to columns by the same rules) or of
// bigqueryio.Row through the Storage Write API, on Google's client
// cloud.google.com/go/bigquery/storage/managedwriter:
//
//	res := bigqueryio.Write(s, "my-project.sales.totals", totals)
//	debug.Print(s, res.FailedRows) // rows the service refused
//
// Exactly once (the default, for bounded input): each bundle appends to
// PENDING streams of its own, one per destination table, created when the
// table's first row comes; it finalizes them when the bundle ends and
// outputs their names. After a GroupByKey on the table, so once every
// bundle is done, one BatchCommitWriteStreams per table commits all its
// streams at once: no row is visible before the commit, and all are after
// it. A bundle that fails or is retried never outputs its streams, so they
// are never committed and no row is written twice. WriteResult.Results
// then holds one TableResult per table (its streams, rows, commit time); a
// table that got no row gets none. A commit retried after one whose answer
// was lost finds every stream STREAM_ALREADY_COMMITTED, which is success;
// a stream delivered twice is committed and counted once.
//
// The commit step commits only on evidence that no bundle is missing (the
// rule avroio's Write shares): a bundle that meets a failure every attempt
// would meet alike (a row refused WithFailOnRowErrors, or a permanent
// error of the service: a gRPC code other than UNAVAILABLE, INTERNAL,
// ABORTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, UNKNOWN and CANCELLED)
// does not fail: it drops its streams unfinalized, skips its other rows
// and passes the failure on to the commit step of every table, which
// commits nothing and fails the write with it. So a runner that runs the
// commit step after a bundle failed (Prism v2.77 and v2.78 do, now and
// then) does not make a part of the rows visible; the write fails once
// its input is consumed rather than at the first such failure. Other
// failures (transient ones past WithRetries, a worker that dies) fail the
// bundle for the runner to retry, and are not covered on such a runner
// when other bundles of the write committed: bundles have no identity that
// survives a retry, so a failed one cannot be told from one retried.
// A FinalizeWriteStream failing with a transient code (UNAVAILABLE,
// INTERNAL, ABORTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, UNKNOWN) is
// retried with the write's backoff (WithRetries); a retry that finds the
// stream finalized by the attempt whose answer was lost is success when it
// is answered the row count appended, or STREAM_FINALIZED for a stream
// GetWriteStream shows PENDING and uncommitted (the API reports no row
// count of a stream: every append was acknowledged at its offset, so the
// stream holds the rows appended). Another count, a committed stream, or
// a permanent error fails the write naming the table, the stream and the
// counts.
//
// Rows are encoded by hand (no dynamicpb message per row) as proto2
// messages of a writer schema made from the table's schema (the
// descriptor managedwriter/adapt would make, built without it), read
// when a worker first writes to the table (GetWriteStream of its _default
// stream); NUMERIC, BIGNUMERIC, DATETIME and TIME go as their text. A
// field without a column, or of a type its column does not take, is
// refused when the pipeline is built against WithSchema or the schema
// bigquery.InferSchema infers, naming the field, and again against the
// table's schema when the write starts; columns without a field are NULL.
// A Row's keys must be columns.
//
// Values are written as the service reads them back. BigQuery keeps
// microseconds: a TIME, DATETIME or TIMESTAMP is truncated to the
// microsecond (toward the past), as Beam Java's encoder truncates a
// LocalTime or an Instant, never rounded: 23:59:59.9999996 is written as
// 23:59:59.999999, in its second, day and year (rounding would carry into
// the next, or past 9999-12-31). A NUMERIC or BIGNUMERIC holds 9 or 38
// digits after the point: a *big.Rat with more (1/3, 0.0000000005) is
// refused, to FailedRows naming the field, as Beam Java's
// BigDecimalByteStringEncoder refuses a BigDecimal of a larger scale;
// round it yourself (x.FloatString(9) rounds half away from zero). A
// civil.Time that is no time of day, or a civil.DateTime outside years 1
// to 9999, is refused the same way, as is a civil.Date outside them (the
// zero civil.Date is one). Every other value is sent exactly.
//
// The schema inferred for CreateIfNeeded (without WithSchema) takes every
// value of the struct type: it is bigquery.InferSchema's, with every field
// that can be nil NULLABLE at every depth (a []byte, a *big.Rat, a nested
// struct pointer, a map: InferSchema makes the first three REQUIRED unless
// tagged nullable), and a *big.Rat tagged `bigqueryio:"bignumeric"` is
// BIGNUMERIC (InferSchema makes every *big.Rat NUMERIC; the official
// client refuses options of its `bigquery` tag but nullable and json, so
// the option has a tag of its own):
//
//	type Reading struct {
//		ID    int64    `bigquery:"id"`
//		Raw   []byte   `bigquery:"raw"`                           // BYTES NULLABLE
//		Value *big.Rat `bigquery:"value" bigqueryio:"bignumeric"` // BIGNUMERIC NULLABLE
//		Site  *Site    `bigquery:"site"`                          // RECORD NULLABLE
//	}
//
// A field whose values no column can hold is refused when the pipeline is
// built, naming the field: a slice whose items can be nil ([]*T,
// []*big.Rat, [][]byte; a BigQuery array holds no NULL; with WithSchema
// such a nil item is refused row by row), a struct of no exported fields,
// the tag on another type than *big.Rat.
//
// Appends carry offsets and at most WithMaxAppendBytes of rows (9 MB,
// under the service's 10 MB request limit); an append is sent once it
// holds 1 MiB of rows (the first of a stream 64 KiB; WithMaxAppendBytes'
// n when given), and up to four are in flight per stream. After a failed append the writer waits for the others, then
// appends again one at a time from the failed one: UNAVAILABLE, INTERNAL,
// RESOURCE_EXHAUSTED, ABORTED and a dropped connection are retried with
// backoff (WithRetries) at the same offset, where ALREADY_EXISTS means an
// earlier attempt wrote the rows; OUT_OF_RANGE, INVALID_ARGUMENT,
// PERMISSION_DENIED and every other error fail the bundle with the
// service's message, naming the table, the stream and the offset. Rows
// the service refuses (row_errors: a REQUIRED column missing, a value out
// of range; none of that request is written) are appended again without
// the refused ones, which go to WriteResult.FailedRows (FailedRow: the
// table, the row as JSON, the service's message), as do rows that cannot
// be encoded, rows over the append size, and rows WithTableFunc routes to
// an invalid table spec; WithFailOnRowErrors fails the write instead.
//
// WithAtLeastOnce appends to each table's _default stream (Beam Java's
// STORAGE_API_AT_LEAST_ONCE): rows are visible as they are appended,
// nothing is committed, and an append retried after the service wrote it,
// or a retried bundle, writes its rows again: the duplicates are bounded
// by what was in flight, at most the rows of each append whose answer was
// lost (up to five appends are in flight per table and DoFn instance). A
// failure before the write (a connection reset or closed, throttling with
// RESOURCE_EXHAUSTED) is retried with backoff and duplicates nothing.
// The connections are bounded per worker process: every at-least-once
// write of the process shares one Storage Write API client (per endpoint
// and project) that multiplexes the _default streams of all tables over
// at most MaxDefaultStreamConnections AppendRows connections
// (managedwriter's connection sharing, which the service allows on
// _default streams only), opened as the traffic needs; each DoFn instance
// keeps one writer per table on them for its life instead of a connection
// per bundle, and the client is closed when the last instance is torn
// down. The service limits a project's open connections, so a streaming
// job of many workers and tables stays within them.
//
// Windows and unbounded input: Write takes a PCollection in any windowing
// (fixed, sliding, session windows, several panes of a trigger), in both
// modes. Its own steps run in the global window: each element-in-window
// is one row, as in Beam Java's BigQueryIO, so a row in three sliding
// windows is written three times, and each pane's elements are rows of
// their own; the commit, and the TableResult, cover every window at once.
// An unbounded PCollection (one from a source that never ends, such as
// avroio's WatchForNewFiles or periodic.Impulse) is written as it comes,
// exactly once, by the streaming write (below, "Streaming"); WithAtLeastOnce
// writes it to the _default stream instead, each bundle's rows visible
// once the bundle ends (its WriteResult.Results has a result per bundle
// and table, as they are appended).
//
// # Change data capture
//
// WithRowMutation(fn) writes each element as a change to the row of the
// table with the same primary key, which BigQuery applies itself (Beam
// Java's withRowMutationInformationFn): fn, a registered func(T)
// RowMutation, gives the change type (Upsert, which inserts the row or
// replaces the key's, or Delete) and, optionally, a sequence number, 1 to
// 4 sections of 1 to 16 hexadecimal digits separated by '/'
// (SequenceNumber(lsn), SequenceNumber(file, offset)), sent as the
// pseudo-columns _CHANGE_TYPE and _CHANGE_SEQUENCE_NUMBER. The service
// compares sequence numbers section by section as unsigned numbers: a
// change below the one a key was last changed by (a delete's included) is
// ignored, and between equal numbers the one written last wins. A type or
// a sequence number the service would refuse sends the element to
// FailedRows (or fails the write, WithFailOnRowErrors).
//
// The service takes changes only on a table's _default stream, of a table
// with a primary key. So, when the pipeline is built: WithRowMutation
// without WithAtLeastOnce is refused (there is no exactly-once CDC), and
// with CreateIfNeeded it needs WithPrimaryKey(columns...), which makes
// the table with that primary key (NOT ENFORCED; 1 to 16 top-level
// columns of the schema, neither REPEATED nor RECORD, else refused naming
// the option; with WithTableSpecFunc, TableSpec.PrimaryKey, and a spec
// without one fails the bundle, naming the table, before the table is
// created). As Beam Java, the table is made without max_staleness. With
// CreateNever the table must have a primary key; the service refuses the
// changes otherwise, and the bundle fails naming the table.
//
// At least once is correct for CDC, bounded or unbounded input: an upsert
// or delete applied twice leaves the row as applying it once does, and
// with sequence numbers an older change retried after a newer one (an
// append whose answer was lost, a retried bundle) is ignored. Without
// sequence numbers the service applies a key's changes in the order they
// arrive: a retried bundle reapplies an older upsert after a newer one, a
// writer's appends may move between the shared connections (below), and
// changes of one key written by different bundles or workers have no
// order (Beam Java's review of its CDC came to the same). So changes
// without one are refused, unless WithUnorderedChanges says their order
// does not matter (a writer then still appends again, after a failed
// append, every append it had in flight behind it, so that its own retry
// does not undo its later changes).
//
// Tables: WithCreateDisposition(CreateIfNeeded), the default, creates a
// missing table (tables.insert, through the REST API, WithRESTEndpoint)
// with WithSchema's schema or the one inferred from the struct type (Row
// needs WithSchema, or CreateNever); CreateNever fails on a missing table.
// WithWriteDisposition(WriteEmpty) refuses a table that has rows when the
// write starts (its metadata's row count), WriteAppend (the default)
// appends, WriteTruncate replaces (below).
//
// # Streaming
//
// Unbounded input is written exactly once unless WithAtLeastOnce (rows
// appended to each table's _default stream as they come);
// WithExactlyOnceStreaming says so explicitly. What each runner commits
// when, and so where exactly once holds (Prism and Dataflow; on Flink
// without failures, at least once through them), is in docs/DESIGN.md,
// "Streaming exactly once, per runner". The write follows Beam
// Java's StorageApiWritesShardedRecords: each row is encoded and the rows
// of a bundle are gathered in chunks keyed by table and shard
// (WithNumStreams, a shard in turn per chunk; by default each worker
// process gives a table shards of its own, one per
// AutoStreamBytesPerSecond of the table's rows it handles, at most
// MaxAutoStreams, so the streams grow with throughput and workers);
// a stateful step gathers each shard's chunks in batches in user state (a
// batch ends at an append's bytes, a writer schema change, a chunk that
// comes WithTriggeringFrequency after the batch's first row, default
// DefaultTriggeringFrequency, or when the watermark passes the batch's
// first event time plus the frequency: an event-time timer) and numbers
// them; a second stateful step appends each batch, in number order, at
// its shard's next offset of a BUFFERED stream kept in state. An append
// answered ALREADY_EXISTS met rows of an attempt the runner did not
// commit (a retried bundle, or a restored checkpoint whose input is
// replayed, perhaps in other batches): they are never taken for the
// batch's; the rows before the state's offset are flushed, the stream is
// left with the rest never flushed, and the batch goes to a new stream.
// After a Reshuffle, FlushRows up to each append's end makes its rows
// visible (idempotent up to an offset). A row is visible about a
// triggering frequency after it came, at most about two. Streams are
// finalized (flushed to their end first) before an append would take them
// past WithStreamRotation's rows or WithStreamRotationBytes' bytes, when
// idle (in event time: no batch for the idle time past the latest batch's
// event time) and at the end of input; a shard idle that long also has
// both steps' state cleared, so the shards of a worker that went away
// leave no state behind; a stream the service no longer takes (NOT_FOUND,
// STREAM_FINALIZED, INVALID_STREAM_STATE) is replaced; OUT_OF_RANGE fails
// the write naming the stream and offset; transient codes (see Retries)
// are retried with backoff (WithRetries); rows the service refuses
// (row_errors) go to FailedRows in the batch write's shape (the element
// as JSON, rebuilt from the encoded row: see FailedRow), or fail the
// write WithFailOnRowErrors; the rest of their batch is appended at the
// same offset, which holds one write at most (docs/DESIGN.md, "Refused
// rows and retries"). Any other answer fails the write (see "Errors"):
// never FailedRows. WriteResult.Results holds one TableResult per
// append made visible (table, stream, rows, the time of the flush).
// WithWriteDisposition(WriteTruncate or WriteEmpty) is refused for
// unbounded input, which has no end to truncate or check at, as are
// WithRowMutation (CDC goes only to _default) and the streaming options
// with WithAtLeastOnce.
//
// The batching step's timer is in event time, not processing time as Beam
// Java's: Beam's Flink runner does not fire a Go DoFn's processing-time
// timers reliably, and the watermark passes every timer when the input ends or a
// job is drained, so each shard's last batch is written then: when an
// unbounded input ends (a watch's termination condition), every row is
// visible when the job ends. A cancelled job writes nothing more: the rows
// of appends already flushed are visible (each append whole, none twice),
// rows appended and not yet flushed stay invisible in their BUFFERED
// streams, and rows not yet appended are not written; they are the runner's
// to replay when the job is restarted from its state (a Dataflow update, a
// Flink savepoint), or the source's to read again in a new job.
// WriteResult.Results names every append made visible. Prism has no drain
// (its job service answers Drain UNIMPLEMENTED, v2.78): there, end the
// input rather than cancel the job. The batching and append steps number
// each shard's batches within an epoch drawn when the batching state is
// new, so that a runner that drops one step's state and not the other's
// (a renamed step) costs a new stream, never a batch. Each
// stateful step has one timer family: Beam Go's harness (v2.78) and Prism
// disagree on how many end-of-timers signals a bundle gets when a step
// has two, and such a bundle can wait forever (docs/DESIGN.md, "Streaming
// exactly once").
//
// # Table features
//
// CreateIfNeeded makes the table as Beam Java's withTimePartitioning,
// withClustering and withKmsKey do: WithTimePartitioning (by day, hour,
// month or year, on a DATE, DATETIME or TIMESTAMP column or on the time
// rows are written, with an expiration of partitions),
// WithRangePartitioning (ranges of an INTEGER column), WithClustering (one
// to four top-level columns of a type that clusters), WithTableDescription,
// WithTableLabels and WithKMSKey (a Cloud KMS key,
// projects/p/locations/l/keyRings/r/cryptoKeys/k). They are checked when
// the pipeline is built against the schema (WithSchema or inferred): a
// clustering or partitioning column that is not in it, or of a type that
// cannot serve, more than four clustering columns, both partitionings, a
// bad label or key are refused naming the option. A table that exists is
// written as it is: its spec is not compared.
//
//	bigqueryio.Write(s, "p.d.daily", counts,
//		bigqueryio.WithTimePartitioning(bigqueryio.TimePartitioning{
//			Unit: bigqueryio.PartitionByDay, Column: "day", Expiration: 365 * 24 * time.Hour}),
//		bigqueryio.WithClustering("word"))
//
// With WithTableFunc, WithTableSpecFunc(fn) gives each table its own spec:
// fn is a registered func(table string) TableSpec of the table spec
// (project.dataset.table); its spec is checked against the schema when the
// table is created, and one that does not fit fails the write naming the
// table.
//
// A partition decorator writes into one partition: "p.d.t$20261203" (or a
// table spec WithTableFunc returns with one). The streams are created on
// the decorated table (CreateWriteStream's parent), as the Storage Write
// API takes it, and committed with the parent the service named them
// under. For a table partitioned by ingestion time the rows land in that
// partition; for one partitioned by a column or a range, the service
// refuses rows whose value is in another partition (they go to
// FailedRows). The decorator must name a partition of the spec's kind
// (yyyymmdd for days, yyyymmddhh, yyyymm, yyyy, a range's start;
// __NULL__ and __UNPARTITIONED__), which is checked when the pipeline is
// built where the spec is known; a table to create for a decorator needs a
// partitioning.
//
// # Schema changes
//
// WithSchemaUpdateOptions(AllowFieldAddition, AllowFieldRelaxation)
// patches the schema of a table that exists (tables.patch) when a worker
// first meets it, before it appends, so that the write's rows fit (Java's
// withSchemaUpdateOptions): the columns of the write's schema (WithSchema,
// or inferred from the struct type) that the table lacks are added at its
// end, NULLABLE (the service adds no REQUIRED column to a table), and its
// REQUIRED columns that the write's schema has NULLABLE become NULLABLE.
// Rows already there read NULL in the new columns. A concurrent patch
// (another worker's) is read again. Without it, a struct field the table
// lacks fails the write naming the field. Rows of bigqueryio.Row need
// WithSchema for it.
//
// The writer follows a table whose schema gains columns while it writes
// (another client's patch): a Row with a key that is not a column makes
// it read the table's schema again (at most once per key every 10 s per
// worker), and if the key is now a column it takes the new schema and
// sends the new writer schema with its next append, once the appends in
// flight are answered (rows encoded before fit it too: columns are added
// at the end). A schema changed otherwise (a column dropped or retyped) is
// not followed, and such rows go to FailedRows as before. A struct's
// fields are fixed when the pipeline is built: use WithSchemaUpdateOptions.
//
// WithIgnoreUnknownValues writes Rows whose keys the table lacks without
// those keys (at every level of RECORDs) instead of sending them to
// FailedRows; it applies to Row input alone.
//
// # Replacing a table
//
// WithWriteDisposition(WriteTruncate) replaces a table's rows with the
// write's, at once. The Storage Write API cannot truncate, so the rows are
// staged: each bundle appends to PENDING streams of a staging table
// (<table>_sdfio_tmp_<run id>, in the table's dataset, made by the first
// bundle with the table's schema, partitioning, clustering and KMS key,
// expiring after 24 hours); the commit step commits them all, runs a copy
// job from the staging table onto the table in WRITE_TRUNCATE (readers
// see the old rows or the new, never a part; the copy replaces the
// table's rows and schema, the KMS key passed on) and deletes the staging
// table. A failed commit or copy job
// deletes the staging table and fails the write with the table as it was.
// The run id is drawn once per run (an Impulse, a side input), so a
// pipeline run again (a template) replaces the table again; the copy job's
// id is made of the streams it copies, so a retried commit step finds its
// job and does not copy twice. A write of one table that gets no row
// empties it, unless the run's staging table exists (a bundle that had
// rows for it began and failed, and the commit step runs without it):
// then the commit step deletes it and fails, the table as it was. With
// WithTableFunc only the tables that get rows are replaced, each on its
// own (not all at once). An append refused for good reaches the commit
// steps, which delete the staging tables and fail the write with the
// table as it was; a pipeline that fails otherwise before its commit step
// leaves its staging table, which expires. WriteTruncate cannot be given
// with WithAtLeastOnce, nor for a partition decorator. It needs
// bigquery.jobs.create besides the rights of a write.
//
// WithTableFunc(fn) routes each element to the table fn names, each table
// with its own streams and its own commit; Write's table is then "". fn is
// a func(T) string registered with Beam (register.Function1x1(fn)), so
// that it reaches the workers by its name.
//
// A crashed or cancelled job leaves PENDING streams that were never
// committed: nothing of them is visible, and the service drops them when
// they expire. Write needs roles/bigquery.dataEditor on the table or its
// dataset (bigquery.tables.updateData, and bigquery.tables.create for
// CreateIfNeeded, bigquery.tables.get for the schema, WriteEmpty, a CDC
// write's primary key and a new table's age).
//
// Metrics, in Namespace or WithMetricsNamespace's: rows_appended,
// bytes_appended (encoded rows), appends (requests sent), append_retries
// (appends sent again), rows_refused (rows sent to FailedRows),
// streams_committed; the streaming write of unbounded input adds
// streams_created, streams_finalized, rows_flushed (rows made visible),
// batches_repeated, streams_abandoned, connections_closed (streams'
// connections closed once idle or past 64 open in a worker), and the
// distribution early_batches (batches waiting for an earlier one of their
// shard, after each batch).
//
// # Errors
//
// Only refused rows go to FailedRows: rows the service names in
// row_errors, rows that cannot be encoded in the table's schema, rows
// over an append's bytes, routes and changes that cannot be sent. A
// FailedRow is the same in every mode: the table, the element as JSON
// (encoding/json), the column the refusal names ("" when none) and the
// service's message. Every other answer either is retried or ends the
// write, so that rows are in the table or the job fails, never missing
// from a job that succeeds: transient codes are retried (see Retries);
// NOT_FOUND and PERMISSION_DENIED about a table (not a stream) made less
// than DefaultTableSettle ago, which the service answers for a while
// after a table is made (CreateIfNeeded) and while a grant propagates,
// are waited out with the write's backoff, uncounted, until the table is
// that old (its age is tables.get's creationTime, read at the first such
// answer); every other answer (the same codes for an older table,
// INVALID_ARGUMENT without row_errors, a code the write does not know)
// fails the write. Its error puts the cause first: "bigqueryio.Write to
// <table>: stream <stream> at offset <n>: <CODE>: <the service's
// message> (<what the write was doing>)"; it wraps the service's error
// (status.Code finds the code).
//
// A table the write makes (CreateIfNeeded) is logged at INFO with its
// columns and spec ("bigqueryio.Write: created table p.d.t
// (CreateIfNeeded): columns (...), ..."), so that a table name misspelled
// in a pipeline is found in the log, not as a new empty table later.
//
// # Retries
//
// Every call the IO retries itself is judged by one rule, the module's
// internal/retry, shared with datastoreio, and waits by one backoff:
// WithRetries(n, base) retries in a row (default 10), the waits from base
// (default 100 ms; 0 retries at once) doubling up to 10 s, each drawn at
// random up to its bound, ending at once when the context is done, with
// no wait after the last attempt. For an idempotent call the rule retries
// UNAVAILABLE, RESOURCE_EXHAUSTED (not gRPC's message-size limit), ABORTED,
// DEADLINE_EXCEEDED, INTERNAL and UNKNOWN (and a dropped connection, which
// surfaces as io.EOF), and HTTP 429, 500, 502, 503 and 504 of REST calls;
// for a call that is not idempotent only UNAVAILABLE, RESOURCE_EXHAUSTED
// and ABORTED, where the service did not act. Every other code fails at
// once, but for Write's NOT_FOUND and PERMISSION_DENIED about a new table
// (CreateWriteStream, GetWriteStream, AppendRows), waited out as "Errors"
// says. Errors name the table and stream, the code, the call and the
// attempts made.
//
//	call                            retried by the IO   rule for      why
//	ReadRows (Read, Query)          yes, WithRetries    idempotent    read at an offset, resumed at the next unread row; the count restarts after rows arrive
//	AppendRows (exactly once)       yes, WithRetries    idempotent    at an offset: a second append is refused ALREADY_EXISTS, which is success
//	AppendRows (WithAtLeastOnce)    yes, WithRetries    idempotent    no offset: a retry may duplicate the rows of the append, as that mode allows
//	FinalizeWriteStream             yes, WithRetries    idempotent    a second one answers STREAM_FINALIZED, checked with GetWriteStream
//	FlushRows (streaming)           yes, WithRetries    idempotent    a second one answers ALREADY_EXISTS
//	CreateWriteStream (streaming)   yes, WithRetries    idempotent    a stream made by a lost attempt stays empty and unnamed
//	BatchCommitWriteStreams         yes, WithRetries    idempotent    a second one answers STREAM_ALREADY_COMMITTED for every stream, which is success
//	CreateReadSession, SplitReadStream, GetWriteStream:
//	                                no (the client library's own retries only) a failed split is refused, and the runner asks again; the others fail the pipeline's construction or the bundle, for the runner to retry
//
// The REST calls (Query's job, dataset and table; Write's table metadata,
// CreateIfNeeded, schema updates, WriteTruncate's staging table and copy
// job) go through the package's own client of the documented JSON API,
// not the official client's bigquery.Client, which would add 2 MB to every
// program; every one is retried with WithRetries by the idempotent rule:
//
//	tables.get, jobs.get            idempotent: reads
//	tables.delete, datasets.delete  idempotent: a second one answers 404, which is success
//	tables.insert                   a second one answers 409 (already exists), which is success: the table is the run's own or made by another worker of the write
//	datasets.insert (Query)         a second one answers 409 for the dataset the first made (its name is random), which is success
//	jobs.insert (query, copy)       the job has an id of its own: a second one answers 409 and the job is read back; a dry run has no effect
//	tables.patch                    sets the same fields again; a schema update's If-Match ETag makes a second one answer 412
//
// A schema update's 412 (the table's ETag changed: another worker's update,
// or a retried patch that took effect) is not retried as such: the schema
// is read again and the patch made anew, at most 5 times.
//
// # IAM
//
// The clients use the Application Default Credentials, unless
// WithClientOptions names client options (RegisterClientOptions) that set
// others: a key file, impersonation. The account that runs the pipeline
// (Dataflow's worker service account, or the one given so) needs roles/bigquery.readSessionUser on the billing project (to create
// read sessions) and roles/bigquery.dataViewer on the table or its dataset;
// Query needs more, see Queries.
package bigqueryio
