package bqcore

import (
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strings"
	"time"
)

// The fields of a struct type that columns fill, found by the rules of the
// official client (cloud.google.com/go/bigquery, whose RowIterator.Next
// uses them), which are Go's rules for embedded fields amended by tags:
//
//   - an exported field is a field, named by its `bigquery` tag or else by
//     its Go name; `bigquery:"-"` drops it; unexported fields are not
//     fields;
//   - the fields of an embedded struct (T or *T, exported or not) are
//     fields of the outer struct, one level deeper, unless the embedded
//     field has a tag name: then it is one field of that name (a RECORD);
//     an embedded non-struct type is a field named by its type;
//   - of fields with the same name, the shallowest wins; at the same
//     depth a tagged one wins over untagged ones; two left at the same
//     depth both tagged or both untagged cancel each other, and neither is
//     filled; a struct type embedded twice at one depth cancels its fields;
//   - a column matches the field of its exact name, or else the first, in
//     field order, whose name equals it ignoring case.
//
// Two choices differ from the client, where the client panics or says
// nothing: a nil embedded *T is allocated when a column fills a field of it
// (the client panics on it, "indirection through nil pointer to embedded
// struct"; the values Read fills are always new); and fields that cancel
// each other, like fields that match no column, are an error unless
// WithIgnoreUnknownFields (the client leaves them zero).

// StructField is a field of a struct type that a column may fill.
type StructField struct {
	Name   string // the BigQuery name: the tag's, or the Go name
	Tagged bool
	GoPath string       // for messages: Base.ID
	Index  []int        // for FieldAlloc
	Typ    reflect.Type // the field's type
	// Offset is the field's offset in the outer struct, valid unless
	// ViaPtr (the field is in a struct an embedded pointer points to).
	Offset uintptr
	ViaPtr bool
	// UnexportedPtr names the unexported embedded pointer the field is
	// reached through ("" if none): reflect cannot allocate it.
	UnexportedPtr string
}

// FieldList is the fields of a struct type, in field order, and the names
// whose fields cancelled each other.
type FieldList struct {
	Fields    []StructField
	Ambiguous map[string][]string // by name: the Go paths of the fields that cancelled
}

// match is the index in l.fields of the field a column name goes into, or
// -1.
func (l *FieldList) Match(column string) int {
	fold := -1
	for i := range l.Fields {
		f := &l.Fields[i]
		if f.Name == column {
			return i
		}
		if fold < 0 && strings.EqualFold(f.Name, column) {
			fold = i
		}
	}
	return fold
}

// bigqueryTag parses a field's `bigquery` tag: its name ("" for none) and
// whether the field is kept.
func bigqueryTag(tag reflect.StructTag) (name string, keep bool) {
	v := tag.Get("bigquery")
	name, _, _ = strings.Cut(v, ",")
	if name == "-" {
		return "", false
	}
	return name, true
}

