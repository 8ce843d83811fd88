package avroio

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
)

// Schemas inferred from Go types (SchemaOf; Write without a schema), by
// the rules of Beam Java's AvroIO.write(Class), which asks Avro's
// ReflectData: a class is a record named after it in its package's
// namespace, a field of a record type is that record, defined once and
// named where it comes again. The Go types map as SchemaOf documents.

var (
	timeTime       = reflect.TypeFor[time.Time]()
	ratValueType   = reflect.TypeFor[big.Rat]()
	ratPointerType = reflect.TypeFor[*big.Rat]()
)

// SchemaOf is the Avro schema (JSON) that Write infers for elements of Go
// type t when it is given no schema, as Beam Java's AvroIO.write(Class)
// infers one through Avro's ReflectData. t is a struct, or a pointer to
// one; it becomes a record, and its fields (hamba/avro's fields of a
// struct, as Read and Write match them: exported fields and the fields of
// embedded structs, named by their `avro` tag or else their Go name, in
// declaration order, `avro:"-"` left out) become its fields:
//
//	bool                        boolean
//	int8, int16, int32,         int
//	uint8, uint16
//	int, int64, uint32          long (time.Duration too: nanoseconds)
//	float32, float64            float, double
//	string                      string
//	[]byte                      bytes
//	[N]byte                     fixed of size N
//	time.Time                   long timestamp-micros
//	civil.Date                  int date
//	civil.Time                  long time-micros
//	civil.DateTime              long local-timestamp-micros
//	*big.Rat                    bytes decimal, with the precision and scale
//	                            of the field's tag: `avro:"price,decimal(38,9)"`
//	struct S                    record (nested)
//	*T                          ["null", T], default null (so **big.Rat is
//	                            a nullable decimal, *S a nullable record)
//	[]T                         array of T
//	map[K]T, K a string kind    map of T
//
// Records and fixed types are named as ReflectData names classes: a named
// Go type by its name, in the namespace of its package's import path,
// each element made an Avro name (characters other than letters, digits
// and '_' become '_'; "github.com/acme/events" is the namespace
// "github_com.acme.events"); an unnamed struct or [N]byte by the record
// that holds it and the field's Avro name joined by '_' ("Order_address"),
// in that record's namespace (an unnamed element type itself is "Record").
// A type that comes again is referred to by its name. The civil types
// (cloud.google.com/go/civil) are Java's LocalDate, LocalTime and
// LocalDateTime, as Avro's conversions map them (local-timestamp-micros
// is Avro 1.10's; readers before it see the long); Read and Write convert
// them exactly, times truncated to the microsecond (see Write). A field with a
// decimal(P,S) option needs 1 <= P and 0 <= S <= P, and holds *big.Rat
// (directly, or in pointers, slices and maps).
//
// Refused, with an error naming the field's Go path ("Order.Lines[].Ch")
// and why: channels, functions, interfaces (any), complex numbers, uint,
// uint64 and uintptr (no Avro type holds them), maps whose keys are not
// strings, arrays other than [N]byte (use a slice), a pointer to a
// pointer (but **big.Rat), a big.Rat held by value (Read cannot read it:
// use *big.Rat), a *big.Rat without a decimal(P,S) tag, an unknown tag
// option, a name that is not an Avro name, two Go
// types that would have the same Avro name, and recursive types (a struct
// that holds itself, through any pointers, slices and maps): Avro's
// ReflectData refers to the record by name there, but a schema of a
// recursive type is refused here, as its values would need a depth limit
// that Write has no option for; give such a type a schema.
func SchemaOf(t reflect.Type) (string, error) {
	if t == nil {
		return "", fmt.Errorf("avroio.SchemaOf: a nil type")
	}
	s, err := inferSchema(t)
	if err != nil {
		return "", fmt.Errorf("avroio.SchemaOf(%v): %w", t, err)
	}
	return s, nil
}

// inferSchema is SchemaOf's schema, with errors that do not name the call.
func inferSchema(t reflect.Type) (string, error) {
	top := t
	if top.Kind() == reflect.Pointer {
		top = top.Elem()
	}
	if top.Kind() != reflect.Struct || top == timeTime || top == ratValueType || isCivil(top) {
		return "", fmt.Errorf("only a struct type (or a pointer to one) has a schema to infer, not %v: give Write a schema", t)
	}
	in := &inferrer{defined: map[string]reflect.Type{}, named: map[reflect.Type]avro.NamedSchema{}, open: map[reflect.Type]string{}}
	s, err := in.record(top, top.Name(), "", top.Name())
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("encoding the inferred schema: %w", err)
	}
	return string(b), nil
}

