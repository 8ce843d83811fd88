package avroio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/box"
	"github.com/sdfio/sdfio/internal/wire"
)

// Record is a generic Avro record, as ReadGeneric returns them: field name
// to value. Each Avro type has one Go type:
//
//	null            nil
//	boolean         bool
//	int             int
//	long            int64
//	float, double   float32, float64
//	string, enum    string (uuid too)
//	bytes           []byte
//	fixed           [n]byte
//	array           []any
//	map             map[string]any
//	record          map[string]any (a nested record; the top one is a Record)
//	decimal         *big.Rat (bytes or fixed)
//	date, timestamp-millis/micros: time.Time in UTC
//	local-timestamp-millis/micros: time.Time in UTC whose fields are the
//	                wall clock (the same on every worker, whatever its time
//	                zone; see "Local timestamps" in the package doc)
//	time-millis, time-micros: time.Duration
//	duration        avro.LogicalDuration
//
// A union's value is nil for its null branch and otherwise the value of
// its branch, bare, with one exception: where two or more branches of the
// union have the same Go type (date and timestamp-millis, both time.Time;
// time-millis and time-micros; two records; a string and an enum; decimals
// in bytes and in fixed), a value of such a branch is a one-key
// map[string]any from the branch's name to the value, so that the branch
// is never lost. A branch's name is its full name for named types
// ("ns.Rec", "ns.Color") and else its type, with its logical type after a
// dot: "int.date", "long.timestamp-millis", "long.time-micros". So
// ["null","string"] gives nil or "x", ["null","ns.Rec"] nil or the record,
// ["int","string"] 5 or "x", and ["null","int.date","long.timestamp-millis"]
// nil, {"int.date": t} or {"long.timestamp-millis": t}. Write, given
// Records, encodes them back by the same branches: a bare value by the
// branch of its Go type, a one-key map by the branch it names. It writes a
// local timestamp by the UTC fields of the time.Time, whatever its zone,
// as it does for structs, so a Record read is written back unchanged.
//
// With a reader schema (ReaderSchema), Records have the reader schema's
// shape: its fields, defaults and unions.
//
// A Record is a map[string]any and can be used as one. Its Beam coder
// (registered by this package) keeps every one of these values and types
// exactly, where Beam's default JSON coder for a map would turn numbers
// into float64 and bytes into strings; times keep their instant, wall
// clock and zone offset.
//
// To decode fast, ReadGeneric and the coder box the numbers, strings, byte
// slices, lists and times of consecutive records into shared allocations
// of at most 1 KiB each (and the coder decodes a record's keys and strings
// into one copy of its encoding): a value kept after its record is dropped
// keeps at most that much alive. Values are never shared: byte
// slices and lists have no spare capacity, so changing or appending to one
// never touches another.
type Record map[string]any

// RecordType is the reflect.Type of Record, for ReadAll and ReadFiles of
// generic records.
var RecordType = reflect.TypeFor[Record]()

// Value tags of the Record coder.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagInt
	tagInt64
	tagFloat32
	tagFloat64
	tagString
	tagBytes
	tagFixed
	tagList
	tagMap
	tagRat
	tagTime
	tagDuration
	tagLogicalDuration
	tagInt32
)

// encodeRecord encodes r deterministically (map keys sorted), so that equal
// records have equal encodings.
func encodeRecord(r Record) ([]byte, error) {
	// One allocation for most records: the size of the last one, which
	// records of one PCollection mostly share.
	b, err := appendValue(make([]byte, 0, min(lastRecordSize.Load()+32, maxSizeHint)), map[string]any(r))
	if err == nil {
		lastRecordSize.Store(int64(len(b)))
	}
	return b, err
}

// lastRecordSize is the length of the last Record encoded, a hint for the
// next one's buffer (at most maxSizeHint).
var lastRecordSize atomic.Int64

const maxSizeHint = 64 << 10

// boxers are the datumDecoders that decodeRecord boxes values with: their
// chunks are shared by consecutive records decoded with one, as the Avro
// decoder's are (see datumDecoder).
var boxers = sync.Pool{New: func() any { return new(datumDecoder) }}

