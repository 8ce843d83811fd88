package bigqueryio

import (
	"fmt"
	"strings"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/hamba/avro/v2"
)

// schemaFromAvro derives the BigQuery schema of a read session from its Avro
// schema, as the Storage Read API maps types (see bqtest's package doc).
func schemaFromAvro(s avro.Schema) (bigquery.Schema, error) {
	rec, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("the session's Avro schema is a %s, want a record", s.Type())
	}
	return avroRecordFields(rec, nil)
}

func avroRecordFields(rec *avro.RecordSchema, path []string) (bigquery.Schema, error) {
	out := make(bigquery.Schema, 0, len(rec.Fields()))
	for _, f := range rec.Fields() {
		fs, err := avroField(f, f.Type(), append(path, f.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, fs)
	}
	return out, nil
}

// propSchema is an Avro schema or field with properties (hamba keeps the
// attributes it does not know, such as sqlType, as properties).
type propSchema interface{ Prop(string) any }

// stringTypes are the BigQuery types sent as Avro strings, by the
// annotations that name them: the Storage Read API marks DATETIME with
// logicalType "datetime" and GEOGRAPHY and JSON with an sqlType; BigQuery's
// Avro exports (and servers written after them) mark DATETIME with sqlType
// "DATETIME". Either annotation names the type.
var stringTypes = map[string]bigquery.FieldType{
	"datetime":  bigquery.DateTimeFieldType,
	"geography": bigquery.GeographyFieldType,
	"json":      bigquery.JSONFieldType,
	"string":    bigquery.StringFieldType,
}

// avroStringType is the BigQuery type of an Avro string column, by its
// logicalType and sqlType annotations (on the string type, or else on the
// field); annotations that name different types are an error. A string
// without a known annotation is a STRING.
func avroStringType(logical string, t avro.Schema, f *avro.Field, path []string) (bigquery.FieldType, error) {
	props := []propSchema{f}
	if p, ok := t.(propSchema); ok {
		props = []propSchema{p, f}
	}
	sql := ""
	for _, p := range props {
		if v, ok := p.Prop("sqlType").(string); ok && sql == "" {
			sql = v
		}
		if v, ok := p.Prop("logicalType").(string); ok && logical == "" {
			logical = v
		}
	}
	byLogical, lok := stringTypes[strings.ToLower(logical)]
	bySQL, sok := stringTypes[strings.ToLower(sql)]
	switch {
	case lok && sok && byLogical != bySQL:
		return "", fmt.Errorf("column %s: its Avro string is annotated logicalType %q and sqlType %q, two different BigQuery types", strings.Join(path, "."), logical, sql)
	case lok:
		return byLogical, nil
	case sok:
		return bySQL, nil
	}
	return bigquery.StringFieldType, nil
}

func avroField(af *avro.Field, t avro.Schema, path []string) (*bigquery.FieldSchema, error) {
	name := path[len(path)-1]
	fs := &bigquery.FieldSchema{Name: name, Required: true}
	if u, ok := t.(*avro.UnionSchema); ok {
		types := u.Types()
		if len(types) != 2 || (types[0].Type() != avro.Null && types[1].Type() != avro.Null) {
			return nil, fmt.Errorf("column %s: union %s is not a nullable type", strings.Join(path, "."), u)
		}
		fs.Required = false
		t = types[1]
		if types[1].Type() == avro.Null {
			t = types[0]
		}
	}
	if a, ok := t.(*avro.ArraySchema); ok {
		fs.Repeated, fs.Required = true, false
		t = a.Items()
	}
	if r, ok := t.(*avro.RefSchema); ok {
		t = r.Schema()
	}
	logical := ""
	if l, ok := t.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		logical = string(l.Logical().Type())
	}
	if p, ok := t.(propSchema); ok {
		if lt, ok := p.Prop("logicalType").(string); ok && logical == "" {
			logical = lt
		}
	}
	switch t.Type() {
	case avro.Long:
		switch logical {
		case "time-micros":
			fs.Type = bigquery.TimeFieldType
		case "timestamp-micros":
			fs.Type = bigquery.TimestampFieldType
		default:
			fs.Type = bigquery.IntegerFieldType
		}
	case avro.Int:
		fs.Type = bigquery.IntegerFieldType
		if logical == "date" {
			fs.Type = bigquery.DateFieldType
		}
	case avro.Double, avro.Float:
		fs.Type = bigquery.FloatFieldType
	case avro.Boolean:
		fs.Type = bigquery.BooleanFieldType
	case avro.String:
		st, err := avroStringType(logical, t, af, path)
		if err != nil {
			return nil, err
		}
		fs.Type = st
	case avro.Bytes:
		fs.Type = bigquery.BytesFieldType
		if logical == "decimal" {
			d := t.(avro.LogicalTypeSchema).Logical().(*avro.DecimalLogicalSchema)
			fs.Type, fs.Precision, fs.Scale = bigquery.NumericFieldType, int64(d.Precision()), int64(d.Scale())
			if d.Precision() > 38 || d.Scale() > 9 {
				fs.Type = bigquery.BigNumericFieldType
			}
		}
	case avro.Record:
		sub, err := avroRecordFields(t.(*avro.RecordSchema), path)
		if err != nil {
			return nil, err
		}
		fs.Type, fs.Schema = bigquery.RecordFieldType, sub
	default:
		return nil, fmt.Errorf("column %s: Avro type %s is not one the Storage Read API sends", strings.Join(path, "."), t.Type())
	}
	return fs, nil
}

// parseArrowSchema decodes the IPC schema message of a read session.
func parseArrowSchema(b []byte) (*arrow.Schema, error) {
	r, _, err := newIPCReader(b, nil)
	if err != nil {
		return nil, fmt.Errorf("the session's Arrow schema: %w", err)
	}
	defer r.Release()
	return r.Schema(), nil
}

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
	arrow.TIME64:  bigquery.TimeFieldType,
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
		fs.Type, fs.Precision, fs.Scale = bigquery.NumericFieldType, int64(tt.Precision), int64(tt.Scale)
	case *arrow.Decimal256Type:
		fs.Type, fs.Precision, fs.Scale = bigquery.BigNumericFieldType, int64(tt.Precision), int64(tt.Scale)
	case *arrow.TimestampType:
		fs.Type = bigquery.TimestampFieldType
		if tt.TimeZone == "" {
			fs.Type = bigquery.DateTimeFieldType
		}
	case *arrow.StructType:
		sub, err := arrowFields(tt.Fields(), path)
		if err != nil {
			return nil, err
		}
		fs.Type, fs.Schema = bigquery.RecordFieldType, sub
	default:
		return nil, fmt.Errorf("column %s: Arrow type %s is not one the Storage Read API sends", strings.Join(path, "."), t)
	}
	return fs, nil
}
