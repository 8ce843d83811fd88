package avroio

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // local paths work without an import
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/beamtypes"
)

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
	// Sync is the sync marker of every file of the write, random for each
	// write, so that the finalize step of WithNumShards(1) can join the
	// bundles' files by copying their blocks (write_concat.go).
	Sync [container.SyncSize]byte
	// NumShards is the fixed number of files, or 0.
	NumShards int
	// TempDir is the write's temporary directory, ending in "/".
	TempDir string
	// StaleTempAge is WithStaleTempAge: how old the newest file of
	// another write's temporary directory without a lease must be for
	// this write to remove it (write_temp.go).
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
	return container.WriterOptions{Codec: c.Codec, Level: c.Level, SyncInterval: c.SyncInterval, MaxBlockSize: c.MaxBlockSize, Metadata: c.Metadata, Sync: c.Sync}
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
// Given no schema (""), Write infers it from the element type, a struct
// (SchemaOf, as Beam Java's AvroIO.write(Class)); a type it cannot map
// panics at construction, naming the field.
//
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
// WithNumShards(n) writes exactly n files, empty ones included: for n > 1,
// records are spread round-robin from a random start and grouped by shard
// with a GroupByKey of compressed blocks (each bundle's records of a shard,
// in blocks of about the sync interval); WithNumShards(1) writes a file per
// bundle, as the default does, and its finalize step joins them into the
// one file, copying their blocks, so that no step holds every record.
// WithNumShards(0), the default, lets the runner decide: one file per
// bundle, no shuffle of records, and one empty file when the input is
// empty. WithShardNameTemplate (default
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
// every runner, including Prism (v2.77, v2.78), which now and then runs the
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
//     that no bundle is missing: under WithNumShards(n), n > 1, a file for
//     each of the n shards (every shard gets one, empty or not, from its
//     own bundle); with runner-determined sharding and WithNumShards(1),
//     when no bundle committed a file
//     (an empty input, or the input's bundles failed), a marker file that
//     a first step ("Begin", which the finalize step waits for) makes and
//     that a failing bundle attempt removes, and no file of an attempt
//     left in the directory: the writing bundles do not wait for Begin,
//     and an attempt that fails before Begin made the marker leaves a
//     tombstone file instead. Without that evidence it removes everything
//     and fails. (A bundle retried successfully is a committed file, so
//     the evidence never fails a write that succeeded.)
//
// What no step can see is not covered: a bundle that fails while others
// of the same write committed, on a runner that then runs the finalize
// step anyway (Prism), commits the others' files when the failure is the
// filesystem's or another DoFn's of the bundle's stage.
//
// A job that fails in another step leaves what its write made so far: a
// failure in another DoFn of a writing bundle's stage (a step before
// Write returning an error, fused with it) leaves the bundle's temporary
// file, Begin's marker and the write's lease; one in a stage before the
// writing one (a step before a Reshuffle, say), Begin's marker and the
// lease; a writing bundle that failed before Begin ran, its tombstone and
// the lease. Beam Go calls no method of a DoFn whose bundle failed elsewhere,
// and tells no other step. The next non-windowed Write whose temporary
// directory is in the same directory (the prefix's, or the same
// WithTempDirectory) removes them, in its Begin step (runner sharding)
// and in its finalize step, as soon as no running write owns them, by
// this rule: every directory named .temp-sdfio-<id>/ there (or
// .temp-sdfio-<id>-<id>/) but its own, files and all, nothing else, whose
// write is no longer running. A runner-sharded write (or one with
// WithNumShards(1)) holds a lease, a
// file its workers renew every 30 s while they run and release when the
// runner stops them (a LOOPBACK or in-process worker, at the end of its
// job, failed or not): a directory whose lease is released, or was not
// renewed for 5 minutes (its workers were killed), is removed at once.
// A directory without a lease (a write with WithNumShards(n), n > 1, a windowed
// write's, one whose own bundle failure removed its lease) is removed
// once its newest file was modified more than WithStaleTempAge ago (7
// days by default, DefaultStaleTempAge). Several jobs may write in one
// directory (on Dataflow, say): a running write renews its lease, or,
// without one, changes its directory whenever one of its bundles
// finishes; one whose directory went all the same (every worker that
// renews its lease gone while its job runs on) finds its files gone and
// fails naming them, rather than writing anything wrong. The removal
// counts in temp_files_removed, is logged (INFO, each directory), and
// when it cannot run (a filesystem that cannot say when a file was
// modified, a listing that fails) it is logged as a WARN and the write
// goes on. Beam Java's WriteFiles leaves temporary files after a failed
// pipeline.
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
	if col.Type().Type() != RecordType {
		if err := beamtypes.Check(col.Type().Type(), "avroio.RegisterType"); err != nil {
			panic(fmt.Sprintf("avroio.Write: %v", err))
		}
	}
	if cfg.Windowed {
		return writeWindowed(s, cfg, dest, col)
	}
	if ws := col.WindowingStrategy(); ws != nil && ws.Fn != nil && ws.Fn.Kind != window.GlobalWindows {
		col = beam.WindowInto(s, window.NewGlobalWindows(), col)
	}
	var results beam.PCollection
	var dests beam.PCollection // the destinations of a write with fixed shards
	var begun beam.PCollection // Begin's output, the finalize step's input when there is a Begin
	switch {
	case cfg.concatShard():
		// One file: the bundles write theirs, as with runner sharding, and
		// the finalize step joins them (write_concat.go), so that no step
		// holds all the records at once.
		begun = beam.ParDo(s.Scope("Begin"), &beginFn{Config: cfg}, beam.Impulse(s))
		results = beam.ParDo(s.Scope("WriteBundles"), &writeBundleFn{Config: cfg}, col)
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
		// write the one empty file of an empty input; the finalize step
		// waits for it (Begin's output is its input), the writing bundles
		// do not (see beginFn and writeBundleFn.giveUp).
		begun = beam.ParDo(s.Scope("Begin"), &beginFn{Config: cfg}, beam.Impulse(s))
		results = beam.ParDo(s.Scope("WriteBundles"), &writeBundleFn{Config: cfg, Dest: dest}, col)
	}
	results = beam.Reshuffle(s, results)
	if !begun.IsValid() {
		begun = beam.Impulse(s)
	}
	if dest != nil {
		if !dests.IsValid() {
			dests = beam.CreateList(s, []string{})
		}
		return beam.ParDo(s.Scope("Finalize"), &finalizeDestsFn{Config: cfg}, begun, beam.SideInput{Input: results}, beam.SideInput{Input: dests})
	}
	return beam.ParDo(s.Scope("Finalize"), &finalizeFn{Config: cfg}, begun, beam.SideInput{Input: results})
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
	if schema == "" {
		if elem == RecordType {
			return fail("no schema given, and avroio.Record values have none to infer: give Write the schema")
		}
		inferred, err := inferSchema(elem)
		if err != nil {
			return fail("no schema given, and none can be inferred from Go type %v: %v", elem, err)
		}
		schema = inferred
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
	// A struct field that names no field of the schema would not be
	// written (a struct tagged `json:"..."` for Beam Go's avroio, say).
	if err := checkFields(elem, parsedSchema(schema)); err != nil {
		return fail("%v", err)
	}
	if elem != RecordType && elem.Kind() != reflect.Interface {
		// Civil dates and times are encoded through a stand-in type
		// (civil.go), which is what hamba/avro must be able to encode.
		conv, err := civilStandIn(elem, parsedSchema(schema))
		if err != nil {
			return fail("%v", err)
		}
		encoded := elem
		if conv != nil {
			encoded = conv.m
		}
		if _, err := fitTypes(encoded, parsedSchema(schema), fitWrite); err != nil {
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
	if _, err := rand.Read(cfg.Sync[:]); err != nil {
		return fail("making a sync marker: %v", err)
	}
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