func decodeRecord(b []byte) (Record, error) {
	box := boxers.Get().(*datumDecoder)
	defer boxers.Put(box)
	// Keys and strings are substrings of one copy of the encoding.
	d := valueDecoder{r: wire.NewSharingReader(b), box: box}
	v, err := d.value(0)
	if err == nil {
		err = d.r.Done("record")
	}
	if err != nil {
		return nil, fmt.Errorf("avroio: decoding a Record: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("avroio: decoding a Record: got %T, want a map", v)
	}
	return Record(m), nil
}

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func appendString(b []byte, s string) []byte { return wire.AppendString(b, s) }

func appendValue(b []byte, v any) ([]byte, error) {
	var err error
	switch x := v.(type) {
	case nil:
		return append(b, tagNil), nil
	case bool:
		if x {
			return append(b, tagTrue), nil
		}
		return append(b, tagFalse), nil
	case int:
		return appendVarint(append(b, tagInt), int64(x)), nil
	case int32:
		return appendVarint(append(b, tagInt32), int64(x)), nil
	case int64:
		return appendVarint(append(b, tagInt64), x), nil
	case float32:
		return binary.BigEndian.AppendUint32(append(b, tagFloat32), math.Float32bits(x)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(b, tagFloat64), math.Float64bits(x)), nil
	case string:
		return appendString(append(b, tagString), x), nil
	case []byte:
		return appendString(append(b, tagBytes), string(x)), nil
	case []any:
		if len(x) > bigCollection {
			b = slices.Grow(b, encodedSize(x))
		}
		b = binary.AppendUvarint(append(b, tagList), uint64(len(x)))
		for _, e := range x {
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return b, nil
	case Record:
		return appendValue(b, map[string]any(x))
	case map[string]any:
		var kb [16]string
		keys := kb[:0]
		if len(x) > len(kb) {
			keys = make([]string, 0, len(x))
		}
		if len(x) > bigCollection {
			b = slices.Grow(b, encodedSize(x))
		}
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = binary.AppendUvarint(append(b, tagMap), uint64(len(keys)))
		for _, k := range keys {
			b = appendString(b, k)
			if b, err = appendValue(b, x[k]); err != nil {
				return nil, fmt.Errorf("field %q: %w", k, err)
			}
		}
		return b, nil
	case *big.Rat:
		if x == nil {
			return append(b, tagNil), nil
		}
		t, err := x.MarshalText()
		if err != nil {
			return nil, err
		}
		return appendString(append(b, tagRat), string(t)), nil
	case time.Time:
		// Seconds, nanoseconds and zone offset: time.MarshalBinary keeps
		// offsets in whole minutes only, and so moves times in zones with
		// offsets of seconds (local mean time before 1883 in New York).
		// The zone's name is not kept.
		b = appendVarint(append(b, tagTime), x.Unix())
		b = binary.AppendUvarint(b, uint64(x.Nanosecond()))
		if x.Location() == time.UTC {
			return append(b, 0), nil
		}
		_, off := x.Zone()
		return appendVarint(append(b, 1), int64(off)), nil
	case time.Duration:
		return appendVarint(append(b, tagDuration), int64(x)), nil
	case avro.LogicalDuration:
		b = append(b, tagLogicalDuration)
		b = binary.BigEndian.AppendUint32(b, x.Months)
		b = binary.BigEndian.AppendUint32(b, x.Days)
		return binary.BigEndian.AppendUint32(b, x.Milliseconds), nil
	}
	// Avro fixed: a byte array of the fixed's size.
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array && rv.Type().Elem().Kind() == reflect.Uint8 {
		b = binary.AppendUvarint(append(b, tagFixed), uint64(rv.Len()))
		for i := 0; i < rv.Len(); i++ {
			b = append(b, byte(rv.Index(i).Uint()))
		}
		return b, nil
	}
	return nil, fmt.Errorf("avroio: a Record cannot hold a value of type %T", v)
}

// bigCollection is the size from which the coder sizes a list or map's
// encoding before writing it: appending grows the buffer by a quarter at
// a time, which for a map of a million entries allocated 5 times its
// encoding (the estimate of what a read allocates, container's budget.go,
// counts one encoding).
const bigCollection = 1024

// encodedSize is the length of v's encoding by appendValue, or more.
func encodedSize(v any) int {
	const varint = binary.MaxVarintLen64
	switch x := v.(type) {
	case nil, bool:
		return 1
	case int, int32, int64, time.Duration:
		return 1 + varint
	case float32:
		return 5
	case float64:
		return 9
	case string:
		return 1 + varint + len(x)
	case []byte:
		return 1 + varint + len(x)
	case []any:
		n := 1 + varint
		for _, e := range x {
			n += encodedSize(e)
		}
		return n
	case Record:
		return encodedSize(map[string]any(x))
	case map[string]any:
		n := 1 + varint
		for k, e := range x {
			n += varint + len(k) + encodedSize(e)
		}
		return n
	case *big.Rat:
		if x == nil {
			return 1
		}
		return 1 + varint + 2 + (x.Num().BitLen()+x.Denom().BitLen())*3/10 + 2
	case time.Time:
		return 1 + 3*varint + 1
	case avro.LogicalDuration:
		return 13
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Array {
		return 1 + varint + rv.Len()
	}
	return 16
}

// maxDepth bounds the nesting the Record coder follows: above what any
// read lets through (container.MaxMaxDepth levels, each of which a union
// wrapped in a map may double).
const maxDepth = 2*container.MaxMaxDepth + 8

type valueDecoder struct {
	r   *wire.Reader // strings are substrings of one copy of the encoding
	box *datumDecoder
}

func (d *valueDecoder) uvarint() (uint64, error) {
	v := d.r.Uvarint()
	return v, d.r.Err()
}

func (d *valueDecoder) varint() (int64, error) {
	v := d.r.Varint()
	return v, d.r.Err()
}

func (d *valueDecoder) fixed(n int) ([]byte, error) {
	p := d.r.Fixed(n)
	return p, d.r.Err()
}

// length reads a count of items, each at least a byte.
func (d *valueDecoder) length() (int, error) {
	n := d.r.Count(1)
	return n, d.r.Err()
}

func (d *valueDecoder) str() (string, error) {
	v := d.r.Str()
	return v, d.r.Err()
}

func (d *valueDecoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("values nested too deep")
	}
	tag, err := d.fixed(1)
	if err != nil {
		return nil, err
	}
	switch tag[0] {
	case tagNil:
		return nil, nil
	case tagFalse:
		return false, nil
	case tagTrue:
		return true, nil
	case tagInt:
		v, err := d.varint()
		if err != nil {
			return nil, err
		}
		return d.box.intv(int(v)), nil
	case tagInt32:
		v, err := d.varint()
		return int32(v), err
	case tagInt64:
		v, err := d.varint()
		if err != nil {
			return nil, err
		}
		return d.box.int64v(v), nil
	case tagFloat32:
		p, err := d.fixed(4)
		if err != nil {
			return nil, err
		}
		return d.box.float32v(math.Float32frombits(binary.BigEndian.Uint32(p))), nil
	case tagFloat64:
		p, err := d.fixed(8)
		if err != nil {
			return nil, err
		}
		return d.box.float64v(math.Float64frombits(binary.BigEndian.Uint64(p))), nil
	case tagString:
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return d.box.stringv(s), nil
	case tagBytes:
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return d.box.bytesv([]byte(s)), nil
	case tagFixed:
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		p, err := d.fixed(n)
		if err != nil {
			return nil, err
		}
		// One allocation of the value's size: Interface() of a
		// reflect.Value would copy it into another.
		t := reflect.ArrayOf(n, reflect.TypeFor[byte]())
		a := reflect.New(t)
		copy(unsafe.Slice((*byte)(a.UnsafePointer()), n), p)
		return box.Pack(box.TypeWordOf(t), a.UnsafePointer()), nil
	case tagList:
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		var l []any
		if n <= maxChunkedItems {
			l = d.box.items.take(n)[:n]
		} else {
			l = make([]any, n)
		}
		for i := range l {
			if l[i], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return d.box.listv(l), nil
	case tagMap:
		n, err := d.length()
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, n)
		for range n {
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			if m[k], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return m, nil
	case tagRat:
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		// Only what MarshalText writes, "num/den": SetString would also
		// take exponents ("1e999999999"), whose values take gigabytes.
		if strings.Trim(s, "-/0123456789") != "" {
			return nil, fmt.Errorf("bad decimal %q", s)
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return nil, fmt.Errorf("bad decimal %q", s)
		}
		return r, nil
	case tagTime:
		sec, err := d.varint()
		if err != nil {
			return nil, err
		}
		nsec, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		if nsec >= 1e9 {
			return nil, fmt.Errorf("time with %d nanoseconds", nsec)
		}
		zone, err := d.fixed(1)
		if err != nil {
			return nil, err
		}
		t := time.Unix(sec, int64(nsec))
		switch zone[0] {
		case 0:
			return d.box.timev(t.UTC()), nil
		case 1:
			off, err := d.varint()
			if err != nil {
				return nil, err
			}
			if off <= -86400 || off >= 86400 {
				return nil, fmt.Errorf("time zone offset %d s", off)
			}
			return t.In(time.FixedZone("", int(off))), nil
		}
		return nil, fmt.Errorf("bad time zone tag %d", zone[0])
	case tagDuration:
		v, err := d.varint()
		if err != nil {
			return nil, err
		}
		return d.box.durationv(time.Duration(v)), nil
	case tagLogicalDuration:
		p, err := d.fixed(12)
		if err != nil {
			return nil, err
		}
		return avro.LogicalDuration{
			Months:       binary.BigEndian.Uint32(p),
			Days:         binary.BigEndian.Uint32(p[4:]),
			Milliseconds: binary.BigEndian.Uint32(p[8:]),
		}, nil
	}
	return nil, fmt.Errorf("unknown value tag %d", tag[0])
}
