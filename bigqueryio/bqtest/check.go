package bqtest

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
)

// checkRow reports a row whose values do not fit the schema.
func checkRow(schema bigquery.Schema, row []bigquery.Value, path []string) error {
	if len(row) != len(schema) {
		return fmt.Errorf("%s has %d values for %d columns", where(path, "row"), len(row), len(schema))
	}
	for i, f := range schema {
		p := append(path, f.Name)
		v := row[i]
		if f.Repeated {
			if v == nil {
				continue
			}
			items, ok := v.([]bigquery.Value)
			if !ok {
				return fmt.Errorf("column %s is repeated: want []bigquery.Value, got %T", strings.Join(p, "."), v)
			}
			for k, it := range items {
				if it == nil {
					return fmt.Errorf("column %s item %d is NULL, which a repeated column cannot hold", strings.Join(p, "."), k)
				}
				if err := checkValue(f, it, p); err != nil {
					return err
				}
			}
			continue
		}
		if v == nil {
			if f.Required {
				return fmt.Errorf("column %s is REQUIRED but NULL", strings.Join(p, "."))
			}
			continue
		}
		if err := checkValue(f, v, p); err != nil {
			return err
		}
	}
	return nil
}

func where(path []string, what string) string {
	if len(path) == 0 {
		return what
	}
	return "record " + strings.Join(path, ".")
}

func checkValue(f *bigquery.FieldSchema, v bigquery.Value, p []string) error {
	ok := false
	switch f.Type {
	case bigquery.IntegerFieldType:
		_, ok = v.(int64)
	case bigquery.FloatFieldType:
		_, ok = v.(float64)
	case bigquery.BooleanFieldType:
		_, ok = v.(bool)
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		_, ok = v.(string)
	case bigquery.BytesFieldType:
		_, ok = v.([]byte)
	case bigquery.NumericFieldType, bigquery.BigNumericFieldType:
		var r *big.Rat
		r, ok = v.(*big.Rat)
		ok = ok && r != nil
	case bigquery.DateFieldType:
		_, ok = v.(civil.Date)
	case bigquery.TimeFieldType:
		_, ok = v.(civil.Time)
	case bigquery.DateTimeFieldType:
		_, ok = v.(civil.DateTime)
	case bigquery.TimestampFieldType:
		_, ok = v.(time.Time)
	case bigquery.RecordFieldType:
		sub, isRow := v.([]bigquery.Value)
		if !isRow {
			return fmt.Errorf("column %s is a RECORD: want []bigquery.Value, got %T", strings.Join(p, "."), v)
		}
		return checkRow(f.Schema, sub, p)
	default:
		return fmt.Errorf("column %s has type %s, which bqtest does not serve", strings.Join(p, "."), f.Type)
	}
	if !ok {
		return fmt.Errorf("column %s of type %s holds a %T", strings.Join(p, "."), f.Type, v)
	}
	return nil
}
