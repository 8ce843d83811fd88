package container

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// DefaultSyncInterval is the default of WriterOptions.SyncInterval: the
// approximate number of bytes of serialized (uncompressed) records in a
// block, as in Avro Java's DataFileWriter.
const DefaultSyncInterval = 64000

// Bounds of WriterOptions.SyncInterval, as in Avro Java.
const (
	MinSyncInterval = 32
	MaxSyncInterval = 1 << 30
)

// Default compression levels of the codecs that have one (WriterOptions.Level 0).
const (
	DefaultDeflateLevel   = 6 // zlib's default; Avro Java's Deflater.DEFAULT_COMPRESSION
	DefaultZstandardLevel = 3 // Avro Java's default
)

// WriterOptions configure a Writer. The zero value writes uncompressed
// blocks of about DefaultSyncInterval bytes with a random sync marker.
type WriterOptions struct {
	// Codec names the block codec: "null" (the default when empty),
	// "deflate", "snappy", "zstandard" or "xz" (WritableCodecs lists them).
	Codec string
	// Level is the codec's compression level; 0 means its default.
	// deflate: 1 (fastest) to 9 (smallest), default 6. zstandard: up to 22,
	// default 3 (levels are mapped onto the four speeds of
	// klauspost/compress/zstd: below 3 fastest, 3-5 default, 6-9 better,
	// 10 and up best). The other codecs have no level and refuse one.
	Level int
	// SyncInterval is the number of bytes of serialized records after which
	// a block is written (the block holds the record that crossed it), from
	// MinSyncInterval to MaxSyncInterval; 0 means DefaultSyncInterval.
	// Readers bound one block's size (see Limits.MaxAlloc, 64 MiB by
	// default), so keep blocks far below that.
	SyncInterval int
	// MaxBlockSize bounds a block the Writer makes: its serialized records,
	// and their compressed form. 0 means DefaultMaxAlloc, the largest block
	// a Reader with default Limits reads, so that what a Writer with
	// default options writes, a Reader with default options reads (but
	// for a record whose decoding the Reader estimates over its MaxAlloc:
	// a string or bytes value over about half of it). A record
	// that would take the current block past it ends the block first; a
	// record that alone serializes to more is refused (Append and
	// AppendEncoded return an error naming it and its size, and the Writer
	// stays usable); a SyncInterval above it is refused. Raise it together
	// with the readers' Limits.MaxAlloc.
	MaxBlockSize int64
	// Metadata is user metadata for the header. Keys starting with "avro."
	// are reserved for the format and refused.
	Metadata map[string][]byte
	// Sync is the file's sync marker; the zero value means a random one,
	// which is what every file should have.
	Sync [SyncSize]byte
	// Config is the hamba/avro configuration records are encoded with (its
	// struct tag key, its registered union types); nil means avro.DefaultConfig.
	Config avro.API
}

// compressor encodes the data of one block for a codec. A Writer owns its
// compressor, so it may keep state between calls.
type compressor interface {
	// compress returns the encoded form of src, appending to dst[:0] and
	// reusing its storage when it can. It may return src itself.
	compress(dst, src []byte) ([]byte, error)
	close()
}

type writeCodec struct {
	levels     bool // accepts a level
	minL, maxL int
	make       func(level int) (compressor, error)
}

var writeCodecs = map[string]writeCodec{
	"null":      {make: func(int) (compressor, error) { return nullCompressor{}, nil }},
	"snappy":    {make: func(int) (compressor, error) { return snappyCompressor{}, nil }},
	"deflate":   {levels: true, minL: 1, maxL: 9, make: newDeflateCompressor},
	"zstandard": {levels: true, minL: -131072, maxL: 22, make: newZstdCompressor},
	"xz":        {make: func(int) (compressor, error) { return &xzCompressor{}, nil }},
}

