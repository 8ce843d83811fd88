package avroio

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/hamba/avro/v2"
)

// checkFields makes sure that the Go struct t can hold records of schema s
// without silently losing data: every exported field of t (and of the
// structs t embeds) must name a field of the record schema, by its `avro`
// tag or else its Go name, as hamba/avro matches them. Fields tagged
// `avro:"-"` are left out. Struct fields whose schema is a record (or a
// union of null and a record) are checked the same way.
//
// Without the check a struct tagged for another encoding (`json:"name"`, as
// Beam Go's own avroio expects) would decode every record into zero values.
// Non-struct types (maps, generic Records) are not checked.
func checkFields(t reflect.Type, s avro.Schema) error {
	return checkStruct(t, t, s, "", map[reflect.Type]bool{})
}

func checkStruct(top, t reflect.Type, s avro.Schema, path string, seen map[reflect.Type]bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	rs := recordSchema(s)
	if t.Kind() != reflect.Struct || rs == nil || seen[t] {
		return nil
	}
	seen[t] = true
	fields := map[string]avro.Schema{}
	for _, f := range rs.Fields() {
		fields[f.Name()] = f.Type()
	}
	for _, f := range structFields(t) {
		name := f.Name
		if tag, ok := f.Tag.Lookup("avro"); ok {
			name, _, _ = strings.Cut(tag, ",")
		}
		if name == "-" {
			continue
		}
		fpath := path + f.Name
		fs, ok := fields[name]
		if !ok {
			how := "its `avro` tag"
			if _, ok := f.Tag.Lookup("avro"); !ok {
				how = "its Go name, as it has no `avro` tag"
			}
			return fmt.Errorf("field %s of Go type %v is Avro field %q by %s, but Avro record %s has no such field (its fields: %s); tag the Go field with the Avro field it holds, as in `avro:%q`, or with `avro:\"-\"` to leave it out",
				fpath, top, name, how, rs.FullName(), fieldNames(rs), suggestField(rs, name))
		}
		if err := checkStruct(top, f.Type, fs, fpath+".", seen); err != nil {
			return err
		}
	}
	return nil
}

// structFields lists the exported fields of t and of the structs it
// embeds, as hamba/avro sees them.
func structFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				out = append(out, structFields(et)...)
			}
			continue
		}
		if f.IsExported() {
			out = append(out, f)
		}
	}
	return out
}

// recordSchema is s as a record schema, looking through references and
// through a union of null and one record; nil if s is something else.
func recordSchema(s avro.Schema) *avro.RecordSchema {
	for {
		switch v := s.(type) {
		case *avro.RefSchema:
			s = v.Schema()
		case *avro.RecordSchema:
			return v
		case *avro.UnionSchema:
			if !v.Nullable() {
				return nil
			}
			for _, b := range v.Types() {
				if b.Type() != avro.Null {
					s = b
				}
			}
		default:
			return nil
		}
	}
}

func fieldNames(rs *avro.RecordSchema) string {
	var names []string
	for _, f := range rs.Fields() {
		names = append(names, f.Name())
	}
	return strings.Join(names, ", ")
}

// suggestField is the field of rs whose name is closest to name: the one
// equal but for case, else the first.
func suggestField(rs *avro.RecordSchema, name string) string {
	fs := rs.Fields()
	for _, f := range fs {
		if strings.EqualFold(f.Name(), name) || strings.EqualFold(strings.ReplaceAll(f.Name(), "_", ""), name) {
			return f.Name()
		}
	}
	if len(fs) > 0 {
		return fs[0].Name()
	}
	return name
}