// inferrer is one inference: the named types defined so far, and the
// structs being inferred (to refuse recursion).
type inferrer struct {
	defined map[string]reflect.Type           // an Avro full name -> the Go type that defined it
	named   map[reflect.Type]avro.NamedSchema // a Go type -> the record or fixed it defined
	open    map[reflect.Type]string           // structs being inferred -> their Go path
}

// place is where in the Go type a value is: its Go path for errors, the
// Avro name that an unnamed record or fixed there takes, the namespace
// of the record that holds it, and the field's decimal option.
type place struct {
	path      string
	field     string // the Avro field
	name      string
	namespace string
	decimal   *decimalTag
}

// decimalTag is a field's decimal(P,S) option; used says that a *big.Rat
// took it.
type decimalTag struct {
	precision, scale int
	used             bool
}

func (p place) fail(format string, args ...any) error {
	return fmt.Errorf("field %s: %s", p.path, fmt.Sprintf(format, args...))
}

// schema is the Avro schema of values of Go type t at p.
func (in *inferrer) schema(t reflect.Type, p place) (avro.Schema, error) {
	switch {
	case t == timeTime:
		return avro.NewPrimitiveSchema(avro.Long, avro.NewPrimitiveLogicalSchema(avro.TimestampMicros)), nil
	case t == ratPointerType:
		if p.decimal == nil {
			return nil, p.fail("a *big.Rat needs the precision and scale of its decimal: tag it `avro:\"%s,decimal(P,S)\"`", p.field)
		}
		p.decimal.used = true
		return avro.NewPrimitiveSchema(avro.Bytes, avro.NewDecimalLogicalSchema(p.decimal.precision, p.decimal.scale)), nil
	case t == ratValueType:
		return nil, p.fail("a big.Rat held by value reads back as 0 (hamba/avro), so Read refuses it: make it a *big.Rat")
	case t == civilDateType:
		return avro.NewPrimitiveSchema(avro.Int, avro.NewPrimitiveLogicalSchema(avro.Date)), nil
	case t == civilTimeType:
		return avro.NewPrimitiveSchema(avro.Long, avro.NewPrimitiveLogicalSchema(avro.TimeMicros)), nil
	case t == civilDateTimeType:
		return avro.NewPrimitiveSchema(avro.Long, avro.NewPrimitiveLogicalSchema(avro.LocalTimestampMicros)), nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return avro.NewPrimitiveSchema(avro.Boolean, nil), nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16:
		return avro.NewPrimitiveSchema(avro.Int, nil), nil
	case reflect.Int, reflect.Int64, reflect.Uint32:
		return avro.NewPrimitiveSchema(avro.Long, nil), nil
	case reflect.Float32:
		return avro.NewPrimitiveSchema(avro.Float, nil), nil
	case reflect.Float64:
		return avro.NewPrimitiveSchema(avro.Double, nil), nil
	case reflect.String:
		return avro.NewPrimitiveSchema(avro.String, nil), nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return avro.NewPrimitiveSchema(avro.Bytes, nil), nil
		}
		items, err := in.schema(t.Elem(), p.elem("[]"))
		if err != nil {
			return nil, err
		}
		return avro.NewArraySchema(items), nil
	case reflect.Array:
		if t.Elem().Kind() != reflect.Uint8 {
			return nil, p.fail("Avro has no type for a Go array of %v (only [N]byte, a fixed): use a slice", t.Elem())
		}
		return in.fixed(t, p)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, p.fail("an Avro map's keys are strings, not %v", t.Key())
		}
		values, err := in.schema(t.Elem(), p.elem("[key]"))
		if err != nil {
			return nil, err
		}
		return avro.NewMapSchema(values), nil
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Pointer && t.Elem() != ratPointerType {
			return nil, p.fail("a pointer to a pointer (%v) has no Avro type: use one pointer for a nullable value", t)
		}
		inner, err := in.schema(t.Elem(), p)
		if err != nil {
			return nil, err
		}
		return avro.NewUnionSchema([]avro.Schema{avro.NewNullSchema(), inner})
	case reflect.Struct:
		name, ns := p.name, p.namespace
		if t.Name() != "" {
			name, ns = t.Name(), ""
		}
		return in.record(t, name, ns, p.path)
	}
	return nil, p.fail("Avro has no type for a Go %v (%v)", t.Kind(), t)
}

// elem is the place of the elements of a slice or map at p.
func (p place) elem(suffix string) place {
	p.path += suffix
	return p
}

