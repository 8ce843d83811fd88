package bigqueryio

import (
	"encoding/json"
	"fmt"
	"strings"

	"cloud.google.com/go/bigquery"
)

// The Avro schema of a read session is JSON, read here with encoding/json
// into the BigQuery schema it stands for, as the Storage Read API maps
// types (see bqtest's package doc): a record of fields whose types are
// primitives, nullable unions ["null", T], arrays of a type, and records,
// with the logical types and sqlType annotations BigQuery puts on them.
// Nothing else of Avro is needed to read BigQuery's rows (avroio reads
// Avro files; this is not its schema model).

// maxAvroDepth is how deep the parser follows records in records.
const maxAvroDepth = 64

// avroParser parses one session's schema: the records defined so far, by
// full name, for references to them.
type avroParser struct {
	named map[string]map[string]any
}

// schemaFromAvroJSON derives the BigQuery schema of a read session from
// its Avro schema's JSON.
func schemaFromAvroJSON(js string) (bigquery.Schema, error) {
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("not JSON: data after the schema at byte %d", dec.InputOffset())
	}
	p := avroParser{named: map[string]map[string]any{}}
	m, ns, err := p.resolve(v, "")
	if err != nil {
		return nil, err
	}
	if kind := avroKind(m); kind != "record" {
		return nil, fmt.Errorf("the session's Avro schema is a %s, want a record", kind)
	}
	return p.record(m.(map[string]any), ns, nil)
}

// avroPrimitives are the Avro primitive type names.
var avroPrimitives = map[string]bool{
	"null": true, "boolean": true, "int": true, "long": true, "float": true,
	"double": true, "bytes": true, "string": true,
}

// avroKind is the type name of a resolved schema: a primitive, "record",
// "array", "union" (a JSON array), or what else it says it is.
func avroKind(v any) string {
	switch x := v.(type) {
	case []any:
		return "union"
	case map[string]any:
		if s, ok := x["type"].(string); ok {
			return s
		}
		return fmt.Sprintf("%T", x["type"])
	case string:
		return x
	}
	return fmt.Sprintf("%T", v)
}

// fullName is the full name of a named type called name in namespace ns.
func fullName(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

// resolve turns a schema as written into a JSON object (a primitive named
// by a string becomes {"type": name}; a reference, the record it names; a
// union stays a []any), registering the records it defines, and returns
// the namespace names inside it resolve in.
func (p *avroParser) resolve(v any, ns string) (any, string, error) {
	switch x := v.(type) {
	case string:
		if avroPrimitives[x] {
			return map[string]any{"type": x}, ns, nil
		}
		for _, n := range []string{fullName(x, ns), x} {
			if m, ok := p.named[n]; ok {
				return m, namespaceOf(n), nil
			}
		}
		return nil, "", fmt.Errorf("type %q is not defined", x)
	case []any:
		return x, ns, nil
	case map[string]any:
		switch t := x["type"].(type) {
		case string:
			if t == "record" {
				name, _ := x["name"].(string)
				if name == "" {
					return nil, "", fmt.Errorf("a record with no name")
				}
				if s, ok := x["namespace"].(string); ok && !strings.Contains(name, ".") {
					ns = s
				}
				full := fullName(name, ns)
				if _, dup := p.named[full]; dup {
					return nil, "", fmt.Errorf("record %s is defined twice", full)
				}
				p.named[full] = x
				return x, namespaceOf(full), nil
			}
			if avroPrimitives[t] || t == "array" || t == "map" || t == "enum" || t == "fixed" {
				return x, ns, nil
			}
			// {"type": "name"}: a reference.
			return p.resolve(t, ns)
		case nil:
			return nil, "", fmt.Errorf("a schema object with no type")
		default:
			return p.resolve(t, ns)
		}
	}
	return nil, "", fmt.Errorf("a schema of JSON type %T", v)
}

// namespaceOf is the namespace of a full name.
func namespaceOf(full string) string {
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		return full[:i]
	}
	return ""
}

// record is the BigQuery fields of record m.
func (p *avroParser) record(m map[string]any, ns string, path []string) (bigquery.Schema, error) {
	fields, ok := m["fields"].([]any)
	if !ok {
		return nil, fmt.Errorf("%s: a record with no fields list", columnName(path, "record"))
	}
	out := make(bigquery.Schema, 0, len(fields))
	seen := map[string]bool{}
	for _, f := range fields {
		fm, ok := f.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: a field of JSON type %T", columnName(path, "record"), f)
		}
		name, _ := fm["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("%s: a field with no name", columnName(path, "record"))
		}
		fpath := append(path[:len(path):len(path)], name)
		if seen[name] {
			return nil, fmt.Errorf("column %s: defined twice", strings.Join(fpath, "."))
		}
		seen[name] = true
		fs, err := p.field(fm, ns, fpath)
		if err != nil {
			return nil, err
		}
		out = append(out, fs)
	}
	return out, nil
}

