package container

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/hamba/avro/v2"
	"github.com/modern-go/reflect2"

	"github.com/sdfio/sdfio/internal/typewalk"
)

// ValidateMode says when the record reader walks a block's datums before
// decoding them (see Options.Validate).
type ValidateMode int

const (
	// ValidateAuto validates only where decoding alone is not safe against
	// hostile counts: recursive schemas and arrays of zero-width items
	// (where the block's size does not bound allocation or recursion), and
	// decoders that skip arrays or maps (writer fields the Go type or the
	// reader schema leaves out), whose loops hamba/avro does not stop at
	// the end of the data. It is the default.
	ValidateAuto ValidateMode = iota
	// ValidateAlways validates every block: exact byte positions in errors,
	// and no allocation at all for a length that the data cannot back.
	ValidateAlways
	// ValidateNever trusts the decoder's own checks.
	ValidateNever
)

// Options configure a record Reader.
type Options struct {
	Limits
	// ReaderSchema, when set, is resolved against each file's writer schema
	// by Avro's schema-resolution rules (as implemented by hamba/avro:
	// reader fields missing from the writer take their defaults, writer
	// fields missing from the reader are skipped, int/long/float promote to
	// wider numbers, string and bytes convert, named types match by name or
	// alias, a writer branch resolves to a reader union). Records are decoded
	// into T by the reader schema. Incompatible schemas are an ErrSchema error
	// naming the fields responsible (`field "driver.id": reader string, writer long`).
	ReaderSchema avro.Schema
	// Config customises hamba/avro's decoding (struct tag key, union type
	// registration); its MaxByteSliceSize and MaxSliceAllocSize are set from
	// Limits.
	Config avro.Config
	// Validate chooses when blocks are validated before decoding.
	Validate ValidateMode
	// DecodeAhead makes the reader read, decompress and decode the records
	// that follow on a goroutine of its own while the caller consumes the
	// ones before them (see ahead.go): at most a few chunks of up to
	// aheadChunk records are held ahead, whose records decode (by the
	// reader's estimate) into at most a quarter of Limits.MaxAlloc (16 MiB
	// by default) plus one record. Next returns exactly what it
	// returns without it — the same records, offsets, split points and
	// errors at the same positions — and Close stops the goroutine. The
	// goroutine starts at the first call to Next.
	DecodeAhead bool
}

// Reader reads the records of one container file into values of type T: a Go
// struct (fields matched by `avro` tags or names), map[string]any for generic
// records, or any type hamba/avro decodes the schema into.
//
// Its Next has the shape of an offset-based source's reader: each record
// comes with the offset of its block, and the first record of each block is
// the split point. Records of one block are never split apart.
type Reader[T any] struct {
	blocks *BlockReader
	info   *schemaInfo
	writer avro.Schema
	schema avro.Schema // what records are decoded by (writer, or resolved)
	dec    avro.ValDecoder
	ar     *avro.Reader
	lim    Limits
	valid  bool // validate every block before decoding
	micros bool // check that time-micros values fit a time.Duration
	never  bool // Options.Validate is ValidateNever: no walks at all
	// prof and rootSlot estimate what records decode into (budget.go).
	prof     profile
	rootSlot int64

	blk  *Block
	idx  int64 // records returned from blk
	done bool
	err  error

	goType reflect.Type // the Go type records are decoded into
	dyn    *dynamicType // set by NewReaderOf: records of a type known at run time
	// scratch is what records are decoded into without dyn, then copied
	// out of (next); zero between records.
	scratch *T

	// ahead is set with Options.DecodeAhead: the fields above, from blk
	// on, and blocks (but for Header and Name) then belong to its goroutine.
	ahead *ahead[T]
}

// OpenReader opens the file through open (see Open) and returns a Reader of
// the records of the blocks starting at or after start.
func OpenReader[T any](name string, open Opener, start int64, opts Options) (*Reader[T], error) {
	br, err := Open(name, open, start, opts.Limits)
	if err != nil {
		return nil, err
	}
	r, err := NewReader[T](br, opts)
	if err != nil {
		br.Close()
		return nil, err
	}
	return r, nil
}

var apis sync.Map // avro.Config -> avro.API

func apiFor(cfg avro.Config) avro.API {
	if api, ok := apis.Load(cfg); ok {
		return api.(avro.API)
	}
	api, _ := apis.LoadOrStore(cfg, cfg.Freeze())
	return api.(avro.API)
}

