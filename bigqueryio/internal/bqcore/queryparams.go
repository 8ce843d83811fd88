package bqcore

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
)

// A query parameter's Go value (bigquery.QueryParameter.Value, an any)
// does not survive the JSON that carries a DoFn to its workers: an int
// comes back a float64, a civil.Date a string, a struct a map. So
// WithQueryParameters turns each value, when the pipeline is built, into
// its explicit BigQuery type and the text of its value, as the official
// client would send them (bigquery.QueryParameter documents the mapping),
// and the query job sends them so (ClientParams). A value the client could not send fails when
// the pipeline is built, naming the parameter.

// queryParam is a query parameter as it travels in the DoFns.
type queryParam struct {
	Name  string
	Type  paramType
	Value paramValue
}

// paramType is a parameter's BigQuery type.
type paramType struct {
	Kind   string       // INT64, FLOAT64, BOOL, STRING, BYTES, TIMESTAMP, DATE, TIME, DATETIME, NUMERIC, BIGNUMERIC, GEOGRAPHY, JSON, INTERVAL, ARRAY, STRUCT
	Elem   *paramType   // ARRAY's
	Fields []paramField // STRUCT's
}

type paramField struct {
	Name string
	Type paramType
}

// paramValue is a parameter's value: NULL, a scalar's text, an array's
// items, a struct's fields, or none of them (an empty array or struct).
type paramValue struct {
	Null   bool                  `json:",omitempty"`
	Scalar *string               `json:",omitempty"`
	Array  []paramValue          `json:",omitempty"`
	Struct map[string]paramValue `json:",omitempty"`
}

// timestampText is how the client writes a TIMESTAMP parameter.
const timestampText = "2006-01-02 15:04:05.999999-07:00"

// queryParams turns the parameters of WithQueryParameters into what
// travels.
func queryParams(ps []bigquery.QueryParameter) ([]queryParam, error) {
	out := make([]queryParam, 0, len(ps))
	named := 0
	for i, p := range ps {
		if p.Name != "" {
			named++
		}
		t, v, err := paramOf(reflect.ValueOf(p.Value), 0)
		if err != nil {
			what := fmt.Sprintf("parameter %d", i+1)
			if p.Name != "" {
				what = "parameter " + p.Name
			}
			return nil, fmt.Errorf("%s (%T): %w", what, p.Value, err)
		}
		out = append(out, queryParam{Name: p.Name, Type: t, Value: v})
	}
	if named != 0 && named != len(ps) {
		return nil, fmt.Errorf("%d of %d parameters have names: give all of them names (@name in the SQL) or none (? in the SQL)", named, len(ps))
	}
	return out, nil
}

// paramOf is the type and value of v, by the client's mapping.
func paramOf(v reflect.Value, depth int) (paramType, paramValue, error) {
	if !v.IsValid() {
		return paramType{}, paramValue{}, fmt.Errorf("a nil value, which has no BigQuery type (use a bigquery.NullX type for NULL)")
	}
	if x, ok := v.Interface().(*bigquery.QueryParameterValue); ok {
		if x == nil {
			return paramType{}, paramValue{}, fmt.Errorf("a nil *bigquery.QueryParameterValue")
		}
		return explicitParam(x, depth)
	}
	t, err := typeOfParam(v.Type(), depth)
	if err != nil {
		return paramType{}, paramValue{}, err
	}
	val, err := valueOfParam(v, depth)
	return t, val, err
}

func text(s string) (paramValue, error) { return paramValue{Scalar: &s}, nil }

