package bqwrite

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter/adapt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The writer schema of a table is made by managedwriter/adapt, as the
// Storage Write API's examples make it: BQSchemaToStorageTableSchema,
// StorageSchemaToProto2Descriptor with scope "root", NormalizeDescriptor.
// It is message "root" with field i+1 for column i (write_encode.go relies
// on it, and writerDescriptor checks it); each RECORD's message
// (root__a__b for column b of RECORD a, shared by RECORDs whose
// sub-schemas are equal) and each RANGE's (rangemessage_range_<element
// type>) are nested types of root. REPEATED columns of packable types have
// the packed option. A column whose name is not a proto identifier is
// field col_<its name in base64>, which names the column by the
// column_name option.
//
// Two things are done to adapt's descriptor:
//
//   - NUMERIC, BIGNUMERIC, DATETIME and TIME columns are made strings
//     (adapt makes the first two BYTES and the others INT64, packed when
//     REPEATED): write_encode.go sends their text, which the service takes
//     as it takes their literals in SQL, so that no value goes through a
//     lossy packing. A string is not packable: the packed option adapt gives
//     REPEATED DATETIME and TIME is dropped, as protobuf's C++ descriptor
//     builder (the service's) refuses it ("[packed = true] can only be
//     specified for repeated primitive fields"). A RANGE's bounds are left
//     as adapt makes them (write_encode.go encodes no RANGE value). adapt's
//     WithProtoMapping could override the types, but an override by type
//     reaches the RANGE messages' bounds too, and one by path is matched
//     against names joined with "." (and split at "__"), which two columns
//     can share.
//   - adapt's defect with flexible column names is worked around;
//     TestAdaptBase64NameDefect shows it. adapt names the field of a column
//     whose name is not a proto identifier col_ + strings.Trim(its name in
//     base64, "+/="), which takes away only the leading and trailing +, /
//     and =: a name whose base64 has a + or a / inside ("kurz_über",
//     a3Vyel/DvGJlcg==; "Größe > 10", R3LDtsOfZSA+IDEw) makes a field name
//     that is no proto identifier, and adapt refuses the whole schema
//     (protodesc: invalid name), so such a column could not be written.
//     renameForAdapt gives adapt such a column under its field name
//     (columnFieldName: adapt's, with each + inside written _P and each /
//     _S; base64 has no _, so no two such names meet), and finishFields
//     sets its column_name option. A column named as another's field name
//     is refused: beside it by adapt (two fields of one name), in twin
//     RECORDs (which adapt gives one message) by finishFields. A RECORD
//     whose name is not a proto identifier is refused, as adapt refuses it
//     (its message's name is made of the column's name).
//     TestWriterDescriptorInnerBase64Names and TestWriteInnerBase64Names
//     write such columns.

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

// writerDescriptor is the normalized writer schema of a table schema.
func writerDescriptor(schema bigquery.Schema) (*descriptorpb.DescriptorProto, error) {
	if err := checkWriterSchema(schema, ""); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	ts, err := adapt.BQSchemaToStorageTableSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	renameForAdapt(ts.GetFields())
	d, err := adapt.StorageSchemaToProto2Descriptor(ts, "root")
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("schema: adapt made a %T, not a message", d)
	}
	dp, err := adapt.NormalizeDescriptor(md)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	nested := make(map[string]*descriptorpb.DescriptorProto, len(dp.GetNestedType()))
	for _, n := range dp.GetNestedType() {
		nested[n.GetName()] = n
	}
	if err := finishFields(dp, schema, "", nested, map[*descriptorpb.FieldDescriptorProto]string{}); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return dp, nil
}

// columnFieldName is the proto field name of a column named name: its
// name if a proto identifier, else col_<its name in base64, trimmed of
// leading and trailing +, / and => as adapt names it, with each + left
// written _P and each / _S (which adapt leaves, making no identifier).
func columnFieldName(name string) string {
	if protoreflect.Name(name).IsValid() {
		return name
	}
	return strings.NewReplacer("+", "_P", "/", "_S").Replace(adaptFieldName(name))
}

// adaptFieldName is the field name adapt gives a column named name that
// is not a proto identifier.
func adaptFieldName(name string) string {
	return "col_" + strings.Trim(base64.StdEncoding.EncodeToString([]byte(name)), "+/=")
}

// renameForAdapt renames the columns, not RECORDs, that adapt would give
// a field name that is no proto identifier to their field names
// (columnFieldName), which adapt takes as they are.
func renameForAdapt(fields []*storagepb.TableFieldSchema) {
	for _, f := range fields {
		if f.GetType() == storagepb.TableFieldSchema_STRUCT {
			renameForAdapt(f.GetFields())
			continue
		}
		if name := f.GetName(); !protoreflect.Name(name).IsValid() && !protoreflect.Name(adaptFieldName(name)).IsValid() {
			f.Name = columnFieldName(name)
		}
	}
}

// finishFields checks that the fields of m, the message adapt made for
// the columns schema of the RECORD at path prefix ("" for the table), are
// numbered i+1 for column i, makes NUMERIC, BIGNUMERIC, DATETIME and TIME
// columns strings, and gives the columns renameForAdapt renamed their
// column_name option. seen is the column each field done is of: a message
// adapt shares between equal sub-schemas is done again, and must be of
// columns of the same names.
func finishFields(m *descriptorpb.DescriptorProto, schema bigquery.Schema, prefix string, nested map[string]*descriptorpb.DescriptorProto, seen map[*descriptorpb.FieldDescriptorProto]string) error {
	if len(m.GetField()) != len(schema) {
		return fmt.Errorf("adapt made %d fields of message %s for %d columns", len(m.GetField()), m.GetName(), len(schema))
	}
	for i, col := range schema {
		path := prefix + col.Name
		f := m.GetField()[i]
		if f.GetNumber() != int32(i+1) {
			return fmt.Errorf("column %s: adapt numbered its field %d, not %d", strconv.Quote(path), f.GetNumber(), i+1)
		}
		if col.Type == bigquery.RecordFieldType {
			name := f.GetTypeName()
			if k := strings.LastIndexByte(name, '.'); k >= 0 {
				name = name[k+1:]
			}
			sub, ok := nested[name]
			if !ok {
				return fmt.Errorf("RECORD %s: no message %s", strconv.Quote(path), f.GetTypeName())
			}
			if err := finishFields(sub, col.Schema, path+".", nested, seen); err != nil {
				return err
			}
			continue
		}
		if prev, ok := seen[f]; ok {
			if prev != col.Name {
				return fmt.Errorf("column %s: its field %s is that of a column %s too", strconv.Quote(path), f.GetName(), strconv.Quote(prev))
			}
			continue
		}
		seen[f] = col.Name
		switch col.Type {
		case bigquery.NumericFieldType, bigquery.BigNumericFieldType, bigquery.DateTimeFieldType, bigquery.TimeFieldType:
			f.Type = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
			if f.Options != nil {
				f.Options.Packed = nil
			}
		}
		if f.GetName() != col.Name && !proto.HasExtension(f.GetOptions(), storagepb.E_ColumnName) {
			if f.Options == nil {
				f.Options = &descriptorpb.FieldOptions{}
			}
			proto.SetExtension(f.Options, storagepb.E_ColumnName, col.Name)
		}
		if f.Options != nil && proto.Size(f.Options) == 0 {
			f.Options = nil
		}
	}
	return nil
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
