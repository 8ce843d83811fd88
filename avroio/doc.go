// Package avroio reads and writes Avro object container files in Beam Go
// pipelines. Reads split files at sync markers and let runners rebalance
// running reads (dynamic splitting), on any Beam filesystem.
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
//     exactly. Every exported field must name a field of the schema records
//     are read with (tag it `avro:"-"` to leave it out); otherwise the read
//     fails, naming the field, instead of silently decoding zero values.
//     Beam Go's avroio matched fields through JSON: a struct with only
//     `json` tags must gain `avro` tags. The type must be registered with
//     beam.RegisterType, as every element type of a pipeline. Decimals go
//     into *big.Rat fields (a nullable decimal into **big.Rat); a big.Rat
//     value, and a *big.Rat for a nullable decimal, which hamba/avro would
//     read as 0, fail the read naming the field. This package registers
//     big.Rat with Beam's schema coder, so decimals keep their exact value
//     between stages.
//   - Record (RecordType; what ReadGeneric yields), a map[string]any of the
//     record's fields with hamba/avro's generic values (see Record), whose
//     Beam coder keeps every value and type exactly;
//   - any other type hamba/avro decodes a record into (map[string]any, say,
//     which Beam encodes as JSON between stages). Beam Go's avroio also took
//     reflect.TypeOf("") for records as JSON text; here, read Records and
//     encode them as needed.
//
// With ReaderSchema, each file's records are read by Avro's schema
// resolution from the file's writer schema to the reader schema: fields
// only the reader has take their defaults, fields only the writer has are
// skipped, numbers promote, names match by alias. A file whose schema
// cannot be resolved fails the read, naming the file.
//
// # Files and patterns
//
// A pattern is a path or glob on any Beam filesystem. Local paths and gs://
// work without further imports; others (memfs://, s3://) need their
// filesystem package imported, as in any Beam Go pipeline. Read lists the
// matching files while the pipeline is built (so the process that builds it
// must be able to list them) and puts them in the pipeline;
// with MatchesManyFiles (Java's withHintMatchesManyFiles) it lists them in a
// step of the pipeline instead, as ReadAll does, for patterns of tens of
// thousands of files. ReadAll expands each pattern of a PCollection in the
// pipeline and shuffles the list of files (file names only; records are
// never shuffled). ReadFiles reads fileio.ReadableFiles (from Beam Go's
// io/fileio); a file gzip-compressed as a whole cannot be split and is an
// error.
//
// A pattern that matches no file is treated as EmptyMatch says, with Java's
// meanings: EmptyMatchDisallow (Read's default) makes it an error (Read
// panics while building the pipeline; with MatchesManyFiles, and in
// ReadAll, the pipeline fails); EmptyMatchAllow reads nothing;
// EmptyMatchAllowIfWildcard (ReadAll's default) reads nothing if the
// pattern has a glob wildcard and is an error otherwise. Directories that a
// local pattern matches are skipped. An empty (0-byte) file holds no
// records.
//
// WatchForNewFiles and WatchAllForNewFiles go on polling patterns and read
// each new file once, as an unbounded PCollection (see their docs).
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
// read of the block's records.
//
// A file is cut into initial bundles of DesiredBundleSize bytes (64 MiB by
// default), none smaller than MinBundleSize (128,000 bytes by default, twice
// Avro's default sync interval; a file smaller than that is one bundle).
//
// A reader of a range reads the file's header, then starts 16 bytes before
// A and searches for the sync marker. It does not read the bytes between
// the header and A: it seeks where the filesystem's stream can seek (local
// files), makes ranged reads on gs:// (and on schemes registered with
// RegisterRangeReader), and only where neither is possible (memfs://) reads
// and discards them.
//
// All codecs of the Avro specification are read: null, deflate, snappy
// (its CRC32 checked), zstandard, bzip2 and xz, and Avro C's lzma.
//
// # Errors
//
// Nothing is skipped: a file that cannot be read fails the read with an
// error that names the file, the byte offset, the block and what was wrong
// (see package avroio/container for the kinds: bad magic, truncation, sync
// marker mismatch, record count, checksum, corrupt data, lengths over the
// MaxAlloc limit, unknown codec, schema errors). MaxAlloc bounds what one
// length field in a file may make the reader allocate.
//
// # Metrics
//
// Reads count, in the Beam metrics namespace "sdfio/avroio" (Namespace):
// records, bytes_read (the bytes of the blocks whose records were read),
// splits_accepted and splits_refused (dynamic splits of running reads),
// ranges_read (ranges opened: initial bundles and split-off pieces) and
// files_matched (files matched in the pipeline by ReadAll, MatchesManyFiles
// and ReadFiles).
//
// # Writing
//
// Write writes a PCollection of structs or Records as Avro container files
// named from a prefix and a shard template, as Beam Java's AvroIO.write:
// each bundle (or each of NumShards shards) writes a temporary file, and a
// finalize step renames the committed ones, so files appear whole or not
// at all. Its documentation has the options, the file names and the commit
// protocol.
package avroio