// valueOfParam is the value of v, whose type typeOfParam accepts, as the
// client writes it.
func valueOfParam(v reflect.Value, depth int) (paramValue, error) {
	if depth > 32 {
		return paramValue{}, fmt.Errorf("values nested deeper than 32 levels")
	}
	t := v.Type()
	switch x := v.Interface().(type) {
	case civil.Date:
		return text(x.String())
	case civil.Time:
		return text(bigquery.CivilTimeString(x))
	case civil.DateTime:
		return text(bigquery.CivilDateTimeString(x))
	case time.Time:
		return text(x.Format(timestampText))
	case *big.Rat:
		if x == nil {
			return paramValue{}, fmt.Errorf("a nil *big.Rat")
		}
		return text(bigquery.NumericString(x))
	case *bigquery.IntervalValue:
		if x == nil {
			return paramValue{}, fmt.Errorf("a nil *bigquery.IntervalValue")
		}
		return text(bigquery.IntervalString(x))
	}
	if isNullType(t) {
		// A bigquery.NullX: NULL unless Valid, else its value field's.
		if !v.FieldByName("Valid").Bool() {
			return paramValue{Null: true}, nil
		}
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).Name != "Valid" {
				return valueOfParam(v.Field(i), depth+1)
			}
		}
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint8, reflect.Uint16, reflect.Uint32,
		reflect.Float32, reflect.Float64, reflect.Bool:
		return text(fmt.Sprint(v.Interface()))
	case reflect.String:
		return text(v.String())
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return text(base64.StdEncoding.EncodeToString(v.Bytes()))
		}
		val := paramValue{}
		for i := 0; i < v.Len(); i++ {
			iv, err := valueOfParam(v.Index(i), depth+1)
			if err != nil {
				return paramValue{}, fmt.Errorf("item %d: %w", i, err)
			}
			val.Array = append(val.Array, iv)
		}
		return val, nil
	case reflect.Pointer:
		if v.IsNil() {
			return paramValue{}, nil // the client sends a nil *struct as an empty value
		}
		return valueOfParam(v.Elem(), depth+1)
	case reflect.Struct:
		val := paramValue{Struct: map[string]paramValue{}}
		for _, f := range FieldsOf(t).Fields {
			if f.ViaPtr {
				return paramValue{}, fmt.Errorf("field %s is reached through an embedded pointer", f.GoPath)
			}
			fv, err := valueOfParam(v.FieldByIndex(f.Index), depth+1)
			if err != nil {
				return paramValue{}, fmt.Errorf("field %s: %w", f.GoPath, err)
			}
			val.Struct[f.Name] = fv
		}
		return val, nil
	}
	return paramValue{}, fmt.Errorf("Go type %s has no BigQuery parameter type", t)
}

// isNullType reports the bigquery.NullX types.
func isNullType(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t.PkgPath() == "cloud.google.com/go/bigquery" && strings.HasPrefix(t.Name(), "Null")
}

// paramKinds is the parameter type of the Go types that are one scalar
// parameter type by themselves (not by their kind).
var paramKinds = map[reflect.Type]string{
	typeOfDate:     "DATE",
	typeOfNullDate: "DATE",

	typeOfCTime:    "TIME",
	typeOfNullTime: "TIME",

	typeOfDateTime:     "DATETIME",
	typeOfNullDateTime: "DATETIME",

	typeOfTime:          "TIMESTAMP",
	typeOfNullTimestamp: "TIMESTAMP",

	typeOfRat: "NUMERIC",

	reflect.TypeOf((*bigquery.IntervalValue)(nil)): "INTERVAL",

	typeOfNullInt64:     "INT64",
	typeOfNullFloat64:   "FLOAT64",
	typeOfNullBool:      "BOOL",
	typeOfNullString:    "STRING",
	typeOfNullGeography: "GEOGRAPHY",
	typeOfNullJSON:      "JSON",
}

