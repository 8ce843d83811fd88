package bqwrite

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The writer schema of a table is built here from its bigquery.Schema
// directly, as the self-contained proto2 descriptor that the Storage Write
// API's adapt package would make and normalize (StorageSchemaToProto2Descriptor
// with scope "root", then NormalizeDescriptor), with NUMERIC, BIGNUMERIC,
// DATETIME and TIME made strings; building it by hand keeps protodesc and
// dynamicpb out of programs that write to BigQuery.
//
// The descriptor is message "root" with field i+1 for column i. A RECORD
// column's message is named after its path from the root ("root__a__b" for
// column b of RECORD a); RECORDs whose sub-schemas are equal (names,
// descriptions, types, modes, range element types and sub-schemas) share
// the message of the first of them in depth-first order. A RANGE column's
// message is rangemessage_range_<element type>, with fields start and end.
// All these messages are nested types of root, sorted by name. A column
// whose name is not a proto identifier is field col_<its name in base64,
// trimmed of +, / and =>, which names the column by the column_name option.
// REPEATED columns of packable types (INT64, FLOAT, BOOLEAN, DATE,
// TIMESTAMP) have the packed option, as adapt gives them. DATETIME and
// TIME do not: adapt makes them INT64 fields, packed, and this package
// sends them as strings, which protobuf refuses to pack ("[packed = true]
// can only be specified for repeated primitive fields", as the service's
// C++ descriptor builder says); adapt plus the string fields gave them
// both.

// storageType is the Storage Write API type of each column type it takes.
var storageType = map[bigquery.FieldType]storagepb.TableFieldSchema_Type{
	bigquery.StringFieldType:     storagepb.TableFieldSchema_STRING,
	bigquery.BytesFieldType:      storagepb.TableFieldSchema_BYTES,
	bigquery.IntegerFieldType:    storagepb.TableFieldSchema_INT64,
	bigquery.FloatFieldType:      storagepb.TableFieldSchema_DOUBLE,
	bigquery.BooleanFieldType:    storagepb.TableFieldSchema_BOOL,
	bigquery.TimestampFieldType:  storagepb.TableFieldSchema_TIMESTAMP,
	bigquery.RecordFieldType:     storagepb.TableFieldSchema_STRUCT,
	bigquery.DateFieldType:       storagepb.TableFieldSchema_DATE,
	bigquery.TimeFieldType:       storagepb.TableFieldSchema_TIME,
	bigquery.DateTimeFieldType:   storagepb.TableFieldSchema_DATETIME,
	bigquery.NumericFieldType:    storagepb.TableFieldSchema_NUMERIC,
	bigquery.BigNumericFieldType: storagepb.TableFieldSchema_BIGNUMERIC,
	bigquery.GeographyFieldType:  storagepb.TableFieldSchema_GEOGRAPHY,
	bigquery.RangeFieldType:      storagepb.TableFieldSchema_RANGE,
	bigquery.JSONFieldType:       storagepb.TableFieldSchema_JSON,
}

// columnType is the column type of each Storage Write API type.
var columnType = func() map[storagepb.TableFieldSchema_Type]bigquery.FieldType {
	m := make(map[storagepb.TableFieldSchema_Type]bigquery.FieldType, len(storageType))
	for k, v := range storageType {
		m[v] = k
	}
	return m
}()

// protoType is the proto type of a scalar column's field; packable tells
// the types adapt gives a REPEATED column the packed option.
func protoType(t bigquery.FieldType) (typ descriptorpb.FieldDescriptorProto_Type, packable bool) {
	switch t {
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType,
		bigquery.NumericFieldType, bigquery.BigNumericFieldType: // BYTES in adapt, made strings
		return descriptorpb.FieldDescriptorProto_TYPE_STRING, false
	case bigquery.DateTimeFieldType, bigquery.TimeFieldType: // INT64 in adapt, made strings: not packable
		return descriptorpb.FieldDescriptorProto_TYPE_STRING, false
	case bigquery.BytesFieldType:
		return descriptorpb.FieldDescriptorProto_TYPE_BYTES, false
	case bigquery.IntegerFieldType, bigquery.TimestampFieldType:
		return descriptorpb.FieldDescriptorProto_TYPE_INT64, true
	case bigquery.DateFieldType:
		return descriptorpb.FieldDescriptorProto_TYPE_INT32, true
	case bigquery.FloatFieldType:
		return descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, true
	case bigquery.BooleanFieldType:
		return descriptorpb.FieldDescriptorProto_TYPE_BOOL, true
	}
	return descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, false // RECORD, RANGE
}

