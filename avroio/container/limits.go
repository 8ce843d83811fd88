package container

// DefaultMaxAlloc is the default of Limits.MaxAlloc: 64 MiB.
const DefaultMaxAlloc = 64 << 20

// DefaultMaxHeaderEntries is the default of Limits.MaxHeaderEntries.
const DefaultMaxHeaderEntries = 1024

// DefaultMaxDepth is the default of Limits.MaxDepth.
const DefaultMaxDepth = 1000

// MaxMaxDepth is the largest Limits.MaxDepth: decoders recurse once per
// level, and avroio's Records nest a Go map per level.
const MaxMaxDepth = 10000

// minMaxSchemaSize is the smallest default of Limits.MaxSchemaSize.
const minMaxSchemaSize = 64 << 10

// Limits bound what a hostile or corrupt file can make a reader allocate.
// Every length field read from a file (metadata sizes, block sizes, record
// counts, decompressed sizes, string and array lengths inside datums) is
// checked against them before anything is allocated for it. The zero value
// means the defaults.
type Limits struct {
	// MaxAlloc bounds what a length in the file may make a reader
	// allocate: the header, one block's compressed bytes, one block's
	// decompressed bytes, and what one record decodes into (its strings,
	// bytes, arrays, maps and fixed values together, what Go's maps and
	// growing slices allocate for them, and one encoding of the record by
	// a coder, as estimated before the record is decoded; see budget.go).
	// A record over it is refused naming the field whose value took it
	// over, before that value is decoded. Default DefaultMaxAlloc
	// (64 MiB); Avro writers cut blocks at 16 KiB-1 MiB, so this is far
	// above real data.
	MaxAlloc int64
	// MaxRecords bounds the record count of one block when records of the
	// schema can encode to zero bytes (so the count cannot be checked against
	// the block's size), and the number of zero-width array items in one
	// block. Default MaxAlloc/16.
	MaxRecords int64
	// MaxHeaderEntries bounds the number of metadata entries in a header.
	// Each costs a map entry and two allocations beyond its bytes, so a
	// header of millions of tiny entries costs far more than its size.
	// Default DefaultMaxHeaderEntries (1024); writers set a handful.
	MaxHeaderEntries int
	// MaxSchemaSize bounds the length of the writer schema's JSON text.
	// Parsing a schema takes about 45 times its length in memory at its
	// peak, so this is what keeps a hostile header's cost proportional to
	// MaxAlloc. Default MaxAlloc/64 (1 MiB by default), at least 64 KiB.
	MaxSchemaSize int64
	// MaxDepth bounds how deeply a datum nests records, arrays and maps
	// (the top record is level 1; unions add no level): decoding recurses
	// once per level. It matters for recursive schemas, whose data nests
	// as deep as it says, and for schemas nested deeper than it, which are
	// refused. Default DefaultMaxDepth (1000), at most MaxMaxDepth.
	MaxDepth int
}

func (l Limits) withDefaults() Limits {
	if l.MaxAlloc <= 0 {
		l.MaxAlloc = DefaultMaxAlloc
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = l.MaxAlloc / 16
		if l.MaxRecords < 1 {
			l.MaxRecords = 1
		}
	}
	if l.MaxHeaderEntries <= 0 {
		l.MaxHeaderEntries = DefaultMaxHeaderEntries
	}
	if l.MaxSchemaSize <= 0 {
		l.MaxSchemaSize = max(l.MaxAlloc/64, minMaxSchemaSize)
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	l.MaxDepth = min(l.MaxDepth, MaxMaxDepth)
	return l
}
