// Package filesource is Beam Java's FileBasedSource for Go: what every
// splittable file format shares, on top of package offsetsource. A format
// (avroio's container files, newline-delimited text, ...) implements a
// small Format; this package matches file patterns, opens files at any
// offset on any Beam filesystem, checks that files did not change, watches
// patterns for new and updated files, and counts it all in Beam metrics.
//
// Dependencies point one way: sdf <- offsetsource <- filesource <- the
// formats.
//
// # A format
//
// A Format[T] opens a reader of records of type T on a File from a byte
// offset, and says how small an initial bundle may be:
//
//	type Format[T any] interface {
//		Open(ctx context.Context, f *File, start, end int64) (offsetsource.Reader[T], error)
//		MinBundleSize() int64
//	}
//
// The reader follows offsetsource's contract: records in offset order,
// each with its offset and whether it is a split point (a record a reader
// opened at an earlier offset would return first), starting at the first
// split point at or after start. File.OpenAt(off) gives the file's bytes
// from off, without reading those before it. A Format value travels to the
// workers in every source, so it is a struct with exported fields (its
// configuration); register it with Register[T, F]() in an init function.
// The tests of this package hold a complete one, Lines (newline-delimited
// records, a split point at each line's first byte), checked with sdftest's
// exhaustive and concurrent checks and in Prism pipelines.
//
// Source[T, F] is the byte range of one file read by F: an
// offsetsource.Source, the element of the read's splittable DoFn. Read,
// ReadAll and ReadFiles (patterns at construction, patterns in a
// PCollection, fileio.ReadableFiles) and WatchForNewFiles build pipelines
// of it; offsetsource/sourcetest's FileSubject gives an sdftest.Subject
// over a real file, so that anyone can check a format's splitting (in a
// package of its own, so that this one links no test harness).
//
// # Options
//
// Options are typed by transform: Read takes ReadOptions, ReadAll
// ReadAllOptions, ReadFiles ReadFilesOptions, the watch WatchOptions and
// MatchNewFiles MatchOptions, and each option implements the interfaces of
// the transforms it applies to (WithMetricsNamespace all of them;
// WithDesiredBundleSize and WithOutputType the reads of records;
// WithEmptyMatch Read and ReadAll; WithMatchesManyFiles Read;
// WithMatchUpdatedFiles the watch), so that an option given to a transform
// it does not apply to does not compile. A value that cannot work panics
// when the pipeline is built, naming the transform and the option
// (filesource.Read: WithDesiredBundleSize(0): the desired bundle size must
// be positive).
//
// # Patterns
//
// A pattern is a path or glob on any Beam filesystem whose package the
// program imports, as with Beam's textio: local paths need no import; for
// gs:// add
//
//	import _ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs"
//
// or _ "github.com/sdfio/sdfio/offsetsource/filesource/gcsrange", which
// imports it and reads objects in ranged requests; memfs://, s3:// and the
// others, their package. This package links no filesystem but the local
// one, so a program that reads no gs:// links no Cloud Storage client.
// *, ? and [...] are matched by the
// filesystem. Brace groups ({a,b}, nested, several) are matched by this
// package on every filesystem, because none of Beam Go's understands them
// (its local filesystem takes { literally). A pattern that stands for at
// most MaxBraceListings (1,024) patterns is expanded and each expansion
// listed, its files merged: gs://b/logs/{2024-01-01,2024-01-02}/* lists
// those two prefixes and nothing else. A pattern with more alternatives
// (eleven groups {a,b} make 2,048) is not expanded, and there is no limit
// on them: as Java's FileSystems do, the filesystem lists what lies under
// the pattern's fixed part (up to the directory of its first group), one
// listing for each number of directory levels the rest can have, and this
// package keeps the names the whole pattern matches. There, *, ? and
// [...] after the first group never match a / (they never do on the local
// filesystem); and a pattern that cannot be listed so is refused with an
// error naming it and why, never matched in part: a group in the scheme or
// the bucket, a [...] that holds a group, or on gs:// two * that meet
// across a brace (Beam's gcs filesystem reads ** as crossing directories).
// A { without its closing }, and the escapes \{ \} \, are literal
// characters. Local names are cleaned (./d/a.txt is d/a.txt), and each
// file is matched once. HasWildcard says whether a pattern has a wildcard in this
// sense; a pattern without one (an unclosed brace, say) is never an
// allowed empty match under EmptyMatchAllowIfWildcard. Directories that a
// glob matches are skipped; a directory given as the pattern itself is an
// error of kind ErrIsDirectory.
//
// WithEmptyMatch sets what a pattern that matches nothing means, with
// Java's meanings: EmptyMatchDisallow (Read's default) is an error of kind
// ErrNoMatch naming the pattern that fails the pipeline when it runs, as in
// Java (Read matches the pattern again in the pipeline when it matched
// nothing while the pipeline was built; ReadAll and WithMatchesManyFiles
// match there anyway),
// EmptyMatchAllow reads nothing, EmptyMatchAllowIfWildcard (ReadAll's
// default) reads nothing if the pattern has a wildcard.
//
// # Opening files
//
// A reader of the range [A, B) of a file opens it once and reads from about
// A on, never the bytes before: local files are read with ReadAt; gs://
// (with package gcsrange imported) and schemes registered with
// RegisterRangeReader are read with ranged
// requests of growing size (64 KiB, doubling to 8 MiB); other filesystems
// through Beam's registry, seeking where their stream can, else reading and
// discarding. A file never reads past the size it was matched with.
//
// A file that cannot be opened (gone, a directory, no access) is an *Error
// of kind ErrOpen (errors.Is also sees the cause, such as fs.ErrNotExist),
// never a format's "truncated".
//
// # Files that change
//
// Matching records each file's size and modification time (Metadata), and
// every range checks them when it opens the file: in Read, ReadAll and
// ReadFiles a file whose size or modification time (to the millisecond,
// where its filesystem has one) changed since it was matched fails the
// read with an error of kind ErrChanged naming the file and both states
// (ChangeFail). So a file appended to or replaced between building the
// pipeline and running it, or while it is read, is an error, never a
// partial or mixed read. (Java's FileBasedSource instead matches when the
// runner splits the source and reads to the size it saw then; Read here
// matches when the pipeline is built, to plan the read, and detects the
// change instead.) The check is made when a range
// opens its file; a file rewritten in place while a range is being read
// can still show the reader other bytes, which formats reject as corrupt.
// The watch reads a file as the poll saw it (ChangeReadAsMatched), because
// its next poll sees the change (see WatchForNewFiles).
//
// # Metrics
//
// In the namespace WithMetricsNamespace names (Namespace by default), besides
// offsetsource's records, bytes_read, splits_accepted and splits_refused:
// files_matched (files matched in the pipeline by ReadAll,
// WithMatchesManyFiles and ReadFiles), ranges_read (ranges opened: initial
// bundles and the pieces dynamic splits made), and the watch's
// watch_polls, watch_new_files, watch_updated_files, watch_files_waiting,
// watch_files_skipped, watch_changed_files_ignored and
// watch_empty_files_skipped (see WatchForNewFiles), and, for reads
// WithBadInput, bad_inputs (offsetsource.BadInput elements output).
//
// # Bad files
//
// By default any error reading a file fails the read. WithBadInput gives
// the read a dead-letter output instead: the ranges of files that could
// not be read because the file is bad (as its Format says, BadFormat, or
// because it changed, is a directory or is gone) go there as
// offsetsource.BadInput elements naming the file, the offset, the records
// lost and the error, and the read goes on. Errors of the filesystem still
// fail the read, for the runner to retry it.
//
// # Restarting a watch
//
// A watch keeps the files it has read in its restriction, which lives as
// long as the job: a new job (a failed streaming job submitted again) has
// none, and reads every file its pattern matches again, as Beam Java's
// Watch does. WithSkipOlderThan and WithSkipListed tell it which files an
// earlier job read.
package filesource
