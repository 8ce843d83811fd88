package sdf

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
)

// Unbounded is the End of a range whose end is not known yet.
const Unbounded = math.MaxInt64

// OffsetRange is the restriction of every offset-based reader: the half-open
// range [Start, End) of positions whose split points it reads. End may be
// Unbounded.
type OffsetRange struct {
	Start, End int64
}

func init() {
	t := reflect.TypeOf((*OffsetRange)(nil)).Elem()
	runtime.RegisterType(t)
	runtime.RegisterType(reflect.TypeOf((*Tracker)(nil)))
	runtime.RegisterFunction(encodeOffsetRange)
	runtime.RegisterFunction(decodeOffsetRange)
	coder.RegisterCoder(t, encodeOffsetRange, decodeOffsetRange)
}

func encodeOffsetRange(r OffsetRange) []byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(r.Start))
	binary.BigEndian.PutUint64(b[8:], uint64(r.End))
	return b[:]
}

func decodeOffsetRange(b []byte) (OffsetRange, error) {
	if len(b) != 16 {
		return OffsetRange{}, fmt.Errorf("sdf: OffsetRange encoding has %d bytes, want 16", len(b))
	}
	return OffsetRange{
		Start: int64(binary.BigEndian.Uint64(b[:8])),
		End:   int64(binary.BigEndian.Uint64(b[8:])),
	}, nil
}

// IsBounded reports whether End is known.
func (r OffsetRange) IsBounded() bool { return r.End != Unbounded }

// Size is End-Start, 0 for an empty or inverted range. An unbounded range has
// size math.MaxInt64-Start.
func (r OffsetRange) Size() int64 {
	if r.End <= r.Start {
		return 0
	}
	return r.End - r.Start
}

// IsEmpty reports whether the range holds no position.
func (r OffsetRange) IsEmpty() bool { return r.End <= r.Start }

func (r OffsetRange) String() string {
	if !r.IsBounded() {
		return fmt.Sprintf("[%d, unbounded)", r.Start)
	}
	return fmt.Sprintf("[%d, %d)", r.Start, r.End)
}
