package avroio

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"
	"github.com/modern-go/reflect2"
)

// How the Go types of structs fit the Avro types of their fields, value by
// value (fields.go matches the fields themselves).
//
// hamba/avro, which reads and writes structs, accepts some pairs of Go and
// Avro types only to fail on every record (an int64 for an Avro int, when
// reading; a float64 for an Avro float, when writing), and changes values
// silently in others: it takes any Go integer of 64 bits for a time-millis
// or time-micros as a time.Duration (an int64 read gets nanoseconds), and
// it writes an int, a time-millis, a date or a timestamp by converting to
// the Avro type's width, so a value out of range wraps (a time-millis of
// 25 days is written as -593h, a Go int of 2^40 as an Avro int of 0, a
// date of 1969-12-31 12:00 as 1970-01-01). Such pairs are refused when the
// read opens a file or when Write is built, naming the Go field; values
// out of range are refused when Write encodes them (valueCheck), naming
// the field and the record.

// fitDirection says which side of hamba/avro a pair of types is checked
// for.
type fitDirection int

const (
	fitRead fitDirection = iota
	fitWrite
)

// checkKind is what a valueCheck checks of a value.
type checkKind uint8

const (
	checkNone       checkKind = iota
	checkInt32                // a Go int for an Avro int
	checkTimeMillis           // a time.Duration for a time-millis
	checkDate                 // a time.Time for a date
	checkTsMillis             // a time.Time for a timestamp-millis
	checkTsMicros             // a time.Time for a timestamp-micros
	checkStruct
	checkPointer
	checkSlice
	checkMap
)

// valueCheck checks the values of one Go type at one place of a schema
// before hamba/avro encodes them. Only places with something to check
// have one.
type valueCheck struct {
	kind   checkKind
	fields []fieldCheck // struct
	elem   *valueCheck  // pointer, slice, map
}

type fieldCheck struct {
	index []int  // the Go field, from the struct (through embedded structs)
	name  string // the Avro field
	check *valueCheck
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	timeValue    = reflect.TypeFor[time.Time]()
)

// fitTypes checks every value of Go type t against schema s, at every
// depth (struct fields, pointers, slices, maps), for dir, and returns what
// Write must check of each value (nil: nothing). path names the place in
// Go terms.
func fitTypes(t reflect.Type, s avro.Schema, dir fitDirection) (*valueCheck, error) {
	f := fitter{dir: dir, done: map[fitKey]*valueCheck{}}
	return f.fit(t, s, "")
}

type fitKey struct {
	t reflect.Type
	s avro.Schema
}

type fitter struct {
	dir  fitDirection
	done map[fitKey]*valueCheck
}

func (f *fitter) fit(t reflect.Type, s avro.Schema, path string) (*valueCheck, error) {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	key := fitKey{t, s}
	if c, ok := f.done[key]; ok {
		return c, nil // a recursive type: its check is being built
	}
	switch st := s.(type) {
	case *avro.UnionSchema:
		b := nullableBranch(st)
		if b == nil {
			return nil, nil // hamba/avro's own union handling
		}
		if t.Kind() == reflect.Pointer {
			c, err := f.fit(t.Elem(), b, path)
			if c == nil || err != nil {
				return nil, err
			}
			return &valueCheck{kind: checkPointer, elem: c}, nil
		}
		return f.fit(t, b, path)
	case *avro.RecordSchema:
		if t.Kind() == reflect.Pointer {
			c, err := f.fit(t.Elem(), s, path)
			if c == nil || err != nil {
				return nil, err
			}
			return &valueCheck{kind: checkPointer, elem: c}, nil
		}
		if t.Kind() != reflect.Struct {
			return nil, nil
		}
		c := &valueCheck{kind: checkStruct}
		f.done[key] = c
		byName := recordFields(st)
		for _, gf := range structFields(t) {
			af := byName[gf.name]
			if af == nil {
				continue
			}
			fc, err := f.fit(gf.typ, af.Type(), path+gf.path+".")
			if err != nil {
				return nil, err
			}
			if fc != nil {
				c.fields = append(c.fields, fieldCheck{index: gf.index, name: af.Name(), check: fc})
			}
		}
		if len(c.fields) == 0 {
			f.done[key] = nil
			return nil, nil
		}
		return c, nil
	case *avro.ArraySchema:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil, nil
		}
		c, err := f.fit(t.Elem(), st.Items(), path)
		if c == nil || err != nil || t.Kind() == reflect.Array {
			return nil, err
		}
		return &valueCheck{kind: checkSlice, elem: c}, nil
	case *avro.MapSchema:
		if t.Kind() != reflect.Map {
			return nil, nil
		}
		c, err := f.fit(t.Elem(), st.Values(), path)
		if c == nil || err != nil {
			return nil, err
		}
		return &valueCheck{kind: checkMap, elem: c}, nil
	}
	return f.leaf(t, s, path)
}

