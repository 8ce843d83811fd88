package bigqueryio

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
)

// A loader fills values of a Go struct type from rows of a schema with the
// rules of the official client's RowIterator.Next: a schema field goes into
// the struct field that matches it (see fieldsOf: `bigquery` tags, names
// ignoring case, embedded structs); `bigquery:"-"` skips a field; schema
// fields with no struct field are ignored, and a struct field with no
// schema field is an error unless fieldRules.ignoreUnknown leaves it zero.
// INTEGER fits int, int8-64, uint8-32 (overflow is an error) and
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
	field    []int // the struct field's index (through embedded structs)
	value    int
	name     string // the field's Go path, for messages
	repeated bool
	set      setFunc
}

type setFunc func(v reflect.Value, x bigquery.Value) error

var errNull = errors.New("NULL")

func newLoader(t reflect.Type, schema bigquery.Schema, r fieldRules) (*loader, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("bigqueryio: rows load into structs, not %s", t)
	}
	ops, err := compileOps(t, schema, r, "", "the session")
	if err != nil {
		return nil, err
	}
	return &loader{typ: t, ops: ops}, nil
}

// columnOps matches the columns of schema to the fields of struct type t
// and compiles how each goes into its field: for column i, fields[i] and
// ops[i], has[i] false when no field takes it. A field that no column
// takes is an error unless r.ignoreUnknown; prefix is the Go path of t in
// the outer struct and where names schema, for messages.
func columnOps(t reflect.Type, schema bigquery.Schema, r fieldRules, prefix, where string) (fields []structField, ops []loadOp, has []bool, err error) {
	l := fieldsOf(t)
	if !r.IgnoreUnknown {
		if err := ambiguousError(t, l, prefix); err != nil {
			return nil, nil, nil, fmt.Errorf("bigqueryio: %w", err)
		}
	}
	used := make([]bool, len(l.Fields))
	fields, ops, has = make([]structField, len(schema)), make([]loadOp, len(schema)), make([]bool, len(schema))
	for i, sf := range schema {
		k := l.Match(sf.Name)
		if k < 0 {
			continue
		}
		used[k] = true
		op, err := compileOp(t, l.Fields[k], sf, r, prefix)
		if err != nil {
			return nil, nil, nil, err
		}
		op.value = i
		fields[i], ops[i], has[i] = l.Fields[k], op, true
	}
	if !r.IgnoreUnknown {
		var unknown []structField
		for k, f := range l.Fields {
			if !used[k] {
				unknown = append(unknown, f)
			}
		}
		if len(unknown) > 0 {
			names := make([]string, len(schema))
			for i, sf := range schema {
				names[i] = sf.Name
			}
			return nil, nil, nil, fmt.Errorf("bigqueryio: %w", unknownFieldsError(t, unknown, prefix, names, where, r))
		}
	}
	return fields, ops, has, nil
}

func compileOps(t reflect.Type, schema bigquery.Schema, r fieldRules, prefix, where string) ([]loadOp, error) {
	_, all, has, err := columnOps(t, schema, r, prefix, where)
	if err != nil {
		return nil, err
	}
	var ops []loadOp
	for i, op := range all {
		if has[i] {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// compileOp is how column sf goes into field f of struct type t.
func compileOp(t reflect.Type, f structField, sf *bigquery.FieldSchema, r fieldRules, prefix string) (loadOp, error) {
	name := prefix + f.GoPath
	op := loadOp{field: f.Index, name: name}
	ft := f.Typ
	if sf.Repeated {
		if ft.Kind() != reflect.Slice {
			return op, fmt.Errorf("bigqueryio: repeated column %s needs a slice, but field %s of %s is a %s", sf.Name, name, t, ft)
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
			return op, fmt.Errorf("bigqueryio: RECORD column %s needs a struct or *struct, but field %s of %s is a %s", sf.Name, name, t, f.Typ)
		}
		sub, err := compileOps(st, sf.Schema, r, name+".", "RECORD column "+sf.Name)
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
		return op, fmt.Errorf("bigqueryio: column %s of type %s cannot be loaded into field %s of %s, of type %s", sf.Name, sf.Type, name, t, ft)
	}
	return op, nil
}

// load fills the struct v points to (or is, if addressable) from row.
func (l *loader) load(v reflect.Value, row []bigquery.Value) error {
	return runOps(l.ops, v, row)
}

func runOps(ops []loadOp, v reflect.Value, row []bigquery.Value) error {
	for _, op := range ops {
		if err := op.apply(fieldAlloc(v, op.field), row[op.value]); err != nil {
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

	typeOfNullInt64     = reflect.TypeOf(bigquery.NullInt64{})
	typeOfNullFloat64   = reflect.TypeOf(bigquery.NullFloat64{})
	typeOfNullBool      = reflect.TypeOf(bigquery.NullBool{})
	typeOfNullString    = reflect.TypeOf(bigquery.NullString{})
	typeOfNullGeography = reflect.TypeOf(bigquery.NullGeography{})
	typeOfNullJSON      = reflect.TypeOf(bigquery.NullJSON{})
	typeOfNullTimestamp = reflect.TypeOf(bigquery.NullTimestamp{})
	typeOfNullDate      = reflect.TypeOf(bigquery.NullDate{})
	typeOfNullTime      = reflect.TypeOf(bigquery.NullTime{})
	typeOfNullDateTime  = reflect.TypeOf(bigquery.NullDateTime{})
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
		case typeOfNullString:
			return nullable(func(x bigquery.Value) bigquery.NullString {
				return bigquery.NullString{StringVal: x.(string), Valid: true}
			})
		case typeOfNullGeography:
			return nullable(func(x bigquery.Value) bigquery.NullGeography {
				return bigquery.NullGeography{GeographyVal: x.(string), Valid: true}
			})
		case typeOfNullJSON:
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
		if ft == typeOfNullInt64 {
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
		if ft == typeOfNullFloat64 {
			return nullable(func(x bigquery.Value) bigquery.NullFloat64 {
				return bigquery.NullFloat64{Float64: x.(float64), Valid: true}
			})
		}
	case bigquery.BooleanFieldType:
		if ft.Kind() == reflect.Bool {
			return plain(func(v reflect.Value, x bigquery.Value) error { v.SetBool(x.(bool)); return nil })
		}
		if ft == typeOfNullBool {
			return nullable(func(x bigquery.Value) bigquery.NullBool { return bigquery.NullBool{Bool: x.(bool), Valid: true} })
		}
	case bigquery.TimestampFieldType:
		if ft == typeOfTime {
			return plain(setAny)
		}
		if ft == typeOfNullTimestamp {
			return nullable(func(x bigquery.Value) bigquery.NullTimestamp {
				return bigquery.NullTimestamp{Timestamp: x.(time.Time), Valid: true}
			})
		}
	case bigquery.DateFieldType:
		if ft == typeOfDate {
			return plain(setAny)
		}
		if ft == typeOfNullDate {
			return nullable(func(x bigquery.Value) bigquery.NullDate { return bigquery.NullDate{Date: x.(civil.Date), Valid: true} })
		}
	case bigquery.TimeFieldType:
		if ft == typeOfCTime {
			return plain(setAny)
		}
		if ft == typeOfNullTime {
			return nullable(func(x bigquery.Value) bigquery.NullTime { return bigquery.NullTime{Time: x.(civil.Time), Valid: true} })
		}
	case bigquery.DateTimeFieldType:
		if ft == typeOfDateTime {
			return plain(setAny)
		}
		if ft == typeOfNullDateTime {
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
