package avroio

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths work without an import
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

// Defaults of the write options.
const (
	// DefaultShardNameTemplate is Beam Java's default shard name template.
	DefaultShardNameTemplate = "-SSSSS-of-NNNNN"
	// DefaultWriteCodec is the codec Write uses unless WithCodec says otherwise:
	// snappy, as in Beam Java's AvroIO.
	DefaultWriteCodec = "snappy"
	// DefaultSyncInterval is the default number of bytes of serialized
	// records per block: container.DefaultSyncInterval, as in Avro Java.
	DefaultSyncInterval = container.DefaultSyncInterval
)

// WriteOption configures Write. The options of Write alone return a
// WriteOption; WithMetricsNamespace, an option of every transform, is one
// too. A read's option is not a WriteOption: given to Write, it does not
// compile.
type WriteOption interface{ applyWrite(*writeOptions) }

// writeOnlyOption is an option of Write alone.
type writeOnlyOption func(*writeOptions)

func (f writeOnlyOption) applyWrite(o *writeOptions) { f(o) }

type writeOptions struct {
	numShards    int
	suffix       string
	template     string
	codec        string
	level        int
	syncInterval int
	maxBlock     int64
	meta         map[string][]byte
	tempDir      string
	staleAge     time.Duration
	namespace    string
	windowed     bool
	dest         *destFunc    // WithDestination's function, checked by Write
	destType     reflect.Type // its argument's type
	destCall     string       // WithDestination's call, for errors
	// fileCalls are the calls of the options that shape the files (codec,
	// level, sync interval, block size, metadata), which the container
	// writer checks: its errors name them.
	fileCalls []string
	err       error // the first option that cannot work
}

func (o *writeOptions) fail(format string, args ...any) {
	if o.err == nil {
		o.err = fmt.Errorf(format, args...)
	}
}

func (o *writeOptions) setNamespace(ns string) {
	o.namespace = ns
	if ns == "" {
		o.fail(`WithMetricsNamespace(""): an empty metrics namespace`)
	}
}

// fileOption is an option that shapes the files, noted as call.
func fileOption(call string, f func(*writeOptions)) WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.fileCalls = append(o.fileCalls, call); f(o) })
}

// WithNumShards sets the number of files: exactly n (empty files
// included), or for 0, the default, as many as the runner makes bundles
// (one file each). Fixed sharding groups the records by shard, a shuffle
// of every record; prefer 0 unless the number of files matters. With
// WithWindowedWrites, it is the number of files per window, pane and
// destination (1 for 0, the default), and shards without records have
// no file; with WithDestination, the number of files per destination.
func WithNumShards(n int) WriteOption {
	return writeOnlyOption(func(o *writeOptions) {
		o.numShards = n
		if n < 0 {
			o.fail("WithNumShards(%d): a negative number of shards", n)
		}
	})
}

// WithSuffix is appended to every file name, after the shard name (e.g.
// ".avro").
func WithSuffix(s string) WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.suffix = s })
}

// WithShardNameTemplate sets the part of a file name between the prefix
// and the suffix (DefaultShardNameTemplate when not set): each run of 'S'
// is replaced by the shard index and each run of 'N' by the number of
// shards, zero-padded to the run's length (wider numbers are not cut); all
// other characters are kept. A template without 'S' suits one file only.
func WithShardNameTemplate(t string) WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.template = t })
}

// WithCodec sets the block codec by its Avro name: "null", "deflate",
// "snappy" (the default), "zstandard" or "xz" (container.WritableCodecs),
// at the codec's default level.
func WithCodec(name string) WriteOption {
	return fileOption(fmt.Sprintf("WithCodec(%q)", name), func(o *writeOptions) { o.codec, o.level = name, 0 })
}

// WithDeflateLevel selects the deflate codec at level 1 (fastest) to 9
// (smallest); its default is 6.
func WithDeflateLevel(level int) WriteOption {
	return fileOption(fmt.Sprintf("WithDeflateLevel(%d)", level), func(o *writeOptions) { o.codec, o.level = "deflate", level })
}

// WithZstandardLevel selects the zstandard codec at a level of up to 22
// (see container.WriterOptions.Level); its default is 3.
func WithZstandardLevel(level int) WriteOption {
	return fileOption(fmt.Sprintf("WithZstandardLevel(%d)", level), func(o *writeOptions) { o.codec, o.level = "zstandard", level })
}

// WithSyncInterval sets the number of bytes of serialized records after
// which a block ends (DefaultSyncInterval when not set), from
// container.MinSyncInterval to container.MaxSyncInterval.
func WithSyncInterval(bytes int) WriteOption {
	return fileOption(fmt.Sprintf("WithSyncInterval(%d)", bytes), func(o *writeOptions) { o.syncInterval = bytes })
}

// WithMaxBlockSize bounds the blocks of the files (their serialized
// records, and those compressed), by default container.DefaultMaxAlloc:
// the largest block Read, with its default WithMaxAlloc, reads. So what
// Write writes with its defaults, Read reads with its defaults: a record
// that would take a block past the bound ends the block first, and a
// record that alone serializes to more fails the write naming it and its
// size (as a record the schema cannot hold does: see "When a write
// fails"). Raise it together with the readers' WithMaxAlloc.
func WithMaxBlockSize(bytes int64) WriteOption {
	return fileOption(fmt.Sprintf("WithMaxBlockSize(%d)", bytes), func(o *writeOptions) { o.maxBlock = bytes })
}

// WithMetadata adds user metadata to every file's header. Keys starting
// with "avro." are reserved. Several WithMetadata options add up; a later
// value for a key replaces an earlier one.
func WithMetadata[V ~string | ~[]byte](m map[string]V) WriteOption {
	return fileOption("WithMetadata(...)", func(o *writeOptions) {
		if o.meta == nil {
			o.meta = map[string][]byte{}
		}
		for k, v := range m {
			o.meta[k] = []byte(v)
		}
	})
}

// WithTempDirectory sets the directory under which the write makes its
// temporary directory (by default the directory of the prefix). It must
// be on the same filesystem as the prefix, so that files can be renamed.
func WithTempDirectory(dir string) WriteOption {
	return writeOnlyOption(func(o *writeOptions) { o.tempDir = dir })
}

// WithStaleTempAge sets how long the temporary directory of another write
// beside this one's must have gone unmodified before this write takes it
// for the debris of a write that is no longer running and removes it
// (see "When a write fails"): DefaultStaleTempAge (7 days) unless given.
// It must be positive; set it below the longest a write of yours may run
// between two of its steps and a live write's files may be removed (it
// then fails, naming the file).
func WithStaleTempAge(d time.Duration) WriteOption {
	return writeOnlyOption(func(o *writeOptions) {
		o.staleAge = d
		if d <= 0 {
			o.fail("WithStaleTempAge(%v): the age must be positive", d)
		}
	})
}