// FieldsOf lists the fields of struct type t by the client's rules (see
// above).
func FieldsOf(t reflect.Type) *FieldList {
	type scan struct {
		t             reflect.Type
		index         []int
		goPath        []string
		offset        uintptr
		viaPtr        bool
		unexportedPtr string
	}
	type candidate struct {
		StructField
		depth int
	}
	var cands []candidate
	visited := map[reflect.Type]bool{}
	current := []scan{{t: t}}
	var count map[reflect.Type]int // how often each type of current was reached
	for depth := 0; len(current) > 0; depth++ {
		var next []scan
		nextCount := map[reflect.Type]int{}
		for _, sc := range current {
			if visited[sc.t] {
				continue // a shallower level shadows this one
			}
			visited[sc.t] = true
			for i := 0; i < sc.t.NumField(); i++ {
				f := sc.t.Field(i)
				if !f.IsExported() && !f.Anonymous {
					continue
				}
				tagName, keep := bigqueryTag(f.Tag)
				if !keep {
					continue
				}
				index := append(append([]int(nil), sc.index...), i)
				goPath := append(append([]string(nil), sc.goPath...), f.Name)
				et := f.Type
				ptr := false
				if f.Anonymous && et.Kind() == reflect.Pointer {
					et, ptr = et.Elem(), true
				}
				if tagName != "" || !f.Anonymous || et.Kind() != reflect.Struct {
					if !f.IsExported() {
						continue
					}
					name := tagName
					if name == "" {
						name = f.Name
					}
					c := candidate{StructField{Name: name, Tagged: tagName != "", GoPath: strings.Join(goPath, "."), Index: index, Typ: f.Type,
						Offset: sc.offset + f.Offset, ViaPtr: sc.viaPtr, UnexportedPtr: sc.unexportedPtr}, depth}
					cands = append(cands, c)
					if count[sc.t] > 1 {
						cands = append(cands, c) // a type reached twice cancels its own fields
					}
					continue
				}
				// An embedded struct: its fields are one level deeper.
				if nextCount[et] > 0 {
					nextCount[et] = 2
					continue
				}
				nextCount[et] = 1
				if count[sc.t] > 1 {
					nextCount[et] = 2
				}
				s := scan{t: et, index: index, goPath: goPath, offset: sc.offset + f.Offset, viaPtr: sc.viaPtr || ptr, unexportedPtr: sc.unexportedPtr}
				if ptr {
					s.offset = 0
					if !f.IsExported() && s.unexportedPtr == "" {
						s.unexportedPtr = strings.Join(goPath, ".") + " (*" + et.String() + ")"
					}
				}
				next = append(next, s)
			}
		}
		current, count = next, nextCount
	}
	// The dominant field of each name: shallowest, then tagged, then first.
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.depth != b.depth {
			return a.depth < b.depth
		}
		if a.Tagged != b.Tagged {
			return a.Tagged
		}
		return lessIndex(a.Index, b.Index)
	})
	l := &FieldList{}
	for i := 0; i < len(cands); {
		j := i + 1
		for j < len(cands) && cands[j].Name == cands[i].Name {
			j++
		}
		if j-i > 1 && cands[i].depth == cands[i+1].depth && cands[i].Tagged == cands[i+1].Tagged {
			if l.Ambiguous == nil {
				l.Ambiguous = map[string][]string{}
			}
			seen := map[string]bool{}
			for _, c := range cands[i:j] {
				if c.depth == cands[i].depth && c.Tagged == cands[i].Tagged && !seen[c.GoPath] {
					seen[c.GoPath] = true
					l.Ambiguous[c.Name] = append(l.Ambiguous[c.Name], c.GoPath)
				}
			}
		} else {
			l.Fields = append(l.Fields, cands[i].StructField)
		}
		i = j
	}
	sort.Slice(l.Fields, func(i, j int) bool { return lessIndex(l.Fields[i].Index, l.Fields[j].Index) })
	return l
}

func lessIndex(a, b []int) bool {
	for k := 0; k < len(a) && k < len(b); k++ {
		if a[k] != b[k] {
			return a[k] < b[k]
		}
	}
	return len(a) < len(b)
}

