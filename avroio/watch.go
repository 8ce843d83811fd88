package avroio

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/offsetsource/filesource"
)

// WatchForNewFiles reads the Avro files that filepattern matches, and goes
// on polling it every pollInterval for new ones until the termination
// condition holds (Java's AvroIO.read().watchForNewFiles). The result is
// an unbounded PCollection of records of type t (RecordType for generic
// records); each record has the event time of the poll that found its
// file, and the watch's watermark is the time of its last poll. Run it as
// a streaming pipeline.
//
// A file is read once it is stable: two polls in a row saw it with the
// same size and modification time, and it is not empty. It is read as the
// poll saw it. A file identified by its path is read once: a change after
// that (records appended, the file rewritten) is ignored and counted in
// watch_changed_files_ignored, unless WithMatchUpdatedFiles is given, which
// reads the changed file again, whole, once it is stable (records read
// before are then read again). Files should therefore appear whole, as
// avroio.Write's do (written under a temporary name and renamed). See
// filesource.WatchForNewFiles for the details.
//
// The watch counts, in Namespace (or WithMetricsNamespace's): watch_polls, watch_new_files (files
// emitted), watch_updated_files (of those, files read again after a
// change), watch_files_waiting (per poll, files not read yet because they
// were changing or empty), watch_files_skipped (per poll, files
// WithSkipOlderThan or WithSkipListed skipped), watch_changed_files_ignored, and
// watch_empty_files_skipped (files still empty when the watch ended).
//
// # A restarted job
//
// The files the watch has read are part of the job's state. A streaming
// job that failed and is submitted again as a new job (not updated, not
// restored from a savepoint) starts with none: it reads every file the
// pattern matches again, and what it writes for them is written twice.
// This is Beam's model, and Beam Java's watch does the same. To skip the
// files the failed job read, give WithSkipOlderThan (files modified
// before a time) or WithSkipListed (files named in a list you keep), or
// make the sink drop duplicates by a key of the records.
//
// # Bad files
//
// A file that cannot be read (corrupt, or with a schema that no longer
// fits t) fails the bundle, and so the job: a streaming runner retries it
// for ever (Dataflow) or the job ends (Prism; Flink once its restarts are
// spent). WatchForNewFilesWithBadFiles sends such files to a dead-letter
// output instead and goes on.
//
// A pattern that matches no file is never an error here: the watch waits
// (WithEmptyMatch and WithMatchesManyFiles are not WatchOptions). The
// other options are those of ReadFiles, WithMatchUpdatedFiles,
// WithSkipOlderThan and WithSkipListed. WatchForNewFiles panics if
// pollInterval is not positive or the options are invalid.
func WatchForNewFiles(s beam.Scope, filepattern string, t reflect.Type, pollInterval time.Duration, until Termination, opts ...WatchOption) beam.PCollection {
	s = s.Scope("avroio.WatchForNewFiles")
	if strings.TrimSpace(filepattern) == "" {
		panic("avroio.WatchForNewFiles: empty file pattern")
	}
	filesystem.ValidateScheme(filepattern)
	return watchAndRead(s, "avroio.WatchForNewFiles", beam.Create(s, filepattern), t, pollInterval, until, opts, nil)
}

// WatchAllForNewFiles is WatchForNewFiles for every pattern of a
// PCollection of strings (Java's AvroIO.readAll().watchForNewFiles). Each
// pattern is watched on its own, with its own termination: a file that two
// patterns match is read twice.
func WatchAllForNewFiles(s beam.Scope, patterns beam.PCollection, t reflect.Type, pollInterval time.Duration, until Termination, opts ...WatchOption) beam.PCollection {
	s = s.Scope("avroio.WatchAllForNewFiles")
	return watchAndRead(s, "avroio.WatchAllForNewFiles", patterns, t, pollInterval, until, opts, nil)
}

func watchAndRead(s beam.Scope, name string, patterns beam.PCollection, t reflect.Type, pollInterval time.Duration, until Termination, opts []WatchOption, bad *beam.PCollection) beam.PCollection {
	o := mustParse(name, opts, WatchOption.applyWatch, EmptyMatchAllow)
	checkType(name, t, o)
	if pollInterval <= 0 {
		panic(fmt.Sprintf("%s: poll interval %v: must be positive", name, pollInterval))
	}
	defer func() {
		// Name this transform in filesource's panics (WithSkipListed...).
		if p := recover(); p != nil {
			panic(fmt.Sprintf("%s: %v", name, p))
		}
	}()
	wopts := o.watchOpts(t)
	if bad != nil {
		wopts = append(wopts, filesource.WithBadInput(bad))
	}
	return filesource.WatchAllForNewFiles[beam.X](s, patterns, o.format(t), pollInterval, until, wopts...)
}

// MatchNewFiles watches every file pattern of a PCollection of strings and
// emits the fileio.FileMetadata of each file once it is stable (see
// filesource.MatchNewFiles; the options that apply are WithMatchUpdatedFiles,
// WithSkipOlderThan and WithSkipListed).
// Its metrics are in Namespace (or WithMetricsNamespace's). MatchNewFiles panics if pollInterval is not
// positive.
func MatchNewFiles(s beam.Scope, patterns beam.PCollection, pollInterval time.Duration, until Termination, opts ...MatchOption) beam.PCollection {
	s = s.Scope("avroio.MatchNewFiles")
	o := mustParse("avroio.MatchNewFiles", opts, MatchOption.applyMatch, EmptyMatchAllow)
	defer func() {
		if p := recover(); p != nil {
			panic(fmt.Sprintf("avroio.MatchNewFiles: %v", p))
		}
	}()
	fopts := []filesource.MatchOption{filesource.WithMetricsNamespace(o.namespace)}
	if o.matchUpdated {
		fopts = append(fopts, filesource.WithMatchUpdatedFiles())
	}
	for _, skip := range o.skip {
		fopts = append(fopts, skip)
	}
	return filesource.MatchNewFiles(s, patterns, pollInterval, until, fopts...)
}