// rangeMessage is the name of the message of a RANGE of element type t.
func rangeMessage(t bigquery.FieldType) string {
	return "rangemessage_range_" + strings.ToLower(storageType[t].String())
}

// writerDescriptor is the normalized writer schema of a table schema.
func writerDescriptor(schema bigquery.Schema) (*descriptorpb.DescriptorProto, error) {
	if schema == nil {
		return nil, errors.New("schema: no columns") // as adapt refuses it
	}
	if err := checkWriterSchema(schema, ""); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	b := &descBuilder{
		root:     &descriptorpb.DescriptorProto{Name: proto.String("root")},
		records:  map[string]string{},
		messages: map[string]bool{"root": true},
	}
	fields, err := b.fields(schema, "root", "")
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	b.root.Field = fields
	sort.SliceStable(b.root.NestedType, func(i, j int) bool {
		return b.root.NestedType[i].GetName() < b.root.NestedType[j].GetName()
	})
	return b.root, nil
}

// checkWriterSchema refuses a schema with a column type, or a range
// element type, that the Storage Write API does not take, or a RANGE
// without an element type of DATE, DATETIME or TIMESTAMP.
func checkWriterSchema(schema bigquery.Schema, prefix string) error {
	for i, f := range schema {
		if f == nil {
			return fmt.Errorf("column %d of %q is nil", i, prefix)
		}
		path := prefix + f.Name
		if _, ok := storageType[f.Type]; !ok {
			return fmt.Errorf("column %s: type %q is not one the Storage Write API takes", path, f.Type)
		}
		if f.RangeElementType != nil {
			if _, ok := storageType[f.RangeElementType.Type]; !ok {
				return fmt.Errorf("column %s: range element type %q is not one the Storage Write API takes", path, f.RangeElementType.Type)
			}
		}
		if f.Type == bigquery.RangeFieldType {
			if f.RangeElementType == nil {
				return fmt.Errorf("column %s is a RANGE without an element type", path)
			}
			switch f.RangeElementType.Type {
			case bigquery.DateFieldType, bigquery.DateTimeFieldType, bigquery.TimestampFieldType:
			default:
				return fmt.Errorf("column %s: a RANGE of %s, not of DATE, DATETIME or TIMESTAMP", path, f.RangeElementType.Type)
			}
		}
		if err := checkWriterSchema(f.Schema, path+"."); err != nil {
			return err
		}
	}
	return nil
}

// descBuilder builds a writer schema.
type descBuilder struct {
	root *descriptorpb.DescriptorProto
	// records is the message of each RECORD sub-schema built, by its key.
	records map[string]string
	// messages are the names of the messages made.
	messages map[string]bool
}

// fields are the fields of the message scope for the columns schema, of
// the RECORD at path prefix ("" for the table).
func (b *descBuilder) fields(schema bigquery.Schema, scope, prefix string) ([]*descriptorpb.FieldDescriptorProto, error) {
	out := make([]*descriptorpb.FieldDescriptorProto, 0, len(schema))
	names := make(map[string]bool, len(schema))
	for i, f := range schema {
		path := prefix + f.Name
		fd := &descriptorpb.FieldDescriptorProto{
			Name:   proto.String(f.Name),
			Number: proto.Int32(int32(i + 1)),
			Label:  descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
		}
		switch {
		case f.Repeated:
			fd.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		case f.Required:
			fd.Label = descriptorpb.FieldDescriptorProto_LABEL_REQUIRED.Enum()
		}
		typ, packable := protoType(f.Type)
		fd.Type = typ.Enum()
		switch f.Type {
		case bigquery.RecordFieldType:
			name, err := b.record(f.Schema, scope+"__"+f.Name, path+".")
			if err != nil {
				return nil, fmt.Errorf("RECORD %s: %w", path, err)
			}
			fd.TypeName = proto.String(name)
		case bigquery.RangeFieldType:
			fd.TypeName = proto.String(b.rangeType(f.RangeElementType.Type))
		default:
			if packable && f.Repeated {
				fd.Options = &descriptorpb.FieldOptions{Packed: proto.Bool(true)}
			}
		}
		if !protoreflect.Name(f.Name).IsValid() {
			name := "col_" + strings.Trim(base64.StdEncoding.EncodeToString([]byte(f.Name)), "+/=")
			if !protoreflect.Name(name).IsValid() {
				return nil, fmt.Errorf("column %s: its field name %s (from its name in base64) is not a proto identifier", strconv.Quote(path), name)
			}
			fd.Name = proto.String(name)
			if fd.Options == nil {
				fd.Options = &descriptorpb.FieldOptions{}
			}
			proto.SetExtension(fd.Options, storagepb.E_ColumnName, f.Name)
		}
		if names[fd.GetName()] {
			return nil, fmt.Errorf("column %s: a second field named %s", strconv.Quote(path), fd.GetName())
		}
		names[fd.GetName()] = true
		out = append(out, fd)
	}
	return out, nil
}

