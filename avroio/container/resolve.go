package container

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
)

// resolve resolves the reader schema against the writer schema, as
// hamba/avro does. When they are incompatible, the error names the fields
// responsible (see mismatches) and wraps hamba/avro's.
func resolve(reader, writer avro.Schema) (avro.Schema, error) {
	s, err := avro.NewSchemaCompatibility().Resolve(reader, writer)
	if err == nil {
		return s, nil
	}
	if m := mismatches(reader, writer); len(m) > 0 {
		return nil, fmt.Errorf("%s: %w", strings.Join(m, "; "), err)
	}
	return nil, err
}

// maxMismatches bounds how many mismatches one error lists.
const maxMismatches = 8

// mismatches walks the reader and writer schemas together, by Avro's
// resolution rules (record fields matched by name or by the reader field's
// aliases, arrays by items, maps by values, unions branch by branch), and
// describes where they do not resolve: each description names the field
// by its path from the top record (fields joined by dots, "[]" for an
// array's items, "{}" for a map's values) and says what each side has.
func mismatches(reader, writer avro.Schema) []string {
	m := &mismatchWalk{compat: avro.NewSchemaCompatibility(), seen: map[[2]avro.Schema]bool{}}
	m.walk("", reader, writer)
	return m.found
}

type mismatchWalk struct {
	compat *avro.SchemaCompatibility
	seen   map[[2]avro.Schema]bool // record pairs walked (recursive schemas)
	found  []string
}

func (m *mismatchWalk) add(path, format string, args ...any) {
	if len(m.found) < maxMismatches {
		m.found = append(m.found, fieldName(path)+": "+fmt.Sprintf(format, args...))
	}
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

func (m *mismatchWalk) walk(path string, reader, writer avro.Schema) {
	reader, writer = deref(reader), deref(writer)
	if len(m.found) >= maxMismatches || m.compat.Compatible(reader, writer) == nil {
		return
	}
	if wu, ok := writer.(*avro.UnionSchema); ok {
		// Every writer branch must resolve.
		for _, b := range wu.Types() {
			if m.compat.Compatible(reader, b) != nil {
				if _, ok := reader.(*avro.UnionSchema); ok {
					m.walkBranch(path, reader, deref(b))
				} else {
					m.walk(path, reader, b)
				}
			}
		}
		return
	}
	if _, ok := reader.(*avro.UnionSchema); ok {
		m.walkBranch(path, reader, writer)
		return
	}
	n := len(m.found)
	switch r := reader.(type) {
	case *avro.RecordSchema:
		w, ok := writer.(*avro.RecordSchema)
		if !ok || !sameName(r, w) {
			break
		}
		key := [2]avro.Schema{r, w}
		if m.seen[key] {
			return
		}
		m.seen[key] = true
		for _, rf := range r.Fields() {
			fpath := joinPath(path, rf.Name())
			wf := writerField(w, rf)
			if wf == nil {
				if !rf.HasDefault() {
					m.add(fpath, "the reader's field (%s) is missing from the writer's record %s and has no default", typeName(rf.Type()), w.FullName())
				}
				continue
			}
			m.walk(fpath, rf.Type(), wf.Type())
		}
	case *avro.ArraySchema:
		if w, ok := writer.(*avro.ArraySchema); ok {
			m.walk(path+"[]", r.Items(), w.Items())
		}
	case *avro.MapSchema:
		if w, ok := writer.(*avro.MapSchema); ok {
			m.walk(path+"{}", r.Values(), w.Values())
		}
	case *avro.EnumSchema:
		if w, ok := writer.(*avro.EnumSchema); ok && sameName(r, w) {
			var missing []string
			for _, sym := range w.Symbols() {
				if !slices.Contains(r.Symbols(), sym) {
					missing = append(missing, sym)
				}
			}
			m.add(path, "the reader's enum %s lacks the writer's symbols %v and has no default", r.FullName(), missing)
			return
		}
	case *avro.FixedSchema:
		if w, ok := writer.(*avro.FixedSchema); ok && sameName(r, w) {
			m.add(path, "reader fixed %s of %d bytes, writer of %d bytes", r.FullName(), r.Size(), w.Size())
			return
		}
	}
	if len(m.found) == n {
		m.add(path, "reader %s, writer %s", typeName(reader), typeName(writer))
	}
}

// walkBranch finds why the writer's (non-union) schema w resolves to no
// branch of the reader's union: a branch of the same named type or of the
// same kind is walked into, so the error names the field inside it.
func (m *mismatchWalk) walkBranch(path string, reader, w avro.Schema) {
	ru := reader.(*avro.UnionSchema)
	for _, b := range ru.Types() {
		b = deref(b)
		if b.Type() != w.Type() {
			continue
		}
		rn, rok := b.(avro.NamedSchema)
		wn, wok := w.(avro.NamedSchema)
		if rok && wok && !sameName(rn, wn) {
			continue
		}
		m.walk(path, b, w)
		return
	}
	m.add(path, "the reader's union %s has no branch for the writer's %s", typeName(reader), typeName(w))
}

// writerField is the writer's field that the reader's field rf reads: the
// one of the same name, or else one named by an alias of rf.
func writerField(w *avro.RecordSchema, rf *avro.Field) *avro.Field {
	for _, f := range w.Fields() {
		if f.Name() == rf.Name() {
			return f
		}
	}
	for _, f := range w.Fields() {
		if slices.Contains(rf.Aliases(), f.Name()) {
			return f
		}
	}
	return nil
}

// sameName reports whether the named types match as Avro resolution
// matches them: by name, or by an alias of the reader's.
func sameName(r, w avro.NamedSchema) bool {
	return r.Name() == w.Name() || slices.Contains(r.Aliases(), w.FullName())
}

// typeName describes a schema in a few words: a named type's kind and full
// name, a primitive with its logical type, an array's or map's element,
// a union's branches.
func typeName(s avro.Schema) string {
	s = deref(s)
	switch t := s.(type) {
	case avro.NamedSchema:
		return string(s.Type()) + " " + t.FullName()
	case *avro.ArraySchema:
		return "array of " + typeName(t.Items())
	case *avro.MapSchema:
		return "map of " + typeName(t.Values())
	case *avro.UnionSchema:
		names := make([]string, len(t.Types()))
		for i, b := range t.Types() {
			names[i] = typeName(b)
		}
		return "[" + strings.Join(names, ", ") + "]"
	case avro.LogicalTypeSchema:
		if l := t.Logical(); l != nil {
			return string(s.Type()) + " (" + string(l.Type()) + ")"
		}
	}
	return string(s.Type())
}
