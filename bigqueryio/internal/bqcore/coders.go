package bqcore

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/internal/beamtypes"
	"github.com/sdfio/sdfio/internal/wire"
)

// RegisterType registers t, a struct type of rows (or a pointer to one),
// with Beam, as beam.RegisterType does, and gives t a coder of its own
// when it holds a field type Beam's own coder cannot carry between stages:
// big.Rat (NUMERIC, BIGNUMERIC as *big.Rat), a struct of unexported fields
// that Beam would encode as nothing, every decimal arriving as 0; and
// civil.Date (DATE, and DATETIME, NullDate, NullDateTime through it). The
// coder is Beam's schema row coder of t with those fields stored as their
// exact text (big.Rat, "num/den") or numbers (civil.Date), and time.Time
// exact to the nanosecond and in every year. It changes the encoding of t
// only: the program's other PCollections of time.Time, *big.Rat, civil
// types and structs holding them are encoded as Beam encodes them. Call it
// in an init function, in place of beam.RegisterType: Read, Query and
// Write refuse a type holding such a field that has no coder of its own.
// It is the same registration as avroio's and datastoreio's RegisterType.
func RegisterType(t reflect.Type) { beamtypes.Register(t) }

// CheckCoder refuses output types whose values Beam could not encode,
// naming the field: every field of a struct Read fills must survive the
// coder between stages.
func CheckCoder(t reflect.Type) error {
	if t == TypeOfRow {
		return nil
	}
	if coder.LookupCustomCoder(t) == nil {
		if _, err := schema.FromType(t); err != nil {
			return fmt.Errorf("Beam cannot encode %s, so its rows could not leave the read's stage: %w", t, err)
		}
	}
	return beamtypes.Check(t, "bigqueryio.RegisterType")
}

// Beam Go's schema row coder, the coder Beam would give this package's own
// element types, writes a nil slice, map or pointer field as a null,
// although the schema it sends the runner with the coder says that a
// slice or map field is never null. Beam Go decodes that; a runner that
// decodes rows itself does not: Flink's RowCoder reads such a row by its
// schema and writes it back without the null, and the bytes no longer
// parse ("Serializer consumed more bytes than the record had", or a
// string swallowing the next elements). So each type of this package that
// crosses a PCollection (or a state cell) and holds such a field has a
// coder of its own, wireTypes: its fields in order, written as
// internal/wire writes numbers, strings and bytes, which runners carry as
// opaque bytes. One named encode/decode pair serves every type (Beam
// passes the type), so that workers find the functions by name.

// RegisterWire gives each of types the wire coder: bigqueryio gives it the
// read's StreamElement (sessionInfo.Arrow is nil in Avro sessions), bqwrite
// the batch write's reports (streamDone.Staging is nil in nearly all) and
// results (TableResult's Streams), and the streaming write's chunks,
// batches, writer schemas and the append step's state (the batching step's
// batchMeta holds numbers only: Beam's row coder carries it). It is called
// from package init functions only: the codecs are written then and only
// read after.
func RegisterWire(types ...reflect.Type) {
	for _, t := range types {
		c, err := wireCodecOf(t)
		if err != nil {
			panic(fmt.Sprintf("bigqueryio: no wire coder for %v: %v", t, err))
		}
		wireCodecs[t] = c
		// beam.RegisterType of t elsewhere in the package, before or
		// after this, registers the same type: both are kept.
		beam.RegisterCoder(t, EncodeWire, DecodeWire)
	}
}

// wireCodecs are the wire codecs of the registered types.
var wireCodecs = map[reflect.Type]wireCodec{}

func init() {
	// Callers that spare Beam a reflective call per element.
	register.Function2x2(EncodeWire)
	register.Function2x2(DecodeWire)
}

// EncodeWire is the wire coder's encoder of v, a value of t.
func EncodeWire(t reflect.Type, v typex.T) ([]byte, error) {
	c, ok := wireCodecs[t]
	if !ok {
		return nil, fmt.Errorf("bigqueryio: no wire coder for %v", t)
	}
	rv := reflect.ValueOf(v)
	return c.enc(make([]byte, 0, c.size(rv)), rv), nil
}

// DecodeWire is the wire coder's decoder of a value of t. Byte slices
// share b, which Beam allocates for each element.
func DecodeWire(t reflect.Type, b []byte) (typex.T, error) {
	c, ok := wireCodecs[t]
	if !ok {
		return nil, fmt.Errorf("bigqueryio: no wire coder for %v", t)
	}
	r := wire.NewReader(b)
	v := reflect.New(t).Elem()
	c.dec(r, v)
	if err := r.Done(t.String()); err != nil {
		return nil, fmt.Errorf("bigqueryio: decoding a %v: %w", t, err)
	}
	return v.Interface(), nil
}

// wireCodec writes a value (enc) in at most size bytes, and reads one into
// a settable value (dec; a failure is the reader's).
type wireCodec struct {
	size func(v reflect.Value) int
	enc  func(b []byte, v reflect.Value) []byte
	dec  func(r *wire.Reader, v reflect.Value)
}