// typeOfParam is the parameter type of Go type t, found from the type
// alone (as the client finds an array's element type).
func typeOfParam(t reflect.Type, depth int) (paramType, error) {
	if depth > 32 {
		return paramType{}, fmt.Errorf("types nested deeper than 32 levels")
	}
	if kind, ok := paramKinds[t]; ok {
		return paramType{Kind: kind}, nil
	}
	switch reflect.Zero(t).Interface().(type) {
	case *bigquery.RangeValue:
		return paramType{}, fmt.Errorf("RANGE parameters are not supported by WithQueryParameters")
	case *bigquery.QueryParameterValue:
		return paramType{}, fmt.Errorf("an array or struct of %s: give the whole parameter as a *bigquery.QueryParameterValue", t)
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return paramType{Kind: "INT64"}, nil
	case reflect.Float32, reflect.Float64:
		return paramType{Kind: "FLOAT64"}, nil
	case reflect.Bool:
		return paramType{Kind: "BOOL"}, nil
	case reflect.String:
		return paramType{Kind: "STRING"}, nil
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return paramType{Kind: "BYTES"}, nil
		}
		et, err := typeOfParam(t.Elem(), depth+1)
		if err != nil {
			return paramType{}, err
		}
		return paramType{Kind: "ARRAY", Elem: &et}, nil
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Struct {
			return typeOfParam(t.Elem(), depth+1)
		}
	case reflect.Struct:
		st := paramType{Kind: "STRUCT"}
		for _, f := range FieldsOf(t).Fields {
			ft, err := typeOfParam(f.Typ, depth+1)
			if err != nil {
				return paramType{}, fmt.Errorf("field %s: %w", f.GoPath, err)
			}
			st.Fields = append(st.Fields, paramField{Name: f.Name, Type: ft})
		}
		return st, nil
	}
	return paramType{}, fmt.Errorf("Go type %s has no BigQuery parameter type", t)
}

// explicitParam is the parameter of an explicit *bigquery.QueryParameterValue.
func explicitParam(x *bigquery.QueryParameterValue, depth int) (paramType, paramValue, error) {
	t, err := explicitType(&x.Type, depth)
	if err != nil {
		return paramType{}, paramValue{}, err
	}
	v, err := explicitValue(x, depth)
	return t, v, err
}

func explicitType(t *bigquery.StandardSQLDataType, depth int) (paramType, error) {
	if depth > 32 {
		return paramType{}, fmt.Errorf("types nested deeper than 32 levels")
	}
	switch {
	case t == nil:
		return paramType{}, fmt.Errorf("a *bigquery.QueryParameterValue without a type")
	case t.ArrayElementType != nil:
		et, err := explicitType(t.ArrayElementType, depth+1)
		if err != nil {
			return paramType{}, err
		}
		return paramType{Kind: "ARRAY", Elem: &et}, nil
	case t.StructType != nil:
		st := paramType{Kind: "STRUCT"}
		for _, f := range t.StructType.Fields {
			ft, err := explicitType(f.Type, depth+1)
			if err != nil {
				return paramType{}, fmt.Errorf("field %s: %w", f.Name, err)
			}
			st.Fields = append(st.Fields, paramField{Name: f.Name, Type: ft})
		}
		return st, nil
	case t.RangeElementType != nil:
		return paramType{}, fmt.Errorf("RANGE parameters are not supported by WithQueryParameters")
	case t.TypeKind == "":
		return paramType{}, fmt.Errorf("a *bigquery.QueryParameterValue without a type")
	}
	return paramType{Kind: t.TypeKind}, nil
}

func explicitValue(x *bigquery.QueryParameterValue, depth int) (paramValue, error) {
	if depth > 32 {
		return paramValue{}, fmt.Errorf("values nested deeper than 32 levels")
	}
	// As the client reads it: an array's items, else a struct's fields,
	// else the scalar Value.
	switch {
	case len(x.ArrayValue) > 0:
		var v paramValue
		for i := range x.ArrayValue {
			iv, err := explicitValue(&x.ArrayValue[i], depth+1)
			if err != nil {
				return paramValue{}, fmt.Errorf("item %d: %w", i, err)
			}
			v.Array = append(v.Array, iv)
		}
		return v, nil
	case len(x.StructValue) > 0:
		v := paramValue{Struct: map[string]paramValue{}}
		for name := range x.StructValue {
			fx := x.StructValue[name]
			fv, err := explicitValue(&fx, depth+1)
			if err != nil {
				return paramValue{}, fmt.Errorf("field %s: %w", name, err)
			}
			v.Struct[name] = fv
		}
		return v, nil
	}
	_, v, err := paramOf(reflect.ValueOf(x.Value), depth+1)
	return v, err // the Value's own type is not sent: x.Type is
}

