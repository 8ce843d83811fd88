// Package container reads Avro object container files from any byte offset:
// the framing layer under avroio's splittable reads. It has no Beam code.
//
// Neither Go Avro library can start reading a container file in the middle,
// which is what a split restriction [start, end) needs. This package parses
// the header (always read from offset 0), finds the first block whose first
// byte lies at or after start by searching for the file's sync marker,
// decompresses each block, and decodes its datums with hamba/avro.
//
// # Layers
//
// ReadHeader parses the magic "Obj\x01", the metadata map (avro.schema,
// avro.codec, user metadata) and the 16-byte sync marker.
//
// BlockReader (Open, NewBlockReader) yields blocks: each with the offset of
// its first byte (the split point), its record count, its size in the file,
// and its decompressed data. The trailing sync marker of every block is
// checked. An Opener gives the reader a stream that starts at a given
// offset — a seek on a local file, a ranged read on an object store — so a
// reader that starts deep in a file reads the header and then nothing before
// start-16. Codecs: null, deflate, snappy (its CRC32 checked), zstandard,
// bzip2, xz, and Avro C's lzma; RegisterCodec adds more.
//
// Reader[T] decodes records into T: a struct (avro tags or field names),
// map[string]any, or any type hamba/avro supports. An optional reader schema
// is resolved against each file's writer schema. Its Next returns each record
// with the offset of its block and whether it is the first record of the
// block, and BlockInfo gives the block's size and record count: the shape of
// an offset-based source's reader. With Options.DecodeAhead the reader reads,
// decompresses and decodes the records that follow on a goroutine of its
// own, a bounded few chunks ahead of the caller, with exactly the results
// (records, offsets, split points, errors and where they surface) of the
// sequential reader; Close stops that goroutine.
//
// Local timestamps (local-timestamp-millis, local-timestamp-micros) decode
// as zone-free wall clocks, as avroio's generic Records do: a time.Time in
// UTC whose UTC fields are the wall clock, the same on every machine
// whatever its TZ (hamba/avro alone gives a time.Local, an hour off inside
// a daylight-saving gap), and Writer.Append writes a Time's UTC fields.
// hamba/avro decodes by a copy of the schemas with these relabelled
// timestamp-millis/micros, so in generic values (map[string]any) a union's
// local-timestamp branch is a bare time.Time, as a timestamp branch is,
// not hamba/avro's {"long.local-timestamp-millis": v}. A union of both
// timestamp-millis and local-timestamp-millis (or -micros) cannot be read
// or written typed: an ErrSchema error names the field.
//
// A reader schema that does not resolve against the writer's is an
// ErrSchema error naming the fields responsible by their path from the
// top record ("driver.id", "stops[].at" for a field of an array's records,
// "tags{}" for a map's values) and what each side has there.
//
// # Offsets and split points
//
// The block at offset B is preceded by the sync marker at B-16; the first
// block is preceded by the header's own marker. A reader asked to start at
// start yields the blocks whose first byte is at or after start, so the
// readers of [A, S) and [S, B) together read the blocks of [A, B), each once.
// Only the first record of a block is a split point; the others carry their
// block's offset.
//
// # Bad input
//
// Malformed input is never skipped: every problem is an *Error naming the
// file, the byte offset, the block and record where it was found, and a kind
// to test with errors.Is: ErrBadMagic, ErrTruncated (a header or block cut
// short, a block shorter than declared), ErrBadHeader, ErrBadBlock,
// ErrSyncMismatch, ErrRecordCount (the records a block declares do not use
// exactly its bytes), ErrChecksum, ErrCorruptData, ErrLimit, ErrUnknownCodec
// and ErrSchema. Readers stay failed after an error.
//
// A sync marker damaged inside a file fails the reader that reads the block
// before it. A reader that starts its search just before the damaged marker
// cannot tell it from data and starts at the next block; in a split read the
// reader of the preceding range still fails, so the read as a whole fails.
//
// # Hostile lengths
//
// Every length read from a file is checked against Limits before memory is
// allocated for it: metadata sizes, the number of metadata entries
// (MaxHeaderEntries) and the schema's length (MaxSchemaSize: parsing a
// schema takes about 45 times its length), so that a hostile header costs
// memory proportional to MaxAlloc; block sizes (allocated exactly when the
// input knows its size, else in chunks that grow with what actually
// arrives); decompressed sizes (known up front for snappy, xz and lzma, and
// for zstandard frames that record it; otherwise the output grows to 1 MiB,
// and a block past that is counted without being kept, refused over
// MaxAlloc, and decoded again into storage of exactly its size, so that a
// decompression bomb is refused having taken about 1 MiB and a block under
// the limit takes about its own size, plus what the codec's format makes
// its decoder hold: zstandard's window, LZMA's dictionary, bzip2's tables);
// record counts (at least the schema's minimum encoded size per
// record), string, bytes and array lengths (through hamba/avro's
// MaxByteSliceSize and MaxSliceAllocSize). Where hamba/avro would allocate
// or loop without bound — arrays of zero-width items, recursive schemas,
// skipped arrays and maps — the reader first validates the block with a
// walk that allocates nothing (Options.Validate; ValidateAlways validates
// every block, which also keeps any record of a bad block from being
// returned, at about 40% more decoding time). What one record decodes into
// (its strings, bytes, arrays, maps and fixed values, booleans and nulls
// counted per item) is estimated before it is decoded and bounded by
// MaxAlloc too (budget.go). Compiling a schema for a typed read costs
// hamba/avro the square of a record's fields or a union's branches (a
// union of 10,000 records: 3.4 GB allocated): a schema whose estimated
// cost (CompileCost) exceeds MaxCompileCost times MaxAlloc is refused
// (ErrLimit) when the reader is made; parsed writer schemas are cached
// per process by their text, so each is compiled once. Schema errors name
// their cause (JSON nested deeper than MaxSchemaJSONDepth, text that is
// not JSON) and never quote more than a few hundred bytes of the schema.
//
// # Headers read once
//
// HeaderCache (and Headers, the process's own) keeps recently parsed
// headers by FileVersion (path, size and whatever else identifies the
// file's version), so the readers of the many ranges of one file parse its
// header once per process; concurrent opens of one version wait for the
// first. A cached header is used only once the file is seen to end its
// header with the same sync marker, so a file replaced under the same name
// and size is read anew.
//
// # Writing
//
// Writer (NewWriter) writes container files: the header (magic, avro.schema
// as given, avro.codec, user metadata sorted by key, a random sync marker),
// then blocks cut when their serialized records reach the sync interval
// (64000 bytes by default, as in Avro Java), each in one Write call to the
// underlying writer. Codecs: null, deflate (levels 1-9), snappy (with the
// CRC32 of the uncompressed data), zstandard (levels up to 22) and xz
// (WritableCodecs). Records are encoded by hamba/avro (Append) or handed
// over already encoded (AppendEncoded). A record that does not fit the
// schema is an error for that record only; a failed write is final.
// Avro C's avrocat and python3-avro read what it writes.
package container