// WritableCodecs lists the codecs a Writer can write, sorted.
func WritableCodecs() []string {
	names := make([]string, 0, len(writeCodecs))
	for n := range writeCodecs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CheckCodec reports whether a Writer can write codec at level (0 for the
// codec's default), with an error that says why not.
func CheckCodec(codec string, level int) error {
	_, err := codecFor(codec, level)
	return err
}

func codecFor(codec string, level int) (writeCodec, error) {
	if codec == "" {
		codec = "null"
	}
	c, ok := writeCodecs[codec]
	if !ok {
		return c, fmt.Errorf("avro container: cannot write codec %q (writable: %s)", codec, strings.Join(WritableCodecs(), ", "))
	}
	if level != 0 {
		if !c.levels {
			return c, fmt.Errorf("avro container: codec %q has no compression level (got %d)", codec, level)
		}
		if level < c.minL || level > c.maxL {
			return c, fmt.Errorf("avro container: %s level %d is outside [%d, %d]", codec, level, c.minL, c.maxL)
		}
	}
	return c, nil
}

// Writer writes an Avro object container file: the header (magic, metadata
// with avro.schema, avro.codec and user metadata, sync marker) when it is
// made, then blocks of records, each compressed by the codec and followed by
// the sync marker. A block is written when its serialized records reach the
// sync interval, on Flush and on Close.
//
// Every block goes to the underlying writer in a single Write call. An error
// from the underlying writer is final: the Writer returns it from then on.
// A record that cannot be encoded is an error for that record only; it is
// left out and the Writer stays usable.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	w        io.Writer
	schema   avro.Schema
	encode   avro.Schema // schema, local timestamps relabelled (localtime.go)
	encErr   error       // why Append cannot encode by schema
	name     string      // the schema's name, for errors
	codec    string
	comp     compressor
	sync     [SyncSize]byte
	interval int
	maxBlock int64

	enc   *avro.Writer // serialized records of the current block
	count int64        // records in the current block
	cbuf  []byte       // compressed data
	frame []byte       // the block as written

	records, blocks, offset int64
	err                     error
	closed                  bool
}

// NewWriter writes the header of a container file with the writer schema
// schema (Avro JSON, stored in the header as given) to w and returns a
// Writer of its records.
func NewWriter(w io.Writer, schema string, opts WriterOptions) (*Writer, error) {
	// A fresh cache, as for reading: named types of one schema must not
	// clash with those of another in the same process.
	s, err := ParseSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("avro container: parsing the writer schema: %w", err)
	}
	codec := opts.Codec
	if codec == "" {
		codec = "null"
	}
	wc, err := codecFor(codec, opts.Level)
	if err != nil {
		return nil, err
	}
	interval := opts.SyncInterval
	if interval == 0 {
		interval = DefaultSyncInterval
	}
	if interval < MinSyncInterval || interval > MaxSyncInterval {
		return nil, fmt.Errorf("avro container: sync interval %d is outside [%d, %d]", interval, MinSyncInterval, MaxSyncInterval)
	}
	maxBlock := opts.MaxBlockSize
	if maxBlock == 0 {
		maxBlock = DefaultMaxAlloc
	}
	if maxBlock < 0 {
		return nil, fmt.Errorf("avro container: a negative MaxBlockSize %d", maxBlock)
	}
	if int64(interval) > maxBlock {
		return nil, fmt.Errorf("avro container: sync interval %d is above MaxBlockSize %d: readers would refuse its blocks", interval, maxBlock)
	}
	for k := range opts.Metadata {
		if strings.HasPrefix(k, "avro.") {
			return nil, fmt.Errorf("avro container: metadata key %q is reserved", k)
		}
	}
	comp, err := wc.make(opts.Level)
	if err != nil {
		return nil, err
	}
	api := opts.Config
	if api == nil {
		api = avro.DefaultConfig
	}
	enc, _, encErr := decodingSchema(s, schema)
	cw := &Writer{
		w:        w,
		schema:   s,
		encode:   enc,
		encErr:   encErr,
		name:     schemaName(s),
		codec:    codec,
		comp:     comp,
		sync:     opts.Sync,
		interval: interval,
		maxBlock: maxBlock,
		enc:      avro.NewWriter(nil, min(interval+interval/4, 1<<20), avro.WithWriterConfig(api)),
	}
	if cw.sync == [SyncSize]byte{} {
		if _, err := rand.Read(cw.sync[:]); err != nil {
			comp.close()
			return nil, fmt.Errorf("avro container: making a sync marker: %w", err)
		}
	}
	if err := cw.write(appendHeader(nil, schema, codec, opts.Metadata, cw.sync)); err != nil {
		comp.close()
		return nil, err
	}
	return cw, nil
}

