package bigqueryio

import (
	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow/go/v15/arrow"
)

// schemaFromArrow derives the BigQuery schema of a read session from its
// Arrow schema.
func schemaFromArrow(s *arrow.Schema) (bigquery.Schema, error) {
	return arrowFields(s.Fields(), nil)
}

func arrowFields(fields []arrow.Field, path []string) (bigquery.Schema, error) {
	out := make(bigquery.Schema, 0, len(fields))
	for _, f := range fields {
		fs, err := arrowField(f, append(path, f.Name))
		if err != nil {
			return nil, err
		}
		out = append(out, fs)
	}
	return out, nil
}

// arrowTypes are the BigQuery types of the Arrow types that are one
// BigQuery type whatever their parameters and metadata, by their ID.
var arrowTypes = map[arrow.Type]bigquery.FieldType{
	arrow.INT64:   bigquery.IntegerFieldType,
	arrow.FLOAT64: bigquery.FloatFieldType,
	arrow.BOOL:    bigquery.BooleanFieldType,
	arrow.BINARY:  bigquery.BytesFieldType,
	arrow.DATE32:  bigquery.DateFieldType,
}

// plainArrowType is the BigQuery type of t if arrowTypes has it.
func plainArrowType(t arrow.DataType) (bigquery.FieldType, bool) {
	if t == nil {
		return "", false
	}
	ft, ok := arrowTypes[t.ID()]
	return ft, ok
}

// arrowStringTypes are the BigQuery types sent as Arrow strings with an
// extension name, by that name (other strings are STRING).
var arrowStringTypes = map[string]bigquery.FieldType{
	"google:sqlType:geography": bigquery.GeographyFieldType,
	"google:sqlType:json":      bigquery.JSONFieldType,
}

func arrowField(f arrow.Field, path []string) (*bigquery.FieldSchema, error) {
	fs := &bigquery.FieldSchema{Name: f.Name, Required: !f.Nullable}
	t := f.Type
	md := f.Metadata
	if l, ok := t.(*arrow.ListType); ok {
		fs.Repeated, fs.Required = true, false
		t = l.Elem()
		md = l.ElemField().Metadata
	}
	ext := ""
	if i := md.FindKey("ARROW:extension:name"); i >= 0 {
		ext = md.Values()[i]
	}
	if pt, ok := plainArrowType(t); ok {
		fs.Type = pt
		return fs, nil
	}
	switch tt := t.(type) {
	case *arrow.StringType:
		fs.Type = bigquery.StringFieldType
		if st, ok := arrowStringTypes[ext]; ok {
			fs.Type = st
		}
	case *arrow.Decimal128Type:
		if tt.Precision <= 0 || tt.Precision > 38 || tt.Scale < 0 || tt.Scale > tt.Precision {
			fs.Type = unknownArrowType(t)
			break
		}
		fs.Type, fs.Precision, fs.Scale = bigquery.NumericFieldType, int64(tt.Precision), int64(tt.Scale)
	case *arrow.Decimal256Type:
		if tt.Precision <= 0 || tt.Precision > 76 || tt.Scale < 0 || tt.Scale > tt.Precision {
			fs.Type = unknownArrowType(t)
			break
		}
		fs.Type, fs.Precision, fs.Scale = bigquery.BigNumericFieldType, int64(tt.Precision), int64(tt.Scale)
	case *arrow.TimestampType:
		switch {
		case tt.Unit != arrow.Microsecond:
			fs.Type = unknownArrowType(t)
		case tt.TimeZone == "":
			fs.Type = bigquery.DateTimeFieldType
		default:
			fs.Type = bigquery.TimestampFieldType
		}
	case *arrow.Time64Type:
		fs.Type = bigquery.TimeFieldType
		if tt.Unit != arrow.Microsecond {
			fs.Type = unknownArrowType(t)
		}
	case *arrow.StructType:
		sub, err := arrowFields(tt.Fields(), path)
		if err != nil {
			return nil, err
		}
		fs.Type, fs.Schema = bigquery.RecordFieldType, sub
	default:
		fs.Type = unknownArrowType(t)
	}
	return fs, nil
}

// unknownArrowType is the type of a column of an Arrow type the Storage
// Read API did not send when this was written (one of another integer or
// time unit, say): the Arrow type's name, which no BigQuery type has, so
// that a session with such a column is read, its NULLs are NULL, and only
// a value of it fails, naming the column and the type (arrowValue), as in
// the official client (its convertArrowValue); a struct field for such a
// column fails when the read's plan is made (setterFor knows no such
// type).
func unknownArrowType(t arrow.DataType) bigquery.FieldType {
	return bigquery.FieldType(t.String())
}
