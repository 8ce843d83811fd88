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
)

// FailedRows have one shape in every mode (see FailedRow): the element as
// encoding/json gives it, the column the refusal names, and the service's
// message (or why the row could not be sent). The batch write holds its
// elements until their append is answered; the streaming write carries
// only the encoded rows through its shuffles and state, so it rebuilds the
// element of a refused row from the row, by the element type's plan
// (rowEncoder.element): the same value but for what the table cannot hold
// (a TIMESTAMP comes back in UTC, to the microsecond; a DATETIME or TIME
// to the microsecond; an empty REPEATED slice as nil; a Row's integers as
// int64, its floats as float64, its NULL values left out).

// columnError is an error about one column of a row (a value the column
// does not take), which FailedRow.Column names.
type columnError struct {
	column string // its path: parent.child for a RECORD's field
	err    error
}

func (e *columnError) Error() string { return e.err.Error() }
func (e *columnError) Unwrap() error { return e.err }

// inColumn is err about column name: a columnError of an error about one
// of its fields is about name.field.
func inColumn(name string, err error) error {
	var ce *columnError
	if errors.As(err, &ce) {
		return &columnError{column: name + "." + ce.column, err: err}
	}
	return &columnError{column: name, err: err}
}

// errColumn is the column err names, "" for none.
func errColumn(err error) string {
	var ce *columnError
	if errors.As(err, &ce) {
		return ce.column
	}
	return ""
}

// refusedColumn is the column of schema that a row error's message names
// after "field" or "column" (as the service's messages do: "Required field
// a.b is missing", "... on field ts"), by its name or by the proto field
// name a flexible column name is sent as (col_<base64>); "" when it names
// none. The longest name named wins.
func refusedColumn(schema bigquery.Schema, msg string) string {
	low := strings.ToLower(msg)
	best, bestLen := "", 0
	var walk func(s bigquery.Schema, path, proto string)
	walk = func(s bigquery.Schema, path, proto string) {
		for _, f := range s {
			p, q := path+f.Name, proto+protoFieldName(f.Name)
			for _, name := range []string{p, q} {
				if len(name) > bestLen && namedAfterField(low, strings.ToLower(name)) {
					best, bestLen = p, len(name)
				}
			}
			if f.Type == bigquery.RecordFieldType {
				walk(f.Schema, p+".", q+".")
			}
		}
	}
	walk(schema, "", "")
	return best
}

// namedAfterField reports whether msg names name as a whole word right
// after "field " or "column " (both lower case).
func namedAfterField(msg, name string) bool {
	for _, lead := range []string{"field ", "column "} {
		for i := 0; ; {
			j := strings.Index(msg[i:], lead+name)
			if j < 0 {
				break
			}
			end := i + j + len(lead) + len(name)
			if end == len(msg) || !nameByte(msg[end]) || msg[end] == '.' && (end+1 == len(msg) || !nameByte(msg[end+1])) {
				return true
			}
			i += j + 1
		}
	}
	return false
}

// protoFieldName is the proto field name column col is sent as
// (writerDescriptor): its name, or col_<its name in base64> for a name
// that is no proto identifier.
func protoFieldName(col string) string { return columnFieldName(col) }

