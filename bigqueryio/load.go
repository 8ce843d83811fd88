package bigqueryio

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
)

// A loader fills values of a Go struct type from rows of a schema with the
// rules of the official client's RowIterator.Next: a schema field goes into
// the exported struct field whose `bigquery` tag (or, untagged, whose name)
// matches it ignoring case; `bigquery:"-"` skips a field; schema fields with
// no struct field are ignored and struct fields with no schema field are left
// zero. INTEGER fits int, int8-64, uint8-32 (overflow is an error) and
// bigquery.NullInt64; FLOAT fits float32/64 and NullFloat64; BOOLEAN bool and
// NullBool; STRING, GEOGRAPHY, JSON fit string and NullString, NullGeography,
// NullJSON; BYTES []byte; NUMERIC and BIGNUMERIC *big.Rat; TIMESTAMP
// time.Time and NullTimestamp; DATE civil.Date and NullDate; TIME civil.Time
// and NullTime; DATETIME civil.DateTime and NullDateTime; a RECORD a struct
// or a pointer to one; a repeated field a slice. NULL into a type that
// cannot hold it is an error naming the field.
type loader struct {
	typ reflect.Type
	ops []loadOp
}

type loadOp struct {
	field    []int
	value    int
	name     string
	repeated bool
	set      setFunc
}

type setFunc func(v reflect.Value, x bigquery.Value) error

var errNull = errors.New("NULL")

func newLoader(t reflect.Type, schema bigquery.Schema) (*loader, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("bigqueryio: rows load into structs, not %s", t)
	}
	ops, err := compileOps(t, schema)
	if err != nil {
		return nil, err
	}
	return &loader{typ: t, ops: ops}, nil
}

// structFields lists the exported fields of t by lower-cased BigQuery name.
func structFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("bigquery"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		out[strings.ToLower(name)] = f
	}
	return out
}

func compileOps(t reflect.Type, schema bigquery.Schema) ([]loadOp, error) {
	fields := structFields(t)
	var ops []loadOp
	for i, sf := range schema {
		f, ok := fields[strings.ToLower(sf.Name)]
		if !ok {
			continue
		}
		op, err := compileOp(t, f, sf)
		if err != nil {
			return nil, err
		}
		op.value = i
		ops = append(ops, op)
	}
	return ops, nil
}

// compileOp is how column sf goes into field f of struct type t.
func compileOp(t reflect.Type, f reflect.StructField, sf *bigquery.FieldSchema) (loadOp, error) {
	op := loadOp{field: f.Index, name: f.Name}
	ft := f.Type
	if sf.Repeated {
		if ft.Kind() != reflect.Slice {
			return op, fmt.Errorf("bigqueryio: repeated column %s needs a slice, but field %s.%s is a %s", sf.Name, t, f.Name, ft)
		}
		ft = ft.Elem()
		op.repeated = true
	}
	if sf.Type == bigquery.RecordFieldType {
		ptr := ft.Kind() == reflect.Pointer
		st := ft
		if ptr {
			st = ft.Elem()
		}
		if st.Kind() != reflect.Struct {
			return op, fmt.Errorf("bigqueryio: RECORD column %s needs a struct or *struct, but field %s.%s is a %s", sf.Name, t, f.Name, f.Type)
		}
		sub, err := compileOps(st, sf.Schema)
		if err != nil {
			return op, err
		}
		op.set = func(v reflect.Value, x bigquery.Value) error {
			if x == nil {
				if !ptr {
					return errNull
				}
				v.Set(reflect.Zero(v.Type()))
				return nil
			}
			target := v
			if ptr {
				target = reflect.New(st)
				v.Set(target)
				target = target.Elem()
			}
			return runOps(sub, target, x.([]bigquery.Value))
		}
		return op, nil
	}
	op.set = setterFor(ft, sf.Type)
	if op.set == nil {
		return op, fmt.Errorf("bigqueryio: column %s of type %s cannot be loaded into field %s.%s of type %s", sf.Name, sf.Type, t, f.Name, ft)
	}
	return op, nil
}

