package avroio

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"cloud.google.com/go/civil"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/internal/typewalk"
)

// Civil dates and times (cloud.google.com/go/civil) in structs.
//
// civil.Date, civil.Time and civil.DateTime are Avro's date (an int of
// days since 1970-01-01), time-micros or time-millis (a time of day) and
// local-timestamp-micros or -millis (a wall clock with no zone), as Java's
// LocalDate, LocalTime and LocalDateTime are through Avro's conversions.
// hamba/avro, which reads and writes structs, has no codec for them there
// (it reads and writes a civil type as text, by its TextMarshaler, only
// for an Avro string). So a struct type holding them at such places is
// read and written through a stand-in type, built once per Go type and
// schema with reflect: the struct with every such civil field made a
// time.Time (civil.Date, civil.DateTime) or a time.Duration (civil.Time),
// which hamba/avro reads and writes, local timestamps by this package's
// rule (the wall clock is the UTC fields of the time.Time). Each value is
// converted on the way: a read decodes the stand-in and converts it to the
// Go type; Write converts each element to the stand-in and checks and
// encodes that. The stand-in's struct fields are the Go struct's fields as
// hamba/avro sees them (fields of embedded structs included), each named
// by its Avro field in a tag; a struct that holds no civil type where the
// schema has one of those types is not replaced, nor is any type that
// holds no civil type at all, which costs nothing.
//
// Conversions that cannot be exact are errors naming the field: writing a
// civil value that is not valid (civil.Date{2024, 2, 30}, the zero Date,
// Hour 24), reading a time of day outside [00:00, 24:00). Times are
// truncated to the schema's unit, as every time is.

var (
	civilDateType     = reflect.TypeFor[civil.Date]()
	civilTimeType     = reflect.TypeFor[civil.Time]()
	civilDateTimeType = reflect.TypeFor[civil.DateTime]()
)

// isCivil reports whether t is one of the civil types.
func isCivil(t reflect.Type) bool {
	return t == civilDateType || t == civilTimeType || t == civilDateTimeType
}

type civilKind uint8

const (
	civilDate     civilKind = iota + 1 // civil.Date as time.Time (date)
	civilTime                          // civil.Time as time.Duration (time-micros, time-millis)
	civilDateTime                      // civil.DateTime as time.Time (local-timestamp-*)
	civilPointer
	civilSlice
	civilMap
	civilStruct
)

// civilConv converts values of the Go type t to and from its stand-in m.
type civilConv struct {
	kind   civilKind
	t, m   reflect.Type
	elem   *civilConv   // pointer, slice, map
	fields []civilField // struct: every field of m
}

// civilField is a field of a stand-in struct: where it is in the Go
// struct, and its conversion (nil: the value is copied).
type civilField struct {
	index []int  // the Go field, from the struct (through embedded structs)
	path  string // its Go selector, for errors
	name  string // the Avro field
	conv  *civilConv
}

// Which Go types hold a civil type at any depth, and the conversions made,
// by Go type and schema.
var (
	holdsCivilCache sync.Map // reflect.Type -> bool
	civilConvs      = newBoundedCache[civilKey, civilResult](maxCachedSchemas)
)

type civilKey struct {
	t reflect.Type
	s [32]byte // the schema's CacheFingerprint (logical types included)
}

type civilResult struct {
	conv *civilConv
	err  error
}

// holdsCivil reports whether values of t hold a civil type anywhere.
func holdsCivil(t reflect.Type) bool {
	if v, ok := holdsCivilCache.Load(t); ok {
		return v.(bool)
	}
	h := typewalk.Holds(t, isCivil)
	holdsCivilCache.Store(t, h)
	return h
}

// civilStandIn is the conversion of values of Go type t, read or written
// by schema s, to and from the stand-in type hamba/avro reads and writes;
// nil when t needs none. It fails for a recursive type that would need
// one (a stand-in of a type that holds itself cannot be built).
func civilStandIn(t reflect.Type, s avro.Schema) (*civilConv, error) {
	if t == nil || s == nil || !holdsCivil(t) {
		return nil, nil
	}
	key := civilKey{t, s.CacheFingerprint()}
	if r, ok := civilConvs.get(key); ok {
		return r.conv, r.err
	}
	b := civilBuilder{open: map[reflect.Type]bool{}}
	c, err := b.build(t, s)
	if err == nil && c != nil && b.recursive != nil {
		c, err = nil, fmt.Errorf("Go type %v holds itself and civil dates or times: avroio reads and writes civil types in non-recursive types only (give the recursive part time.Time values)", b.recursive)
	}
	civilConvs.put(key, civilResult{c, err})
	return c, err
}

