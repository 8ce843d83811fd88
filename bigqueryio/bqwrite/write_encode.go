package bqwrite

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The rows of a write are encoded by hand as proto2 messages of a writer
// schema made from the table's schema (writerDescriptor, field i+1 for
// column i, with NUMERIC, BIGNUMERIC, DATETIME and TIME sent as strings,
// which the service takes as it takes their text in SQL, so that no value
// goes through a lossy packing): no dynamicpb message per row.

// rowEncoder encodes rows of one Go type for one table schema.
type rowEncoder struct {
	schema bigquery.Schema
	desc   *descriptorpb.DescriptorProto
	plan   *recordPlan
	isRow  bool // the rows are bqwrite.Row
}

// recordPlan is how to encode the columns of a table or RECORD.
type recordPlan struct {
	cols []colPlan
	// ignoreUnknown drops a Row's keys that are not columns
	// (WithIgnoreUnknownValues) instead of refusing the row.
	ignoreUnknown bool
}

// colPlan is one column: its proto field and, for a struct, the field that
// holds its value.
type colPlan struct {
	name     string
	num      protowire.Number
	typ      bigquery.FieldType
	repeated bool
	field    []int // the struct field's index; nil: no field (NULL), or a Row
	goPath   string
	sub      *recordPlan // RECORD
}

// newRowEncoder compiles the encoding of rows of t (a struct type or Row)
// for schema. Every field of a struct must have a column of a type that
// takes it; columns without a field are NULL.
func newRowEncoder(schema bigquery.Schema, t reflect.Type) (*rowEncoder, error) {
	desc, err := writerDescriptor(schema)
	if err != nil {
		return nil, err
	}
	e := &rowEncoder{schema: schema, desc: desc, isRow: t == typeOfRow}
	if e.isRow {
		e.plan = planRecord(schema)
		return e, nil
	}
	if e.plan, err = planStruct(schema, t, ""); err != nil {
		return nil, err
	}
	return e, nil
}

func planRecord(schema bigquery.Schema) *recordPlan {
	p := &recordPlan{}
	for i, f := range schema {
		c := colPlan{name: f.Name, num: protowire.Number(i + 1), typ: f.Type, repeated: f.Repeated}
		if f.Type == bigquery.RecordFieldType {
			c.sub = planRecord(f.Schema)
		}
		p.cols = append(p.cols, c)
	}
	return p
}

func planStruct(schema bigquery.Schema, t reflect.Type, prefix string) (*recordPlan, error) {
	l := fieldsOf(t)
	if err := ambiguousError(t, l, prefix); err != nil {
		return nil, err
	}
	used := make([]bool, len(l.Fields))
	p := &recordPlan{}
	for i, f := range schema {
		c := colPlan{name: f.Name, num: protowire.Number(i + 1), typ: f.Type, repeated: f.Repeated}
		if j := l.Match(f.Name); j >= 0 && !used[j] {
			used[j] = true
			sf := l.Fields[j]
			if sf.UnexportedPtr != "" {
				return nil, fmt.Errorf("field %s%s is reached through the unexported embedded pointer %s", prefix, sf.GoPath, sf.UnexportedPtr)
			}
			c.field, c.goPath = sf.Index, prefix+sf.GoPath
			ft := sf.Typ
			if f.Repeated {
				if ft.Kind() != reflect.Slice || ft.Elem().Kind() == reflect.Uint8 && f.Type != bigquery.BytesFieldType {
					return nil, fmt.Errorf("field %s of type %v: column %s is REPEATED, a slice takes it", c.goPath, ft, f.Name)
				}
				if ft.Elem().Kind() == reflect.Uint8 && f.Type == bigquery.BytesFieldType {
					return nil, fmt.Errorf("field %s of type %v: column %s is REPEATED BYTES, a [][]byte takes it", c.goPath, ft, f.Name)
				}
				ft = ft.Elem()
			}
			if f.Type == bigquery.RecordFieldType {
				st := ft
				if st.Kind() == reflect.Pointer {
					st = st.Elem()
				}
				if st.Kind() != reflect.Struct || isValueStruct(st) {
					return nil, fmt.Errorf("field %s of type %v: column %s is a RECORD, a struct or *struct takes it", c.goPath, ft, f.Name)
				}
				sub, err := planStruct(f.Schema, st, c.goPath+".")
				if err != nil {
					return nil, err
				}
				c.sub = sub
			} else if _, err := appendScalar(nil, &c, reflect.New(ft).Elem().Interface()); errors.Is(err, errWrongType) {
				return nil, fmt.Errorf("field %s of type %v cannot be written to column %s of type %s", c.goPath, ft, f.Name, f.Type)
			}
		}
		p.cols = append(p.cols, c)
	}
	for j, u := range used {
		if !u {
			return nil, fmt.Errorf("field %s%s matches no column (the columns are %s)", prefix, l.Fields[j].GoPath, columnNames(schema))
		}
	}
	return p, nil
}