// nameByte reports the bytes of a column path.
func nameByte(c byte) bool {
	return c == '_' || c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// failedRow is the FailedRow of a row the service refused with msg: the
// element x as JSON and the column msg names.
func failedRow(spec string, schema bigquery.Schema, x any, msg string) FailedRow {
	return FailedRow{Table: spec, Row: rowJSON(x), Column: refusedColumn(schema, msg), Error: msg}
}

// element rebuilds, from a row e encoded, the element it was encoded
// from: a value of typ (a struct type) or a Row, holding what the row
// holds (see the top of this file).
func (e *rowEncoder) element(typ reflect.Type, row []byte) (any, error) {
	if e.isRow {
		m, err := e.plan.decodeMap(row)
		return Row(m), err
	}
	ptr := typ.Kind() == reflect.Pointer
	if ptr {
		typ = typ.Elem()
	}
	v := reflect.New(typ)
	if err := e.plan.decodeStruct(v.Elem(), row); err != nil {
		return nil, err
	}
	if ptr {
		return v.Interface(), nil
	}
	return v.Elem().Interface(), nil
}

// col is the column of proto field num (column i is field i+1), nil for a
// field that is no column (CDC's pseudo-columns).
func (p *recordPlan) col(num protowire.Number) *colPlan {
	if i := int(num) - 1; i >= 0 && i < len(p.cols) && p.cols[i].num == num {
		return &p.cols[i]
	}
	return nil
}

// fields calls fn with each field of the message m, in wire order: its
// column and its value (a varint or fixed64 as v, bytes as b).
func (p *recordPlan) fields(m []byte, fn func(c *colPlan, v uint64, b []byte) error) error {
	for len(m) > 0 {
		num, wt, n := protowire.ConsumeTag(m)
		if n < 0 {
			return protowire.ParseError(n)
		}
		m = m[n:]
		var v uint64
		var b []byte
		switch wt {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(m)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(m)
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(m)
		default:
			n = protowire.ConsumeFieldValue(num, wt, m)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		m = m[n:]
		if c := p.col(num); c != nil {
			if err := fn(c, v, b); err != nil {
				return fmt.Errorf("column %s: %w", c.name, err)
			}
		}
	}
	return nil
}

// decodeStruct sets the fields of v (a struct of the plan's type) from
// the message m.
func (p *recordPlan) decodeStruct(v reflect.Value, m []byte) error {
	return p.fields(m, func(c *colPlan, u uint64, b []byte) error {
		if c.field == nil {
			return nil
		}
		fv := fieldAlloc(v, c.field)
		dst := fv
		if c.repeated {
			fv.Set(reflect.Append(fv, reflect.Zero(fv.Type().Elem())))
			dst = fv.Index(fv.Len() - 1)
		}
		if c.sub != nil {
			if dst.Kind() == reflect.Pointer {
				dst.Set(reflect.New(dst.Type().Elem()))
				dst = dst.Elem()
			}
			return c.sub.decodeStruct(dst, b)
		}
		x, err := c.scalar(u, b)
		if err != nil {
			return err
		}
		return setScalar(dst, x)
	})
}

// decodeMap is the message m as a Row's map.
func (p *recordPlan) decodeMap(m []byte) (map[string]bigquery.Value, error) {
	out := map[string]bigquery.Value{}
	err := p.fields(m, func(c *colPlan, u uint64, b []byte) error {
		var x bigquery.Value
		if c.sub != nil {
			sub, err := c.sub.decodeMap(b)
			if err != nil {
				return err
			}
			x = sub
		} else {
			var err error
			if x, err = c.scalar(u, b); err != nil {
				return err
			}
		}
		if c.repeated {
			items, _ := out[c.name].([]bigquery.Value)
			out[c.name] = append(items, x)
			return nil
		}
		out[c.name] = x
		return nil
	})
	return out, err
}

// scalar is the value of a field of scalar column c, as Read gives a
// column of its type: int64, float64, bool, string, []byte, *big.Rat,
// civil.Date, civil.DateTime, civil.Time or time.Time (UTC).
func (c *colPlan) scalar(u uint64, b []byte) (any, error) {
	switch c.typ {
	case bigquery.IntegerFieldType:
		return int64(u), nil
	case bigquery.FloatFieldType:
		return math.Float64frombits(u), nil
	case bigquery.BooleanFieldType:
		return u != 0, nil
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		return string(b), nil
	case bigquery.BytesFieldType:
		return append([]byte{}, b...), nil
	case bigquery.NumericFieldType, bigquery.BigNumericFieldType:
		r, ok := new(big.Rat).SetString(string(b))
		if !ok {
			return nil, fmt.Errorf("%s literal %q", c.typ, b)
		}
		return r, nil
	case bigquery.DateFieldType:
		return epochDate.AddDays(int(int64(u))), nil
	case bigquery.DateTimeFieldType:
		return civil.ParseDateTime(strings.Replace(string(b), " ", "T", 1))
	case bigquery.TimeFieldType:
		return civil.ParseTime(string(b))
	case bigquery.TimestampFieldType:
		return time.UnixMicro(int64(u)).UTC(), nil
	}
	return nil, fmt.Errorf("column type %s", c.typ)
}

// setScalar sets dst, of a type appendScalar takes for its column, to x
// (a value of scalar).
func setScalar(dst reflect.Value, x any) error {
	switch d := dst.Addr().Interface().(type) {
	case *bigquery.NullInt64:
		*d = bigquery.NullInt64{Int64: x.(int64), Valid: true}
	case *bigquery.NullFloat64:
		*d = bigquery.NullFloat64{Float64: x.(float64), Valid: true}
	case *bigquery.NullBool:
		*d = bigquery.NullBool{Bool: x.(bool), Valid: true}
	case *bigquery.NullString:
		*d = bigquery.NullString{StringVal: x.(string), Valid: true}
	case *bigquery.NullGeography:
		*d = bigquery.NullGeography{GeographyVal: x.(string), Valid: true}
	case *bigquery.NullJSON:
		*d = bigquery.NullJSON{JSONVal: x.(string), Valid: true}
	case *bigquery.NullDate:
		*d = bigquery.NullDate{Date: x.(civil.Date), Valid: true}
	case *bigquery.NullDateTime:
		*d = bigquery.NullDateTime{DateTime: x.(civil.DateTime), Valid: true}
	case *bigquery.NullTime:
		*d = bigquery.NullTime{Time: x.(civil.Time), Valid: true}
	case *bigquery.NullTimestamp:
		*d = bigquery.NullTimestamp{Timestamp: x.(time.Time), Valid: true}
	case *big.Rat:
		d.Set(x.(*big.Rat))
	case **big.Rat:
		*d = x.(*big.Rat)
	default:
		xv := reflect.ValueOf(x)
		switch {
		case dst.Type() == xv.Type():
			dst.Set(xv)
		case dst.CanInt() && xv.CanInt():
			dst.SetInt(xv.Int())
		case dst.CanUint() && xv.CanInt():
			dst.SetUint(uint64(xv.Int()))
		case dst.CanFloat() && xv.CanFloat():
			dst.SetFloat(xv.Float())
		default:
			return fmt.Errorf("a %T cannot be set into a %v", x, dst.Type())
		}
	}
	return nil
}