func schemaName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

// appendHeader appends a container header: the reserved keys first, then
// user metadata sorted by key, so equal inputs give equal bytes.
func appendHeader(b []byte, schema, codec string, meta map[string][]byte, sync [SyncSize]byte) []byte {
	b = append(b, Magic[:]...)
	b = appendVarlong(b, int64(2+len(meta)))
	b = appendVarbytes(b, []byte(MetaSchema))
	b = appendVarbytes(b, []byte(schema))
	b = appendVarbytes(b, []byte(MetaCodec))
	b = appendVarbytes(b, []byte(codec))
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b = appendVarbytes(b, []byte(k))
		b = appendVarbytes(b, meta[k])
	}
	b = appendVarlong(b, 0)
	return append(b, sync[:]...)
}

// appendVarlong appends v as an Avro long (zig-zag varint).
func appendVarlong(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

func appendVarbytes(b, v []byte) []byte {
	return append(appendVarlong(b, int64(len(v))), v...)
}

// write hands p to the underlying writer; a failure is final.
func (w *Writer) write(p []byte) error {
	n, err := w.w.Write(p)
	w.offset += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("avro container: writing at byte %d: %w", w.offset, err)
		return w.err
	}
	return nil
}

func (w *Writer) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("avro container: writer is closed")
	}
	return nil
}

// Append encodes v by the writer schema and adds it to the current block:
// a struct (fields matched by `avro` tags or names), map[string]any for a
// record, or any value hamba/avro encodes by the schema. When the block's
// serialized records reach the sync interval the block is written.
//
// A local-timestamp-millis/micros takes a time.Time whose UTC fields are
// the wall clock, as Reader gives them: a Time is written as its wall
// clock in UTC, on every machine whatever its TZ (hamba/avro alone would
// write its wall clock in time.Local). A schema with a union of both
// timestamp-millis and local-timestamp-millis (or -micros) cannot be
// encoded by Append, which refuses every record; AppendEncoded takes them.
func (w *Writer) Append(v any) error {
	if err := w.usable(); err != nil {
		return err
	}
	if w.encErr != nil {
		return fmt.Errorf("avro container: encoding record %d (%T) by schema %s: %w", w.records, v, w.name, w.encErr)
	}
	prev := w.enc.Buffered()
	w.enc.WriteVal(w.encode, v)
	if err := w.enc.Error; err != nil {
		// Drop the part of the record written before the failure.
		w.enc.Error = nil
		w.truncate(prev)
		return fmt.Errorf("avro container: encoding record %d (%T) by schema %s: %w", w.records, v, w.name, err)
	}
	return w.added(prev)
}

// truncate drops what the current block's buffer holds past its first n
// bytes.
func (w *Writer) truncate(n int) {
	kept := w.enc.Buffer()[:n]
	w.enc.Reset(nil)
	w.enc.Write(kept) // the same bytes, in place
}

// AppendEncoded adds one record already serialized by the writer schema
// (Avro's binary encoding of exactly one datum, as Append would produce).
// It is not checked: bytes that are not one datum of the schema make a file
// that readers reject.
func (w *Writer) AppendEncoded(datum []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	prev := w.enc.Buffered()
	w.enc.Write(datum)
	return w.added(prev)
}

// AppendBlock writes records, the serialized form of count records (the
// datums AppendEncoded takes, one after another), as a block of its own,
// after writing the current block. It is not checked beyond its size: a
// block above MaxBlockSize is refused.
func (w *Writer) AppendBlock(count int64, records []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	if count <= 0 {
		return nil
	}
	if int64(len(records)) > w.maxBlock {
		return fmt.Errorf("avro container: a block of %d records serializes to %d bytes, more than MaxBlockSize %d", count, len(records), w.maxBlock)
	}
	if err := w.writeBlock(); err != nil {
		return err
	}
	w.enc.Write(records)
	w.count = count
	w.records += count
	return w.writeBlock()
}

