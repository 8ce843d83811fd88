package avroio

import (
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/offsetsource"
)

// BadFile is an element of the dead-letter output of ReadWithBadFiles,
// WatchForNewFilesWithBadFiles and WatchAllForNewFilesWithBadFiles: a byte
// range of an Avro file whose records were not read, and why.
//
//   - Input is the file's path.
//   - Offset is the byte offset where the file was seen bad: the offset of
//     the block the error is in, or of the header's end for an error of
//     the header or the schema; -1 when unknown.
//   - The records not read are those of the blocks starting in
//     [Start, End), but for the first RecordsRead records of the block at
//     Start (read, and in the records' output, before the error).
//   - Error is the error's text, the cause first: "avro container <file>
//     at byte <offset> (block at byte <b>, record <r>): <kind>: <what was
//     wrong>", naming the field where the error is about one.
//
// Every record of a file is either read once or covered by one BadFile.
// Each range of a file is read on its own (an initial bundle of
// WithDesiredBundleSize bytes, a piece a runner split off), and reports
// its own losses: a file whose schema does not fit the record type gives
// one BadFile per range, together covering the file.
type BadFile = offsetsource.BadInput

// ReadWithBadFiles is Read (ReadGeneric with t RecordType) with a
// dead-letter output: it returns the records, and a PCollection of
// BadFile, one for each part of a file that could not be read because the
// file is bad, instead of failing the pipeline:
//
//   - a block that is corrupt (data that does not decode, a checksum or
//     sync marker that does not match, a length over WithMaxAlloc, a value
//     the record type cannot hold): the records before it are read once, a
//     BadFile covers the block, and the read goes on at the next sync
//     marker of the file, then with the other files;
//   - a file whose schema the record type (or WithReaderSchema) does not
//     fit, a file that is not Avro, a file whose header is corrupt: the
//     whole file (its range) goes to the dead letter;
//   - a file that changed since it was matched, or is gone.
//
// Errors that are not the file's fault (the filesystem failed to read, the
// job was cancelled) still fail the bundle, for the runner to retry it:
// nothing is skipped that a retry could read. The bad files are counted in
// bad_inputs and logged at WARN.
//
//	events, bad := avroio.ReadWithBadFiles(s, "/data/events-*.avro", reflect.TypeFor[Event]())
//	debug.Print(s, bad) // or write them where an operator looks
//
// Read, without a dead letter, fails on the first bad file: for a batch
// job, whose result would lack records, that is the default.
func ReadWithBadFiles(s beam.Scope, filepattern string, t reflect.Type, opts ...ReadOption) (records, bad beam.PCollection) {
	s = s.Scope("avroio.ReadWithBadFiles")
	records = read(s, "avroio.ReadWithBadFiles", filepattern, t, opts, &bad)
	return records, bad
}

// WatchForNewFilesWithBadFiles is WatchForNewFiles with the dead-letter
// output of ReadWithBadFiles: a corrupt file, or one whose schema no
// longer fits the record type, goes to the BadFile output, and the watch
// goes on with the next files. For a streaming job this is the way to
// keep one bad file from stopping the job: without it, the file's error
// fails the bundle, which a streaming runner retries for ever (Dataflow)
// or which ends the job (Prism, Flink without restarts).
func WatchForNewFilesWithBadFiles(s beam.Scope, filepattern string, t reflect.Type, pollInterval time.Duration, until Termination, opts ...WatchOption) (records, bad beam.PCollection) {
	s = s.Scope("avroio.WatchForNewFilesWithBadFiles")
	if strings.TrimSpace(filepattern) == "" {
		panic("avroio.WatchForNewFilesWithBadFiles: empty file pattern")
	}
	filesystem.ValidateScheme(filepattern)
	records = watchAndRead(s, "avroio.WatchForNewFilesWithBadFiles", beam.Create(s, filepattern), t, pollInterval, until, opts, &bad)
	return records, bad
}

// WatchAllForNewFilesWithBadFiles is WatchAllForNewFiles with the
// dead-letter output of WatchForNewFilesWithBadFiles.
func WatchAllForNewFilesWithBadFiles(s beam.Scope, patterns beam.PCollection, t reflect.Type, pollInterval time.Duration, until Termination, opts ...WatchOption) (records, bad beam.PCollection) {
	s = s.Scope("avroio.WatchAllForNewFilesWithBadFiles")
	records = watchAndRead(s, "avroio.WatchAllForNewFilesWithBadFiles", patterns, t, pollInterval, until, opts, &bad)
	return records, bad
}