// record is the name of the message of a RECORD with the columns schema:
// that of an equal sub-schema built before, or a new one named scope.
func (b *descBuilder) record(schema bigquery.Schema, scope, prefix string) (string, error) {
	var key strings.Builder
	recordKey(&key, schema)
	if name, ok := b.records[key.String()]; ok {
		return name, nil
	}
	if !protoreflect.Name(scope).IsValid() {
		return "", fmt.Errorf("its message name %s is not a proto identifier", strconv.Quote(scope))
	}
	fields, err := b.fields(schema, scope, prefix)
	if err != nil {
		return "", err
	}
	if b.messages[scope] {
		return "", fmt.Errorf("a second message named %s", scope)
	}
	b.messages[scope] = true
	b.root.NestedType = append(b.root.NestedType, &descriptorpb.DescriptorProto{Name: proto.String(scope), Field: fields})
	b.records[key.String()] = scope
	return scope, nil
}

// rangeType is the name of the message of a RANGE of element type t,
// made on first use.
func (b *descBuilder) rangeType(t bigquery.FieldType) string {
	name := rangeMessage(t)
	if b.messages[name] {
		return name
	}
	b.messages[name] = true
	typ, _ := protoType(t)
	if t == bigquery.DateTimeFieldType {
		typ = descriptorpb.FieldDescriptorProto_TYPE_INT64 // not made a string
	}
	field := func(name string, n int32) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{
			Name:   proto.String(name),
			Number: proto.Int32(n),
			Label:  descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
			Type:   typ.Enum(),
		}
	}
	b.root.NestedType = append(b.root.NestedType, &descriptorpb.DescriptorProto{
		Name:  proto.String(name),
		Field: []*descriptorpb.FieldDescriptorProto{field("start", 1), field("end", 2)},
	})
	return name
}

// recordKey writes to w what of a sub-schema makes its message: each
// column's name, description, type, mode, range element type and
// sub-schema (whatever its type), as adapt compares them.
func recordKey(w *strings.Builder, schema bigquery.Schema) {
	for _, f := range schema {
		mode := "N"
		switch {
		case f.Repeated:
			mode = "R"
		case f.Required:
			mode = "Q"
		}
		fmt.Fprintf(w, "%q %q %s %s", f.Name, f.Description, f.Type, mode)
		if f.RangeElementType != nil {
			fmt.Fprintf(w, " <%s>", f.RangeElementType.Type)
		}
		w.WriteString("(")
		recordKey(w, f.Schema)
		w.WriteString(");")
	}
}

// tableSchema is the bigquery.Schema of a Storage Write API table schema:
// each column's name, description, type, mode, range element type and
// sub-schema.
func tableSchema(ts *storagepb.TableSchema) (bigquery.Schema, error) {
	if ts == nil {
		return nil, nil
	}
	return columnSchemas(ts.GetFields(), "")
}

func columnSchemas(fields []*storagepb.TableFieldSchema, prefix string) (bigquery.Schema, error) {
	var out bigquery.Schema
	for i, f := range fields {
		if f == nil {
			return nil, fmt.Errorf("column %d of %q is nil", i, prefix)
		}
		path := prefix + f.GetName()
		typ, ok := columnType[f.GetType()]
		if !ok {
			return nil, fmt.Errorf("column %s: type %s is not one bigqueryio knows", path, f.GetType())
		}
		fs := &bigquery.FieldSchema{
			Name:        f.GetName(),
			Description: f.GetDescription(),
			Type:        typ,
			Repeated:    f.GetMode() == storagepb.TableFieldSchema_REPEATED,
			Required:    f.GetMode() == storagepb.TableFieldSchema_REQUIRED,
		}
		if r := f.GetRangeElementType(); r != nil {
			et, ok := columnType[r.GetType()]
			if !ok {
				return nil, fmt.Errorf("column %s: range element type %s is not one bigqueryio knows", path, r.GetType())
			}
			fs.RangeElementType = &bigquery.RangeElementType{Type: et}
		}
		sub, err := columnSchemas(f.GetFields(), path+".")
		if err != nil {
			return nil, err
		}
		fs.Schema = sub
		out = append(out, fs)
	}
	return out, nil
}