// FieldAlloc is the field at index of the struct v (addressable),
// allocating the embedded pointers on the way when they are nil.
func FieldAlloc(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

// FieldRules are what a read asks of the fields of its struct type.
type FieldRules struct {
	// IgnoreUnknown leaves fields that match no column zero
	// (WithIgnoreUnknownFields).
	IgnoreUnknown bool
	// Selected are the read's selected fields (WithSelectedFields), for
	// the message of a field that matches no column of the session.
	Selected []string
}

// CheckType refuses, when the pipeline is built, what the fields of t
// tell without a schema: a field behind an unexported embedded pointer
// (which reflect cannot allocate), fields that cancel each other, and,
// with selected fields, a field whose column cannot be in the session. It
// checks nested struct types (RECORD columns) for the first two.
func CheckType(t reflect.Type, r FieldRules) error {
	if t == TypeOfRow {
		return nil
	}
	var selected []string
	for _, s := range r.Selected {
		top, _, _ := strings.Cut(s, ".")
		selected = append(selected, top)
	}
	return checkStruct(t, r, selected, "", map[reflect.Type]bool{})
}

func checkStruct(t reflect.Type, r FieldRules, selected []string, prefix string, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	l := FieldsOf(t)
	for _, f := range l.Fields {
		if f.UnexportedPtr != "" {
			return fmt.Errorf("field %s%s of %s is reached through the unexported embedded pointer %s, which cannot be allocated: export its type, or embed it by value", prefix, f.GoPath, t, f.UnexportedPtr)
		}
	}
	if !r.IgnoreUnknown {
		if err := AmbiguousError(t, l, prefix); err != nil {
			return err
		}
		if selected != nil {
			for _, f := range l.Fields {
				found := false
				for _, s := range selected {
					found = found || strings.EqualFold(s, f.Name)
				}
				if !found {
					return fmt.Errorf("field %s%s (column %s) of %s matches none of the selected fields (WithSelectedFields %s): select its column, tag the field `bigquery:\"-\"`, or read with WithIgnoreUnknownFields() to leave it zero",
						prefix, f.GoPath, f.Name, t, strings.Join(selected, ", "))
				}
			}
		}
	}
	for _, f := range l.Fields {
		st := f.Typ
		for st.Kind() == reflect.Pointer || st.Kind() == reflect.Slice || st.Kind() == reflect.Array {
			st = st.Elem()
		}
		if st.Kind() == reflect.Struct && st.PkgPath() != "cloud.google.com/go/bigquery" && st.PkgPath() != "cloud.google.com/go/civil" && st != TypeOfTime && st != TypeOfRat.Elem() {
			if err := checkStruct(st, r, nil, prefix+f.GoPath+".", seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// AmbiguousError is the error of fields of l that cancelled each other,
// or nil.
func AmbiguousError(t reflect.Type, l *FieldList, prefix string) error {
	if len(l.Ambiguous) == 0 {
		return nil
	}
	names := make([]string, 0, len(l.Ambiguous))
	for n := range l.Ambiguous {
		names = append(names, n)
	}
	sort.Strings(names)
	n := names[0]
	paths := l.Ambiguous[n]
	for i := range paths {
		paths[i] = prefix + paths[i]
	}
	return fmt.Errorf("fields %s of %s are all named %s at the same depth of embedding, so no column fills any of them (as the official client's rules have it): tag the one to fill, or read with WithIgnoreUnknownFields() to leave them zero",
		strings.Join(paths, " and "), t, n)
}

// UnknownFieldsError is the error of fields that match no column.
func UnknownFieldsError(t reflect.Type, unknown []StructField, prefix string, schemaNames []string, where string, r FieldRules) error {
	var fs []string
	for _, f := range unknown {
		fs = append(fs, fmt.Sprintf("%s%s (column %s)", prefix, f.GoPath, f.Name))
	}
	cols := strings.Join(schemaNames, ", ")
	if cols == "" {
		cols = "none"
	}
	msg := fmt.Sprintf("field %s of %s matches no column of %s, whose columns are %s", strings.Join(fs, ", "), t, where, cols)
	if len(fs) > 1 {
		msg = fmt.Sprintf("fields %s of %s match no column of %s, whose columns are %s", strings.Join(fs, ", "), t, where, cols)
	}
	if prefix == "" && len(r.Selected) > 0 {
		msg += fmt.Sprintf(" (the read selects only %s with WithSelectedFields: a column of the table that is not selected is not in the session)", strings.Join(r.Selected, ", "))
	}
	return fmt.Errorf("%s: fix the name or `bigquery` tag, tag the field `bigquery:\"-\"`, or read with WithIgnoreUnknownFields() to leave it zero", msg)
}

// TypeOfTime and TypeOfRat are the reflect types of time.Time and *big.Rat.
var (
	TypeOfTime = reflect.TypeOf(time.Time{})
	TypeOfRat  = reflect.TypeOf((*big.Rat)(nil))
)
