package avroio

import (
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
)

// The Go structs records are read into and written from are matched to
// Avro records here, once for both directions, by hamba/avro's rules (its
// describeStruct): a struct's fields are its exported fields, named by their
// `avro` tag or else their Go name, and the fields of every struct it embeds
// (a struct or pointer to a struct, tagged or not, exported or not),
// breadth first, so that a field of the outer struct shadows a field of the
// same name in an embedded one; embedded fields of other types are left
// out.

// goField is a field of a Go struct as hamba/avro sees it.
type goField struct {
	name   string       // the Avro field it holds: its avro tag, else its Go name
	path   string       // its Go selector from the struct ("Base.ID" when embedded)
	typ    reflect.Type // its Go type
	tagged bool         // it has an avro tag
	tag    string       // its avro tag, options and all
	index  []int        // its index sequence from the struct (reflect.Value.FieldByIndex)
}

// structFields lists the fields of the struct t as hamba/avro matches them
// to record fields: breadth first through embedded structs, the first field
// of each name only (the one hamba/avro fills).
func structFields(t reflect.Type) []goField {
	type level struct {
		t      reflect.Type
		prefix string
		index  []int
	}
	var out []goField
	named := map[string]bool{}
	visited := map[reflect.Type]bool{}
	for next := []level{{t, "", nil}}; len(next) > 0; {
		curr := next
		next = nil
		for _, l := range curr {
			if visited[l.t] {
				continue
			}
			visited[l.t] = true
			for i := 0; i < l.t.NumField(); i++ {
				f := l.t.Field(i)
				index := append(append([]int(nil), l.index...), i)
				if f.Anonymous {
					et := f.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if et.Kind() == reflect.Struct {
						next = append(next, level{et, l.prefix + f.Name + ".", index})
					}
					continue
				}
				if !f.IsExported() {
					continue
				}
				name := f.Name
				tag, tagged := f.Tag.Lookup("avro")
				if tagged {
					name, _, _ = strings.Cut(tag, ",")
				}
				if named[name] {
					continue
				}
				named[name] = true
				out = append(out, goField{name: name, path: l.prefix + f.Name, typ: f.Type, tagged: tagged, tag: tag, index: index})
			}
		}
	}
	return out
}

