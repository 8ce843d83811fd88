package avroio

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
)

// The encoding of Records into Avro datums (see generic_schema.go).

// decimalBytes is the big-endian two's complement unscaled value of r at
// scale, in size bytes (0: as few as it takes).
func decimalBytes(r *big.Rat, scale, size int) ([]byte, error) {
	v := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(bigTen, big.NewInt(int64(scale)), nil)))
	if !v.IsInt() {
		return nil, fmt.Errorf("decimal %s has more than %d digits after the point", r.RatString(), scale)
	}
	n := v.Num()
	var b []byte
	if n.Sign() >= 0 {
		b = n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	} else {
		// Two's complement: 2^(8k) + n for the smallest k that fits.
		k := (n.BitLen() + 8) / 8
		t := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(k)*8), n)
		b = t.Bytes()
		for len(b) < k {
			b = append([]byte{0}, b...)
		}
		if b[0]&0x80 == 0 {
			b = append([]byte{0xff}, b...)
		}
	}
	if size == 0 {
		return b, nil
	}
	// Drop or add sign bytes to make size.
	for len(b) > size && (b[0] == 0 && b[1]&0x80 == 0 || b[0] == 0xff && b[1]&0x80 != 0) {
		b = b[1:]
	}
	if len(b) > size {
		return nil, fmt.Errorf("decimal %s does not fit in %d bytes", r.RatString(), size)
	}
	pad := byte(0)
	if b[0]&0x80 != 0 {
		pad = 0xff
	}
	out := make([]byte, size)
	for i := range size - len(b) {
		out[i] = pad
	}
	copy(out[size-len(b):], b)
	return out, nil
}

// appendDatum appends the Avro binary encoding of v by n to b.
func appendDatum(b []byte, n *node, v any) ([]byte, error) {
	return appendDatumDepth(b, n, v, 0)
}

func typeErr(n *node, v any) error {
	return fmt.Errorf("a %T cannot be written as Avro %s (want %s)", v, n.name, n.goType)
}

func putLong(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

func putBytes(b []byte, p []byte) []byte {
	return append(putLong(b, int64(len(p))), p...)
}

// asInt64 is v as an integer, for Go integer types.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case float64: // JSON defaults
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return int64(x), true
		}
	}
	return 0, false
}