// civilBuilder builds one conversion: the structs being built (a struct
// met again inside itself is left as it is, and recorded).
type civilBuilder struct {
	open      map[reflect.Type]bool
	recursive reflect.Type
}

// logical reports whether s is the primitive typ with the logical type lt.
func logical(s avro.Schema, typ avro.Type, lts ...avro.LogicalType) bool {
	ps, ok := s.(*avro.PrimitiveSchema)
	if !ok || ps.Type() != typ || ps.Logical() == nil {
		return false
	}
	for _, lt := range lts {
		if ps.Logical().Type() == lt {
			return true
		}
	}
	return false
}

func (b *civilBuilder) build(t reflect.Type, s avro.Schema) (*civilConv, error) {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if !holdsCivil(t) {
		return nil, nil
	}
	if u, ok := s.(*avro.UnionSchema); ok {
		// A nullable union: its branch, into a pointer (or into the
		// value, as hamba/avro and fit.go take it).
		if s = nullableBranch(u); s == nil {
			return nil, nil
		}
		if ref, ok := s.(*avro.RefSchema); ok {
			s = ref.Schema()
		}
	}
	switch t {
	case civilDateType:
		if logical(s, avro.Int, avro.Date) {
			return &civilConv{kind: civilDate, t: t, m: timeValue}, nil
		}
		return nil, nil
	case civilTimeType:
		if logical(s, avro.Long, avro.TimeMicros) || logical(s, avro.Int, avro.TimeMillis) {
			return &civilConv{kind: civilTime, t: t, m: durationType}, nil
		}
		return nil, nil
	case civilDateTimeType:
		if logical(s, avro.Long, avro.LocalTimestampMicros, avro.LocalTimestampMillis) {
			return &civilConv{kind: civilDateTime, t: t, m: timeValue}, nil
		}
		return nil, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		c, err := b.build(t.Elem(), s)
		if c == nil || err != nil {
			return nil, err
		}
		return &civilConv{kind: civilPointer, t: t, m: reflect.PointerTo(c.m), elem: c}, nil
	case reflect.Slice:
		as, ok := s.(*avro.ArraySchema)
		if !ok {
			return nil, nil
		}
		c, err := b.build(t.Elem(), as.Items())
		if c == nil || err != nil {
			return nil, err
		}
		return &civilConv{kind: civilSlice, t: t, m: reflect.SliceOf(c.m), elem: c}, nil
	case reflect.Map:
		ms, ok := s.(*avro.MapSchema)
		if !ok || t.Key().Kind() != reflect.String {
			return nil, nil
		}
		c, err := b.build(t.Elem(), ms.Values())
		if c == nil || err != nil {
			return nil, err
		}
		return &civilConv{kind: civilMap, t: t, m: reflect.MapOf(t.Key(), c.m), elem: c}, nil
	case reflect.Struct:
		rs, ok := s.(*avro.RecordSchema)
		if !ok {
			return nil, nil
		}
		return b.record(t, rs)
	}
	return nil, nil
}