// typeName is the Avro name and namespace of the named Go type t (name
// and ns are the ones of an unnamed type at its place).
func typeName(t reflect.Type, name, ns string) (string, string) {
	if t.Name() == "" {
		return avroName(name), ns
	}
	var parts []string
	if pkg := t.PkgPath(); pkg != "" {
		for _, e := range strings.Split(pkg, "/") {
			parts = append(parts, avroName(e))
		}
	}
	return avroName(t.Name()), strings.Join(parts, ".")
}

// avroName is s with every character but letters, digits and '_' made
// '_', and a leading digit prefixed by '_'.
func avroName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) > 0 && '0' <= b[0] && b[0] <= '9' {
		return "_" + string(b)
	}
	return string(b)
}

// define records that the Go type t defines the Avro type of full name
// full, refusing a second Go type of the same name.
func (in *inferrer) define(t reflect.Type, full, path string) error {
	if other, ok := in.defined[full]; ok && other != t {
		return fmt.Errorf("field %s: Go types %v and %v would both be the Avro type %s: give one of them a schema, or rename it", path, other, t, full)
	}
	in.defined[full] = t
	return nil
}

// fixed is the fixed type of the byte array type t at p.
func (in *inferrer) fixed(t reflect.Type, p place) (avro.Schema, error) {
	if s, ok := in.named[t]; ok {
		return avro.NewRefSchema(s), nil
	}
	name, ns := typeName(t, p.name, p.namespace)
	f, err := avro.NewFixedSchema(name, ns, t.Len(), nil)
	if err != nil {
		return nil, p.fail("the fixed of %v: %v", t, err)
	}
	if err := in.define(t, f.FullName(), p.path); err != nil {
		return nil, err
	}
	if t.Name() != "" {
		in.named[t] = f
	}
	return f, nil
}

// record is the record of the struct type t at path, named name in
// namespace ns unless t is named.
func (in *inferrer) record(t reflect.Type, name, ns, path string) (avro.Schema, error) {
	if s, ok := in.named[t]; ok {
		return avro.NewRefSchema(s), nil
	}
	if outer, ok := in.open[t]; ok {
		return nil, fmt.Errorf("field %s: %v holds itself (it is %s too): recursive types are refused; give Write a schema", path, t, outer)
	}
	if name == "" {
		name = "Record"
	}
	name, ns = typeName(t, name, ns)
	full := name
	if ns != "" {
		full = ns + "." + name
	}
	if err := in.define(t, full, path); err != nil {
		return nil, err
	}
	in.open[t] = path
	defer delete(in.open, t)
	var fields []*avro.Field
	for _, f := range structFields(t) {
		if f.name == "-" {
			continue
		}
		fp := place{path: path + "." + f.path, field: f.name, name: name + "_" + f.name, namespace: ns}
		dec, err := parseFieldTag(f.tag)
		if err != nil {
			return nil, fp.fail("%v", err)
		}
		fp.decimal = dec
		fs, err := in.schema(f.typ, fp)
		if err != nil {
			return nil, err
		}
		if dec != nil && !dec.used {
			return nil, fp.fail("its decimal(%d,%d) option is for a *big.Rat, and %v holds none", dec.precision, dec.scale, f.typ)
		}
		var opts []avro.SchemaOption
		if fs.Type() == avro.Union {
			opts = append(opts, avro.WithDefault(nil))
		}
		af, err := avro.NewField(f.name, fs, opts...)
		if err != nil {
			return nil, fp.fail("%v", err)
		}
		fields = append(fields, af)
	}
	rs, err := avro.NewRecordSchema(name, ns, fields)
	if err != nil {
		return nil, fmt.Errorf("field %s: the record of %v: %w", path, t, err)
	}
	if t.Name() != "" {
		in.named[t] = rs
	}
	return rs, nil
}

// decimalOption is the one option of an `avro` tag that inference reads.
var decimalOption = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$`)

// parseFieldTag is the decimal option of a field's `avro` tag (what
// follows the name and a comma), nil without one.
func parseFieldTag(tag string) (*decimalTag, error) {
	_, opt, ok := strings.Cut(tag, ",")
	if !ok {
		return nil, nil
	}
	m := decimalOption.FindStringSubmatch(strings.TrimSpace(opt))
	if m == nil {
		return nil, fmt.Errorf("unknown option %q in its tag `avro:%q` (the one option is decimal(P,S), as in `avro:\"price,decimal(38,9)\"`)", opt, tag)
	}
	p, err1 := strconv.Atoi(m[1])
	s, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || p < 1 || s > p {
		return nil, fmt.Errorf("decimal(%s,%s) in its tag: the precision must be at least 1 and the scale from 0 to the precision", m[1], m[2])
	}
	return &decimalTag{precision: p, scale: s}, nil
}