// load fills the struct v points to (or is, if addressable) from row.
func (l *loader) load(v reflect.Value, row []bigquery.Value) error {
	return runOps(l.ops, v, row)
}

func runOps(ops []loadOp, v reflect.Value, row []bigquery.Value) error {
	for _, op := range ops {
		if err := op.apply(v.FieldByIndex(op.field), row[op.value]); err != nil {
			return err
		}
	}
	return nil
}

// apply loads x into fv, the field of op.
func (op *loadOp) apply(fv reflect.Value, x bigquery.Value) error {
	if op.repeated {
		items, _ := x.([]bigquery.Value)
		if len(items) == 0 {
			fv.Set(reflect.Zero(fv.Type()))
			return nil
		}
		s := reflect.MakeSlice(fv.Type(), len(items), len(items))
		for i, it := range items {
			if err := op.set(s.Index(i), it); err != nil {
				if errors.Is(err, errNull) {
					return fmt.Errorf("field %s item %d: NULL cannot be loaded into %s", op.name, i, s.Type().Elem())
				}
				return fmt.Errorf("field %s item %d: %w", op.name, i, err)
			}
		}
		fv.Set(s)
		return nil
	}
	if err := op.set(fv, x); err != nil {
		if errors.Is(err, errNull) {
			return fmt.Errorf("NULL cannot be loaded into field %s of type %s", op.name, fv.Type())
		}
		return fmt.Errorf("field %s: %w", op.name, err)
	}
	return nil
}

var (
	typeOfTime     = reflect.TypeOf(time.Time{})
	typeOfDate     = reflect.TypeOf(civil.Date{})
	typeOfCTime    = reflect.TypeOf(civil.Time{})
	typeOfDateTime = reflect.TypeOf(civil.DateTime{})
	typeOfRat      = reflect.TypeOf((*big.Rat)(nil))
	typeOfBytes    = reflect.TypeOf([]byte(nil))
)

func nullable[N any](build func(x bigquery.Value) N) setFunc {
	return func(v reflect.Value, x bigquery.Value) error {
		if x == nil {
			v.Set(reflect.Zero(v.Type()))
			return nil
		}
		v.Set(reflect.ValueOf(build(x)))
		return nil
	}
}

func plain(set func(v reflect.Value, x bigquery.Value) error) setFunc {
	return func(v reflect.Value, x bigquery.Value) error {
		if x == nil {
			return errNull
		}
		return set(v, x)
	}
}