// fixedSize is the size of a value taking at most n bytes.
func fixedSize(n int) func(reflect.Value) int { return func(reflect.Value) int { return n } }

// wireCodecOf is the codec of t: a struct of exported fields of strings,
// booleans, integers, floats, time.Time, structs as this one and slices of
// those ([]byte as bytes); a slice keeps whether it was nil. Every value
// takes at least a byte, which bounds the counts a decoder believes.
func wireCodecOf(t reflect.Type) (wireCodec, error) {
	switch t.Kind() {
	case reflect.String:
		return wireCodec{
			size: func(v reflect.Value) int { return binary.MaxVarintLen64 + v.Len() },
			enc:  func(b []byte, v reflect.Value) []byte { return wire.AppendString(b, v.String()) },
			dec:  func(r *wire.Reader, v reflect.Value) { v.SetString(r.Str()) },
		}, nil
	case reflect.Bool:
		return wireCodec{
			size: fixedSize(1),
			enc: func(b []byte, v reflect.Value) []byte {
				if v.Bool() {
					return append(b, 1)
				}
				return append(b, 0)
			},
			dec: func(r *wire.Reader, v reflect.Value) {
				switch x := r.Byte(); x {
				case 0, 1:
					v.SetBool(x == 1)
				default:
					r.Fail("a boolean of %d", x)
				}
			},
		}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return wireCodec{
			size: fixedSize(binary.MaxVarintLen64),
			enc:  func(b []byte, v reflect.Value) []byte { return wire.AppendVarint(b, v.Int()) },
			dec: func(r *wire.Reader, v reflect.Value) {
				if x := r.Varint(); v.OverflowInt(x) {
					r.Fail("%d overflows %v", x, v.Type())
				} else {
					v.SetInt(x)
				}
			},
		}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return wireCodec{
			size: fixedSize(binary.MaxVarintLen64),
			enc:  func(b []byte, v reflect.Value) []byte { return wire.AppendUvarint(b, v.Uint()) },
			dec: func(r *wire.Reader, v reflect.Value) {
				if x := r.Uvarint(); v.OverflowUint(x) {
					r.Fail("%d overflows %v", x, v.Type())
				} else {
					v.SetUint(x)
				}
			},
		}, nil
	case reflect.Float32, reflect.Float64:
		return wireCodec{
			size: fixedSize(8),
			enc:  func(b []byte, v reflect.Value) []byte { return wire.AppendUint64(b, math.Float64bits(v.Float())) },
			dec:  func(r *wire.Reader, v reflect.Value) { v.SetFloat(math.Float64frombits(r.Uint64())) },
		}, nil
	case reflect.Slice:
		return wireSliceCodec(t)
	case reflect.Struct:
		if t == TypeOfTime {
			// time.Time's binary form, as Beam's own coder keeps it: the
			// instant to the nanosecond and the zone's offset (an offset
			// it cannot keep, beyond ±22 days, is written in UTC).
			return wireCodec{
				size: fixedSize(17),
				enc: func(b []byte, v reflect.Value) []byte {
					// Its length (15 or 16 bytes, a one-byte varint) first.
					tm, at := v.Interface().(time.Time), len(b)
					out, err := tm.AppendBinary(append(b, 0))
					if err != nil {
						out, _ = tm.UTC().AppendBinary(append(b, 0))
					}
					out[at] = byte(len(out) - at - 1)
					return out
				},
				dec: func(r *wire.Reader, v reflect.Value) {
					var tm time.Time
					if p := r.Bytes(); r.Err() == nil {
						if err := tm.UnmarshalBinary(p); err != nil {
							r.Fail("a time: %v", err)
							return
						}
						v.Set(reflect.ValueOf(tm))
					}
				},
			}, nil
		}
		return wireStructCodec(t)
	}
	return wireCodec{}, fmt.Errorf("%v: the wire coder has no encoding of a %v", t, t.Kind())
}

// wireSliceCodec writes 0 for a nil slice, else its length+1 and its
// items; []byte as its bytes, which decode as a slice of the encoding.
func wireSliceCodec(t reflect.Type) (wireCodec, error) {
	if t.Elem().Kind() == reflect.Uint8 {
		return wireCodec{
			size: func(v reflect.Value) int { return binary.MaxVarintLen64 + v.Len() },
			enc: func(b []byte, v reflect.Value) []byte {
				if v.IsNil() {
					return append(b, 0)
				}
				p := v.Bytes()
				return append(wire.AppendUvarint(b, uint64(len(p))+1), p...)
			},
			dec: func(r *wire.Reader, v reflect.Value) {
				if n := wireCount(r); n >= 0 {
					if p := r.Fixed(n); r.Err() == nil {
						v.SetBytes(p[:n:n])
					}
				}
			},
		}, nil
	}
	if t == typeOfByteSlices {
		return byteSlicesWire, nil
	}
	return wireItemsCodec(t)
}