// leaf checks a Go type against a primitive, enum or fixed schema.
func (f *fitter) leaf(t reflect.Type, s avro.Schema, path string) (*valueCheck, error) {
	if t.Kind() == reflect.Interface {
		return nil, nil
	}
	where := func() string {
		if path == "" {
			return "the Go type " + t.String()
		}
		return fmt.Sprintf("Go field %s (%v)", strings.TrimSuffix(path, "."), t)
	}
	var lt avro.LogicalType
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		lt = ls.Logical().Type()
	}
	if (lt == avro.TimeMillis || lt == avro.TimeMicros) && t.Kind() == reflect.Int64 && t != durationType {
		return nil, fmt.Errorf("%s holds an Avro %s, which hamba/avro reads and writes as a time.Duration in nanoseconds, so an %v would change the number; make it a time.Duration, an int (the number itself), or read it with a reader schema in which the field is a plain %s", where(), lt, t, s.Type())
	}
	if err := hambaRefuses(t, s, f.dir); err != nil {
		if isCivil(t) {
			return nil, fmt.Errorf("%s cannot hold Avro %s: a civil.Date holds an Avro date (int), a civil.Time a time-micros or time-millis, a civil.DateTime a local-timestamp-micros or -millis, and each of them a string (as text)", where(), schemaDescription(s))
		}
		return nil, fmt.Errorf("%s cannot hold Avro %s: %w", where(), schemaDescription(s), err)
	}
	if f.dir != fitWrite {
		return nil, nil
	}
	isTime := t.ConvertibleTo(timeValue) && t.Kind() == reflect.Struct
	switch {
	case s.Type() == avro.Int && lt == avro.TimeMillis && t.Kind() == reflect.Int64:
		return &valueCheck{kind: checkTimeMillis}, nil
	case s.Type() == avro.Int && (t.Kind() == reflect.Int || t.Kind() == reflect.Int64):
		return &valueCheck{kind: checkInt32}, nil
	case isTime && lt == avro.Date:
		return &valueCheck{kind: checkDate}, nil
	case isTime && (lt == avro.TimestampMillis || lt == avro.LocalTimestampMillis):
		return &valueCheck{kind: checkTsMillis}, nil
	case isTime && (lt == avro.TimestampMicros || lt == avro.LocalTimestampMicros):
		return &valueCheck{kind: checkTsMicros}, nil
	}
	return nil, nil
}

func schemaDescription(s avro.Schema) string {
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		return fmt.Sprintf("%s (%s)", s.Type(), ls.Logical().Type())
	}
	return string(s.Type())
}

// hambaRefuses is the error hamba/avro's decoder (or encoder) of values
// of t by the leaf schema s fails every value with, or nil: hamba/avro
// makes such decoders when the types do not fit, and fails only when a
// record is read.
func hambaRefuses(t reflect.Type, s avro.Schema, dir fitDirection) error {
	switch dir {
	case fitRead:
		dec := avro.DefaultConfig.DecoderOf(s, reflect2.Type2(reflect.PointerTo(t)))
		if !strings.HasSuffix(reflect.TypeOf(dec).String(), ".errorDecoder") {
			return nil
		}
		r := avro.NewReader(nil, 0)
		r.Reset(nil)
		dec.Decode(unsafe.Pointer(reflect.New(t).UnsafePointer()), r)
		return r.Error
	default:
		enc := avro.DefaultConfig.EncoderOf(s, reflect2.Type2(t))
		if !strings.HasSuffix(reflect.TypeOf(enc).String(), ".errorEncoder") {
			return nil
		}
		w := avro.NewWriter(nil, 16)
		enc.Encode(unsafe.Pointer(reflect.New(t).UnsafePointer()), w)
		return w.Error
	}
}

