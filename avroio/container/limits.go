package container

// DefaultMaxAlloc is the default of Limits.MaxAlloc: 64 MiB.
const DefaultMaxAlloc = 64 << 20

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
	return l
}