// wireCount reads a slice's length+1: -1 for nil.
func wireCount(r *wire.Reader) int {
	n := r.Uvarint()
	if n == 0 || r.Err() != nil {
		return -1
	}
	if n-1 > uint64(r.Left()) {
		r.Fail("a slice of %d with %d bytes left", n-1, r.Left())
		return -1
	}
	return int(n - 1)
}

// wireItemsCodec is wireSliceCodec's codec of a slice of anything but
// bytes: its items one after another, each by its own codec.
func wireItemsCodec(t reflect.Type) (wireCodec, error) {
	item, err := wireCodecOf(t.Elem())
	if err != nil {
		return wireCodec{}, err
	}
	return wireCodec{
		size: func(v reflect.Value) int {
			n := binary.MaxVarintLen64
			for i := range v.Len() {
				n += item.size(v.Index(i))
			}
			return n
		},
		enc: func(b []byte, v reflect.Value) []byte {
			if v.IsNil() {
				return append(b, 0)
			}
			b = wire.AppendUvarint(b, uint64(v.Len())+1)
			for i := range v.Len() {
				b = item.enc(b, v.Index(i))
			}
			return b
		},
		dec: func(r *wire.Reader, v reflect.Value) {
			n := wireCount(r)
			if n < 0 {
				return
			}
			s := reflect.MakeSlice(t, n, n)
			for i := 0; i < n && r.Err() == nil; i++ {
				item.dec(r, s.Index(i))
			}
			v.Set(s)
		},
	}, nil
}

// typeOfByteSlices is the type of the streaming write's rows.
var typeOfByteSlices = reflect.TypeFor[[][]byte]()

// byteSlicesWire is the codec of a [][]byte.
var byteSlicesWire = byteSlicesCodec()

// byteSlicesCodec is wireSliceCodec's codec of a [][]byte, the rows of
// every chunk and batch of the streaming write: the same bytes as the
// general codec of a slice of []byte (count, then each item as a []byte),
// written and read without a reflect.Value per row.
func byteSlicesCodec() wireCodec {
	return wireCodec{
		size: func(v reflect.Value) int {
			rows := v.Interface().([][]byte)
			n := binary.MaxVarintLen64 * (len(rows) + 1)
			for _, p := range rows {
				n += len(p)
			}
			return n
		},
		enc: func(b []byte, v reflect.Value) []byte {
			rows := v.Interface().([][]byte)
			if rows == nil {
				return append(b, 0)
			}
			b = wire.AppendUvarint(b, uint64(len(rows))+1)
			for _, p := range rows {
				if p == nil {
					b = append(b, 0)
					continue
				}
				b = append(wire.AppendUvarint(b, uint64(len(p))+1), p...)
			}
			return b
		},
		dec: func(r *wire.Reader, v reflect.Value) {
			n := wireCount(r)
			if n < 0 {
				return
			}
			rows := make([][]byte, n)
			for i := 0; i < n && r.Err() == nil; i++ {
				if m := wireCount(r); m >= 0 {
					if p := r.Fixed(m); r.Err() == nil {
						rows[i] = p[:m:m]
					}
				}
			}
			v.Set(reflect.ValueOf(rows))
		},
	}
}

// wireStructCodec writes a struct's fields in order. It refuses an
// unexported field (it could not be set) and a struct of none (it would
// take no bytes).
func wireStructCodec(t reflect.Type) (wireCodec, error) {
	if t.NumField() == 0 {
		return wireCodec{}, fmt.Errorf("%v has no fields", t)
	}
	fields := make([]wireCodec, t.NumField())
	for i := range fields {
		f := t.Field(i)
		if !f.IsExported() {
			return wireCodec{}, fmt.Errorf("field %s of %v is unexported", f.Name, t)
		}
		c, err := wireCodecOf(f.Type)
		if err != nil {
			return wireCodec{}, fmt.Errorf("field %s of %v: %w", f.Name, t, err)
		}
		fields[i] = c
	}
	return wireCodec{
		size: func(v reflect.Value) int {
			n := 0
			for i, f := range fields {
				n += f.size(v.Field(i))
			}
			return n
		},
		enc: func(b []byte, v reflect.Value) []byte {
			for i, f := range fields {
				b = f.enc(b, v.Field(i))
			}
			return b
		},
		dec: func(r *wire.Reader, v reflect.Value) {
			for i, f := range fields {
				f.dec(r, v.Field(i))
			}
		},
	}, nil
}

// HasWire reports whether t has the wire coder.
func HasWire(t reflect.Type) bool { _, ok := wireCodecs[t]; return ok }

// WireTypes are the types given the wire coder whose package path is pkg.
func WireTypes(pkg string) []reflect.Type {
	var out []reflect.Type
	for t := range wireCodecs {
		if t.PkgPath() == pkg {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