// isValueStruct tells the struct types that are values of one column.
func isValueStruct(t reflect.Type) bool {
	switch t {
	case reflect.TypeFor[time.Time](), reflect.TypeFor[civil.Date](), reflect.TypeFor[civil.Time](),
		reflect.TypeFor[civil.DateTime](), reflect.TypeFor[big.Rat]():
		return true
	}
	return t.PkgPath() == "cloud.google.com/go/bigquery" && strings.HasPrefix(t.Name(), "Null")
}

func columnNames(schema bigquery.Schema) string {
	names := make([]string, len(schema))
	for i, f := range schema {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// errWrongType is the error of a value a column does not take.
var errWrongType = errors.New("wrong type")

// encode appends the encoded row x (a struct of the encoder's type, or a
// Row) to b.
func (e *rowEncoder) encode(b []byte, x any) ([]byte, error) {
	if e.isRow {
		m, ok := x.(Row)
		if !ok {
			return b, fmt.Errorf("a %T, not a bqwrite.Row", x)
		}
		return e.plan.appendMap(b, m, "")
	}
	v := reflect.ValueOf(x)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return e.plan.appendStruct(b, v)
}

func (p *recordPlan) appendStruct(b []byte, v reflect.Value) ([]byte, error) {
	for i := range p.cols {
		c := &p.cols[i]
		if c.field == nil {
			continue
		}
		fv, err := v.FieldByIndexErr(c.field)
		if err != nil {
			continue // through a nil embedded pointer: NULL
		}
		if c.repeated {
			for k := 0; k < fv.Len(); k++ {
				if b, err = c.appendOne(b, fv.Index(k), true); err != nil {
					return b, err
				}
			}
			continue
		}
		if b, err = c.appendOne(b, fv, false); err != nil {
			return b, err
		}
	}
	return b, nil
}

func (c *colPlan) appendOne(b []byte, v reflect.Value, item bool) ([]byte, error) {
	if c.sub != nil {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if item {
					return b, inColumn(c.name, fmt.Errorf("field %s: a nil item in a REPEATED RECORD (BigQuery arrays hold no NULL)", c.goPath))
				}
				return b, nil
			}
			v = v.Elem()
		}
		sub, err := c.sub.appendStruct(nil, v)
		if err != nil {
			return b, inColumn(c.name, err)
		}
		b = protowire.AppendTag(b, c.num, protowire.BytesType)
		return protowire.AppendBytes(b, sub), nil
	}
	n := len(b)
	b, err := appendScalar(b, c, v.Interface())
	if err != nil {
		return b, inColumn(c.name, fmt.Errorf("field %s: %w", c.goPath, err))
	}
	if item && len(b) == n {
		return b, inColumn(c.name, fmt.Errorf("field %s: a NULL item in REPEATED column %s (BigQuery arrays hold no NULL)", c.goPath, c.name))
	}
	return b, nil
}

func (p *recordPlan) appendMap(b []byte, m map[string]bigquery.Value, prefix string) ([]byte, error) {
	found := 0
	for i := range p.cols {
		c := &p.cols[i]
		x, ok := m[c.name]
		if !ok {
			continue
		}
		found++
		var err error
		if b, err = c.appendValue(b, x, prefix); err != nil {
			return b, err
		}
	}
	if found < len(m) && !p.ignoreUnknown {
		for k := range m {
			if !p.has(k) {
				return b, fmt.Errorf("column %s%s is not in the table's schema (%s)", prefix, k, p.names())
			}
		}
	}
	return b, nil
}

func (p *recordPlan) has(name string) bool {
	for _, c := range p.cols {
		if c.name == name {
			return true
		}
	}
	return false
}