// maxElemSize is the largest element size of any slice reachable in t: what
// one decoded array item costs. Interfaces count as the 16 bytes of an any
// (generic decoding makes []any).
func maxElemSize(t reflect.Type) int64 {
	seen := map[reflect.Type]bool{}
	var m int64 = 1
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Slice:
			m = max(m, int64(t.Elem().Size()))
			walk(t.Elem())
		case reflect.Array, reflect.Pointer:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			for i := 0; i < t.NumField(); i++ {
				walk(t.Field(i).Type)
			}
		case reflect.Interface:
			m = max(m, 16)
		}
	}
	walk(t)
	return m
}

// NewReader reads the records of the blocks that br yields. It parses the
// writer schema from br's header and resolves opts.ReaderSchema against it.
func NewReader[T any](br *BlockReader, opts Options) (*Reader[T], error) {
	return newReader[T](br, reflect.TypeFor[T](), opts, true)
}

// newReader reads records into values of goType, which is T unless T is
// any and the reader is one made by NewReaderOf. typed says that
// hamba/avro decodes the records (not a decoder of NewReaderWith's): its
// decoder then decodes by the schemas with local timestamps relabelled.
func newReader[T any](br *BlockReader, goType reflect.Type, opts Options, typed bool) (*Reader[T], error) {
	lim := opts.Limits.withDefaults()
	h := br.Header()
	name := br.Name()
	serr := func(err error, format string, args ...any) error {
		return headerErr(name, h.Size, ErrSchema, err, format, args...)
	}
	ps, err := parseWriterSchema(h.Schema)
	if err != nil {
		return nil, serr(err, "writer schema")
	}
	writer, info := ps.schema, ps.info
	if int64(info.maxFixed) > lim.MaxAlloc {
		return nil, headerErr(name, h.Size, ErrLimit, nil, "writer schema has a fixed of %d bytes, over the %d-byte limit", info.maxFixed, lim.MaxAlloc)
	}
	// schema is what Schema reports; decode what hamba/avro decodes by.
	schema, decode := writer, writer
	if typed {
		if ps.decodeErr != nil {
			return nil, serr(ps.decodeErr, "writer schema, for a typed read")
		}
		decode = ps.decode
	}
	if opts.ReaderSchema != nil {
		schema, err = resolve(opts.ReaderSchema, writer)
		if err != nil {
			return nil, serr(err, "resolving the reader schema against the writer schema")
		}
		decode = schema
		if typed {
			rdec, changed, err := decodingReaderSchema(opts.ReaderSchema)
			if err != nil {
				return nil, serr(err, "reader schema, for a typed read")
			}
			if changed || ps.relabelled {
				if decode, err = avro.NewSchemaCompatibility().Resolve(rdec, ps.decode); err != nil {
					return nil, serr(err, "resolving the reader schema against the writer schema, local timestamps relabelled")
				}
			}
		}
	}
	cfg := opts.Config
	cfg.MaxByteSliceSize = int(min(lim.MaxAlloc, int64(maxInt)))
	// reflect2 grows a slice to at most twice what was asked for.
	cfg.MaxSliceAllocSize = int(max(lim.MaxAlloc/(2*maxElemSize(goType)), 1))
	api := apiFor(cfg)
	r := &Reader[T]{
		blocks: br,
		info:   info,
		writer: writer,
		schema: schema,
		lim:    lim,
		ar:     avro.NewReader(nil, 0, avro.WithReaderConfig(api)),
		goType: goType,
		prof:   profileGeneric,
		never:  opts.Validate == ValidateNever,
	}
	if typed && !hasInterface(goType) {
		r.prof, r.rootSlot = profileTyped, int64(goType.Size())
		if goType.Kind() == reflect.Pointer {
			r.rootSlot += int64(goType.Elem().Size())
		}
	}
	if !info.recursive && info.depth > lim.MaxDepth {
		return nil, headerErr(name, h.Size, ErrLimit, nil, "writer schema nests records, arrays and maps %d levels deep, over the limit of %d (Limits.MaxDepth; avroio.WithMaxDepth)", info.depth, lim.MaxDepth)
	}
	if least := satAdd(r.rootSlot, info.bound[r.prof].lo); least > lim.MaxAlloc {
		return nil, headerErr(name, h.Size, ErrLimit, nil, "every record of the writer schema decodes into at least %d bytes (its fixed values and fields), over the %d-byte limit (Limits.MaxAlloc)", least, lim.MaxAlloc)
	}
	var skips bool
	if typed {
		// hamba/avro compiles its decoder once per process and schema
		// (the writer schemas are cached by text), at a cost that grows
		// with the square of a record's fields or a union's branches.
		if err := checkCompileCost(decode, "schema", lim.MaxAlloc); err != nil {
			return nil, headerErr(name, h.Size, ErrLimit, nil, "%v", err)
		}
		r.dec = api.DecoderOf(decode, reflect2.Type2(reflect.PointerTo(goType)))
		var convertsMicros bool
		skips, convertsMicros = inspectDecoder(r.dec)
		// hamba/avro reads a time-micros into a time.Duration by
		// multiplying it by 1000, which wraps past ±2^63 ns.
		r.micros = info.hasMicros && convertsMicros && opts.Validate != ValidateNever
	}
	if opts.DecodeAhead {
		r.ahead = newAhead[T](aheadBudget(lim.MaxAlloc))
	}
	r.valid = opts.Validate == ValidateAlways ||
		opts.Validate == ValidateAuto && (info.recursive || info.zeroWidthItems || skips)
	return r, nil
}