// writeConfig is what every step of a write needs; it travels to the
// workers inside the DoFns.
type writeConfig struct {
	// Prefix, Template and Suffix make the final names.
	Prefix, Template, Suffix string
	// Schema is the writer schema's JSON.
	Schema string
	// StructSchema, when set, is the schema hamba/avro encodes elements
	// other than Records by: Schema with its local timestamps relabelled as
	// timestamps (same encoding; see localtime.go).
	StructSchema string
	// Codec, Level, SyncInterval and Metadata configure container.Writer.
	Codec        string
	Level        int
	SyncInterval int
	Metadata     map[string][]byte
	// MaxBlockSize bounds a block (container.WriterOptions.MaxBlockSize).
	MaxBlockSize int64
	// NumShards is the fixed number of files, or 0.
	NumShards int
	// TempDir is the write's temporary directory, ending in "/".
	TempDir string
	// StaleTempAge is WithStaleTempAge: how old the newest file of
	// another write's temporary directory must be for this write to
	// remove it (write_temp.go).
	StaleTempAge time.Duration
	// Namespace is the Beam metrics namespace (WithMetricsNamespace).
	Namespace string
	// Windowed is WithWindowedWrites: a set of files per window and pane
	// (see write_windowed.go).
	Windowed bool
	// Dynamic is WithDestination: each file belongs to a destination,
	// appended to Prefix.
	Dynamic bool
}

// counter is the named counter of the write's metrics namespace.
func (c writeConfig) counter(name string) beam.Counter {
	ns := c.Namespace
	if ns == "" { // a writeConfig not built by the options (tests)
		ns = Namespace
	}
	return beam.NewCounter(ns, name)
}

func (c writeConfig) writerOptions() container.WriterOptions {
	return container.WriterOptions{Codec: c.Codec, Level: c.Level, SyncInterval: c.SyncInterval, MaxBlockSize: c.MaxBlockSize, Metadata: c.Metadata}
}

// fileResult describes a temporary file a committed bundle wrote, or
// (Err set) records the bundle could not write.
type fileResult struct {
	// Temp is the file's temporary path.
	Temp string
	// Shard is the shard index under fixed sharding, -1 otherwise.
	Shard int
	// Records and Bytes are the records in the file and its size.
	Records, Bytes int64
	// Dest is the file's destination (WithDestination), "" without one.
	Dest string
	// Err, when set, says why the bundle wrote no file: a record it could
	// not encode, or another fault of the data rather than of the
	// filesystem. The finalize step then commits nothing (see failWrite).
	Err string
}