func (p *recordPlan) names() string {
	names := make([]string, len(p.cols))
	for i, c := range p.cols {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// appendValue appends a value of a Row's column.
func (c *colPlan) appendValue(b []byte, x any, prefix string) ([]byte, error) {
	if x == nil {
		return b, nil
	}
	if c.repeated {
		items, ok := x.([]bigquery.Value)
		if !ok {
			v := reflect.ValueOf(x)
			if v.Kind() != reflect.Slice || c.typ == bigquery.BytesFieldType && v.Type().Elem().Kind() == reflect.Uint8 {
				return b, inColumn(c.name, fmt.Errorf("column %s%s is REPEATED: a %T is not a list", prefix, c.name, x))
			}
			items = make([]bigquery.Value, v.Len())
			for k := range items {
				items[k] = v.Index(k).Interface()
			}
		}
		for _, it := range items {
			n := len(b)
			var err error
			if b, err = c.appendItem(b, it, prefix); err != nil {
				return b, err
			}
			if len(b) == n {
				return b, inColumn(c.name, fmt.Errorf("column %s%s: a NULL item in a REPEATED column (BigQuery arrays hold no NULL)", prefix, c.name))
			}
		}
		return b, nil
	}
	return c.appendItem(b, x, prefix)
}

func (c *colPlan) appendItem(b []byte, x any, prefix string) ([]byte, error) {
	if c.sub != nil {
		var m map[string]bigquery.Value
		switch r := x.(type) {
		case nil:
			return b, nil
		case map[string]bigquery.Value:
			m = r
		case Row:
			m = r
		default:
			return b, inColumn(c.name, fmt.Errorf("column %s%s is a RECORD: a %T is not a map[string]bigquery.Value", prefix, c.name, x))
		}
		sub, err := c.sub.appendMap(nil, m, prefix+c.name+".")
		if err != nil {
			return b, inColumn(c.name, err)
		}
		b = protowire.AppendTag(b, c.num, protowire.BytesType)
		return protowire.AppendBytes(b, sub), nil
	}
	b, err := appendScalar(b, c, x)
	if err != nil {
		return b, inColumn(c.name, fmt.Errorf("column %s%s: %w", prefix, c.name, err))
	}
	return b, nil
}

// appendScalar appends x, a value of the scalar column c, or nothing for a
// NULL. A type the column does not take is errWrongType.
func appendScalar(b []byte, c *colPlan, x any) ([]byte, error) {
	varint := func(u uint64) []byte {
		b = protowire.AppendTag(b, c.num, protowire.VarintType)
		return protowire.AppendVarint(b, u)
	}
	str := func(s string) []byte {
		b = protowire.AppendTag(b, c.num, protowire.BytesType)
		return protowire.AppendString(b, s)
	}
	wrong := func() ([]byte, error) {
		return b, fmt.Errorf("%w: a %s column does not take a %T", errWrongType, c.typ, x)
	}
	switch c.typ {
	case bigquery.IntegerFieldType:
		switch v := x.(type) {
		case int:
			return varint(uint64(v)), nil
		case int8:
			return varint(uint64(v)), nil
		case int16:
			return varint(uint64(v)), nil
		case int32:
			return varint(uint64(v)), nil
		case int64:
			return varint(uint64(v)), nil
		case uint8:
			return varint(uint64(v)), nil
		case uint16:
			return varint(uint64(v)), nil
		case uint32:
			return varint(uint64(v)), nil
		case bigquery.NullInt64:
			if !v.Valid {
				return b, nil
			}
			return varint(uint64(v.Int64)), nil
		}
	case bigquery.FloatFieldType:
		var f float64
		switch v := x.(type) {
		case float64:
			f = v
		case float32:
			f = float64(v)
		case bigquery.NullFloat64:
			if !v.Valid {
				return b, nil
			}
			f = v.Float64
		default:
			return wrong()
		}
		b = protowire.AppendTag(b, c.num, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(f)), nil
	case bigquery.BooleanFieldType:
		switch v := x.(type) {
		case bool:
			return varint(protowire.EncodeBool(v)), nil
		case bigquery.NullBool:
			if !v.Valid {
				return b, nil
			}
			return varint(protowire.EncodeBool(v.Bool)), nil
		}
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		switch v := x.(type) {
		case string:
			return str(v), nil
		case bigquery.NullString:
			if !v.Valid {
				return b, nil
			}
			return str(v.StringVal), nil
		case bigquery.NullGeography:
			if !v.Valid {
				return b, nil
			}
			return str(v.GeographyVal), nil
		case bigquery.NullJSON:
			if !v.Valid {
				return b, nil
			}
			return str(v.JSONVal), nil
		}
	case bigquery.BytesFieldType:
		if v, ok := x.([]byte); ok {
			if v == nil {
				return b, nil
			}
			b = protowire.AppendTag(b, c.num, protowire.BytesType)
			return protowire.AppendBytes(b, v), nil
		}
	case bigquery.NumericFieldType, bigquery.BigNumericFieldType:
		var r *big.Rat
		switch v := x.(type) {
		case *big.Rat:
			r = v
		case big.Rat:
			r = &v
		default:
			return wrong()
		}
		if r == nil {
			return b, nil
		}
		text, err := decimalText(r, c.typ)
		if err != nil {
			return b, err
		}
		return str(text), nil
	case bigquery.DateFieldType:
		switch v := x.(type) {
		case civil.Date:
			if !validDate(v) {
				return b, fmt.Errorf("%v is not a date of years 1 to 9999", v)
			}
			return varint(uint64(int64(v.DaysSince(epochDate)))), nil
		case bigquery.NullDate:
			if !v.Valid {
				return b, nil
			}
			if !validDate(v.Date) {
				return b, fmt.Errorf("%v is not a date of years 1 to 9999", v.Date)
			}
			return varint(uint64(int64(v.Date.DaysSince(epochDate)))), nil
		}
	case bigquery.DateTimeFieldType:
		switch v := x.(type) {
		case civil.DateTime:
			return appendCivil(b, c.num, v.Date, v.Time, true)
		case bigquery.NullDateTime:
			if !v.Valid {
				return b, nil
			}
			return appendCivil(b, c.num, v.DateTime.Date, v.DateTime.Time, true)
		}
	case bigquery.TimeFieldType:
		switch v := x.(type) {
		case civil.Time:
			return appendCivil(b, c.num, civil.Date{}, v, false)
		case bigquery.NullTime:
			if !v.Valid {
				return b, nil
			}
			return appendCivil(b, c.num, civil.Date{}, v.Time, false)
		}
	case bigquery.TimestampFieldType:
		switch v := x.(type) {
		case time.Time:
			return varint(uint64(v.UnixMicro())), nil
		case bigquery.NullTimestamp:
			if !v.Valid {
				return b, nil
			}
			return varint(uint64(v.Timestamp.UnixMicro())), nil
		}
	default:
		return b, fmt.Errorf("%w: column type %s is not supported by Write", errWrongType, c.typ)
	}
	return wrong()
}

var epochDate = civil.Date{Year: 1970, Month: 1, Day: 1}

// appendCivil appends the literal of a DATETIME (withDate: d and t) or a
// TIME (t) to b as field num: the time truncated to microseconds, BigQuery's
// precision, as Beam Java's encoder truncates a LocalTime's nanoseconds.
// Truncation never carries: 23:59:59.9999996 stays in its second, its day
// and its year (bigquery.CivilTimeString rounds, and wrote
// "01:02:03.1000000" for 01:02:03.9999996, a literal the service refuses).
// A value that is no time of day or date of years 1 to 9999 is refused.
func appendCivil(b []byte, num protowire.Number, d civil.Date, t civil.Time, withDate bool) ([]byte, error) {
	if !t.IsValid() {
		return b, fmt.Errorf("%v is not a valid time of day", t)
	}
	var buf [32]byte
	lit := buf[:0]
	if withDate {
		if !validDate(d) {
			return b, fmt.Errorf("%v is not a date of years 1 to 9999", d)
		}
		lit = appendDigits(lit, d.Year, 4)
		lit = appendDigits(append(lit, '-'), int(d.Month), 2)
		lit = appendDigits(append(lit, '-'), d.Day, 2)
		lit = append(lit, ' ')
	}
	lit = appendDigits(lit, t.Hour, 2)
	lit = appendDigits(append(lit, ':'), t.Minute, 2)
	lit = appendDigits(append(lit, ':'), t.Second, 2)
	if us := t.Nanosecond / 1000; us != 0 {
		lit = appendDigits(append(lit, '.'), us, 6)
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, lit), nil
}

// validDate reports a date BigQuery holds: a valid date of years 1 to 9999
// (the zero civil.Date is none).
func validDate(d civil.Date) bool { return d.IsValid() && d.Year >= 1 && d.Year <= 9999 }

// appendDigits appends n (0 <= n < 10^width) as width decimal digits.
func appendDigits(b []byte, n, width int) []byte {
	start := len(b)
	for range width {
		b = append(b, '0')
	}
	for i := len(b) - 1; i >= start && n > 0; i-- {
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return b
}

// Decimal scales: the digits NUMERIC and BIGNUMERIC hold after the point.
var (
	numericScale    = new(big.Int).Exp(big.NewInt(10), big.NewInt(9), nil)
	bigNumericScale = new(big.Int).Exp(big.NewInt(10), big.NewInt(38), nil)
)

// decimalText is r as the literal of column type typ (NUMERIC or
// BIGNUMERIC). A value with more digits after the point than the type holds
// (9, or 38) is refused, not rounded, as Beam Java's
// BigDecimalByteStringEncoder refuses a BigDecimal of a larger scale: the
// service would store another number than the one written.
func decimalText(r *big.Rat, typ bigquery.FieldType) (string, error) {
	scale, digits := numericScale, 9
	if typ == bigquery.BigNumericFieldType {
		scale, digits = bigNumericScale, 38
	}
	if new(big.Int).Rem(scale, r.Denom()).Sign() != 0 {
		return "", fmt.Errorf("%s value %s (%s...) has more than %d digits after the point, which %s holds: round it first (a big.Rat set from x.FloatString(%d) rounds half away from zero)",
			typ, r.RatString(), r.FloatString(digits+3), digits, typ, digits)
	}
	return r.FloatString(digits), nil
}