// hasInterface reports whether values of t hold interfaces anywhere (a
// map[string]any, an any), which hamba/avro fills with generic values.
func hasInterface(t reflect.Type) bool {
	return typewalk.Holds(t, func(t reflect.Type) bool { return t.Kind() == reflect.Interface })
}

const hambaPkg = "github.com/hamba/avro/v2"

// hamba/avro decoders that loop over an array's or map's declared item count
// without stopping at an error: the skip decoders it uses for writer fields
// that the Go type or the reader schema leaves out (and maps with
// TextUnmarshaler keys). Fed a hostile count, they spin for 2^63 rounds after
// the data ran out, so blocks decoded through them are validated first.
var uncheckedLoops = map[string]bool{"sliceSkipDecoder": true, "mapSkipDecoder": true, "mapDecoderUnmarshaler": true}

// Decoders of hamba/avro that read a time-micros into a time.Duration
// (multiplying by 1000, which wraps): its own, and the generic decoder of
// interfaces, which makes its decoders as it meets values.
var microsDecoders = map[string]bool{"timeMicrosCodec": true, "efaceDecoder": true}

// inspectDecoder reports whether the decoder graph dec contains one of
// uncheckedLoops, and one of microsDecoders, by walking hamba's decoder
// structs with reflection.
func inspectDecoder(dec avro.ValDecoder) (skips, micros bool) {
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		if skips && micros {
			return
		}
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			walk(v.Elem())
		case reflect.Struct:
			t := v.Type()
			if t.PkgPath() != hambaPkg {
				return
			}
			skips = skips || uncheckedLoops[t.Name()]
			micros = micros || microsDecoders[t.Name()]
			for i := 0; i < v.NumField(); i++ {
				walk(v.Field(i))
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(dec))
	return skips, micros
}

const maxInt = int64(^uint(0) >> 1)

// Parsed writer schemas, by their JSON text: every split of a file, and
// every file of a data set, usually shares one. Bounded, so a stream of
// distinct schemas cannot grow it without end.
var (
	schemasMu sync.Mutex
	schemas   = map[string]parsedSchema{}
)

// The bounds of the parsed-schema cache: entries, and the schemas' JSON
// text in bytes (a parsed schema holds several times its text).
const (
	maxCachedSchemas     = 256
	maxCachedSchemaBytes = 8 << 20
)

var schemaBytes int // the text length of the cached schemas; schemasMu

type parsedSchema struct {
	schema avro.Schema
	info   *schemaInfo
	// decode is what hamba/avro decodes typed reads by: schema with its
	// local timestamps relabelled (see localtime.go), or schema itself;
	// decodeErr says why there is none.
	decode     avro.Schema
	relabelled bool // decode is a relabelled copy
	decodeErr  error
}

// parsing holds the parses in progress, by text (schemasMu): readers of
// one file opened at once (the ranges of a split read, say) wait for one
// parse rather than each making their own. A parse takes up to 150 times
// the text's length (a union of 10,000 records, 700 KB of text, took 100
// MB), so two at once took twice the memory of one.
var parsing = map[string]*schemaParse{}

type schemaParse struct {
	done chan struct{}
	p    parsedSchema
	err  error
}

func parseWriterSchema(text string) (parsedSchema, error) {
	schemasMu.Lock()
	if p, ok := schemas[text]; ok {
		schemasMu.Unlock()
		return p, nil
	}
	if w, ok := parsing[text]; ok {
		schemasMu.Unlock()
		<-w.done
		return w.p, w.err
	}
	w := &schemaParse{done: make(chan struct{}), err: errors.New("parsing the schema failed")}
	parsing[text] = w
	schemasMu.Unlock()
	defer func() {
		// Even when the parse panicked: no waiter waits for ever.
		schemasMu.Lock()
		delete(parsing, text)
		if _, dup := schemas[text]; w.err == nil && !dup && len(schemas) < maxCachedSchemas && schemaBytes+len(text) <= maxCachedSchemaBytes {
			schemas[text] = w.p
			schemaBytes += len(text)
		}
		schemasMu.Unlock()
		close(w.done)
	}()
	w.p, w.err = parseWriterSchemaNow(text)
	return w.p, w.err
}