// record is the conversion of the struct t read or written as records of
// rs: a flat struct of t's fields as hamba/avro sees them.
func (b *civilBuilder) record(t reflect.Type, rs *avro.RecordSchema) (*civilConv, error) {
	if b.open[t] {
		b.recursive = t
		return nil, nil
	}
	b.open[t] = true
	defer delete(b.open, t)
	byName := recordFields(rs)
	var (
		fields  []civilField
		sfields []reflect.StructField
		changed bool
		names   = map[string]bool{}
	)
	for _, gf := range structFields(t) {
		if gf.name == "-" {
			continue
		}
		f := civilField{index: gf.index, path: gf.path, name: gf.name}
		typ := gf.typ
		if af := byName[gf.name]; af != nil {
			c, err := b.build(gf.typ, af.Type())
			if err != nil {
				return nil, err
			}
			if c != nil {
				f.conv, typ, changed = c, c.m, true
			}
		}
		// The stand-in's field is named as the Go field (the last part of
		// its selector, so that errors name it), made unique.
		name := gf.path[strings.LastIndexByte(gf.path, '.')+1:]
		for i := 2; names[name]; i++ {
			name = gf.path[strings.LastIndexByte(gf.path, '.')+1:] + "_" + strconv.Itoa(i)
		}
		names[name] = true
		fields = append(fields, f)
		sfields = append(sfields, reflect.StructField{Name: name, Type: typ, Tag: reflect.StructTag(`avro:"` + gf.name + `"`)})
	}
	if !changed {
		return nil, nil
	}
	m, err := structOf(sfields)
	if err != nil {
		return nil, fmt.Errorf("the stand-in of %v for its civil fields: %w", t, err)
	}
	return &civilConv{kind: civilStruct, t: t, m: m, fields: fields}, nil
}

// structOf is reflect.StructOf, its panics made errors.
func structOf(fields []reflect.StructField) (t reflect.Type, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return reflect.StructOf(fields), nil
}

// maxCivilYear bounds the years converted to a time.Time: beyond it,
// time.Date's arithmetic would wrap, and no Avro date (±5.8 million years)
// or timestamp holds it anyway.
const maxCivilYear = 1 << 30

// toStandIn is the stand-in of v, a value of c.t; field names the Avro
// field for errors.
func (c *civilConv) toStandIn(v reflect.Value, field string) (reflect.Value, error) {
	switch c.kind {
	case civilDate:
		d := v.Interface().(civil.Date)
		if d.Year > maxCivilYear || d.Year < -maxCivilYear || !d.IsValid() {
			return reflect.Value{}, fmt.Errorf("field %s: %s (year %d, month %d, day %d) is not a date an Avro date holds", field, d, d.Year, d.Month, d.Day)
		}
		return reflect.ValueOf(d.In(time.UTC)), nil
	case civilTime:
		ct := v.Interface().(civil.Time)
		if !ct.IsValid() {
			return reflect.Value{}, fmt.Errorf("field %s: %02d:%02d:%02d.%09d is not a time of day", field, ct.Hour, ct.Minute, ct.Second, ct.Nanosecond)
		}
		d := time.Duration(ct.Hour)*time.Hour + time.Duration(ct.Minute)*time.Minute + time.Duration(ct.Second)*time.Second + time.Duration(ct.Nanosecond)
		return reflect.ValueOf(d), nil
	case civilDateTime:
		dt := v.Interface().(civil.DateTime)
		if dt.Date.Year > maxCivilYear || dt.Date.Year < -maxCivilYear || !dt.IsValid() {
			return reflect.Value{}, fmt.Errorf("field %s: %s is not a valid date and time of day", field, dt)
		}
		return reflect.ValueOf(dt.In(time.UTC)), nil
	case civilPointer:
		out := reflect.New(c.m).Elem()
		if v.IsNil() {
			return out, nil
		}
		e, err := c.elem.toStandIn(v.Elem(), field)
		if err != nil {
			return reflect.Value{}, err
		}
		p := reflect.New(c.elem.m)
		p.Elem().Set(e)
		out.Set(p)
		return out, nil
	case civilSlice:
		if v.IsNil() {
			return reflect.Zero(c.m), nil // hamba/avro refuses it, naming the field
		}
		out := reflect.MakeSlice(c.m, v.Len(), v.Len())
		for i := range v.Len() {
			e, err := c.elem.toStandIn(v.Index(i), field+"[]")
			if err != nil {
				return reflect.Value{}, fmt.Errorf("item %d: %w", i, err)
			}
			out.Index(i).Set(e)
		}
		return out, nil
	case civilMap:
		if v.IsNil() {
			return reflect.Zero(c.m), nil
		}
		out := reflect.MakeMapWithSize(c.m, v.Len())
		it := v.MapRange()
		for it.Next() {
			e, err := c.elem.toStandIn(it.Value(), field+"{}")
			if err != nil {
				return reflect.Value{}, fmt.Errorf("key %q: %w", it.Key().String(), err)
			}
			out.SetMapIndex(it.Key(), e)
		}
		return out, nil
	default: // civilStruct
		out := reflect.New(c.m).Elem()
		for i, f := range c.fields {
			fv, err := v.FieldByIndexErr(f.index)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("field %s: Go field %s is in a nil embedded struct pointer", joinField(field, f.name), f.path)
			}
			if f.conv == nil {
				out.Field(i).Set(readable(fv))
				continue
			}
			e, err := f.conv.toStandIn(readable(fv), joinField(field, f.name))
			if err != nil {
				return reflect.Value{}, err
			}
			out.Field(i).Set(e)
		}
		return out, nil
	}
}