// Write writes the elements of col, encoded by the Avro schema (JSON), to
// Avro object container files whose names start with prefix, with the
// semantics of Beam Java's AvroIO.write, and returns the PCollection of the
// names of the files written (strings), available once all are in place:
//
//	avroio.Write(s, "gs://bucket/out/part", schemaJSON, records,
//		avroio.WithNumShards(4), avroio.WithSuffix(".avro"))
//
// writes gs://bucket/out/part-00000-of-00004.avro ... part-00003-of-00004.avro.
// Invalid options or schemas, and elements of a Go type that cannot hold
// the schema (a string for a record schema, a struct lacking a field the
// schema needs without a default), panic at construction, as elsewhere in
// Beam Go.
//
// # Elements
//
// Elements are Go structs (fields matched by `avro` tags or names, as
// hamba/avro does, and as Read matches them) or generic records: Record
// values, in the form ReadGeneric returns them (see Record; unions whose
// branches share a Go type are one-key maps naming the branch, so a Record
// read is written back by the same branch). Records are encoded by this
// package's own encoder; other types by hamba/avro, except that local
// timestamps are written by the package's rule, the UTC fields of the
// time.Time, for every type and on every worker whatever its time zone
// (see "Local timestamps" in the package documentation; a struct cannot
// write a union of both a timestamp and a local timestamp of one unit,
// and is refused at construction, naming the field). Other named map types
// work too, but Beam Go gives them its JSON coder, which turns numbers
// into float64 wherever the PCollection is encoded (across a shuffle, or
// between stages), and such records then fail to encode; Record's own
// coder keeps every value's type.
//
// # Options
//
// WithNumShards(n) writes exactly n files, empty ones included (records are
// spread round-robin from a random start, grouped by shard with a
// GroupByKey of encoded records); WithNumShards(0), the default, lets the
// runner decide: one file per bundle, no shuffle of records, and one empty
// file when the input is empty. WithShardNameTemplate (default
// "-SSSSS-of-NNNNN": each run of S becomes the shard index, each run of N
// the number of shards, zero-padded to the run's length) and WithSuffix
// complete the names. WithCodec (default "snappy", as in Java),
// WithDeflateLevel, WithZstandardLevel, WithSyncInterval (bytes of
// serialized records per block, default 64000), WithMaxBlockSize (the
// largest block, by default the largest Read reads with its defaults) and
// WithMetadata shape the files. WithTempDirectory moves the temporary
// files; WithMetricsNamespace, the metrics. Values that cannot work panic
// when the pipeline is built, naming the option.
//
// # Committing files
//
// Files appear whole or not at all. Each bundle writes its file under a
// name of its own in a temporary directory (".temp-sdfio-<random>" beside
// the prefix unless WithTempDirectory says otherwise); a new name for every
// attempt, so a retried bundle never writes over, or adds to, another
// attempt's file. Only bundles the runner commits pass their file names on,
// through a Reshuffle, to a single finalize step, which renames them to
// their final names (making the local directory of the prefix where it is
// missing) and then deletes everything else in the temporary directory:
// the files of failed or retried attempts. Renames use the filesystem's
// Rename (or Copy and Remove), so any Beam filesystem works; a finalize
// step that is retried after renaming some files finds them already in
// place.
//
// # When a write fails
//
// A failed write leaves no final file and no temporary directory, on
// every runner, including Prism v2.77, which now and then runs the
// finalize step after a failed bundle, with the results of the bundles
// that committed (its failure handling advances the watermark as if the
// failed bundle had finished with no output):
//
//   - A record the schema cannot hold (or one past a container limit)
//     does not fail its bundle: the bundle drops its file, skips its other
//     records and passes the error on, and the finalize step, seeing it,
//     removes every temporary file (other bundles' included) and fails the
//     pipeline with that error. Such a record fails every attempt, so no
//     retry is lost; the pipeline fails when the write's input is all
//     consumed rather than at the first bad record.
//   - A fault of the filesystem (creating, writing or committing a
//     temporary file) fails the bundle, which removes its file, so that a
//     runner can retry it. The finalize step commits only with evidence
//     that no bundle is missing: under WithNumShards(n), a file for each of the
//     n shards (every shard gets one, empty or not, from its own bundle);
//     with runner-determined sharding, when no bundle committed a file
//     (an empty input, or the input's bundles failed), a marker file that
//     a first step ("Begin", which every writing bundle waits for) makes
//     and that a failing bundle attempt removes, and no file of an attempt
//     left in the directory. Without that evidence it removes everything
//     and fails. (A bundle retried successfully is a committed file, so
//     the removed marker never fails a write that succeeded.)
//
// What no step can see is not covered: a bundle that fails while others
// of the same write committed, on a runner that then runs the finalize
// step anyway (Prism), commits the others' files when the failure is the
// filesystem's or another DoFn's of the bundle's stage.
//
// A job that fails in another DoFn of a writing bundle's stage (a step
// before Write returning an error) and runs no finalize step leaves the
// bundle's temporary files and Begin's marker: Beam Go calls no method of
// a DoFn whose bundle failed elsewhere, and tells no other step. A later
// non-windowed Write whose temporary directory is in the same directory
// (the prefix's, or the same WithTempDirectory) removes them, in its
// finalize step, by this rule: every directory named
// .temp-sdfio-<id>/ there (or .temp-sdfio-<id>-<id>/) but its own, whose
// newest file was modified more than WithStaleTempAge ago (7 days by
// default, DefaultStaleTempAge), files and all; nothing else. Several jobs
// may write in one directory (on Dataflow, say): a running write changes
// its directory whenever one of its bundles finishes, so a week without a
// change is a write that ended; one that did run that long between two
// bundles finds its files gone and fails naming them, rather than writing
// anything wrong. It counts in temp_files_removed, is logged (INFO, each
// directory), and when it cannot run (a filesystem that cannot say when a
// file was modified, a listing that fails) it is logged as a WARN and the
// write goes on. Beam Java's WriteFiles leaves temporary files after a
// failed pipeline.
//
// # Windowed writes
//
// Without WithWindowedWrites, Write needs a bounded input (its finalize
// step waits for all of it), and elements of other windows are written as
// if in the global window (as Beam Java's AvroIO.write without
// withWindowedWrites). WithWindowedWrites writes each window and pane of
// the input on its own, as Java's withWindowedWrites, and needs no step
// to see the whole input, so an unbounded input (WatchForNewFiles, say)
// is written as it comes: the records, encoded, are keyed by destination
// and shard and grouped by a GroupByKey, which fires under the input's
// windowing and trigger; each group, the records of one shard of one
// destination in one pane of one window, is written to a temporary file
// and renamed to its final name once the file is whole:
//
//	<prefix><destination>-<start>-<end>-pane-<index><shard name><suffix>
//
// <start> and <end> are the bounds of an interval window (fixed, sliding
// or session) in UTC to the millisecond, as 20261203T150400.000Z (no ':',
// which some filesystems refuse), or "global" instead of both for the
// global window; <index> is the pane's index in its window (0 for the one
// pane of the default trigger; early, on-time and late panes of a
// trigger count up from 0); the shard name is the shard name template
// expanded, with the number of shards of WithNumShards, or 1, the default:
// one file per window, pane and destination, in which case the records of
// a pane go through one worker. Windows of other types fail the write.
// For example, fixed windows of a minute write
// part-20261203T150400.000Z-20261203T150500.000Z-pane-0-00000-of-00001.avro.
// The GroupByKey is the input's windowing at work, as for any grouping:
// an unbounded input in the global window needs a trigger that fires, and
// records the windowing drops as late are not written.
//
// A file is visible only once whole: each group is written under a
// temporary name of its own, in a directory of its own beside the prefix
// (".temp-sdfio-<random>-<random>", or under WithTempDirectory), and
// renamed; a bundle that fails removes its temporary file and directory
// (and, on a filesystem that renames by copying, what the copy may have
// made of the final file). The final name depends only on the group,
// which a runner hands whole to a retried bundle, so a retry writes the
// same file under the same name again, never a second file. A record
// that cannot be encoded (or whose destination is refused) fails its
// bundle before any file of it is written; on a streaming runner that
// retries bundles for ever, such a record stops the pipeline there. The
// files of panes that fired before a failure stay: each pane is a commit
// of its own, as in Java. What is not done: a shard or a window with no
// records has no file (no empty files, unlike the global window's fixed
// shards), and a pane that fires with no records writes nothing; there
// is no finalize step, and so no list of all the files; the returned
// PCollection holds each file's name in its window and pane, as the file
// is committed.
//
// # Destinations
//
// WithDestination(fn) routes each element to the destination fn returns,
// a string appended to the prefix (a sub-path such as "/eu/part" under a
// prefix "/out", or a suffix of the name such as "eu" under "/out/part-";
// it must not have a ".." element or a "://"). Each destination has its
// own files, its own shards and its own shard numbering: with runner
// sharding, a file per destination per bundle, numbered 0 to n-1 of the
// destination's n files; with WithNumShards(n), exactly n files per
// destination that has records (empty ones included); windowed, as above,
// per window and pane. An empty input with destinations writes no file.
// All destinations share the write's temporary directory, commit and
// failure handling, and its options (schema, codec, template, suffix).
//
// # Metrics
//
// In namespace Namespace (or WithMetricsNamespace's): records_written and bytes_written (by the
// writing bundles; bytes are whole files, headers included),
// files_written and temp_files_removed (by the finalize step; in a
// windowed write, by the writing bundles: files committed, and temporary
// files of failed attempts removed).
func Write(s beam.Scope, prefix, schema string, col beam.PCollection, opts ...WriteOption) beam.PCollection {
	s = s.Scope("avroio.Write")
	cfg, dest, err := newWriteConfigDest(prefix, schema, col.Type().Type(), opts)
	if err != nil {
		panic(err)
	}
	if cfg.Windowed {
		return writeWindowed(s, cfg, dest, col)
	}
	if ws := col.WindowingStrategy(); ws != nil && ws.Fn != nil && ws.Fn.Kind != window.GlobalWindows {
		col = beam.WindowInto(s, window.NewGlobalWindows(), col)
	}
	var results beam.PCollection
	var dests beam.PCollection // the destinations of a write with fixed shards
	switch {
	case cfg.NumShards > 0 && dest != nil:
		keyed, seen := beam.ParDo2(s.Scope("EncodeAndShard"), &destShardFn{Config: cfg, Dest: dest}, col)
		grouped := beam.GroupByKey(s, keyed)
		results = beam.ParDo(s.Scope("WriteShards"), &writeDestShardFn{Config: cfg}, grouped)
		dests = beam.Reshuffle(s, seen)
	case cfg.NumShards > 0:
		keyed := beam.ParDo(s.Scope("EncodeAndShard"), &shardFn{Config: cfg}, col)
		// Every shard gets a group, and so a file from WriteShards, even
		// without records: the finalize step then knows that a shard
		// missing from its input is one whose writing failed.
		markers := beam.ParDo(s.Scope("ShardMarkers"), &shardMarkersFn{NumShards: cfg.NumShards}, beam.Impulse(s))
		grouped := beam.GroupByKey(s, beam.Flatten(s, keyed, markers))
		results = beam.ParDo(s.Scope("WriteShards"), &writeShardFn{Config: cfg}, grouped)
	default:
		// Begin's marker file is the evidence that lets the finalize step
		// write the one empty file of an empty input; the side input makes
		// every writing bundle wait for it (see beginFn).
		begun := beam.ParDo(s.Scope("Begin"), &beginFn{Config: cfg}, beam.Impulse(s))
		results = beam.ParDo(s.Scope("WriteBundles"), &writeBundleFn{Config: cfg, Dest: dest}, col, beam.SideInput{Input: begun})
	}
	results = beam.Reshuffle(s, results)
	if dest != nil {
		if !dests.IsValid() {
			dests = beam.CreateList(s, []string{})
		}
		return beam.ParDo(s.Scope("Finalize"), &finalizeDestsFn{Config: cfg}, beam.Impulse(s), beam.SideInput{Input: results}, beam.SideInput{Input: dests})
	}
	return beam.ParDo(s.Scope("Finalize"), &finalizeFn{Config: cfg}, beam.Impulse(s), beam.SideInput{Input: results})
}

func newWriteConfig(prefix, schema string, elem reflect.Type, opts []WriteOption) (writeConfig, error) {
	cfg, _, err := newWriteConfigDest(prefix, schema, elem, opts)
	return cfg, err
}

