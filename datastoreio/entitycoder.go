package datastoreio

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"reflect"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"

	"github.com/sdfio/sdfio/internal/beamtypes"
	"github.com/sdfio/sdfio/internal/wire"
)

// Generic entities in a pipeline: datastore.PropertyList, *datastore.PropertyList
// and *datastore.Entity get a Beam coder (and, as fields of structs, a
// schema logical type each) that keeps every property exactly: its name,
// its NoIndex flag and its value, of the Go type it holds. Values may be
// what the client loads (nil, int64, bool, string, float64 with NaN
// payloads and -0, []byte, time.Time, datastore.GeoPoint, *datastore.Key,
// *datastore.Entity, []interface{} of those) and the other types it saves
// (int, int32, float32); any other type fails the encoding, naming the
// property. A time keeps its instant to the nanosecond and its offset from
// UTC (time.Time.MarshalBinary). Nesting (entities and arrays) is limited
// to MaxEntityDepth levels, more than the service stores.
//
// The encoding: a version byte, then the value. A property list is a
// uvarint count of properties, each a name (uvarint length and bytes), a
// NoIndex byte and a value; a value is a tag byte and its payload.
const MaxEntityDepth = 64

const entityCoderVersion = 1

const (
	tagNil byte = iota
	tagInt64
	tagBool
	tagString
	tagFloat64
	tagBytes
	tagNilBytes
	tagTime
	tagGeo
	tagKey
	tagNilKey
	tagEntity
	tagNilEntity
	tagArray
	tagNilArray
	tagInt
	tagInt32
	tagFloat32
)

var (
	propertyType        = reflect.TypeFor[datastore.Property]()
	propertyListType    = reflect.TypeFor[datastore.PropertyList]()
	propertyListPtrType = reflect.TypeFor[*datastore.PropertyList]()
)

func init() {
	for _, t := range []reflect.Type{propertyType, propertyListType, propertyListPtrType, entityPtrType} {
		beam.RegisterType(t)
	}
	// Beam Go codes a PCollection of a slice type as a list of its
	// elements, and makes its element type the unnamed slice: a
	// PCollection of datastore.PropertyList is one of []datastore.Property,
	// each property coded by the coder of datastore.Property.
	beam.RegisterCoder(propertyType, encodeProperty, decodeProperty)
	beam.RegisterCoder(propertyListType, EncodePropertyList, DecodePropertyList)
	beam.RegisterCoder(propertyListPtrType, encodePropertyListPtr, decodePropertyListPtr)
	beam.RegisterCoder(entityPtrType, EncodeEntity, DecodeEntity)

	// As fields of element types: shadows (package internal/beamtypes)
	// stored as the same bytes.
	beamtypes.Replace(propertyListType, bytesField("a datastore.PropertyList", func(v propertyListField) ([]byte, error) {
		return EncodePropertyList(datastore.PropertyList(v))
	}), bytesFieldDec("a datastore.PropertyList", func(b []byte) (propertyListField, error) {
		pl, err := DecodePropertyList(b)
		return propertyListField(pl), err
	}))
	beamtypes.Replace(propertyListPtrType, bytesField("a *datastore.PropertyList", func(v propertyListPtrField) ([]byte, error) {
		return encodePropertyListPtr(v)
	}), bytesFieldDec("a *datastore.PropertyList", func(b []byte) (propertyListPtrField, error) {
		return decodePropertyListPtr(b)
	}))
	beamtypes.Replace(entityPtrType, bytesField("a *datastore.Entity", func(v entityField) ([]byte, error) {
		return EncodeEntity(v)
	}), bytesFieldDec("a *datastore.Entity", func(b []byte) (entityField, error) {
		return DecodeEntity(b)
	}))
}

// The shadows of datastore.PropertyList, *datastore.PropertyList and
// *datastore.Entity as fields.
type (
	propertyListField    datastore.PropertyList
	propertyListPtrField *datastore.PropertyList
	entityField          *datastore.Entity
)

// bytesField and bytesFieldDec make a field's encoding of a byte coder: a
// row of one bytes field.
func bytesField[S any](what string, enc func(S) ([]byte, error)) func(S, io.Writer) error {
	return func(v S, w io.Writer) error {
		if err := coder.WriteSimpleRowHeader(1, w); err != nil {
			return fmt.Errorf("datastoreio: encoding %s: %w", what, err)
		}
		b, err := enc(v)
		if err != nil {
			return err
		}
		return coder.EncodeBytes(b, w)
	}
}