// BlockFrame is a block as a Writer writes it (its record count, its
// size and its data, compressed by the Writer's codec) without the sync
// marker that ends it, for AppendFrame: data must come after the file's
// header, which a Writer writes first.
func BlockFrame(written []byte) ([]byte, bool) {
	if len(written) < SyncSize {
		return nil, false
	}
	return written[:len(written)-SyncSize], true
}

// AppendFrame writes frame, a block of another Writer with the same
// schema and codec (BlockFrame of what it wrote), after the current block,
// ended by this Writer's sync marker: a file can be assembled from blocks
// compressed elsewhere. The frame's record count and size are checked
// against its length, and its size against MaxBlockSize; its data are not.
func (w *Writer) AppendFrame(frame []byte) error {
	if err := w.usable(); err != nil {
		return err
	}
	count, n := binary.Varint(frame)
	if n <= 0 || count <= 0 {
		return fmt.Errorf("avro container: a block frame of %d bytes has no valid record count", len(frame))
	}
	size, m := binary.Varint(frame[n:])
	if m <= 0 || size < 0 || int64(len(frame)-n-m) != size {
		return fmt.Errorf("avro container: a block frame of %d bytes does not hold the %d bytes it says", len(frame), size)
	}
	if size > w.maxBlock {
		return fmt.Errorf("avro container: a block frame of %d records holds %d bytes, more than MaxBlockSize %d", count, size, w.maxBlock)
	}
	if err := w.writeBlock(); err != nil {
		return err
	}
	f := append(w.frame[:0], frame...)
	f = append(f, w.sync[:]...)
	w.frame = f
	if err := w.write(f); err != nil {
		return err
	}
	w.blocks++
	w.records += count
	return nil
}

// added counts the record the current block's buffer holds from byte prev
// on, after ending the block before it if the record would take the block
// past the largest a reader reads.
func (w *Writer) added(prev int) error {
	if int64(w.enc.Buffered()) > w.maxBlock {
		size := w.enc.Buffered() - prev
		if int64(size) > w.maxBlock {
			w.truncate(prev)
			return fmt.Errorf("avro container: record %d serializes to %d bytes, more than a block may hold (MaxBlockSize %d; readers refuse blocks above their Limits.MaxAlloc, %d by default)", w.records, size, w.maxBlock, int64(DefaultMaxAlloc))
		}
		rec := append([]byte(nil), w.enc.Buffer()[prev:]...)
		w.truncate(prev)
		if err := w.writeBlock(); err != nil {
			return err
		}
		w.enc.Write(rec)
	}
	w.count++
	w.records++
	if w.enc.Buffered() >= w.interval {
		return w.writeBlock()
	}
	return nil
}

// writeBlock compresses the current block and writes it with its framing.
func (w *Writer) writeBlock() error {
	if w.count == 0 {
		return nil
	}
	data, err := w.comp.compress(w.cbuf, w.enc.Buffer())
	if err != nil {
		w.err = fmt.Errorf("avro container: compressing block %d (%d records, %d bytes) with %s: %w", w.blocks, w.count, w.enc.Buffered(), w.codec, err)
		return w.err
	}
	if w.codec != "null" {
		w.cbuf = data // keep the storage for the next block
	}
	if int64(len(data)) > w.maxBlock {
		w.err = fmt.Errorf("avro container: block %d (%d records) compresses with %s to %d bytes, more than MaxBlockSize %d: readers would refuse it", w.blocks, w.count, w.codec, len(data), w.maxBlock)
		return w.err
	}
	f := appendVarlong(w.frame[:0], w.count)
	f = appendVarlong(f, int64(len(data)))
	f = append(f, data...)
	f = append(f, w.sync[:]...)
	w.frame = f
	if err := w.write(f); err != nil {
		return err
	}
	w.blocks++
	w.count = 0
	w.enc.Reset(nil)
	return nil
}

// Flush writes the current block, if it holds any record, so that
// everything appended so far is in the underlying writer. It does not flush
// the underlying writer itself.
func (w *Writer) Flush() error {
	if err := w.usable(); err != nil {
		return err
	}
	return w.writeBlock()
}

