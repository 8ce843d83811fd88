package bqwrite

import (
	"fmt"
	"math/big"
	"reflect"

	"cloud.google.com/go/bigquery"
)

// ioTag is the struct tag key of this package's own field options:
// `bigqueryio:"bignumeric"` makes the inferred column of a *big.Rat field
// BIGNUMERIC. The official client refuses options of its `bigquery` tag
// other than nullable and json (in InferSchema and when it loads rows), so
// they cannot go there.
const ioTag = "bigqueryio"

var typeOfRatPtr = reflect.TypeFor[*big.Rat]()

// inferSchema is the schema CreateIfNeeded creates for struct type t:
// bigquery.InferSchema's, made to take every value of t. InferSchema makes
// a []byte, a *big.Rat and a nested struct pointer REQUIRED unless tagged
// nullable, so that their nil is refused; here every field that can be nil
// (a pointer, a []byte, a map) is NULLABLE, at every depth. A *big.Rat
// tagged `bigqueryio:"bignumeric"` is BIGNUMERIC (InferSchema makes every
// *big.Rat NUMERIC, which refuses BIGNUMERIC's values). A field holding
// values no column can (a slice whose items can be nil: a BigQuery array
// holds no NULL; a struct of no fields) fails, naming it.
func inferSchema(t reflect.Type) (bigquery.Schema, error) {
	schema, err := bigquery.InferSchema(reflect.New(t).Elem().Interface())
	if err != nil {
		return nil, fmt.Errorf("inferring its schema: %w", err)
	}
	schema = copySchema(schema)
	if err := fitSchema(schema, t, ""); err != nil {
		return nil, fmt.Errorf("inferring its schema: %w", err)
	}
	return schema, nil
}

// fitSchema makes the columns of schema, inferred from struct type t, take
// every value of their fields; prefix is the Go path of t for messages.
func fitSchema(schema bigquery.Schema, t reflect.Type, prefix string) error {
	l := fieldsOf(t)
	for _, f := range l.Fields {
		if v, ok := t.FieldByIndex(f.Index).Tag.Lookup(ioTag); ok && v != "bignumeric" {
			return fmt.Errorf("field %s%s: tag %s:%q: the one option is bignumeric", prefix, f.GoPath, ioTag, v)
		}
	}
	for _, col := range schema {
		i := l.Match(col.Name)
		if i < 0 {
			return fmt.Errorf("column %s%s: no field of %v", prefix, col.Name, t)
		}
		f := l.Fields[i]
		path := prefix + f.GoPath
		typ := f.Typ
		if col.Repeated {
			typ = typ.Elem()
			if canBeNil(typ) {
				return fmt.Errorf("field %s: its items (%v) can be nil, which a REPEATED column cannot hold (a BigQuery array has no NULL): use items that cannot be nil, or WithSchema (nil items are then refused row by row)", path, typ)
			}
		} else if canBeNil(typ) {
			col.Required = false
		}
		if t.FieldByIndex(f.Index).Tag.Get(ioTag) == "bignumeric" {
			if typ != typeOfRatPtr {
				return fmt.Errorf("field %s: tag %s:\"bignumeric\" is for a *big.Rat (or []*big.Rat), not a %v", path, ioTag, f.Typ)
			}
			col.Type = bigquery.BigNumericFieldType
		}
		if col.Type == bigquery.RecordFieldType {
			if typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			if len(col.Schema) == 0 {
				return fmt.Errorf("field %s: a RECORD of no columns (%v has no exported fields)", path, typ)
			}
			if err := fitSchema(col.Schema, typ, path+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

// canBeNil reports a type whose nil is a value a column must take as NULL.
func canBeNil(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return true
	}
	return false
}

// copySchema is a deep copy of schema: InferSchema caches the schema it
// returns, shared with every caller, which fitSchema must not change.
func copySchema(schema bigquery.Schema) bigquery.Schema {
	if schema == nil {
		return nil
	}
	out := make(bigquery.Schema, len(schema))
	for i, f := range schema {
		c := *f
		c.Schema = copySchema(f.Schema)
		out[i] = &c
	}
	return out
}
