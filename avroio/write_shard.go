package avroio

// The write with a fixed number of shards (WithNumShards): records keyed
// by shard, grouped, and each shard written to a temporary file.

import (
	"context"
	"fmt"
	mrand "math/rand/v2"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/hamba/avro/v2"
)

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

// destShardFn is shardFn for a write with destinations and a fixed
// number of shards: records are keyed by destination and shard
// (shardKey), and at the end of the bundle every destination it saw gets
// a marker in each of its shards (so that each has a group, and a file,
// records or not) and goes to its second output, from which the finalize
// step knows the destinations whose files it must find.
type destShardFn struct {
	Config writeConfig
	Dest   *destFunc

	enc    *elementEncoder
	next   map[string]int
	order  []string
	failed bool
}

// errorKey is the key of record errors in destShardFn's output.
var errorKey = shardKey("", errorShard)

func (fn *destShardFn) Setup() (err error) {
	fn.enc, err = openEncoder(fn.Config)
	return err
}

func (fn *destShardFn) StartBundle(_ context.Context, _ func(string, []byte), _ func(string)) {
	fn.next, fn.order, fn.failed = map[string]int{}, nil, false
}

func (fn *destShardFn) ProcessElement(ctx context.Context, elem beam.X, emit func(string, []byte), _ func(string)) error {
	if fn.failed {
		return nil
	}
	dest, err := fn.Dest.of(elem)
	if err != nil {
		fn.failed = true
		emit(errorKey, append([]byte{tagError}, fmt.Sprintf("avroio.Write to %s: %v", fn.Config.Prefix, err)...))
		return nil
	}
	d, err := fn.enc.encode(elem)
	if err != nil {
		fn.failed = true
		emit(errorKey, append([]byte{tagError}, fmt.Sprintf("avroio.Write to %s: %v", fn.Config.destPrefix(dest), err)...))
		return nil
	}
	shard, ok := fn.next[dest]
	if !ok {
		shard = mrand.IntN(fn.Config.NumShards)
		fn.order = append(fn.order, dest)
	}
	fn.next[dest] = (shard + 1) % fn.Config.NumShards
	emit(shardKey(dest, shard), append([]byte{tagDatum}, d...))
	return nil
}

func (fn *destShardFn) FinishBundle(_ context.Context, emit func(string, []byte), dests func(string)) {
	for _, dest := range fn.order {
		for i := 0; i < fn.Config.NumShards; i++ {
			emit(shardKey(dest, i), []byte{tagMarker})
		}
		dests(dest)
	}
	fn.order = nil
}

// writeDestShardFn is writeShardFn for destShardFn's groups.
type writeDestShardFn struct {
	Config writeConfig

	fs filesystem.Interface
}

func (fn *writeDestShardFn) Setup(ctx context.Context) (err error) {
	fn.fs, err = openTempFS(ctx, fn.Config)
	return err
}

func (fn *writeDestShardFn) ProcessElement(ctx context.Context, key string, datums func(*[]byte) bool, emit func(fileResult)) error {
	dest, shard, err := parseShardKey(key)
	if err != nil {
		return err
	}
	return writeShard(ctx, fn.fs, fn.Config, shard, dest, datums, emit)
}

func (fn *writeDestShardFn) Teardown() error { return closeFS(fn.fs) }