// Close writes the last block and releases the codec. It does not close
// the underlying writer. Closing again returns nil.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	err := w.err
	if err == nil {
		err = w.writeBlock()
	}
	w.closed = true
	w.comp.close()
	return err
}

// Records is the number of records appended so far.
func (w *Writer) Records() int64 { return w.records }

// Blocks is the number of blocks written so far.
func (w *Writer) Blocks() int64 { return w.blocks }

// Offset is the number of bytes written to the underlying writer: the
// offset at which the next block will start.
func (w *Writer) Offset() int64 { return w.offset }

// Buffered is the number of serialized bytes in the block not yet written.
func (w *Writer) Buffered() int { return w.enc.Buffered() }

// Sync is the file's sync marker.
func (w *Writer) Sync() [SyncSize]byte { return w.sync }

// Codec is the name of the codec blocks are written with.
func (w *Writer) Codec() string { return w.codec }

type nullCompressor struct{}

func (nullCompressor) compress(_, src []byte) ([]byte, error) { return src, nil }
func (nullCompressor) close()                                 {}

// snappyCompressor: a snappy block followed by the big-endian CRC32 (IEEE)
// of the uncompressed data.
type snappyCompressor struct{}

func (snappyCompressor) compress(dst, src []byte) ([]byte, error) {
	n := snappy.MaxEncodedLen(len(src))
	if n < 0 {
		return nil, fmt.Errorf("snappy: block of %d bytes is too large", len(src))
	}
	if cap(dst) < n+4 {
		dst = make([]byte, n+4)
	}
	out := snappy.Encode(dst[:cap(dst)], src)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(src)), nil
}

func (snappyCompressor) close() {}

// deflateCompressor: raw DEFLATE (RFC 1951), no zlib or gzip framing.
type deflateCompressor struct {
	buf sliceWriter
	fw  *flate.Writer
}

func newDeflateCompressor(level int) (compressor, error) {
	if level == 0 {
		level = DefaultDeflateLevel
	}
	c := &deflateCompressor{}
	fw, err := flate.NewWriter(&c.buf, level)
	if err != nil {
		return nil, fmt.Errorf("deflate level %d: %w", level, err)
	}
	c.fw = fw
	return c, nil
}

func (c *deflateCompressor) compress(dst, src []byte) ([]byte, error) {
	c.buf.b = dst[:0]
	c.fw.Reset(&c.buf)
	if _, err := c.fw.Write(src); err != nil {
		return nil, err
	}
	if err := c.fw.Close(); err != nil {
		return nil, err
	}
	return c.buf.b, nil
}

func (c *deflateCompressor) close() {}

// zstdCompressor: one Zstandard frame per block, with its checksum.
type zstdCompressor struct {
	enc *zstd.Encoder
}

func newZstdCompressor(level int) (compressor, error) {
	if level == 0 {
		level = DefaultZstandardLevel
	}
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true),
	)
	if err != nil {
		return nil, fmt.Errorf("zstandard level %d: %w", level, err)
	}
	return &zstdCompressor{enc: enc}, nil
}

func (c *zstdCompressor) compress(dst, src []byte) ([]byte, error) {
	return c.enc.EncodeAll(src, dst[:0]), nil
}

func (c *zstdCompressor) close() { c.enc.Close() }

// xzCompressor: an xz stream (LZMA2, CRC64 check) per block, as Avro Java
// writes it. The dictionary is sized to the block: a larger one would only
// cost memory, here and in every reader.
type xzCompressor struct {
	buf sliceWriter
}

func (c *xzCompressor) compress(dst, src []byte) ([]byte, error) {
	c.buf.b = dst[:0]
	dict := 4096 // the smallest dictionary LZMA allows
	for dict < len(src) && dict < 8<<20 {
		dict <<= 1
	}
	cfg := xz.WriterConfig{DictCap: dict, CheckSum: xz.CRC64}
	xw, err := cfg.NewWriter(&c.buf)
	if err != nil {
		return nil, err
	}
	if _, err := xw.Write(src); err != nil {
		return nil, err
	}
	if err := xw.Close(); err != nil {
		return nil, err
	}
	return c.buf.b, nil
}

func (c *xzCompressor) close() {}

// sliceWriter appends what is written to b.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