// newWriteConfigDest is the configuration of a write of elements of type
// elem, and WithDestination's function (nil without one).
func newWriteConfigDest(prefix, schema string, elem reflect.Type, opts []WriteOption) (writeConfig, *destFunc, error) {
	o := writeOptions{template: DefaultShardNameTemplate, codec: DefaultWriteCodec, namespace: Namespace}
	for _, opt := range opts {
		opt.applyWrite(&o)
	}
	fail := func(format string, args ...any) (writeConfig, *destFunc, error) {
		return writeConfig{}, nil, fmt.Errorf("avroio.Write to %q: %s", prefix, fmt.Sprintf(format, args...))
	}
	if o.err != nil {
		return fail("%v", o.err)
	}
	if strings.TrimSpace(prefix) == "" {
		return fail("empty prefix")
	}
	if err := validateScheme(prefix); err != nil {
		return fail("%v", err)
	}
	if o.numShards > 1 && !strings.Contains(o.template, "S") {
		return fail("WithShardNameTemplate(%q) has no S, so the %d shards of WithNumShards(%d) would share one name", o.template, o.numShards, o.numShards)
	}
	cfg := writeConfig{
		Prefix: prefix, Template: o.template, Suffix: o.suffix, Schema: schema,
		Codec: o.codec, Level: o.level, SyncInterval: o.syncInterval, Metadata: o.meta,
		MaxBlockSize: o.maxBlock, NumShards: o.numShards, Namespace: o.namespace,
		Windowed: o.windowed, Dynamic: o.dest != nil,
	}
	if o.dest != nil {
		if err := o.dest.check(o.destCall, o.destType, elem); err != nil {
			return fail("%v", err)
		}
	}
	// Everything the container writer checks (schema, codec, level, sync
	// interval, metadata keys) fails here rather than on a worker.
	w, err := container.NewWriter(io.Discard, schema, cfg.writerOptions())
	if err != nil {
		if len(o.fileCalls) > 0 {
			return fail("%s: %v", strings.Join(o.fileCalls, ", "), err)
		}
		return fail("%v", err)
	}
	w.Close()
	if err := checkElementType(elem, parsedSchema(schema)); err != nil {
		return fail("%v", err)
	}
	if err := checkWritable(elem, parsedSchema(schema)); err != nil {
		return fail("%v", err)
	}
	if elem != RecordType && elem.Kind() != reflect.Interface {
		if _, err := fitTypes(elem, parsedSchema(schema), fitWrite); err != nil {
			return fail("%v", err)
		}
	}
	if elem != RecordType {
		// Values other than Records are encoded by hamba/avro, whose
		// compiling of a schema costs the square of its records' fields
		// and unions' branches: bounded as reads bound it by default.
		if err := container.CheckCompileCost(parsedSchema(schema), "writer schema for "+elem.String(), DefaultMaxAlloc); err != nil {
			return fail("%v", err)
		}
	}
	if elem == RecordType {
		if _, err := newRecordEncoder(schema); err != nil {
			return fail("%v", err)
		}
	} else {
		// Structs (and other types hamba/avro encodes) write local
		// timestamps by the package's rule, not by the worker's zone.
		relabelled, changed, err := container.RelabelLocalTimestamps(schema)
		if err != nil {
			return fail("%v", err)
		}
		if changed {
			if _, err := cachedSchema(relabelled); err != nil {
				return fail("the schema with local timestamps relabelled does not parse: %v", err)
			}
			cfg.StructSchema = relabelled
		}
	}
	base := o.tempDir
	if base == "" {
		base = prefix[:strings.LastIndex(prefix, "/")+1]
	} else if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	cfg.TempDir = base + tempDirPrefix + randomID() + "/"
	cfg.StaleTempAge = cmp.Or(o.staleAge, DefaultStaleTempAge)
	return cfg, o.dest, nil
}

// validateScheme checks that prefix's filesystem is registered, without
// making a client for it.
func validateScheme(prefix string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	filesystem.ValidateScheme(prefix)
	return nil
}

// checkElementType refuses element types that can never be encoded by
// the schema: for a record schema, anything but a struct (or pointer to
// one), a map with string keys, or an interface type.
func checkElementType(t reflect.Type, s avro.Schema) error {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if s.Type() != avro.Record {
		return nil
	}
	et := t
	for et.Kind() == reflect.Pointer {
		et = et.Elem()
	}
	switch {
	case et.Kind() == reflect.Struct, et.Kind() == reflect.Interface:
		return nil
	case et.Kind() == reflect.Map && et.Key().Kind() == reflect.String:
		return nil
	}
	return fmt.Errorf("elements of Go type %v cannot be written as Avro record %s: give Write structs or avroio.Record values", t, schemaFullName(s))
}

// parsedSchema is the writer schema JSON parsed (through the package's
// bounded cache), which newWriteConfig has checked before.
func parsedSchema(json string) avro.Schema {
	sch, err := cachedSchema(json)
	if err != nil {
		// newWriteConfig parsed it before; this cannot happen.
		panic(fmt.Sprintf("avroio: parsing a checked schema: %v", err))
	}
	return sch
}

// recordEncoder encodes Records by the writer schema with the package's
// own encoder (see generic_encode.go), so that unions keep the branch a Record
// names; other elements are encoded by hamba/avro.
type recordEncoder struct {
	root *node
	buf  []byte
}

func newRecordEncoder(schema string) (*recordEncoder, error) {
	n, err := compileSchema(parsedSchema(schema))
	if err != nil {
		return nil, err
	}
	return &recordEncoder{root: n}, nil
}

// encode returns the datum of r; the slice is reused by the next call.
func (e *recordEncoder) encode(r Record) ([]byte, error) {
	b, err := appendDatum(e.buf[:0], e.root, map[string]any(r))
	if err != nil {
		return nil, err
	}
	e.buf = b
	return b, nil
}

// Local timestamps (Avro's local-timestamp-millis and -micros) are wall
// clocks with no zone. This package has one rule for them, for structs and
// Records, on reads and writes (see "Local timestamps" in the package
// documentation): the wall clock is the UTC fields of a time.Time. A
// local-timestamp-millis of value v is the time.Time time.UnixMilli(v).UTC(),
// and a time.Time t is written as t.UnixMilli(), exactly as a
// timestamp-millis is. The binary encodings of a local timestamp and of a
// timestamp of the same unit are the same long, so the rule is what
// hamba/avro does for timestamps.
//
// hamba/avro (v2.31) encodes a struct's local timestamp as the wall clock
// of t.Local(), which depends on the time zone of the worker. So Write
// encodes structs by a copy of the writer schema in which every
// local-timestamp-* is relabelled as the timestamp-* of its unit
// (container.RelabelLocalTimestamps, which also refuses a union of a
// timestamp and a local timestamp of one unit, naming the field); the
// files' headers keep the schema as the user gave it; container.Writer's
// Append, which the runner-sharded path uses, encodes by the same copy.
// Records are encoded by this package's own encoder (generic_encode.go), which
// keeps the rule itself.

// elementEncoder encodes the elements of a write: Records by the
// package's own encoder, anything else by hamba/avro, by the writer schema
// or, when it has local timestamps, by writeConfig.StructSchema.
type elementEncoder struct {
	rec *recordEncoder
	// schema and enc encode other elements for the NumShards path, by
	// writeConfig.StructSchema when the writer schema has local timestamps
	// (container.Writer.Append encodes them on the runner-sharded path).
	schema avro.Schema
	name   string // the writer schema's full name, for errors
	enc    *avro.Writer
	// checks are what each Go type of element needs checked before
	// hamba/avro encodes it (fit.go), made at its first element.
	checks map[reflect.Type]*valueCheck
}