// columnName names the column at path in an error (the schema's root
// record, what, when path is empty).
func columnName(path []string, what string) string {
	if len(path) == 0 {
		return "the session's " + what
	}
	return "column " + strings.Join(path, ".")
}

// prop is the string attribute k of m ("" when absent or not a string).
func prop(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// field is the BigQuery field of Avro field f, at path.
func (p *avroParser) field(f map[string]any, ns string, path []string) (*bigquery.FieldSchema, error) {
	col := strings.Join(path, ".")
	if len(path) > maxAvroDepth {
		// A record that contains itself (BigQuery nests 15 deep at most).
		return nil, fmt.Errorf("column %s: records nested deeper than %d", col, maxAvroDepth)
	}
	fs := &bigquery.FieldSchema{Name: path[len(path)-1], Required: true}
	t, tns, err := p.resolve(f["type"], ns)
	if err != nil {
		return nil, fmt.Errorf("column %s: %w", col, err)
	}
	if u, ok := t.([]any); ok {
		// Only ["null", T]: the decoders read branch 0 as NULL.
		if len(u) != 2 || avroKind(u[0]) != "null" || avroKind(u[1]) == "null" {
			js, _ := json.Marshal(u)
			return nil, fmt.Errorf("column %s: union %s is not a nullable type [\"null\", T]", col, js)
		}
		fs.Required = false
		if t, tns, err = p.resolve(u[1], tns); err != nil {
			return nil, fmt.Errorf("column %s: %w", col, err)
		}
	}
	if m, ok := t.(map[string]any); ok && prop(m, "type") == "array" {
		fs.Repeated, fs.Required = true, false
		if t, tns, err = p.resolve(m["items"], tns); err != nil {
			return nil, fmt.Errorf("column %s: the array's items: %w", col, err)
		}
	}
	m, _ := t.(map[string]any)
	logical := prop(m, "logicalType")
	switch kind := avroKind(t); kind {
	case "long":
		switch logical {
		case "time-micros":
			fs.Type = bigquery.TimeFieldType
		case "timestamp-micros":
			fs.Type = bigquery.TimestampFieldType
		default:
			fs.Type = bigquery.IntegerFieldType
		}
	case "int":
		fs.Type = bigquery.IntegerFieldType
		if logical == "date" {
			fs.Type = bigquery.DateFieldType
		}
	case "double":
		fs.Type = bigquery.FloatFieldType
	case "boolean":
		fs.Type = bigquery.BooleanFieldType
	case "string":
		st, err := avroStringType(m, f, col)
		if err != nil {
			return nil, err
		}
		fs.Type = st
	case "bytes":
		fs.Type = bigquery.BytesFieldType
		if logical == "decimal" {
			prec, okp := avroInt(m["precision"])
			scale, oks := avroInt(m["scale"])
			if _, has := m["scale"]; !has {
				scale, oks = 0, true
			}
			if !okp || !oks || prec <= 0 || scale < 0 || scale > prec {
				return nil, fmt.Errorf("column %s: a decimal of precision %v and scale %v", col, m["precision"], m["scale"])
			}
			fs.Type, fs.Precision, fs.Scale = bigquery.NumericFieldType, prec, scale
			if prec > 38 || scale > 9 {
				fs.Type = bigquery.BigNumericFieldType
			}
		}
	case "record":
		sub, err := p.record(m, tns, path)
		if err != nil {
			return nil, err
		}
		if len(sub) == 0 {
			// Its values would take no bytes: an array of them could not
			// be bounded by the payload. BigQuery's RECORDs have fields.
			return nil, fmt.Errorf("column %s: a record of no fields", col)
		}
		fs.Type, fs.Schema = bigquery.RecordFieldType, sub
	default:
		return nil, fmt.Errorf("column %s: Avro type %s is not one the Storage Read API sends", col, kind)
	}
	return fs, nil
}

// avroInt is a JSON number that is an integer.
func avroInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

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
// logicalType and sqlType annotations (on the string type t, or else on
// the field f); annotations that name different types are an error. A
// string without a known annotation is a STRING.
func avroStringType(t, f map[string]any, col string) (bigquery.FieldType, error) {
	sql, logical := "", ""
	for _, m := range []map[string]any{t, f} {
		if sql == "" {
			sql = prop(m, "sqlType")
		}
		if logical == "" {
			logical = prop(m, "logicalType")
		}
	}
	byLogical, lok := stringTypes[strings.ToLower(logical)]
	bySQL, sok := stringTypes[strings.ToLower(sql)]
	switch {
	case lok && sok && byLogical != bySQL:
		return "", fmt.Errorf("column %s: its Avro string is annotated logicalType %q and sqlType %q, two different BigQuery types", col, logical, sql)
	case lok:
		return byLogical, nil
	case sok:
		return bySQL, nil
	}
	return bigquery.StringFieldType, nil
}
