package avroio

// The write with a fixed number of shards (WithNumShards): records keyed
// by shard, grouped, and each shard written to a temporary file.

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"slices"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

// shardFn encodes each record and keys it by its shard: round-robin from
// a random shard in every bundle, as Beam Java's WriteFiles does. Records
// are not grouped one by one: each shard's records of a bundle are
// gathered into blocks of about the sync interval, compressed here, and a
// block is what goes to the GroupByKey (tagBlock), so that the runner
// holds the write's compressed bytes rather than a value per record
// (WithNumShards(1) on 200,000 records took 533 MB when every record was
// a value of its one key). Each value starts with a tag byte (tagBlock,
// tagMarker, tagError; tagDatum, one record, is still read). A record
// that cannot be encoded does not fail the bundle: the error goes, keyed
// errorShard, to WriteShards and on to the finalize step, which fails the
// write and commits nothing (see writeBundleFn for why); the rest of the
// bundle is skipped.
type shardFn struct {
	Config writeConfig

	enc    *elementEncoder
	blocks *shardBlocks
	next   int
	failed bool
}

// Tags of the values WriteShards groups, and the key of record errors.
const (
	tagMarker  = 0 // a shard's marker (shardMarkersFn): no record
	tagDatum   = 1 // followed by one encoded record
	tagError   = 2 // followed by the error a record made
	tagBlock   = 3 // followed by a block's frame (container.BlockFrame)
	errorShard = -1
)

func (fn *shardFn) Setup() (err error) {
	if fn.enc, err = openEncoder(fn.Config); err != nil {
		return err
	}
	fn.blocks, err = newShardBlocks(fn.Config)
	return err
}

func (fn *shardFn) StartBundle(_ context.Context, _ func(int, []byte)) {
	fn.next = mrand.IntN(fn.Config.NumShards)
	fn.failed = false
	fn.blocks.reset() // what a failed bundle left
}

func (fn *shardFn) ProcessElement(ctx context.Context, elem beam.X, emit func(int, []byte)) error {
	if fn.failed {
		return nil
	}
	d, err := fn.enc.encode(elem)
	if err == nil {
		err = fn.blocks.add(fn.next, d, func(f []byte) { emit(fn.next, f) })
	}
	if err != nil {
		fn.failed = true
		fn.blocks.reset()
		emit(errorShard, append([]byte{tagError}, fmt.Sprintf("avroio.Write to %s: %v", fn.Config.Prefix, err)...))
		return nil
	}
	fn.next = (fn.next + 1) % fn.Config.NumShards
	return nil
}

// FinishBundle emits the blocks the bundle's shards still hold.
func (fn *shardFn) FinishBundle(_ context.Context, emit func(int, []byte)) error {
	if fn.failed {
		fn.blocks.reset()
		return nil
	}
	return fn.blocks.flushAll(func(shard int, f []byte) { emit(shard, f) })
}

// shardBlocks gathers the encoded records of each shard of a bundle into
// blocks, compressed by the write's codec, as values for WriteShards
// (tagBlock): a shard holds at most about a sync interval of records at a
// time, so the DoFn holds that for each shard it writes to.
type shardBlocks struct {
	cw       *container.Writer // compresses and frames the blocks
	sink     *frameSink
	interval int
	maxBlock int64
	bufs     map[int]*shardBuf
}

type shardBuf struct {
	data  []byte
	count int64
}

// frameSink is the container.Writer's output: the header, dropped, then
// the frame of each block it writes.
type frameSink struct {
	header bool
	frame  []byte
}

func (s *frameSink) Write(p []byte) (int, error) {
	if !s.header {
		s.header = true
		return len(p), nil
	}
	f, ok := container.BlockFrame(p)
	if !ok {
		return 0, fmt.Errorf("avroio.Write: a block of %d bytes", len(p))
	}
	// A value of its own: the runner may hold it after emit returns.
	s.frame = append(append(make([]byte, 0, 1+len(f)), tagBlock), f...)
	return len(p), nil
}

func newShardBlocks(cfg writeConfig) (*shardBlocks, error) {
	sink := &frameSink{}
	cw, err := container.NewWriter(sink, cfg.Schema, cfg.writerOptions())
	if err != nil {
		return nil, fmt.Errorf("avroio.Write to %s: %w", cfg.Prefix, err)
	}
	b := &shardBlocks{cw: cw, sink: sink, interval: cfg.SyncInterval, maxBlock: cfg.MaxBlockSize, bufs: map[int]*shardBuf{}}
	if b.interval == 0 {
		b.interval = container.DefaultSyncInterval
	}
	if b.maxBlock == 0 {
		b.maxBlock = container.DefaultMaxAlloc
	}
	return b, nil
}

// add adds datum d to shard's block, calling emit with the value of each
// block it completes.
func (b *shardBlocks) add(shard int, d []byte, emit func([]byte)) error {
	if int64(len(d)) > b.maxBlock {
		return fmt.Errorf("record serializes to %d bytes, more than a block may hold (MaxBlockSize %d; readers refuse blocks above their Limits.MaxAlloc, %d by default)", len(d), b.maxBlock, int64(container.DefaultMaxAlloc))
	}
	sb := b.bufs[shard]
	if sb == nil {
		sb = &shardBuf{}
		b.bufs[shard] = sb
	}
	if int64(len(sb.data)+len(d)) > b.maxBlock {
		if err := b.flush(sb, emit); err != nil {
			return err
		}
	}
	sb.data = append(sb.data, d...)
	sb.count++
	if len(sb.data) >= b.interval {
		return b.flush(sb, emit)
	}
	return nil
}

// flush compresses sb's records into a block and emits its value.
func (b *shardBlocks) flush(sb *shardBuf, emit func([]byte)) error {
	if sb.count == 0 {
		return nil
	}
	if err := b.cw.AppendBlock(sb.count, sb.data); err != nil {
		return err
	}
	sb.data, sb.count = sb.data[:0], 0
	emit(b.sink.frame)
	return nil
}

// flushAll emits every shard's last block, in shard order.
func (b *shardBlocks) flushAll(emit func(int, []byte)) error {
	shards := make([]int, 0, len(b.bufs))
	for s, sb := range b.bufs {
		if sb.count > 0 {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	for _, s := range shards {
		if err := b.flush(b.bufs[s], func(f []byte) { emit(s, f) }); err != nil {
			return err
		}
	}
	return nil
}

// reset drops the records not yet emitted.
func (b *shardBlocks) reset() {
	for _, sb := range b.bufs {
		sb.data, sb.count = sb.data[:0], 0
	}
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
		if len(d) == 0 {
			continue
		}
		var err error
		switch d[0] {
		case tagBlock:
			err = f.cw.AppendFrame(d[1:])
		case tagDatum:
			err = f.cw.AppendEncoded(d[1:])
		default:
			continue // the shard's marker
		}
		if err != nil {
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