func parseWriterSchemaNow(text string) (parsedSchema, error) {
	// A fresh cache per file: named types of one file's schema must not
	// leak into, or clash with, another's.
	s, err := ParseSchema(text)
	if err != nil {
		return parsedSchema{}, fmt.Errorf("parsing: %w", err)
	}
	info, err := analyze(s)
	if err != nil {
		return parsedSchema{}, err
	}
	p := parsedSchema{schema: s, info: info}
	p.decode, p.relabelled, p.decodeErr = decodingSchema(s, text)
	return p, nil
}

// Header is the file's header.
func (r *Reader[T]) Header() *Header { return r.blocks.Header() }

// WriterSchema is the parsed writer schema of the file.
func (r *Reader[T]) WriterSchema() avro.Schema { return r.writer }

// Schema is the schema records are decoded by: the writer schema, or the
// reader schema resolved against it.
func (r *Reader[T]) Schema() avro.Schema { return r.schema }

// BlockInfo describes the block of the record Next returned last: its size
// in bytes in the file and the records it holds.
func (r *Reader[T]) BlockInfo() (size, records int64) {
	if r.ahead != nil {
		return r.ahead.size, r.ahead.records
	}
	if r.blk == nil {
		return 0, 0
	}
	return r.blk.Size, r.blk.Records
}

// BytesRead is the number of bytes read from the file so far. With
// DecodeAhead it is the count as of when the block of the record Next
// returned last was read (bytes read ahead since then are not included).
func (r *Reader[T]) BytesRead() int64 {
	if r.ahead != nil {
		return r.ahead.bytesRead(r)
	}
	return r.blocks.BytesRead()
}

// Close closes the file. With DecodeAhead it first stops the goroutine
// decoding ahead and waits for it to finish what it is doing (a block read
// in progress completes first).
func (r *Reader[T]) Close() error {
	if r.ahead != nil {
		r.ahead.stopAndWait(r.blocks.Name())
	}
	return r.blocks.Close()
}