func setterFor(ft reflect.Type, st bigquery.FieldType) setFunc {
	switch st {
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		switch ft {
		case reflect.TypeOf(bigquery.NullString{}):
			return nullable(func(x bigquery.Value) bigquery.NullString {
				return bigquery.NullString{StringVal: x.(string), Valid: true}
			})
		case reflect.TypeOf(bigquery.NullGeography{}):
			return nullable(func(x bigquery.Value) bigquery.NullGeography {
				return bigquery.NullGeography{GeographyVal: x.(string), Valid: true}
			})
		case reflect.TypeOf(bigquery.NullJSON{}):
			return nullable(func(x bigquery.Value) bigquery.NullJSON { return bigquery.NullJSON{JSONVal: x.(string), Valid: true} })
		}
		if ft.Kind() == reflect.String {
			return plain(func(v reflect.Value, x bigquery.Value) error { v.SetString(x.(string)); return nil })
		}
	case bigquery.BytesFieldType:
		if ft == typeOfBytes {
			return func(v reflect.Value, x bigquery.Value) error {
				if x == nil {
					v.SetBytes(nil)
				} else {
					v.SetBytes(x.([]byte))
				}
				return nil
			}
		}
	case bigquery.IntegerFieldType:
		switch ft.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return plain(func(v reflect.Value, x bigquery.Value) error {
				n := x.(int64)
				if v.OverflowInt(n) {
					return fmt.Errorf("value %d overflows %s", n, v.Type())
				}
				v.SetInt(n)
				return nil
			})
		case reflect.Uint8, reflect.Uint16, reflect.Uint32:
			return plain(func(v reflect.Value, x bigquery.Value) error {
				n := x.(int64)
				if n < 0 || v.OverflowUint(uint64(n)) {
					return fmt.Errorf("value %d overflows %s", n, v.Type())
				}
				v.SetUint(uint64(n))
				return nil
			})
		}
		if ft == reflect.TypeOf(bigquery.NullInt64{}) {
			return nullable(func(x bigquery.Value) bigquery.NullInt64 { return bigquery.NullInt64{Int64: x.(int64), Valid: true} })
		}
	case bigquery.FloatFieldType:
		switch ft.Kind() {
		case reflect.Float32, reflect.Float64:
			return plain(func(v reflect.Value, x bigquery.Value) error {
				f := x.(float64)
				if v.OverflowFloat(f) {
					return fmt.Errorf("value %v overflows %s", f, v.Type())
				}
				v.SetFloat(f)
				return nil
			})
		}
		if ft == reflect.TypeOf(bigquery.NullFloat64{}) {
			return nullable(func(x bigquery.Value) bigquery.NullFloat64 {
				return bigquery.NullFloat64{Float64: x.(float64), Valid: true}
			})
		}
	case bigquery.BooleanFieldType:
		if ft.Kind() == reflect.Bool {
			return plain(func(v reflect.Value, x bigquery.Value) error { v.SetBool(x.(bool)); return nil })
		}
		if ft == reflect.TypeOf(bigquery.NullBool{}) {
			return nullable(func(x bigquery.Value) bigquery.NullBool { return bigquery.NullBool{Bool: x.(bool), Valid: true} })
		}
	case bigquery.TimestampFieldType:
		if ft == typeOfTime {
			return plain(setAny)
		}
		if ft == reflect.TypeOf(bigquery.NullTimestamp{}) {
			return nullable(func(x bigquery.Value) bigquery.NullTimestamp {
				return bigquery.NullTimestamp{Timestamp: x.(time.Time), Valid: true}
			})
		}
	case bigquery.DateFieldType:
		if ft == typeOfDate {
			return plain(setAny)
		}
		if ft == reflect.TypeOf(bigquery.NullDate{}) {
			return nullable(func(x bigquery.Value) bigquery.NullDate { return bigquery.NullDate{Date: x.(civil.Date), Valid: true} })
		}
	case bigquery.TimeFieldType:
		if ft == typeOfCTime {
			return plain(setAny)
		}
		if ft == reflect.TypeOf(bigquery.NullTime{}) {
			return nullable(func(x bigquery.Value) bigquery.NullTime { return bigquery.NullTime{Time: x.(civil.Time), Valid: true} })
		}
	case bigquery.DateTimeFieldType:
		if ft == typeOfDateTime {
			return plain(setAny)
		}
		if ft == reflect.TypeOf(bigquery.NullDateTime{}) {
			return nullable(func(x bigquery.Value) bigquery.NullDateTime {
				return bigquery.NullDateTime{DateTime: x.(civil.DateTime), Valid: true}
			})
		}
	case bigquery.NumericFieldType, bigquery.BigNumericFieldType:
		if ft == typeOfRat {
			return func(v reflect.Value, x bigquery.Value) error {
				if x == nil {
					v.Set(reflect.Zero(v.Type()))
				} else {
					v.Set(reflect.ValueOf(x.(*big.Rat)))
				}
				return nil
			}
		}
	}
	return nil
}

func setAny(v reflect.Value, x bigquery.Value) error {
	v.Set(reflect.ValueOf(x))
	return nil
}