func newElementEncoder(cfg writeConfig) (*elementEncoder, error) {
	rec, err := newRecordEncoder(cfg.Schema)
	if err != nil {
		return nil, err
	}
	e := &elementEncoder{rec: rec, schema: parsedSchema(cfg.Schema), enc: avro.NewWriter(nil, 512), checks: map[reflect.Type]*valueCheck{}}
	e.name = schemaFullName(e.schema)
	if cfg.StructSchema != "" {
		e.schema = parsedSchema(cfg.StructSchema)
	}
	return e, nil
}

// encode returns the datum of elem; the slice is reused by the next call.
func (e *elementEncoder) encode(elem any) ([]byte, error) {
	if r, ok := elem.(Record); ok {
		d, err := e.rec.encode(r)
		if err != nil {
			return nil, fmt.Errorf("encoding an avroio.Record by schema %s: %w", e.name, err)
		}
		return d, nil
	}
	if err := e.checkValue(elem); err != nil {
		return nil, err
	}
	e.enc.Reset(nil)
	e.enc.Error = nil
	e.enc.WriteVal(e.schema, elem)
	if err := e.enc.Error; err != nil {
		e.enc.Error = nil
		return nil, fmt.Errorf("encoding a %T by schema %s: %w", elem, e.name, err)
	}
	return e.enc.Buffer(), nil
}

// checkValue refuses an element that hamba/avro would encode changed: a
// value out of the range of its Avro type (fit.go).
func (e *elementEncoder) checkValue(elem any) error {
	if elem == nil {
		return nil // hamba/avro refuses it
	}
	t := reflect.TypeOf(elem)
	c, ok := e.checks[t]
	if !ok {
		var err error
		if c, err = fitTypes(t, e.schema, fitWrite); err != nil {
			return fmt.Errorf("encoding a %T by schema %s: %w", elem, e.name, err)
		}
		e.checks[t] = c
	}
	if c == nil {
		return nil
	}
	if err := c.check(reflect.ValueOf(elem), ""); err != nil {
		return fmt.Errorf("encoding a %T by schema %s: %w", elem, e.name, err)
	}
	return nil
}

// append adds elem to w.
func (e *elementEncoder) append(w *container.Writer, elem any) error {
	if _, ok := elem.(Record); !ok {
		if err := e.checkValue(elem); err != nil {
			return fmt.Errorf("record %d: %w", w.Records(), err)
		}
		// Straight into the block; Append encodes local timestamps by
		// the relabelled schema itself.
		return w.Append(elem)
	}
	d, err := e.encode(elem)
	if err != nil {
		return fmt.Errorf("record %d: %w", w.Records(), err)
	}
	return w.AppendEncoded(d)
}