// EncodeParams is the parameters as they travel: JSON of []queryParam, ""
// for none.
func EncodeParams(ps []bigquery.QueryParameter) (string, error) {
	qs, err := queryParams(ps)
	if err != nil || len(qs) == 0 {
		return "", err
	}
	b, err := json.Marshal(qs)
	return string(b), err
}

// DecodeParams is the parameters of EncodeParams, nil for none (ClientParams
// turns them into the query job's).
func DecodeParams(s string) ([]queryParam, error) {
	if s == "" {
		return nil, nil
	}
	var qs []queryParam
	if err := json.Unmarshal([]byte(s), &qs); err != nil {
		return nil, fmt.Errorf("bqquery: decoding the query parameters: %w", err)
	}
	return qs, nil
}

// ParamsText is the parameters for messages.
func ParamsText(ps []bigquery.QueryParameter) []any {
	out := make([]any, len(ps))
	for i, p := range ps {
		if p.Name != "" {
			out[i] = fmt.Sprintf("%s=%v", p.Name, p.Value)
		} else {
			out[i] = fmt.Sprint(p.Value)
		}
	}
	return out
}

// ClientParams is the parameters as the official client sends them:
// each value a *bigquery.QueryParameterValue of its explicit type, every
// scalar as its text (the client sends a text as it is), NULL a
// bigquery.NullString that is not valid (the client sends "value": null
// for it). The client sends no parameter mode: the service takes the
// parameters' names (all or none) for it.
func ClientParams(ps []queryParam) []bigquery.QueryParameter {
	if len(ps) == 0 {
		return nil
	}
	out := make([]bigquery.QueryParameter, len(ps))
	for i, p := range ps {
		v := clientValue(p.Type, p.Value)
		out[i] = bigquery.QueryParameter{Name: p.Name, Value: &v}
	}
	return out
}

func clientType(t paramType) *bigquery.StandardSQLDataType {
	switch t.Kind {
	case "ARRAY":
		return &bigquery.StandardSQLDataType{TypeKind: "ARRAY", ArrayElementType: clientType(*t.Elem)}
	case "STRUCT":
		st := &bigquery.StandardSQLStructType{}
		for _, f := range t.Fields {
			st.Fields = append(st.Fields, &bigquery.StandardSQLField{Name: f.Name, Type: clientType(f.Type)})
		}
		return &bigquery.StandardSQLDataType{TypeKind: "STRUCT", StructType: st}
	}
	return &bigquery.StandardSQLDataType{TypeKind: t.Kind}
}

// clientValue is the value v of type t; the type is read from the
// top-level value only, the nested ones carry it for clarity.
func clientValue(t paramType, v paramValue) bigquery.QueryParameterValue {
	out := bigquery.QueryParameterValue{Type: *clientType(t)}
	switch {
	case v.Null:
		out.Value = bigquery.NullString{}
	case v.Scalar != nil:
		// A NullString that is valid sends its text even when empty.
		out.Value = bigquery.NullString{StringVal: *v.Scalar, Valid: true}
	case len(v.Array) > 0:
		out.ArrayValue = make([]bigquery.QueryParameterValue, len(v.Array))
		for i, it := range v.Array {
			out.ArrayValue[i] = clientValue(*t.Elem, it)
		}
	case len(v.Struct) > 0:
		out.StructValue = make(map[string]bigquery.QueryParameterValue, len(v.Struct))
		for _, f := range t.Fields {
			if fv, ok := v.Struct[f.Name]; ok {
				out.StructValue[f.Name] = clientValue(f.Type, fv)
			}
		}
	case t.Kind == "ARRAY":
		out.Value = []string{} // an empty array: the client sends no values
	default:
		out.Value = struct{}{} // an empty struct
	}
	return out
}

// The Go types of query parameter values with a BigQuery type of their own.
var (
	typeOfTime     = reflect.TypeOf(time.Time{})
	typeOfDate     = reflect.TypeOf(civil.Date{})
	typeOfCTime    = reflect.TypeOf(civil.Time{})
	typeOfDateTime = reflect.TypeOf(civil.DateTime{})
	typeOfRat      = reflect.TypeOf((*big.Rat)(nil))

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