func appendDatumDepth(b []byte, n *node, v any, depth int) ([]byte, error) {
	if depth > maxDatumDepth {
		return nil, errDepth
	}
	switch n.kind {
	case kNull:
		if v != nil {
			return nil, typeErr(n, v)
		}
		return b, nil
	case kBool:
		x, ok := v.(bool)
		if !ok {
			return nil, typeErr(n, v)
		}
		if x {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case kInt, kLong:
		x, ok := asInt64(v)
		if !ok {
			return nil, typeErr(n, v)
		}
		if n.kind == kInt && (x < math.MinInt32 || x > math.MaxInt32) {
			return nil, fmt.Errorf("%d does not fit Avro int", x)
		}
		return putLong(b, x), nil
	case kFloat:
		var f float32
		switch x := v.(type) {
		case float32:
			f = x
		case float64:
			f = float32(x)
			if float64(f) != x && !math.IsNaN(x) {
				return nil, fmt.Errorf("the float64 %v is not a float32 (an Avro float holds %v): convert it with float32(x) to round it", x, f)
			}
		default:
			i, ok := asInt64(v)
			if !ok {
				return nil, typeErr(n, v)
			}
			f = float32(i)
			if !exactInt(float64(f), i) {
				return nil, fmt.Errorf("the integer %d is not a float32 (an Avro float holds %v)", i, f)
			}
		}
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(f)), nil
	case kDouble:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			i, ok := asInt64(v)
			if !ok {
				return nil, typeErr(n, v)
			}
			f = float64(i)
			if !exactInt(f, i) {
				return nil, fmt.Errorf("the integer %d is not a float64 (an Avro double holds %v)", i, f)
			}
		}
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(f)), nil
	case kString:
		switch x := v.(type) {
		case string:
			return append(putLong(b, int64(len(x))), x...), nil
		case []byte:
			return putBytes(b, x), nil
		}
		return nil, typeErr(n, v)
	case kBytes:
		switch x := v.(type) {
		case []byte:
			return putBytes(b, x), nil
		case string:
			return append(putLong(b, int64(len(x))), x...), nil
		}
		return nil, typeErr(n, v)
	case kEnum:
		s, ok := v.(string)
		if !ok {
			return nil, typeErr(n, v)
		}
		for i, sym := range n.symbols {
			if sym == s {
				return putLong(b, int64(i)), nil
			}
		}
		return nil, fmt.Errorf("%q is not a symbol of enum %s", s, n.name)
	case kDate, kTimestampMillis, kTimestampMicros, kLocalTimestampMillis, kLocalTimestampMicros:
		t, ok := v.(time.Time)
		if !ok {
			return nil, typeErr(n, v)
		}
		// A local timestamp is the wall clock of t's UTC fields, whatever
		// t's location (localtime.go): the same long as a timestamp.
		var x int64
		var err error
		switch n.kind {
		case kDate:
			x, err = dateOf(t)
		case kTimestampMillis, kLocalTimestampMillis:
			x, err = unixUnits(t, 1000)
		default:
			x, err = unixUnits(t, 1000000)
		}
		if err != nil {
			return nil, err
		}
		return putLong(b, x), nil
	case kTimeMillis, kTimeMicros:
		d, ok := v.(time.Duration)
		if !ok {
			return nil, typeErr(n, v)
		}
		if n.kind == kTimeMillis {
			ms, err := timeMillisOf(d)
			if err != nil {
				return nil, err
			}
			return putLong(b, ms), nil
		}
		return putLong(b, int64(d/time.Microsecond)), nil
	case kDecimalBytes, kDecimalFixed:
		r, ok := v.(*big.Rat)
		if !ok || r == nil {
			return nil, typeErr(n, v)
		}
		size := 0
		if n.kind == kDecimalFixed {
			size = n.size
		}
		p, err := decimalBytes(r, n.scale, size)
		if err != nil {
			return nil, err
		}
		if n.kind == kDecimalFixed {
			return append(b, p...), nil
		}
		return putBytes(b, p), nil
	case kDuration:
		d, ok := v.(avro.LogicalDuration)
		if !ok {
			if p, isBytes := v.([]byte); isBytes && len(p) == 12 {
				return append(b, p...), nil
			}
			return nil, typeErr(n, v)
		}
		b = binary.LittleEndian.AppendUint32(b, d.Months)
		b = binary.LittleEndian.AppendUint32(b, d.Days)
		return binary.LittleEndian.AppendUint32(b, d.Milliseconds), nil
	case kFixed:
		if p, ok := v.([]byte); ok {
			if len(p) != n.size {
				return nil, fmt.Errorf("%d bytes for fixed %s of %d", len(p), n.name, n.size)
			}
			return append(b, p...), nil
		}
		rv := reflect.ValueOf(v)
		if !rv.IsValid() || rv.Kind() != reflect.Array || rv.Type().Elem().Kind() != reflect.Uint8 || rv.Len() != n.size {
			return nil, typeErr(n, v)
		}
		for i := range n.size {
			b = append(b, byte(rv.Index(i).Uint()))
		}
		return b, nil
	case kArray:
		l, ok := v.([]any)
		if !ok {
			return nil, notCollection(n, v, "[]any{}")
		}
		if len(l) > 0 {
			b = putLong(b, int64(len(l)))
			var err error
			for i, e := range l {
				if b, err = appendDatumDepth(b, n.elem, e, depth+1); err != nil {
					return nil, fmt.Errorf("item %d: %w", i, err)
				}
			}
		}
		return append(b, 0), nil
	case kMap:
		m, ok := asMap(v)
		if !ok {
			return nil, notCollection(n, v, "map[string]any{}")
		}
		if len(m) > 0 {
			b = putLong(b, int64(len(m)))
			var err error
			for k, e := range m {
				b = append(putLong(b, int64(len(k))), k...)
				if b, err = appendDatumDepth(b, n.elem, e, depth+1); err != nil {
					return nil, fmt.Errorf("key %q: %w", k, err)
				}
			}
		}
		return append(b, 0), nil
	case kRecord:
		m, ok := asMap(v)
		if !ok {
			return nil, typeErr(n, v)
		}
		var err error
		found := 0
		for _, f := range n.fields {
			fv, ok := m[f.name]
			if !ok {
				if !f.hasDef {
					return nil, fmt.Errorf("record %s: field %q is missing and has no default", n.name, f.name)
				}
				fv = f.def
			} else {
				found++
			}
			if b, err = appendDatumDepth(b, f.node, fv, depth+1); err != nil {
				return nil, fmt.Errorf("field %s: %w", f.name, err)
			}
		}
		if found < len(m) {
			return nil, n.unknownKeys(m)
		}
		return b, nil
	case kUnion:
		i, inner, err := n.branchOf(v)
		if err != nil {
			return nil, err
		}
		b = putLong(b, int64(i))
		b, err = appendDatumDepth(b, n.branches[i], inner, depth+1)
		if err != nil {
			return nil, fmt.Errorf("union branch %s: %w", n.branches[i].name, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown node kind %d", n.kind)
}

// notCollection is the error of v given for array or map n, whose empty
// value is empty: nil is not one, as the schema has no null.
func notCollection(n *node, v any, empty string) error {
	if v == nil {
		return fmt.Errorf("nil for an Avro %s, which has no null: give an empty %s, or make the schema a union with null", n.avroType, empty)
	}
	return typeErr(n, v)
}

// unknownKeys is the error of a Record whose keys name fields record n
// does not have: their values would be dropped.
func (n *node) unknownKeys(m map[string]any) error {
	var extra, names []string
	for k := range m {
		if !slices.ContainsFunc(n.fields, func(f *field) bool { return f.name == k }) {
			extra = append(extra, strconv.Quote(k))
		}
	}
	for _, f := range n.fields {
		names = append(names, f.name)
	}
	slices.Sort(extra)
	return fmt.Errorf("record %s has no field %s (its fields: %s): the value would be lost", n.name, strings.Join(extra, ", "), strings.Join(names, ", "))
}

// exactInt reports whether the float f is exactly the integer i.
func exactInt(f float64, i int64) bool {
	return f >= -(1<<63) && f < 1<<63 && int64(f) == i
}

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case Record:
		return m, true
	}
	return nil, false
}