// randomID is 128 random bits in hex: the unique part of temporary names.
func randomID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("avroio: random name: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// shardName is the final name of shard i of n.
func (c writeConfig) shardName(i, n int) string {
	return c.Prefix + expandTemplate(c.Template, i, n) + c.Suffix
}

// expandTemplate replaces each run of S in t by shard and each run of N by
// n, zero-padded to the run's length, as Beam Java's DefaultFilenamePolicy.
func expandTemplate(t string, shard, n int) string {
	var b strings.Builder
	for i := 0; i < len(t); {
		c := t[i]
		if c != 'S' && c != 'N' {
			b.WriteByte(c)
			i++
			continue
		}
		j := i
		for j < len(t) && t[j] == c {
			j++
		}
		v := shard
		if c == 'N' {
			v = n
		}
		fmt.Fprintf(&b, "%0*d", j-i, v)
		i = j
	}
	return b.String()
}

// tempFile is a container file being written to a temporary name.
type tempFile struct {
	path string
	wc   *ioRecorder
	cw   *container.Writer
}

// ioRecorder keeps the first error of the file it writes, so that a
// failed Append can be told apart: the filesystem's fault (a failed
// write), which a runner may retry, or the record's.
type ioRecorder struct {
	io.WriteCloser
	err error
}

func (w *ioRecorder) Write(p []byte) (int, error) {
	n, err := w.WriteCloser.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// dataFault reports whether err, from appending to f, is a fault of the
// record (it cannot be encoded, or exceeds a limit) rather than of the
// filesystem: the same record fails the same way on every attempt.
func (f *tempFile) dataFault(err error) bool { return err != nil && f.wc.err == nil }

func openTempFile(ctx context.Context, fs filesystem.Interface, cfg writeConfig, path string) (*tempFile, error) {
	fwc, err := fs.OpenWrite(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("avroio.Write: creating temporary file %s: %w", path, err)
	}
	wc := &ioRecorder{WriteCloser: fwc}
	cw, err := container.NewWriter(wc, cfg.Schema, cfg.writerOptions())
	if err != nil {
		// The header could not be written: remove what was.
		wc.Close()
		if rm, ok := fs.(filesystem.Remover); ok {
			rm.Remove(ctx, path)
		}
		return nil, fmt.Errorf("avroio.Write: temporary file %s: %w", path, err)
	}
	return &tempFile{path: path, wc: wc, cw: cw}, nil
}

// finish writes the last block and closes the file, which commits it on
// object stores.
func (f *tempFile) finish() (fileResult, error) {
	err := f.cw.Close()
	if cerr := f.wc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileResult{}, fmt.Errorf("avroio.Write: finishing temporary file %s: %w", f.path, err)
	}
	return fileResult{Temp: f.path, Shard: -1, Records: f.cw.Records(), Bytes: f.cw.Offset()}, nil
}

// abandon closes a file of a bundle that failed and tries to remove it;
// whatever is left, the finalize step removes.
func (f *tempFile) abandon(ctx context.Context, fs filesystem.Interface) {
	f.cw.Close()
	f.wc.Close()
	if rm, ok := fs.(filesystem.Remover); ok {
		rm.Remove(ctx, f.path)
	}
}

// writeBundleFn writes each bundle's records to a temporary file of its
// own and, when the bundle finishes, emits the file's description.
//
// A record it cannot write (not encodable by the schema, or past a limit)
// does not fail the bundle: the bundle drops its file, skips the rest of
// its records and emits the error instead (fileResult.Err), so that the
// write fails in its finalize step, which then removes every temporary
// file and commits nothing. (A failed bundle cannot do that: other
// bundles may still write; and Prism v2.77 may run the finalize step
// after a bundle failed, with the bundles that did commit.) The same
// record fails every attempt, so a runner's retry could not have helped.
// A fault of the filesystem fails the bundle, for the runner to retry.
type writeBundleFn struct {
	Config writeConfig
	// Dest is WithDestination's function, nil without one: the bundle
	// then writes one file per destination.
	Dest *destFunc

	fs     filesystem.Interface
	files  map[string]*tempFile // by destination
	order  []string             // the destinations of files, in order
	enc    *elementEncoder
	failed string // the record error of this bundle, if any
}

func (fn *writeBundleFn) Setup(ctx context.Context) (err error) {
	if fn.fs, err = openTempFS(ctx, fn.Config); err != nil {
		return err
	}
	if fn.enc, err = openEncoder(fn.Config); err != nil {
		return err
	}
	fn.files = map[string]*tempFile{}
	return nil
}

// touchWriteCounters makes the runner know the write counters from a
// bundle's first report on: Prism v2.77 keeps only one of two concurrent
// first reports of a counter it does not know yet, which lost a bundle's
// records_written under load.
func touchWriteCounters(ctx context.Context, cfg writeConfig) {
	cfg.counter("records_written").Inc(ctx, 0)
	cfg.counter("bytes_written").Inc(ctx, 0)
}

// StartBundle drops the file of a bundle that failed on this instance
// (in another DoFn of its stage, since this one did not see it fail).
func (fn *writeBundleFn) StartBundle(ctx context.Context, _ func(*string) bool, _ func(fileResult)) {
	touchWriteCounters(ctx, fn.Config)
	fn.failed = ""
	if len(fn.files) > 0 {
		fn.giveUp(ctx)
	}
}

func (fn *writeBundleFn) ProcessElement(ctx context.Context, elem beam.X, _ func(*string) bool, _ func(fileResult)) error {
	if fn.failed != "" {
		return nil // the write fails; its finalize step says why
	}
	dest := ""
	if fn.Dest != nil {
		var err error
		if dest, err = fn.Dest.of(elem); err != nil {
			fn.dropFiles(ctx)
			fn.failed = fmt.Sprintf("avroio.Write to %s: %v", fn.Config.Prefix, err)
			return nil
		}
	}
	cur := fn.files[dest]
	if cur == nil {
		// A new name for every bundle attempt.
		f, err := openTempFile(ctx, fn.fs, fn.Config, fn.Config.TempDir+randomID())
		if err != nil {
			fn.giveUp(ctx)
			return err
		}
		cur = f
		fn.files[dest] = f
		fn.order = append(fn.order, dest)
	}
	if err := fn.enc.append(cur.cw, elem); err != nil {
		err = fmt.Errorf("avroio.Write to %s (temporary file %s): %w", fn.Config.destPrefix(dest), cur.path, err)
		if cur.dataFault(err) {
			fn.dropFiles(ctx)
			fn.failed = err.Error()
			return nil
		}
		// The attempt failed: remove what it wrote.
		fn.giveUp(ctx)
		return err
	}
	return nil
}

func (fn *writeBundleFn) FinishBundle(ctx context.Context, _ func(*string) bool, emit func(fileResult)) error {
	if fn.failed != "" {
		emit(fileResult{Shard: -1, Err: fn.failed})
		fn.failed = ""
		return nil
	}
	if len(fn.order) == 0 {
		return nil // no records, no file
	}
	var done []fileResult
	for _, dest := range fn.order {
		res, err := fn.files[dest].finish()
		if err != nil {
			// Remove this attempt's files, the finished ones too: none is
			// committed.
			for _, r := range done {
				if rm, ok := fn.fs.(filesystem.Remover); ok {
					rm.Remove(ctx, r.Temp)
				}
			}
			fn.giveUp(ctx)
			return err
		}
		delete(fn.files, dest)
		res.Dest = dest
		done = append(done, res)
	}
	fn.order = nil
	for _, res := range done {
		fn.Config.counter("records_written").Inc(ctx, res.Records)
		fn.Config.counter("bytes_written").Inc(ctx, res.Bytes)
		emit(res)
	}
	return nil
}

// dropFiles abandons the bundle's files.
func (fn *writeBundleFn) dropFiles(ctx context.Context) {
	for _, f := range fn.files {
		f.abandon(ctx, fn.fs)
	}
	clear(fn.files)
	fn.order = nil
}

// giveUp removes what a failing bundle attempt wrote, and Begin's marker:
// an attempt that had records and commits nothing must not let the
// finalize step take the input for empty (see finalize). The marker is
// only ever consulted when no bundle committed a file, which on a runner
// that does not run the finalize step after a failure means the input was
// empty and no attempt ran at all; so removing it cannot fail a write
// that a retried attempt completes.
func (fn *writeBundleFn) giveUp(ctx context.Context) {
	fn.dropFiles(ctx)
	if rm, ok := fn.fs.(filesystem.Remover); ok {
		rm.Remove(ctx, fn.Config.TempDir+begunMarker)
	}
	removeLocalDir(fn.Config.TempDir)
}

func (fn *writeBundleFn) Teardown(ctx context.Context) error {
	if len(fn.files) > 0 {
		fn.giveUp(ctx)
	}
	if fn.fs != nil {
		return fn.fs.Close()
	}
	return nil
}

// begunMarker names Begin's marker file in the temporary directory.
const begunMarker = "begun"

// beginFn makes the temporary directory's marker file before any bundle
// writes (each waits for its output as a side input): the evidence the
// finalize step needs to write the empty file of an empty input, since no
// bundle ran to say so. A bundle attempt that fails removes it (see
// writeBundleFn.giveUp), so that a finalize step run after the failure
// (Prism v2.77 does, now and then) does not take the lost records for an
// empty input; the finalize step removes it on success.
type beginFn struct {
	Config writeConfig
}

func (fn *beginFn) ProcessElement(ctx context.Context, _ []byte, emit func(string)) error {
	fs, err := openTempFS(ctx, fn.Config)
	if err != nil {
		return err
	}
	defer fs.Close()
	path := fn.Config.TempDir + begunMarker
	if err := makeLocalDir(path); err != nil {
		return fmt.Errorf("avroio.Write: making the temporary directory %s: %w", fn.Config.TempDir, err)
	}
	w, err := fs.OpenWrite(ctx, path)
	if err != nil {
		removeLocalDir(fn.Config.TempDir)
		return fmt.Errorf("avroio.Write: writing %s: %w", path, err)
	}
	if err := w.Close(); err != nil {
		if rm, ok := fs.(filesystem.Remover); ok {
			rm.Remove(ctx, path)
		}
		removeLocalDir(fn.Config.TempDir)
		return fmt.Errorf("avroio.Write: writing %s: %w", path, err)
	}
	emit(path)
	return nil
}

// shardFn encodes each record and keys it by its shard: round-robin from
// a random shard in every bundle, as Beam Java's WriteFiles does. Each
// value starts with a tag byte (tagDatum, tagMarker, tagError). A record
// that cannot be encoded does not fail the bundle: the error goes, keyed
// errorShard, to WriteShards and on to the finalize step, which fails the
// write and commits nothing (see writeBundleFn for why); the rest of the
// bundle is skipped.
type shardFn struct {
	Config writeConfig

	enc    *elementEncoder
	next   int
	failed bool
}

// Tags of the values WriteShards groups, and the key of record errors.
const (
	tagMarker  = 0 // a shard's marker (shardMarkersFn): no record
	tagDatum   = 1 // followed by one encoded record
	tagError   = 2 // followed by the error a record made
	errorShard = -1
)

func (fn *shardFn) Setup() (err error) {
	fn.enc, err = openEncoder(fn.Config)
	return err
}

func (fn *shardFn) StartBundle(_ context.Context, _ func(int, []byte)) {
	fn.next = mrand.IntN(fn.Config.NumShards)
	fn.failed = false
}

func (fn *shardFn) ProcessElement(ctx context.Context, elem beam.X, emit func(int, []byte)) error {
	if fn.failed {
		return nil
	}
	d, err := fn.enc.encode(elem)
	if err != nil {
		fn.failed = true
		emit(errorShard, append([]byte{tagError}, fmt.Sprintf("avroio.Write to %s: %v", fn.Config.Prefix, err)...))
		return nil
	}
	emit(fn.next, append([]byte{tagDatum}, d...))
	fn.next = (fn.next + 1) % fn.Config.NumShards
	return nil
}

func schemaFullName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

// shardMarkersFn emits each shard's marker, so that every shard has a
// group in WriteShards, records or not.
type shardMarkersFn struct {
	NumShards int
}

func (fn *shardMarkersFn) ProcessElement(_ []byte, emit func(int, []byte)) {
	for i := 0; i < fn.NumShards; i++ {
		emit(i, []byte{tagMarker})
	}
}

// openTempFS opens the filesystem of the write's temporary directory, for
// the write's DoFns.
func openTempFS(ctx context.Context, cfg writeConfig) (filesystem.Interface, error) {
	fs, err := filesystem.New(ctx, cfg.TempDir)
	if err != nil {
		return nil, fmt.Errorf("avroio.Write: %w", err)
	}
	return fs, nil
}

// openEncoder makes the record encoder of the write's DoFns, its error
// naming the write.
func openEncoder(cfg writeConfig) (*elementEncoder, error) {
	enc, err := newElementEncoder(cfg)
	if err != nil {
		return nil, fmt.Errorf("avroio.Write to %s: %w", cfg.Prefix, err)
	}
	return enc, nil
}

// closeFS closes fs, if Setup opened it.
func closeFS(fs filesystem.Interface) error {
	if fs != nil {
		return fs.Close()
	}
	return nil
}

// writeShardFn writes the encoded records of one shard to a temporary
// file, an empty one for a shard with no records. The errors shardFn sent
// (key errorShard), and a record it cannot append (past a limit), become
// an error result, as in writeBundleFn; a fault of the filesystem fails
// the bundle.
type writeShardFn struct {
	Config writeConfig

	fs filesystem.Interface
}

func (fn *writeShardFn) Setup(ctx context.Context) (err error) {
	fn.fs, err = openTempFS(ctx, fn.Config)
	return err
}

func (fn *writeShardFn) ProcessElement(ctx context.Context, shard int, datums func(*[]byte) bool, emit func(fileResult)) error {
	return writeShard(ctx, fn.fs, fn.Config, shard, "", datums, emit)
}

// writeShard writes the encoded records of one shard of destination
// dest to a temporary file (see writeShardFn).
func writeShard(ctx context.Context, fs filesystem.Interface, cfg writeConfig, shard int, dest string, datums func(*[]byte) bool, emit func(fileResult)) error {
	touchWriteCounters(ctx, cfg)
	var d []byte
	if shard == errorShard {
		var first string
		n := 0
		for datums(&d) {
			if n++; n == 1 {
				first = string(d[1:])
			}
		}
		if n > 1 {
			first = fmt.Sprintf("%s (and %d more bundles failed on their records)", first, n-1)
		}
		emit(fileResult{Shard: errorShard, Err: first})
		return nil
	}
	path := fmt.Sprintf("%sshard-%d-%s", cfg.TempDir, shard, randomID())
	f, err := openTempFile(ctx, fs, cfg, path)
	if err != nil {
		removeLocalDir(cfg.TempDir)
		return err
	}
	for datums(&d) {
		if len(d) == 0 || d[0] != tagDatum {
			continue // the shard's marker
		}
		if err := f.cw.AppendEncoded(d[1:]); err != nil {
			err = fmt.Errorf("avroio.Write to %s (temporary file %s): %w", cfg.destPrefix(dest), path, err)
			fault := f.dataFault(err)
			f.abandon(ctx, fs)
			removeLocalDir(cfg.TempDir)
			if fault {
				emit(fileResult{Shard: shard, Dest: dest, Err: err.Error()})
				return nil
			}
			return err
		}
	}
	res, err := f.finish()
	if err != nil {
		if rm, ok := fs.(filesystem.Remover); ok {
			rm.Remove(ctx, path)
		}
		removeLocalDir(cfg.TempDir)
		return err
	}
	res.Shard, res.Dest = shard, dest
	cfg.counter("records_written").Inc(ctx, res.Records)
	cfg.counter("bytes_written").Inc(ctx, res.Bytes)
	emit(res)
	return nil
}

func (fn *writeShardFn) Teardown() error { return closeFS(fn.fs) }

// finalizeFn runs once, after every writing bundle committed: it gets the
// committed temporary files as a side input, renames them to their final
// names, writes the empty file of an empty input, and removes what is left
// in the temporary directory; or, when the results show that the write
// failed, removes every temporary file and fails (see finalize).
type finalizeFn struct {
	Config writeConfig
}

func (fn *finalizeFn) ProcessElement(ctx context.Context, _ []byte, results func(*fileResult) bool, emit func(string)) error {
	var all []fileResult
	var r fileResult
	for results(&r) {
		all = append(all, r)
	}
	fs, err := openTempFS(ctx, fn.Config)
	if err != nil {
		return err
	}
	defer fs.Close()
	st, err := finalize(ctx, fs, fn.Config, all)
	sweepStaleTempDirs(ctx, fs, fn.Config)
	if st.removed > 0 {
		fn.Config.counter("temp_files_removed").Inc(ctx, int64(st.removed))
	}
	if err != nil {
		return err
	}
	fn.Config.counter("files_written").Inc(ctx, int64(len(st.files)))
	if st.emptyBytes > 0 {
		fn.Config.counter("bytes_written").Inc(ctx, st.emptyBytes)
	}
	for _, f := range st.files {
		emit(f)
	}
	return nil
}

type finalizeStats struct {
	files      []string // final names, in shard order
	removed    int      // leftover temporary files removed
	emptyBytes int64    // bytes of the empty file written here
}

// finalize renames the committed temporary files to their final names. It
// is idempotent: run again after a failure part way (a retried finalize
// step), it finds the files renamed before in place and finishes the rest.
//
// It commits only what shows the write succeeded, since a runner may run
// it after a writing bundle failed (Prism v2.77 does, now and then, with
// the results of the bundles that committed): no result may carry an
// error (a record that could not be written); under fixed sharding every
// shard must have its file (WriteShards writes one for each, records or
// not); and with runner-determined sharding, no result at all is an empty
// input only if Begin's marker is still there (a failing bundle attempt
// removes it) and no bundle attempt left a file. Otherwise nothing is
// committed: every temporary file is removed (see failWrite), and the
// error says why.
func finalize(ctx context.Context, fs filesystem.Interface, cfg writeConfig, results []fileResult) (finalizeStats, error) {
	var st finalizeStats
	var failed []string
	ok := results[:0:0]
	for _, r := range results {
		if r.Err != "" {
			failed = append(failed, r.Err)
		} else {
			ok = append(ok, r)
		}
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		more := ""
		if len(failed) > 1 {
			more = fmt.Sprintf(" (and %d more bundles failed)", len(failed)-1)
		}
		return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: %s%s", cfg.Prefix, failed[0], more))
	}
	results = ok
	marker := cfg.TempDir + begunMarker
	var moves []string // temporary names, in shard order
	emptyInput := false
	if cfg.NumShards > 0 {
		moves = make([]string, cfg.NumShards)
		for _, r := range results {
			if r.Shard < 0 || r.Shard >= cfg.NumShards {
				return st, fmt.Errorf("avroio.Write to %s: temporary file %s has shard %d, want one of [0, %d)", cfg.Prefix, r.Temp, r.Shard, cfg.NumShards)
			}
			if moves[r.Shard] != "" {
				return st, fmt.Errorf("avroio.Write to %s: shard %d was written twice (%s and %s)", cfg.Prefix, r.Shard, moves[r.Shard], r.Temp)
			}
			moves[r.Shard] = r.Temp
		}
		for i, m := range moves {
			if m == "" {
				return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: shard %d of %d has no file (its writing failed, and the runner ran the finalize step all the same)", cfg.Prefix, i, cfg.NumShards))
			}
		}
	} else {
		sort.Slice(results, func(i, j int) bool { return results[i].Temp < results[j].Temp })
		for _, r := range results {
			moves = append(moves, r.Temp)
		}
		emptyInput = len(moves) == 0
	}
	n := max(len(moves), 1)
	finals := make([]string, n)
	seen := map[string]int{}
	for i := range finals {
		finals[i] = cfg.shardName(i, n)
		if j, dup := seen[finals[i]]; dup {
			return st, fmt.Errorf("avroio.Write to %s: shards %d and %d of %d would both be named %s (shard name template %q)", cfg.Prefix, j, i, n, finals[i], cfg.Template)
		}
		seen[finals[i]] = i
	}
	if emptyInput {
		left, err := tempFiles(ctx, fs, cfg)
		if err != nil {
			return st, err
		}
		_, merr := fs.Size(ctx, marker)
		if merr != nil && len(left) == 0 {
			if _, ferr := fs.Size(ctx, finals[0]); ferr == nil {
				// A finalize step retried after it wrote the file and
				// removed the marker.
				st.files = finals
				removeLocalDir(cfg.TempDir)
				return st, nil
			}
		}
		if merr != nil || len(left) > 0 {
			why := "the temporary directory's marker is gone (a bundle attempt failed)"
			if merr == nil {
				why = fmt.Sprintf("bundle attempts that had records left %s", left[0])
			}
			return failWrite(ctx, fs, cfg, st, fmt.Errorf("avroio.Write to %s failed, and no file was committed: no bundle committed a file, but the input was not empty: %s", cfg.Prefix, why))
		}
		// The one empty file of an empty input, written like the others.
		path := fmt.Sprintf("%sempty-0-%s", cfg.TempDir, randomID())
		f, err := openTempFile(ctx, fs, cfg, path)
		if err != nil {
			return st, err
		}
		res, err := f.finish()
		if err != nil {
			// Remove what this attempt wrote (a retry makes a new name).
			if rm, ok := fs.(filesystem.Remover); ok {
				rm.Remove(ctx, path)
			}
			return st, err
		}
		moves = []string{path}
		st.emptyBytes = res.Bytes
	}
	return commitMoves(ctx, fs, cfg, st, moves, finals)
}

// commitMoves renames each temporary file moves[i] to finals[i], then
// removes what is left in the temporary directory (the files of failed
// or retried attempts, and Begin's marker) and the directory. A rename
// found done (a retried finalize step) is skipped.
func commitMoves(ctx context.Context, fs filesystem.Interface, cfg writeConfig, st finalizeStats, moves, finals []string) (finalizeStats, error) {
	marker := cfg.TempDir + begunMarker
	for i, m := range moves {
		if err := makeLocalDir(finals[i]); err != nil {
			return st, fmt.Errorf("avroio.Write: making the directory of %s: %w", finals[i], err)
		}
		if err := filesystem.Rename(ctx, fs, m, finals[i]); err != nil {
			// A finalize step retried after this rename succeeded finds the
			// temporary file gone and the final one in place.
			_, terr := fs.Size(ctx, m)
			_, ferr := fs.Size(ctx, finals[i])
			if terr == nil || ferr != nil {
				return st, fmt.Errorf("avroio.Write: renaming %s to %s: %w", m, finals[i], err)
			}
		}
	}
	st.files = finals
	// What is left are the files of failed or retried bundle attempts,
	// and (last, see the retried case above) Begin's marker.
	left, err := tempFiles(ctx, fs, cfg)
	if err != nil {
		return st, err
	}
	if err := removeAll(ctx, fs, cfg, left, &st.removed); err != nil {
		return st, err
	}
	if _, err := fs.Size(ctx, marker); err == nil {
		if err := removeAll(ctx, fs, cfg, []string{marker}, nil); err != nil {
			return st, err
		}
	}
	removeLocalDir(cfg.TempDir)
	return st, nil
}

// failWrite removes everything in the temporary directory of a write that
// failed (the files of every bundle, committed or not, and Begin's
// marker), and the directory, and returns err: nothing of the write is
// left, and no final file was made.
func failWrite(ctx context.Context, fs filesystem.Interface, cfg writeConfig, st finalizeStats, err error) (finalizeStats, error) {
	left, lerr := fs.List(ctx, cfg.TempDir+"*")
	if lerr == nil {
		lerr = removeAll(ctx, fs, cfg, left, &st.removed)
	}
	removeLocalDir(cfg.TempDir)
	if lerr != nil {
		return st, fmt.Errorf("%w; and removing its temporary files: %v", err, lerr)
	}
	return st, err
}

// tempFiles lists the files in the temporary directory other than Begin's
// marker.
func tempFiles(ctx context.Context, fs filesystem.Interface, cfg writeConfig) ([]string, error) {
	all, err := fs.List(ctx, cfg.TempDir+"*")
	if err != nil {
		return nil, fmt.Errorf("avroio.Write: listing the temporary directory %s: %w", cfg.TempDir, err)
	}
	marker := cfg.TempDir + begunMarker
	left := all[:0]
	for _, p := range all {
		if p != marker {
			left = append(left, p)
		}
	}
	return left, nil
}

// removeAll removes the temporary files paths, counting them in n.
func removeAll(ctx context.Context, fs filesystem.Interface, cfg writeConfig, paths []string, n *int) error {
	if len(paths) == 0 {
		return nil
	}
	rm, ok := fs.(filesystem.Remover)
	if !ok {
		return fmt.Errorf("avroio.Write: %T cannot remove the %d leftover temporary files in %s", fs, len(paths), cfg.TempDir)
	}
	for _, p := range paths {
		if err := rm.Remove(ctx, p); err != nil {
			return fmt.Errorf("avroio.Write: removing leftover temporary file %s: %w", p, err)
		}
		if n != nil {
			*n++
		}
	}
	return nil
}

// makeLocalDir makes the directory of a local file where it is missing
// (a WithTempDirectory elsewhere leaves the prefix's directory unmade); object
// stores need none.
func makeLocalDir(path string) error {
	if strings.Contains(path, "://") {
		return nil
	}
	return os.MkdirAll(filepath.Dir(path), 0o755)
}

// removeLocalDir removes the temporary directory of a write to the local
// filesystem, which Beam's filesystem interface cannot do (object stores
// have no directories to remove). It fails harmlessly when the directory is
// not empty or not local.
func removeLocalDir(dir string) {
	if strings.Contains(dir, "://") {
		return
	}
	os.Remove(strings.TrimSuffix(dir, "/"))
}
