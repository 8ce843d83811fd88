// Package avroio reads and writes Avro object container files in Beam Go
// pipelines, into and from Go structs or generic Records: reads split
// files at sync markers and let runners rebalance running reads (dynamic
// splitting), on any Beam filesystem the program imports; writes commit
// whole files. Element types must be registered, with RegisterType (or
// beam.RegisterType for a type without decimals); Read refuses one that is
// not when the pipeline is built.
//
//	type Event struct {
//		ID   int64  `avro:"id"`
//		Name string `avro:"name"`
//	}
//
//	func init() { avroio.RegisterType(reflect.TypeFor[Event]()) }
//
//	func main() {
//		beam.Init()
//		p, s := beam.NewPipelineWithRoot()
//		events := avroio.Read(s, "/data/events-*.avro", reflect.TypeFor[Event](),
//			avroio.WithDesiredBundleSize(32<<20))
//		avroio.Write(s, "/data/out/events", eventSchema, events, avroio.WithSuffix(".avro"))
//		if err := beamx.Run(context.Background(), p); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Options are typed by transform: a RecordOption (WithDesiredBundleSize,
// WithReaderSchema, WithMaxAlloc, ...) goes to every read, WithEmptyMatch
// to Read and ReadAll, WithMatchesManyFiles to Read alone,
// WithMatchUpdatedFiles, WithSkipOlderThan and WithSkipListed to the
// watch, the With* options of Write to Write alone, WithMetricsNamespace to every transform; one given to a transform
// it does not apply to does not compile. Values that cannot work panic
// when the pipeline is built, naming the transform and the option
// (avroio.Read: WithDesiredBundleSize(0): the desired bundle size must be
// positive). For gs:// paths, import Beam's gcs filesystem or
// offsetsource/filesource/gcsrange (see "Files and patterns").
//
// # Reading
//
//	events := avroio.Read(s, "gs://bucket/events/*.avro", reflect.TypeFor[Event]())
//	generic := avroio.ReadGeneric(s, "/data/*.avro")     // avroio.Record values
//	more := avroio.ReadAll(s, patterns, avroio.RecordType) // a PCollection of patterns
//	files := avroio.ReadFiles(s, readableFiles, reflect.TypeFor[Event]())
//
// Read has the shape of Beam Go's own avroio.Read (scope, pattern,
// reflect.Type) plus options. Records are decoded with hamba/avro straight
// into values of the type given:
//
//   - a Go struct (or pointer to one) whose fields are matched to the
//     record's fields by `avro:"name"` tags, or else by their Go names,
//     exactly, with hamba/avro's rule for embedded structs (the fields of
//     every embedded struct or *struct count as the outer struct's,
//     breadth first, an outer field shadowing an inner one of the same
//     name). Every exported field must name a field of the schema records
//     are read with (tag it `avro:"-"` to leave it out), in nested records
//     too; otherwise the read fails, naming the Go field, the file and the
//     record's fields, instead of silently decoding zero values. A struct
//     that hamba/avro would fail every record of, or read changed, fails
//     the read when the file is opened, as a schema error naming the Go
//     field and the file: an int64 for an Avro int (use int32 or int), an
//     int64 for a time-millis or time-micros (read as nanoseconds; use
//     time.Duration), no field for an Avro field that holds a null
//     (hamba/avro cannot skip a null; add a field of any type tagged with
//     its name, which stays zero). Beam Go's
//     avroio matched fields through JSON: a struct with only `json` tags
//     must gain `avro` tags. Where the schema is known when the pipeline is
//     built (WithReaderSchema; Write's schema) a field that names none of
//     its fields panics then, naming it. A union of null and one type goes into a
//     pointer (nil for null), as hamba/avro does. The type must be
//     registered with RegisterType (see Decimals), as every element type of
//     a pipeline; Read panics at construction when it is not.
//   - Record (RecordType; what ReadGeneric yields), a map[string]any of the
//     record's fields, whose Beam coder keeps every value and type exactly.
//     Record's documentation gives the Go type of each Avro type and the
//     shape of unions: where two branches of a union share a Go type (date
//     and timestamp-millis, two records, ...) the value names its branch,
//     so that writing it back picks the same branch.
//   - any other type hamba/avro decodes a record into (map[string]any, say,
//     which Beam encodes as JSON between stages, turning numbers into
//     float64). Beam Go's avroio also took reflect.TypeOf("") for records
//     as JSON text; here, read Records and encode them as needed.
//
// Given WithReaderSchema (or WithReaderSchemaFile, the schema in a file on
// any Beam filesystem, read when the pipeline is built), each file's records are read by Avro's schema
// resolution from the file's writer schema to the reader schema: fields
// only the reader has take their defaults, fields only the writer has are
// skipped, numbers promote, names match by alias. A file whose schema
// cannot be resolved fails the read, naming the file and the fields that
// do not resolve.
//
// # Decimals
//
// Avro decimals (bytes or fixed) go into *big.Rat fields of structs, and
// nullable decimals into **big.Rat; Records hold *big.Rat. hamba/avro
// (v2.31) reads every decimal as 0 into a big.Rat held by value, and into
// a *big.Rat for a nullable decimal: Read panics at construction for a
// big.Rat value anywhere in the type, and a *big.Rat for a nullable decimal
// fails the read naming the field and the file. Beam's schema coder would
// encode a *big.Rat as nothing between stages, every decimal arriving as
// 0: RegisterType gives a type holding decimals (and civil dates, Datastore
// keys) a coder of its own that keeps them exactly, and time.Time of every
// year and zone offset, and Read and Write refuse such a type registered
// only with beam.RegisterType. Importing this package registers no coder
// or schema logical type for a type it does not own: the program's other
// PCollections of time.Time, *big.Rat and civil types are encoded as Beam
// encodes them (before, times of years beyond 0-9999 failed there too).
// Write takes big.Rat values and pointers. A Record's decimal with more
// digits after the point than the schema's scale, or too large for its
// fixed, fails the write; structs are encoded by hamba/avro, which cuts
// such digits off (rounding toward negative infinity) and fails only on
// more digits than the schema's precision.
//
// # Local timestamps
//
// Avro's local-timestamp-millis and local-timestamp-micros are wall clocks
// without a zone ("2024-03-10 02:30", a time New York skips). They have one
// rule here, for structs and Records, on reads and on Write, and it never
// depends on the time zone of the worker: the wall clock is the UTC fields
// of a time.Time.
//
//   - A read gives a time.Time in UTC whose fields are the wall clock: the
//     local-timestamp-millis v is time.UnixMilli(v).UTC().
//   - Write writes the UTC fields of a time.Time t (t.UTC()), that is
//     t.UnixMilli() or t.UnixMicro(): the long a timestamp of the same
//     instant has. Values that avroio read are in UTC, so reading and
//     writing back changes nothing. To write a wall clock, build it in
//     time.UTC: time.Date(2024, 3, 10, 2, 30, 0, 0, time.UTC). A time in
//     another zone is written by its UTC fields, not by its wall clock in
//     that zone; to write that wall clock, rebuild it first:
//     time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(),
//     t.Second(), t.Nanosecond(), time.UTC).
//
// The rule follows a time's instant, not its zone, because the zone is not
// the same on every worker: time.Now() is in the worker's zone, and Beam
// Go's coder for time.Time gives a time back in UTC, time.Local or a fixed
// zone, by its offset. (That coder writes RFC 3339 text, whose offsets are
// whole minutes: a time in a zone whose offset has seconds, as New York's
// before 1883, moves by those seconds between stages; a time in UTC, as
// avroio reads them, does not.) hamba/avro's own rule, the wall clock of
// t.Local(), is not used. A union that holds both timestamp-millis and
// local-timestamp-millis (or both -micros) cannot be written from a struct,
// whose time.Time cannot say which branch it is: Write refuses it at
// construction, naming the field. Records name the branch
// ({"long.local-timestamp-millis": t}) and write such unions.
//
// # Files and patterns
//
// A pattern is a path or glob on any Beam filesystem whose package the
// program imports, as with Beam's textio. Local paths need no import; for
// gs:// add
//
//	import _ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"
//
// or _ "github.com/sdfio/sdfio/offsetsource/filesource/gcsrange", which
// imports it and reads objects in ranged requests (a range deep in an
// object is fetched from there); others (memfs://, s3://) need their
// filesystem package. avroio links no filesystem but the local one: a
// program that reads local files links no Cloud Storage client. Brace groups
// ({a,b}) are matched on every filesystem, with no limit on their number:
// up to filesource.MaxBraceListings (1,024) alternatives are listed one by
// one, a pattern with more is matched against a listing of its fixed part,
// and one that cannot be matched so (a group in the bucket, say) is an
// error naming it, never a partial match (see package filesource,
// Patterns). Read lists the matching files
// while the pipeline is built (so the process that builds it must be able
// to list them) and puts them in the pipeline; with WithMatchesManyFiles
// (Java's withHintMatchesManyFiles) it lists them in a step of the
// pipeline instead, as ReadAll does, for patterns of tens of thousands of
// files. ReadAll expands each pattern of a PCollection in the pipeline and
// shuffles the list of files (file names only; records are never
// shuffled). ReadFiles reads fileio.ReadableFiles (from Beam Go's
// io/fileio); a file gzip-compressed as a whole cannot be split and is an
// error.
//
// A pattern that matches no file is treated as WithEmptyMatch says, with Java's
// meanings: EmptyMatchDisallow (Read's default) makes it an error that
// fails the pipeline when it runs, naming the pattern (as Beam Java: Read
// matches a pattern that matched nothing while the pipeline was built
// again in the pipeline, and fails there if it still matches nothing;
// ReadAll and WithMatchesManyFiles match there anyway); EmptyMatchAllow reads nothing;
// EmptyMatchAllowIfWildcard (ReadAll's default) reads nothing if the
// pattern has a wildcard (*, ?, [...] or a brace group) and is an error
// otherwise. Directories that a glob matches are skipped; a directory given
// as the pattern itself is an error saying so. An empty (0-byte) file holds
// no records.
//
// Each file's size and modification time are recorded when it is matched,
// and a file that changed by the time a range of it is read (appended to,
// replaced) fails the read, naming the file (filesource.ErrChanged), rather
// than being read in part. WatchForNewFiles and WatchAllForNewFiles go on
// polling patterns and read each new file once it is stable, as an
// unbounded PCollection (see their docs, and WithMatchUpdatedFiles).
//
// # The read contract
//
// Each file is read by a splittable DoFn (package offsetsource) whose
// restrictions are byte ranges of the file. A range [A, B) holds the blocks
// whose first byte lies in [A, B); the sync marker before such a block may
// lie before A. Reading [A, S) and [S, B) yields exactly the records of
// [A, B), in the same order. A block's records are never split apart: only
// a block's first record is a split point. While a range is read, the
// runner may split off the rest of it (Beam Go's TrySplit, a fraction of
// the remaining bytes); progress inside a block advances by the records
// read of the block's records. FileSource is this very source over a file
// of your own; avroio/avrotest's Subject hands it to the split checks of
// package sdf/sdftest (a package of its own, so that avroio links no test
// harness).
//
// A file is cut into initial bundles of WithDesiredBundleSize bytes (64 MiB by
// default), none smaller than WithMinBundleSize (128,000 bytes by default, twice
// Avro's default sync interval; a file smaller than that is one bundle).
//
// A reader of a range reads the file's header (parsed once per worker
// process and file, for all its ranges), then starts 16 bytes before A and
// searches for the sync marker. It does not read the bytes between the
// header and A: it seeks where the filesystem's stream can seek (local
// files), makes ranged reads on gs:// with package gcsrange imported (and
// on schemes registered with RegisterRangeReader), and only where neither
// is possible (memfs://, gs:// without gcsrange) reads and discards them.
//
// All codecs of the Avro specification are read: null, deflate, snappy
// (its CRC32 checked), zstandard, bzip2 and xz, and Avro C's lzma.
//
// # Errors
//
// Nothing is skipped: a file that cannot be read fails the read with an
// error that names first the file, the byte offset, the block and what was
// wrong, then where it was read
// (a *container.Error; see package avroio/container for its kinds: bad
// magic, truncation, sync marker mismatch, record count, checksum, corrupt
// data, lengths over the WithMaxAlloc limit, unknown codec, schema errors,
// among them a struct field that names no field of the schema). A file that
// cannot be opened (gone, a directory, no access) is an error of kind
// filesource.ErrOpen, never "truncated"; one that changed since it was
// matched, of kind filesource.ErrChanged. WithMaxAlloc bounds what one length
// field in a file may make the reader allocate, and what one record may:
// before a record is decoded, the reader estimates what decoding it
// allocates (a Go map's entry at its real cost, 100-170 bytes with the
// tables it outgrows; a slice's growth; a union's one-key map) and one
// encoding of it by its coder (Beam Go encodes sampled elements to size
// them), and refuses it, naming the field whose value took it over the
// limit, before decoding any of that value. A header's metadata and
// schema are bounded too (a schema is parsed once per process at a time),
// so that a file, hostile or valid, is read or refused within about
// WithMaxAlloc plus 60 MB of memory (measured in a child process's peak
// resident set for a map of a million entries, a union of 10,000
// records, a map of 8 million null keys, directly and in a pipeline). A
// valid file costs what the values read from it take: a schema's fixed types cost nothing until a value of one is
// decoded (a record declaring 40 fixed types of 60 MB, all null, is read
// in under a megabyte). Decoding ahead of the runner (the next records
// are decoded on a goroutine of their own while the runner takes the ones
// before) holds at most a quarter of WithMaxAlloc (16 MiB by default) of
// decoded records, by the reader's estimate of their size, plus one
// record. Compiling a schema is bounded by a limit too: for
// Go types, decoded by hamba/avro, at container.MaxCompileCost times
// WithMaxAlloc (a schema over it fails the read when the file is opened,
// with an error naming the file and the limit; a union of 10,000 records
// is refused so); for Records, avroio's own compile takes memory linear in
// the schema's text, which the header's bound on it (WithMaxAlloc/64, at
// least 64 KiB) limits.
//
// Failing is the default, right for a batch job, whose output would
// otherwise lack records. ReadWithBadFiles and WatchForNewFilesWithBadFiles
// (and WatchAllForNewFilesWithBadFiles) send what cannot be read to a
// second PCollection instead, of BadFile: the file, the byte offset, the
// blocks lost and the error; a corrupt block costs that block (the read
// goes on at the next sync marker), a file whose schema does not fit costs
// the file, and every record is read once or covered by one BadFile.
// Errors of the filesystem still fail the bundle, for the runner to retry
// it. A streaming job should use them: a bundle that fails is retried for
// ever on Dataflow, and ends the job on Prism and Flink.
//
// # Metrics
//
// Reads and writes count, in the Beam metrics namespace "sdfio/avroio"
// (Namespace). Reads: records, bytes_read (the bytes of the blocks whose
// records were read), splits_accepted and splits_refused (dynamic splits of
// running reads), ranges_read (ranges opened: initial bundles and
// split-off pieces), files_matched (files matched in the pipeline by
// ReadAll, WithMatchesManyFiles and ReadFiles), bad_inputs (BadFile
// elements output by the reads with a dead letter), and the watch's
// counters (see WatchForNewFiles). Write: records_written, bytes_written, files_written
// and temp_files_removed (see Write).
//
// # Writing
//
// Write writes a PCollection of structs or Records as Avro container files
// named from a prefix and a shard template, as Beam Java's AvroIO.write:
// each bundle (or each of WithNumShards shards) writes a temporary file, and a
// finalize step renames the committed ones, so files appear whole or not
// at all. A write that fails leaves no final file and no temporary
// directory: a record the schema cannot hold fails the write in its
// finalize step, which removes every temporary file; a bundle whose
// filesystem fails removes what it wrote, for the runner to retry it, and
// a finalize step that runs anyway (Prism does, now and then) commits
// nothing it has no evidence for; what a job that failed in another
// step left (a temporary file, Begin's marker, the write's lease), the
// next Write beside it removes as soon as that job's workers stopped or
// 5 minutes after they were killed (a directory without a lease, once it
// is a week old: WithStaleTempAge). An element type that
// cannot hold the schema (a string for a record, a struct lacking a field
// without a default) panics at construction. A value the schema cannot
// hold exactly fails the write, naming the field and the record, instead
// of being written changed: a Record key that names no field of the
// record, a float64 or integer that an Avro float (double) does not hold
// exactly, an integer, date or time-millis beyond an Avro int, a timestamp
// beyond ±2^63 of its unit, nil for an array or map (which have no null;
// give an empty one). Times are truncated to the schema's unit
// (millisecond, microsecond, day), as Avro Java writes them. A struct
// field whose Go type hamba/avro would write changed (an int64 for a
// time-millis, read and written as nanoseconds) or fail on every record
// (a float64 for an Avro float) panics at construction.
//
// A Write given no schema ("") of structs infers one from the struct
// type, as Beam Java's AvroIO.write(Class) does through ReflectData:
// SchemaOf gives it, and documents the mapping (records, ["null", T] for
// pointers, arrays, maps, fixed for [N]byte, timestamp-micros for
// time.Time, a bytes decimal for a *big.Rat tagged
// `avro:"name,decimal(P,S)"`, date, time-micros and local-timestamp-micros
// for civil.Date, civil.Time and civil.DateTime). A type it cannot map (a
// channel, a func, an interface, a map whose keys are not strings, a
// recursive struct) panics at construction, naming the field's Go path.
// Records have no type to infer from: give their schema.
//
// # Civil dates and times
//
// Struct fields of the types of cloud.google.com/go/civil are read and
// written as Java's LocalDate, LocalTime and LocalDateTime are: a
// civil.Date holds an Avro date, a civil.Time a time-micros or
// time-millis, a civil.DateTime a local-timestamp-micros or -millis (by
// the rule of "Local timestamps": the same in every zone), plain, in
// nullable unions through pointers, in arrays, maps and nested records;
// any of them holds an Avro string too, as its text (2024-03-10), as
// hamba/avro reads and writes it. Times are cut to the schema's unit. A
// value that is not a valid civil value (the zero civil.Date, February
// 30, hour 24) fails the write, naming the field and the record, as does
// a date beyond an Avro date; a time-micros or time-millis outside
// [00:00, 24:00), which no civil.Time holds, fails the read with an
// error of kind container.ErrRange naming the field, the file and the
// record. hamba/avro has no codec for the civil types at those logical
// types, so such a struct type is decoded and encoded through a stand-in
// type built for it (the civil fields as time.Time and time.Duration),
// each record converted on the way; types without civil fields cost
// nothing more. A recursive type holding civil fields is refused when the
// read opens a file or Write is built. Element types holding civil.Date
// are registered with RegisterType (see Decimals).
//
// WithWindowedWrites writes a set of files for each window and pane of
// the input, committed as each pane fires, with names that carry the
// window and the pane ("part-20261203T150400.000Z-20261203T150500.000Z-
// pane-0-00000-of-00001"): the way to write an unbounded input, such as
// a WatchForNewFiles, which the default write, finishing in one step
// after all its input, cannot. WithDestination routes each element to
// its own files, under a destination appended to the prefix, in either
// mode. Write's documentation has the options, the file names and the
// commit protocol.
package avroio