func bytesFieldDec[S any](what string, dec func([]byte) (S, error)) func(io.Reader) (S, error) {
	return func(r io.Reader) (S, error) {
		var zero S
		if err := coder.ReadSimpleRowHeader(1, r); err != nil {
			return zero, fmt.Errorf("datastoreio: decoding %s: %w", what, err)
		}
		b, err := coder.DecodeBytes(r)
		if err != nil {
			return zero, fmt.Errorf("datastoreio: decoding %s: %w", what, err)
		}
		return dec(b)
	}
}

// EncodePropertyList is the Beam coder of datastore.PropertyList (see
// MaxEntityDepth for what it keeps). A nil list and an empty one differ.
func EncodePropertyList(pl datastore.PropertyList) ([]byte, error) {
	b := []byte{entityCoderVersion}
	if pl == nil {
		return append(b, tagNilArray), nil
	}
	b = append(b, tagArray)
	return appendProperties(b, pl, 1)
}

// DecodePropertyList decodes what EncodePropertyList wrote.
func DecodePropertyList(b []byte) (datastore.PropertyList, error) {
	d, err := newEntityDecoder(b)
	if err != nil {
		return nil, err
	}
	tag, err := d.byte()
	if err != nil {
		return nil, err
	}
	var pl datastore.PropertyList
	switch tag {
	case tagNilArray:
	case tagArray:
		if pl, err = d.properties(1); err != nil {
			return nil, err
		}
		if pl == nil {
			pl = datastore.PropertyList{}
		}
	default:
		return nil, d.errorf("tag %d where a property list starts", tag)
	}
	return pl, d.end()
}

func encodeProperty(p datastore.Property) ([]byte, error) {
	return appendProperties([]byte{entityCoderVersion}, []datastore.Property{p}, 1)
}

func decodeProperty(b []byte) (datastore.Property, error) {
	d, err := newEntityDecoder(b)
	if err != nil {
		return datastore.Property{}, err
	}
	props, err := d.properties(1)
	if err != nil {
		return datastore.Property{}, err
	}
	if len(props) != 1 {
		return datastore.Property{}, d.errorf("%d properties where one was encoded", len(props))
	}
	return props[0], d.end()
}

func encodePropertyListPtr(p *datastore.PropertyList) ([]byte, error) {
	if p == nil {
		return []byte{entityCoderVersion, tagNil}, nil
	}
	return EncodePropertyList(*p)
}

func decodePropertyListPtr(b []byte) (*datastore.PropertyList, error) {
	if len(b) == 2 && b[0] == entityCoderVersion && b[1] == tagNil {
		return nil, nil
	}
	pl, err := DecodePropertyList(b)
	if err != nil {
		return nil, err
	}
	return &pl, nil
}

// EncodeEntity is the Beam coder of *datastore.Entity: its key (nil, or
// incomplete, kept as it is) and properties.
func EncodeEntity(e *datastore.Entity) ([]byte, error) {
	return appendValue([]byte{entityCoderVersion}, "", e, 0)
}

// DecodeEntity decodes what EncodeEntity wrote.
func DecodeEntity(b []byte) (*datastore.Entity, error) {
	d, err := newEntityDecoder(b)
	if err != nil {
		return nil, err
	}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	e, ok := v.(*datastore.Entity)
	if !ok && v != nil {
		return nil, d.errorf("a %T where an entity was encoded", v)
	}
	return e, d.end()
}