// check checks the value v (of the Go type c was made for); avroField
// names the Avro field it fills, for errors.
func (c *valueCheck) check(v reflect.Value, avroField string) error {
	switch c.kind {
	case checkStruct:
		for _, f := range c.fields {
			fv, err := v.FieldByIndexErr(f.index)
			if err != nil {
				continue // through a nil embedded pointer: hamba/avro fails on it
			}
			if err := f.check.check(fv, joinField(avroField, f.name)); err != nil {
				return err
			}
		}
	case checkPointer:
		if !v.IsNil() {
			return c.elem.check(v.Elem(), avroField)
		}
	case checkSlice:
		for i := range v.Len() {
			if err := c.elem.check(v.Index(i), avroField+"[]"); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
	case checkMap:
		it := v.MapRange()
		for it.Next() {
			if err := c.elem.check(it.Value(), avroField+"{}"); err != nil {
				return fmt.Errorf("key %v: %w", it.Key(), err)
			}
		}
	case checkInt32:
		if x := v.Int(); x < math.MinInt32 || x > math.MaxInt32 {
			return fmt.Errorf("field %s: %d does not fit an Avro int", avroField, x)
		}
	case checkTimeMillis:
		if _, err := timeMillisOf(time.Duration(v.Int())); err != nil {
			return fmt.Errorf("field %s: %w", avroField, err)
		}
	case checkDate, checkTsMillis, checkTsMicros:
		t := v.Convert(timeValue).Interface().(time.Time)
		var err error
		switch c.kind {
		case checkDate:
			if _, err = dateOf(t); err == nil && t.Unix() < 0 && t.Unix()%86400 != 0 {
				err = fmt.Errorf("%v has a time of day before 1970, and hamba/avro would write the next day: truncate it to the day (t.UTC().Truncate(24 * time.Hour))", t)
			}
		case checkTsMillis:
			_, err = unixUnits(t, 1000)
		default:
			_, err = unixUnits(t, 1000000)
		}
		if err != nil {
			return fmt.Errorf("field %s: %w", avroField, err)
		}
	}
	return nil
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// timeMillisOf is d as a time-millis (truncated to the millisecond), or
// an error when an Avro int cannot hold it.
func timeMillisOf(d time.Duration) (int64, error) {
	ms := int64(d / time.Millisecond)
	if ms < math.MinInt32 || ms > math.MaxInt32 {
		return 0, fmt.Errorf("the duration %v is %d ms, which a time-millis (an Avro int, ±24.8 days) cannot hold", d, ms)
	}
	return ms, nil
}

// dateOf is the day of t in UTC as a date, or an error when an Avro int
// cannot hold it.
func dateOf(t time.Time) (int64, error) {
	sec := t.Unix()
	days := sec / 86400
	if sec%86400 < 0 {
		days--
	}
	if days < math.MinInt32 || days > math.MaxInt32 {
		return 0, fmt.Errorf("%v is day %d of the Unix epoch, which a date (an Avro int) cannot hold", t, days)
	}
	return days, nil
}

// unixUnits is t in units of 1/perSecond s since the Unix epoch
// (truncated toward the past, as t.UnixMilli and t.UnixMicro do), or an
// error when a long cannot hold it (t.UnixMilli would wrap).
func unixUnits(t time.Time, perSecond int64) (int64, error) {
	sec, q := t.Unix(), int64(t.Nanosecond())/(1e9/perSecond)
	bad := func() (int64, error) {
		unit := "ms"
		if perSecond != 1000 {
			unit = "µs"
		}
		return 0, fmt.Errorf("%v is beyond the ±2^63 %s since 1970 that an Avro long holds", t, unit)
	}
	if sec >= 0 {
		if sec > (math.MaxInt64-q)/perSecond {
			return bad()
		}
		return sec*perSecond + q, nil
	}
	// sec*perSecond + q = (sec+1)*perSecond - (perSecond-q), computed
	// without passing below the smallest long on the way.
	s1 := sec + 1
	if s1 < math.MinInt64/perSecond {
		return bad()
	}
	hi, d := s1*perSecond, perSecond-q
	if hi < math.MinInt64+d {
		return bad()
	}
	return hi - d, nil
}