// fromStandIn sets out, a settable value of c.t, to the value of the
// stand-in m; field names the Avro field for errors.
func (c *civilConv) fromStandIn(m, out reflect.Value, field string) error {
	switch c.kind {
	case civilDate:
		out.Set(reflect.ValueOf(civil.DateOf(m.Interface().(time.Time).UTC())))
	case civilTime:
		d := time.Duration(m.Int())
		if d < 0 || d >= 24*time.Hour {
			return fmt.Errorf("field %s: %v after midnight is not a time of day, which a civil.Time holds", field, d)
		}
		out.Set(reflect.ValueOf(civil.Time{
			Hour: int(d / time.Hour), Minute: int(d % time.Hour / time.Minute),
			Second: int(d % time.Minute / time.Second), Nanosecond: int(d % time.Second),
		}))
	case civilDateTime:
		out.Set(reflect.ValueOf(civil.DateTimeOf(m.Interface().(time.Time).UTC())))
	case civilPointer:
		if m.IsNil() {
			out.SetZero()
			return nil
		}
		p := reflect.New(c.t.Elem())
		if err := c.elem.fromStandIn(m.Elem(), p.Elem(), field); err != nil {
			return err
		}
		out.Set(p)
	case civilSlice:
		if m.IsNil() {
			out.SetZero()
			return nil
		}
		s := reflect.MakeSlice(c.t, m.Len(), m.Len())
		for i := range m.Len() {
			if err := c.elem.fromStandIn(m.Index(i), s.Index(i), field+"[]"); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		out.Set(s)
	case civilMap:
		if m.IsNil() {
			out.SetZero()
			return nil
		}
		mp := reflect.MakeMapWithSize(c.t, m.Len())
		e := reflect.New(c.t.Elem()).Elem()
		it := m.MapRange()
		for it.Next() {
			e.SetZero()
			if err := c.elem.fromStandIn(it.Value(), e, field+"{}"); err != nil {
				return fmt.Errorf("key %q: %w", it.Key().String(), err)
			}
			mp.SetMapIndex(it.Key(), e)
		}
		out.Set(mp)
	default: // civilStruct
		for i, f := range c.fields {
			dst := settableField(out, f.index)
			if f.conv == nil {
				dst.Set(m.Field(i))
				continue
			}
			if err := f.conv.fromStandIn(m.Field(i), dst, joinField(field, f.name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// readable is v, a field that may have been reached through an unexported
// embedded struct, as a value whose Interface and Set may be used: its
// copy, when it cannot be read directly.
func readable(v reflect.Value) reflect.Value {
	if v.CanInterface() {
		return v
	}
	c := reflect.New(v.Type()).Elem()
	if v.CanAddr() {
		c.Set(reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem())
		return c
	}
	return v // not addressable and not exported: cannot be; Set reports it
}

// settableField is the field of the struct v (settable) at index,
// allocating the embedded struct pointers on the way, as hamba/avro does
// when it reads into them; embedded structs that are not exported are
// reached through their address.
func settableField(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		f := v.Field(x)
		v = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	return v
}

// convertRead converts a record read as the stand-in of c.t into a value
// of c.t.
func (c *civilConv) convertRead(rec any) (any, error) {
	out := reflect.New(c.t).Elem()
	if err := c.fromStandIn(reflect.ValueOf(rec), out, ""); err != nil {
		return nil, err
	}
	return out.Interface(), nil
}

// convertWrite converts an element of type c.t into its stand-in.
func (c *civilConv) convertWrite(elem any) (any, error) {
	v, err := c.toStandIn(reflect.ValueOf(elem), "")
	if err != nil {
		return nil, err
	}
	return v.Interface(), nil
}