func appendProperties(b []byte, props []datastore.Property, depth int) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(len(props)))
	for _, p := range props {
		b = wire.AppendString(b, p.Name)
		if p.NoIndex {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		var err error
		if b, err = appendValue(b, p.Name, p.Value, depth); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// appendValue appends the tag and payload of v, the value of property
// name, nested depth levels deep.
func appendValue(b []byte, name string, v any, depth int) ([]byte, error) {
	if depth > MaxEntityDepth {
		return nil, fmt.Errorf("datastoreio: encoding property %q: nested more than %d levels (MaxEntityDepth)", name, MaxEntityDepth)
	}
	switch x := v.(type) {
	case nil:
		return append(b, tagNil), nil
	case int64:
		return binary.AppendVarint(append(b, tagInt64), x), nil
	case int:
		return binary.AppendVarint(append(b, tagInt), int64(x)), nil
	case int32:
		return binary.AppendVarint(append(b, tagInt32), int64(x)), nil
	case bool:
		if x {
			return append(b, tagBool, 1), nil
		}
		return append(b, tagBool, 0), nil
	case string:
		return wire.AppendString(append(b, tagString), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat64), math.Float64bits(x)), nil
	case float32:
		return binary.LittleEndian.AppendUint32(append(b, tagFloat32), math.Float32bits(x)), nil
	case []byte:
		if x == nil {
			return append(b, tagNilBytes), nil
		}
		return wire.AppendBytes(append(b, tagBytes), x), nil
	case time.Time:
		t, err := x.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("datastoreio: encoding property %q: %w", name, err)
		}
		return wire.AppendBytes(append(b, tagTime), t), nil
	case datastore.GeoPoint:
		b = binary.LittleEndian.AppendUint64(append(b, tagGeo), math.Float64bits(x.Lat))
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(x.Lng)), nil
	case *datastore.Key:
		if x == nil {
			return append(b, tagNilKey), nil
		}
		return appendKey(append(b, tagKey), x), nil
	case *datastore.Entity:
		if x == nil {
			return append(b, tagNilEntity), nil
		}
		b = append(b, tagEntity)
		if x.Key == nil {
			b = append(b, 0)
		} else {
			b = appendKey(append(b, 1), x.Key)
		}
		return appendProperties(b, x.Properties, depth+1)
	case []interface{}:
		if x == nil {
			return append(b, tagNilArray), nil
		}
		b = binary.AppendUvarint(append(b, tagArray), uint64(len(x)))
		for _, e := range x {
			var err error
			if b, err = appendValue(b, name, e, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("datastoreio: encoding property %q: a value of type %T is not a Datastore value "+
		"(nil, int64, int, int32, bool, string, float64, float32, []byte, time.Time, datastore.GeoPoint, *datastore.Key, *datastore.Entity, []interface{})", name, v)
}

// appendKey appends a key as its path, root first: per element its kind,
// then 0 and an id, or 1 and a name, or 2 (incomplete); the namespace of
// each element, as keys may (wrongly) mix them.
func appendKey(b []byte, k *datastore.Key) []byte {
	path := keyPath(k)
	b = binary.AppendUvarint(b, uint64(len(path)))
	for _, e := range path {
		b = wire.AppendString(b, e.Namespace)
		b = wire.AppendString(b, e.Kind)
		switch {
		case e.ID != 0:
			b = binary.AppendVarint(append(b, 0), e.ID)
		case e.Name != "":
			b = wire.AppendString(append(b, 1), e.Name)
		default:
			b = append(b, 2)
		}
	}
	return b
}

// entityDecoder reads the encoding through a wire.Reader, which checks
// every count against the bytes left before anything is allocated for it,
// so a hostile count cannot make it allocate more than the input's size.
type entityDecoder struct {
	r *wire.Reader
	n int
}

func newEntityDecoder(b []byte) (*entityDecoder, error) {
	d := &entityDecoder{r: wire.NewReader(b), n: len(b)}
	v, err := d.byte()
	if err != nil {
		return nil, err
	}
	if v != entityCoderVersion {
		return nil, d.errorf("encoding version %d, want %d", v, entityCoderVersion)
	}
	return d, nil
}

// err is the reader's first failure, naming the entity's size and the
// byte offset.
func (d *entityDecoder) err() error {
	if err := d.r.Err(); err != nil {
		return fmt.Errorf("datastoreio: decoding an entity of %d bytes: %w", d.n, err)
	}
	return nil
}

func (d *entityDecoder) errorf(format string, args ...any) error {
	d.r.Fail(format, args...)
	return d.err()
}

func (d *entityDecoder) end() error {
	d.r.Done("entity")
	return d.err()
}

func (d *entityDecoder) byte() (byte, error) {
	v := d.r.Byte()
	return v, d.err()
}

func (d *entityDecoder) varint() (int64, error) {
	v := d.r.Varint()
	return v, d.err()
}

// count reads a count of items of at least minSize bytes each.
func (d *entityDecoder) count(minSize int) (int, error) {
	n := d.r.Count(minSize)
	return n, d.err()
}

func (d *entityDecoder) bytes() ([]byte, error) {
	b := d.r.Bytes()
	return b[:len(b):len(b)], d.err()
}

func (d *entityDecoder) string() (string, error) {
	v := d.r.Str()
	return v, d.err()
}

func (d *entityDecoder) fixed(n int) ([]byte, error) {
	b := d.r.Fixed(n)
	return b, d.err()
}

func (d *entityDecoder) properties(depth int) ([]datastore.Property, error) {
	n, err := d.count(3) // name length, NoIndex, tag
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	props := make([]datastore.Property, n)
	for i := range props {
		if props[i].Name, err = d.string(); err != nil {
			return nil, err
		}
		flag, err := d.byte()
		if err != nil {
			return nil, err
		}
		if flag > 1 {
			return nil, d.errorf("NoIndex byte %d of property %q", flag, props[i].Name)
		}
		props[i].NoIndex = flag == 1
		if props[i].Value, err = d.value(depth); err != nil {
			return nil, err
		}
	}
	return props, nil
}

func (d *entityDecoder) value(depth int) (any, error) {
	if depth > MaxEntityDepth {
		return nil, d.errorf("nested more than %d levels (MaxEntityDepth)", MaxEntityDepth)
	}
	tag, err := d.byte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case tagNil:
		return nil, nil
	case tagInt64:
		return d.varint()
	case tagInt:
		v, err := d.varint()
		if err == nil && int64(int(v)) != v {
			err = d.errorf("int %d overflows this platform's int", v)
		}
		return int(v), err
	case tagInt32:
		v, err := d.varint()
		if err == nil && int64(int32(v)) != v {
			err = d.errorf("int32 %d out of range", v)
		}
		return int32(v), err
	case tagBool:
		v, err := d.byte()
		if err == nil && v > 1 {
			err = d.errorf("bool byte %d", v)
		}
		return v == 1, err
	case tagString:
		return d.string()
	case tagFloat64:
		b, err := d.fixed(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case tagFloat32:
		b, err := d.fixed(4)
		if err != nil {
			return nil, err
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case tagBytes:
		b, err := d.bytes()
		if err != nil {
			return nil, err
		}
		return append(make([]byte, 0, len(b)), b...), nil
	case tagNilBytes:
		return []byte(nil), nil
	case tagTime:
		b, err := d.bytes()
		if err != nil {
			return nil, err
		}
		var t time.Time
		if err := t.UnmarshalBinary(b); err != nil {
			return nil, d.errorf("time: %v", err)
		}
		return t, nil
	case tagGeo:
		b, err := d.fixed(16)
		if err != nil {
			return nil, err
		}
		return datastore.GeoPoint{
			Lat: math.Float64frombits(binary.LittleEndian.Uint64(b)),
			Lng: math.Float64frombits(binary.LittleEndian.Uint64(b[8:])),
		}, nil
	case tagKey:
		return d.key()
	case tagNilKey:
		return (*datastore.Key)(nil), nil
	case tagEntity:
		e := &datastore.Entity{}
		has, err := d.byte()
		if err != nil {
			return nil, err
		}
		switch has {
		case 0:
		case 1:
			if e.Key, err = d.key(); err != nil {
				return nil, err
			}
		default:
			return nil, d.errorf("key byte %d of an entity", has)
		}
		if e.Properties, err = d.properties(depth + 1); err != nil {
			return nil, err
		}
		return e, nil
	case tagNilEntity:
		return (*datastore.Entity)(nil), nil
	case tagArray:
		n, err := d.count(1)
		if err != nil {
			return nil, err
		}
		arr := make([]interface{}, n)
		for i := range arr {
			if arr[i], err = d.value(depth + 1); err != nil {
				return nil, err
			}
		}
		return arr, nil
	case tagNilArray:
		return []interface{}(nil), nil
	}
	return nil, d.errorf("unknown value tag %d", tag)
}

func (d *entityDecoder) key() (*datastore.Key, error) {
	n, err := d.count(3) // namespace, kind, id-or-name byte
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, d.errorf("a key with an empty path")
	}
	var k *datastore.Key
	for range n {
		e := &datastore.Key{Parent: k}
		if e.Namespace, err = d.string(); err != nil {
			return nil, err
		}
		if e.Kind, err = d.string(); err != nil {
			return nil, err
		}
		which, err := d.byte()
		if err != nil {
			return nil, err
		}
		switch which {
		case 0:
			if e.ID, err = d.varint(); err != nil {
				return nil, err
			}
		case 1:
			if e.Name, err = d.string(); err != nil {
				return nil, err
			}
		case 2:
		default:
			return nil, d.errorf("key element byte %d", which)
		}
		k = e
	}
	return k, nil
}

// RegisterType registers t, an entity type (a struct or a pointer to one),
// with Beam, as beam.RegisterType does, and gives t a coder of its own
// when it holds a field type Beam's own coder cannot carry between stages:
// *datastore.Key (a key field, `datastore:"__key__"`; recursive, which
// Beam refuses), datastore.PropertyList, *datastore.PropertyList and
// *datastore.Entity (stored as this package's coders of them), big.Rat
// and civil.Date. The coder is Beam's schema row coder of t with those
// fields replaced, and time.Time exact in every year. It changes the
// encoding of t only: the program's other PCollections are encoded as
// Beam encodes them. Call it in an init function, in place of
// beam.RegisterType: Read, Write and the deletes refuse a type holding
// such a field that has no coder of its own. It is the same registration
// as avroio's and bigqueryio's RegisterType.
func RegisterType(t reflect.Type) { beamtypes.Register(t) }