func (r *Reader[T]) recErr(kind error, cause error, format string, args ...any) error {
	return &Error{File: r.blocks.Name(), Offset: r.blk.Offset, Block: r.blk.Offset, Record: r.idx, Kind: kind, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// Next returns the next record, the offset of its block, and whether it is
// the first record of its block (a split point). It returns io.EOF after the
// last record. Errors stay: once Next failed it keeps failing.
func (r *Reader[T]) Next() (rec T, offset int64, splitPoint bool, err error) {
	// The records of the chunk decoded ahead in hand, from a slice
	// without a further call; nextAhead takes the next chunk (a chunk
	// holds up to aheadChunk records) and returns its first record.
	if a := r.ahead; a != nil && len(a.rest) > 0 {
		rec, a.rest = a.rest[0], a.rest[1:]
		return rec, a.off, false, nil // a chunk's first record is nextAhead's
	}
	return r.nextSlow()
}

// nextSlow is Next past the chunk in hand, or without decoding ahead.
func (r *Reader[T]) nextSlow() (rec T, offset int64, splitPoint bool, err error) {
	if r.ahead != nil {
		return r.nextAhead()
	}
	return r.next()
}

// next is Next without decoding ahead; with DecodeAhead only the
// goroutine decoding ahead calls it.
func (r *Reader[T]) next() (rec T, offset int64, splitPoint bool, err error) {
	if r.err != nil {
		return rec, 0, false, r.err
	}
	for r.blk == nil || r.idx >= r.blk.Records {
		if err := r.nextBlock(); err != nil {
			r.err = err
			return rec, 0, false, err
		}
	}
	if r.dyn != nil {
		p := r.dyn.new()
		if err := r.decode(p); err != nil {
			r.err = err
			return rec, 0, false, err
		}
		rec, _ = any(r.dyn.box(p)).(T) // T is any: only a nil record is left zero
	} else {
		// Decoded into the reader's own value, which is zero before each
		// decode (hamba/avro would otherwise reuse its slices and maps),
		// and copied out: rec's address never reaches the decoder, so rec
		// stays off the heap (taking it made every call, on NewReaderOf's
		// path too, allocate a T).
		if r.scratch == nil {
			r.scratch = new(T)
		}
		var zero T // scratch is zero here: it is cleared after every decode
		if err := r.decode(unsafe.Pointer(r.scratch)); err != nil {
			*r.scratch = zero
			r.err = err
			return zero, 0, false, err
		}
		rec, *r.scratch = *r.scratch, zero
	}
	r.idx++
	if r.idx == r.blk.Records {
		// The declared records must use the block's bytes exactly.
		if r.ar.Peek(); r.ar.Error == nil {
			r.err = r.recErr(ErrRecordCount, nil, "the block declares %d records but bytes remain after them (%d bytes of data)", r.blk.Records, len(r.blk.Data))
			var zero T
			return zero, 0, false, r.err
		}
	}
	return rec, r.blk.Offset, r.idx == 1, nil
}

func (r *Reader[T]) nextBlock() error {
	blk, err := r.blocks.Next()
	if err != nil {
		return err
	}
	r.blk, r.idx = blk, 0
	n, size := blk.Records, int64(len(blk.Data))
	if min := r.info.root.min; min > 0 {
		if n > size/min {
			return r.recErr(ErrRecordCount, nil, "the block declares %d records of at least %d bytes each but holds %d bytes of data", n, min, size)
		}
	} else if n > r.lim.MaxRecords {
		return r.recErr(ErrLimit, nil, "the block declares %d records, over the limit of %d", n, r.lim.MaxRecords)
	}
	if n == 0 && size > 0 {
		return r.recErr(ErrRecordCount, nil, "the block declares no records but holds %d bytes of data", size)
	}
	costing := !r.never && r.info.mayExceed(r.prof, r.rootSlot, size, r.lim.MaxAlloc)
	if r.valid || r.micros || costing {
		v := validator{b: blk.Data, zeroBudget: r.lim.MaxRecords, maxDepth: r.lim.MaxDepth, micros: r.micros, costing: costing, prof: r.prof, limit: r.lim.MaxAlloc}
		p := 0
		for ; r.idx < n; r.idx++ {
			v.cost = r.rootSlot
			q, err := v.datum(r.info.root, p, 0)
			if err != nil {
				kind := ErrCorruptData
				switch {
				case errors.Is(err, errShort):
					kind = ErrRecordCount
				case errors.Is(err, ErrLimit):
					kind = ErrLimit
				case errors.Is(err, ErrRange):
					kind = ErrRange
				}
				return r.recErr(kind, err, "record starting at data byte %d of %d", p, size)
			}
			if v.cost > r.lim.MaxAlloc {
				return r.recErr(ErrLimit, nil, "the record at data bytes %d-%d decodes into about %d bytes (estimated from its strings, bytes, arrays, maps and fixed values), over the %d-byte limit (Limits.MaxAlloc; avroio.WithMaxAlloc)", p, q, v.cost, r.lim.MaxAlloc)
			}
			p = q
		}
		if p != len(blk.Data) {
			return r.recErr(ErrRecordCount, nil, "the block declares %d records but they end at data byte %d of %d", n, p, size)
		}
		r.idx = 0
	}
	r.ar.Reset(blk.Data)
	r.ar.Error = nil
	return nil
}

// decode decodes one record into rec, turning decoder failures (and panics)
// into errors that say where.
func (r *Reader[T]) decode(rec unsafe.Pointer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = r.recErr(ErrCorruptData, fmt.Errorf("%v", p), "decoder panicked")
		}
	}()
	r.dec.Decode(rec, r.ar)
	if e := r.ar.Error; e != nil {
		msg := e.Error()
		switch {
		case errors.Is(e, io.EOF), errors.Is(e, io.ErrUnexpectedEOF):
			return r.recErr(ErrRecordCount, e, "the block's data ends inside record %d of the %d it declares", r.idx, r.blk.Records)
		case errors.Is(e, ErrRange):
			return r.recErr(ErrRange, e, "decoding into %v", r.goType)
		case errors.Is(e, ErrLimit):
			return r.recErr(ErrLimit, e, "decoding")
		case strings.Contains(msg, "MaxByteSliceSize"), strings.Contains(msg, "MaxSliceAllocSize"):
			return r.recErr(ErrLimit, e, "a length in the record exceeds the %d-byte limit", r.lim.MaxAlloc)
		case strings.Contains(strings.ToLower(msg), "is unsupported for avro"):
			// hamba/avro builds decoders lazily per branch: a Go type that
			// cannot hold part of the schema shows up at the first datum
			// that uses that part.
			return r.recErr(ErrSchema, e, "Go type %v cannot hold the schema", r.goType)
		}
		return r.recErr(ErrCorruptData, e, "decoding")
	}
	return nil
}