// walkRecords calls visit for every pair of a Go struct and an Avro record
// that t and s hold at the same place: t and s themselves, and through
// pointers, nullable unions, arrays, maps and record fields below them.
// path names the place in Go terms ("" for the top, then "Field." ...).
// Places where t and s do not fit each other are left to hamba/avro, which
// fails on them with an error of its own.
func walkRecords(t reflect.Type, s avro.Schema, visit func(t reflect.Type, rs *avro.RecordSchema, path string) error) error {
	type key struct {
		t reflect.Type
		s string
	}
	seen := map[key]bool{}
	var walk func(t reflect.Type, s avro.Schema, path string) error
	walk = func(t reflect.Type, s avro.Schema, path string) error {
		for {
			if ref, ok := s.(*avro.RefSchema); ok {
				s = ref.Schema()
				continue
			}
			if u, ok := s.(*avro.UnionSchema); ok {
				b := nullableBranch(u)
				if b == nil {
					return nil
				}
				s = b
				continue
			}
			if t.Kind() == reflect.Pointer {
				t = t.Elem()
				continue
			}
			break
		}
		switch s := s.(type) {
		case *avro.ArraySchema:
			if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
				return walk(t.Elem(), s.Items(), path)
			}
		case *avro.MapSchema:
			if t.Kind() == reflect.Map {
				return walk(t.Elem(), s.Values(), path)
			}
		case *avro.RecordSchema:
			if t.Kind() != reflect.Struct {
				return nil
			}
			k := key{t, s.FullName()}
			if seen[k] {
				return nil
			}
			seen[k] = true
			if err := visit(t, s, path); err != nil {
				return err
			}
			byName := recordFields(s)
			for _, f := range structFields(t) {
				if af := byName[f.name]; af != nil {
					if err := walk(f.typ, af.Type(), path+f.path+"."); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	return walk(t, s, "")
}

// nullableBranch is the branch of a union of null and one other type, or
// nil for other unions.
func nullableBranch(u *avro.UnionSchema) avro.Schema {
	if !u.Nullable() {
		return nil
	}
	for _, b := range u.Types() {
		if b.Type() != avro.Null {
			return b
		}
	}
	return nil
}

// recordFields maps the names and aliases of rs's fields to the fields, as
// hamba/avro matches struct fields to them.
func recordFields(rs *avro.RecordSchema) map[string]*avro.Field {
	m := map[string]*avro.Field{}
	for _, f := range rs.Fields() {
		m[f.Name()] = f
	}
	for _, f := range rs.Fields() {
		for _, a := range f.Aliases() {
			if m[a] == nil {
				m[a] = f
			}
		}
	}
	return m
}

// checkFields makes sure that records of schema s read into the Go type t
// lose nothing silently: every exported field of a struct t (and of the
// structs it embeds, and of the structs its fields hold) must name a field
// of the record schema there, by its `avro` tag or else its Go name, as
// hamba/avro matches them; fields tagged `avro:"-"` are left out. Without
// the check a struct tagged for another encoding (`json:"name"`, as Beam
// Go's own avroio expects) would decode every record into zero values.
// Decimals in a nullable union cannot be read into a *big.Rat (see
// checkDecimals). Non-struct types (maps, generic Records) are not checked.
func checkFields(t reflect.Type, s avro.Schema) error {
	return walkRecords(t, s, func(st reflect.Type, rs *avro.RecordSchema, path string) error {
		fields := recordFields(rs)
		for _, f := range structFields(st) {
			if f.name == "-" {
				continue
			}
			af, ok := fields[f.name]
			if !ok {
				how := "its `avro` tag"
				if !f.tagged {
					how = "its Go name, as it has no `avro` tag"
				}
				return fmt.Errorf("field %s%s of Go type %v is Avro field %q by %s, but Avro record %s has no such field (its fields: %s); tag the Go field with the Avro field it holds, as in `avro:%q`, or with `avro:\"-\"` to leave it out",
					path, f.path, t, f.name, how, rs.FullName(), fieldNames(rs), suggestField(rs, f.name))
			}
			if err := checkDecimals(f.typ, af.Type()); err != nil {
				return fmt.Errorf("field %s%s of Go type %v (Avro field %s.%s): %w", path, f.path, t, rs.FullName(), af.Name(), err)
			}
		}
		return nil
	})
}

// checkDecimals refuses a *big.Rat for a decimal in a nullable union, at
// any depth of arrays and maps: hamba/avro (v2.31) decodes it through its
// decoder for a big.Rat value, which leaves the value 0 and stores a
// pointer into the big.Rat's non-pointer memory. A **big.Rat reads it.
func checkDecimals(t reflect.Type, s avro.Schema) error {
	for {
		switch v := s.(type) {
		case *avro.RefSchema:
			s = v.Schema()
			continue
		case *avro.ArraySchema:
			if t.Kind() == reflect.Slice {
				t, s = t.Elem(), v.Items()
				continue
			}
		case *avro.MapSchema:
			if t.Kind() == reflect.Map {
				t, s = t.Elem(), v.Values()
				continue
			}
		case *avro.UnionSchema:
			b := nullableBranch(v)
			if b != nil && t == reflect.TypeFor[*big.Rat]() && b.Type() == avro.Bytes {
				if ls, ok := b.(avro.LogicalTypeSchema); ok && ls.Logical() != nil && ls.Logical().Type() == avro.Decimal {
					return fmt.Errorf("a *big.Rat cannot hold a decimal in a nullable union: hamba/avro would read every value as 0; make the field a **big.Rat")
				}
			}
		}
		return nil
	}
}

// checkWritable makes sure that a struct type t has a field for every
// field of the record schema s that has no default, as hamba/avro needs to
// encode it, wherever t holds a record of s (nested records, arrays and
// maps of records, nullable unions). Other types are checked when records
// are encoded.
func checkWritable(t reflect.Type, s avro.Schema) error {
	return walkRecords(t, s, func(st reflect.Type, rs *avro.RecordSchema, path string) error {
		have := fieldNameSet(st)
		for _, af := range rs.Fields() {
			if have[af.Name()] || af.HasDefault() {
				continue
			}
			return fmt.Errorf("Go type %v (%s) has no field for field %q of Avro record %s, which has no default; add a field tagged `avro:%q`",
				st, recordPlace(t, path), af.Name(), rs.FullName(), af.Name())
		}
		return nil
	})
}

// fieldNameSet is the set of the Avro field names of struct type st.
func fieldNameSet(st reflect.Type) map[string]bool {
	have := map[string]bool{}
	for _, f := range structFields(st) {
		have[f.name] = true
	}
	return have
}

// recordPlace names where in type t walkRecords found a record, at path.
func recordPlace(t reflect.Type, path string) string {
	where := t.String()
	if path != "" {
		where += "." + strings.TrimSuffix(path, ".")
	}
	return where
}

// ratValueField is the path of a big.Rat held by value (not through a
// pointer) in t, or "": hamba/avro reads a decimal into a big.Rat value as
// 0, with no error, so reads refuse such types when they are built. Write
// encodes them correctly and accepts them.
func ratValueField(t reflect.Type) string {
	seen := map[reflect.Type]bool{}
	var find func(t reflect.Type, path string) string
	find = func(t reflect.Type, path string) string {
		if t == reflect.TypeFor[big.Rat]() {
			return path
		}
		if seen[t] {
			return ""
		}
		seen[t] = true
		defer delete(seen, t)
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			return find(t.Elem(), path+"[]")
		case reflect.Map:
			return find(t.Elem(), path+"[key]")
		case reflect.Struct:
			for _, f := range structFields(t) {
				if p := find(f.typ, path+"."+f.path); p != "" {
					return p
				}
			}
		case reflect.Pointer:
			e := t.Elem()
			if e == reflect.TypeFor[big.Rat]() {
				return "" // *big.Rat: read by hamba/avro's pointer decoder
			}
			return find(e, path)
		}
		return ""
	}
	return strings.TrimPrefix(find(t, ""), ".")
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

// checkSkippedNulls refuses a struct type t that has no field for an Avro
// field of schema s holding a null (the field itself, or a record, array
// or map it holds, outside a union's null branch): hamba/avro skips the
// fields a struct lacks with decoders that have no case for null, and so
// fails every record as corrupt data. A Go field of any type holds a null
// (it stays zero).
func checkSkippedNulls(t reflect.Type, s avro.Schema) error {
	return walkRecords(t, s, func(st reflect.Type, rs *avro.RecordSchema, path string) error {
		have := fieldNameSet(st)
		for _, af := range rs.Fields() {
			if have[af.Name()] || slices.ContainsFunc(af.Aliases(), func(a string) bool { return have[a] }) {
				continue
			}
			at, ok := bareNull(af.Type(), af.Name(), map[string]bool{})
			if !ok {
				continue
			}
			return fmt.Errorf("Go type %v (%s) has no field for Avro field %q of record %s, which holds a null (at %s): hamba/avro cannot skip a null and would fail every record; add a field tagged `avro:%q` (of any type: a null leaves it zero)",
				st, recordPlace(t, path), af.Name(), rs.FullName(), at, af.Name())
		}
		return nil
	})
}

// bareNull reports where the schema s (at path) holds a null that
// hamba/avro's skip decoders meet: s itself, or inside its records, arrays
// and maps, and the non-null branches of its unions.
func bareNull(s avro.Schema, path string, seen map[string]bool) (string, bool) {
	if s.Type() == avro.Null {
		return path, true
	}
	switch t := s.(type) {
	case *avro.RefSchema:
		return bareNull(t.Schema(), path, seen)
	case *avro.ArraySchema:
		return bareNull(t.Items(), path+"[]", seen)
	case *avro.MapSchema:
		return bareNull(t.Values(), path+"{}", seen)
	case *avro.UnionSchema:
		for _, b := range t.Types() {
			if b.Type() == avro.Null {
				continue
			}
			if p, ok := bareNull(b, path, seen); ok {
				return p, true
			}
		}
	case *avro.RecordSchema:
		if seen[t.FullName()] {
			return "", false
		}
		seen[t.FullName()] = true
		for _, f := range t.Fields() {
			if p, ok := bareNull(f.Type(), path+"."+f.Name(), seen); ok {
				return p, true
			}
		}
	}
	return "", false
}
