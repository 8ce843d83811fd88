package container

// DefaultMaxAlloc is the default of Limits.MaxAlloc: 64 MiB.
const DefaultMaxAlloc = 64 << 20

// DefaultMaxHeaderEntries is the default of Limits.MaxHeaderEntries.
const DefaultMaxHeaderEntries = 1024

// minMaxSchemaSize is the smallest default of Limits.MaxSchemaSize.
const minMaxSchemaSize = 64 << 10

// Limits bound what a hostile or corrupt file can make a reader allocate.
// Every length field read from a file (metadata sizes, block sizes, record
// counts, decompressed sizes, string and array lengths inside datums) is
// checked against them before anything is allocated for it. The zero value
// means the defaults.
type Limits struct {
	// MaxAlloc bounds a single allocation driven by a length in the file: the
	// header, one block's compressed bytes, one block's decompressed bytes,
	// one string or bytes value, one array. Default DefaultMaxAlloc (64 MiB);
	// Avro writers cut blocks at 16 KiB-1 MiB, so this is far above real data.
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
	return l
}
