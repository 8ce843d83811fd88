package beamtypes

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
)

var (
	mu sync.Mutex
	// shadows maps a field type to the sdfio-owned type its values are
	// encoded as; filled at init by Replace.
	shadows = map[reflect.Type]reflect.Type{}
	// coders caches the element coders built, by element type.
	coders = map[reflect.Type]*elemCoder{}
)

func init() {
	// The custom coder's functions, found by name on the workers.
	runtime.RegisterFunction(encodeElement)
	runtime.RegisterFunction(decodeElement)
}

// Replace makes sdfio encode values of orig, wherever they are held in an
// element type given to Use, as values of S: a type sdfio owns, defined on
// orig's underlying type (so laid out as orig is), for which enc and dec
// are registered as Beam's schema coder providers (for S only). It is
// called from init functions; it panics when S is not laid out as orig.
func Replace[S any](orig reflect.Type, enc func(S, io.Writer) error, dec func(io.Reader) (S, error)) {
	s := reflect.TypeFor[S]()
	if orig.Size() != s.Size() || orig.Align() != s.Align() || orig.Kind() != s.Kind() || !s.ConvertibleTo(orig) {
		panic(fmt.Sprintf("beamtypes.Replace: %v is not laid out as %v", s, orig))
	}
	coder.RegisterSchemaProviders(s,
		func(reflect.Type) (func(any, io.Writer) error, error) {
			return func(v any, w io.Writer) error { return enc(v.(S), w) }, nil
		},
		func(reflect.Type) (func(io.Reader) (any, error), error) {
			return func(r io.Reader) (any, error) { return dec(r) }, nil
		})
	mu.Lock()
	defer mu.Unlock()
	shadows[orig] = s
}

// elemCoder encodes values of t as Beam's row encoding of s, t's shadow.
type elemCoder struct {
	t, s reflect.Type
	enc  func(any, io.Writer) error
	dec  func(io.Reader) (any, error)
}

// Register registers t, an element type of the program's sdfio
// transforms, with Beam (beam.RegisterType, for a named type) and, when t
// holds a field type that has a shadow, gives t (t only) a custom coder:
// Beam's row coder of t's shadow. A coder the program registered for t
// itself is kept. Called from init functions, so that the launcher and
// every worker encode t alike; it panics when no coder of t's shadow can
// be built, naming the type and why.
func Register(t reflect.Type) {
	if key, ok := runtime.TypeKey(deref(t)); ok {
		if rt, found := runtime.LookupType(key); !found || rt != deref(t) {
			beam.RegisterType(deref(t))
		}
	}
	if coder.LookupCustomCoder(t) != nil {
		return
	}
	c, err := coderFor(t)
	if err != nil {
		panic(fmt.Sprintf("sdfio: registering %v: %v", t, err))
	}
	if c != nil {
		coder.RegisterCoder(t, encodeElement, decodeElement)
	}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// coderFor returns the element coder of t, nil when t holds no field type
// with a shadow.
func coderFor(t reflect.Type) (*elemCoder, error) {
	mu.Lock()
	defer mu.Unlock()
	if c, ok := coders[t]; ok {
		return c, nil
	}
	s, changed, err := shadowOf(t, map[reflect.Type]bool{})
	if err != nil {
		return nil, fmt.Errorf("no coder for %v: %w", t, err)
	}
	if !changed {
		coders[t] = nil
		return nil, nil
	}
	if reflectx.SkipPtr(s).Kind() != reflect.Struct {
		return nil, fmt.Errorf("no coder for %v: only structs (and pointers to them) holding %v get one", t, shadowedNames())
	}
	enc, err := coder.RowEncoderForStruct(s)
	if err != nil {
		return nil, fmt.Errorf("no coder for %v: %w", t, err)
	}
	dec, err := coder.RowDecoderForStruct(s)
	if err != nil {
		return nil, fmt.Errorf("no coder for %v: %w", t, err)
	}
	c := &elemCoder{t: t, s: s, enc: enc, dec: dec}
	coders[t] = c
	return c, nil
}

func shadowedNames() []reflect.Type {
	var ts []reflect.Type
	for t := range shadows {
		ts = append(ts, t)
	}
	return ts
}

// shadowOf returns t with every field type that has a shadow replaced by
// it, at any depth, and whether anything was replaced. Types on the path
// (recursive types) are left as they are.
func shadowOf(t reflect.Type, path map[reflect.Type]bool) (reflect.Type, bool, error) {
	if s, ok := shadows[t]; ok {
		return s, true, nil
	}
	if path[t] {
		return t, false, nil
	}
	path[t] = true
	defer delete(path, t)
	switch t.Kind() {
	case reflect.Pointer:
		e, ok, err := shadowOf(t.Elem(), path)
		if !ok || err != nil {
			return t, false, err
		}
		return reflect.PointerTo(e), true, nil
	case reflect.Slice:
		e, ok, err := shadowOf(t.Elem(), path)
		if !ok || err != nil {
			return t, false, err
		}
		return reflect.SliceOf(e), true, nil
	case reflect.Array:
		e, ok, err := shadowOf(t.Elem(), path)
		if !ok || err != nil {
			return t, false, err
		}
		return reflect.ArrayOf(t.Len(), e), true, nil
	case reflect.Map:
		if _, ok, _ := shadowOf(t.Key(), path); ok {
			return t, false, fmt.Errorf("the map key type %v cannot be encoded: use a key of another type", t.Key())
		}
		e, ok, err := shadowOf(t.Elem(), path)
		if !ok || err != nil {
			return t, false, err
		}
		return reflect.MapOf(t.Key(), e), true, nil
	case reflect.Struct:
		return shadowStruct(t, path)
	}
	return t, false, nil
}

func shadowStruct(t reflect.Type, path map[reflect.Type]bool) (reflect.Type, bool, error) {
	fields := make([]reflect.StructField, t.NumField())
	changed := false
	for i := range fields {
		f := t.Field(i)
		s, ok, err := shadowOf(f.Type, path)
		if err != nil {
			return t, false, fmt.Errorf("field %s of %v: %w", f.Name, t, err)
		}
		changed = changed || ok
		fields[i] = reflect.StructField{Name: f.Name, PkgPath: f.PkgPath, Type: s, Tag: f.Tag, Anonymous: f.Anonymous}
	}
	if !changed {
		return t, false, nil
	}
	s, err := structOf(fields)
	if err != nil {
		return t, false, fmt.Errorf("%v: %w", t, err)
	}
	for i := range fields {
		if s.Field(i).Offset != t.Field(i).Offset {
			return t, false, fmt.Errorf("%v: field %s would move", t, fields[i].Name)
		}
	}
	return s, true, nil
}

// structOf is reflect.StructOf, which refuses some embedded fields (of a
// type with methods, unless it is the only field, and every unexported
// embedded field): those are made named fields, which Beam's row coder
// encodes the same way (a nested row). An unexported embedded field gets
// an exported name of its own, as Beam's coder of the original type keeps
// its promoted fields and an unexported named field would be skipped.
func structOf(fields []reflect.StructField) (reflect.Type, error) {
	s, err := tryStructOf(fields)
	if err == nil {
		return s, nil
	}
	taken := map[string]bool{}
	for _, f := range fields {
		taken[f.Name] = true
	}
	for i := range fields {
		if fields[i].Anonymous && fields[i].PkgPath != "" {
			name := "Embedded" + strings.ToUpper(fields[i].Name[:1]) + fields[i].Name[1:]
			for taken[name] {
				name += "_"
			}
			taken[name] = true
			fields[i].Name, fields[i].PkgPath = name, ""
		}
		fields[i].Anonymous = false
	}
	return tryStructOf(fields)
}

func tryStructOf(fields []reflect.StructField) (s reflect.Type, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return reflect.StructOf(fields), nil
}

// encodeElement is the custom coder's encoder: v's memory, of type t,
// viewed as t's shadow, through Beam's row encoder of the shadow.
func encodeElement(t reflect.Type, v typex.T) ([]byte, error) {
	c, err := coderFor(t)
	if err == nil && c == nil {
		err = fmt.Errorf("%v holds nothing to encode as a shadow", t)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding a %v: %w", t, err)
	}
	p := reflect.New(t)
	p.Elem().Set(reflect.ValueOf(v))
	var buf bytes.Buffer
	if err := c.enc(reflect.NewAt(c.s, p.UnsafePointer()).Elem().Interface(), &buf); err != nil {
		return nil, fmt.Errorf("encoding a %v: %w", t, err)
	}
	return buf.Bytes(), nil
}

// decodeElement is the custom coder's decoder: a value of t's shadow,
// copied into memory of type t.
func decodeElement(t reflect.Type, b []byte) (typex.T, error) {
	c, err := coderFor(t)
	if err == nil && c == nil {
		err = fmt.Errorf("%v holds nothing to decode as a shadow", t)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding a %v: %w", t, err)
	}
	r := bytes.NewReader(b)
	v, err := c.dec(r)
	if err != nil {
		return nil, fmt.Errorf("decoding a %v: %w", t, err)
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("decoding a %v: %d bytes left over", t, r.Len())
	}
	p := reflect.New(t)
	reflect.NewAt(c.s, p.UnsafePointer()).Elem().Set(reflect.ValueOf(v))
	return p.Elem().Interface(), nil
}

// Check refuses an element type t of an sdfio transform, at
// construction, that a worker could not decode: a named type (or pointer
// to one) not registered with Beam, which a worker in another process
// (Dataflow, Flink, a separate binary) would decode into an anonymous copy
// of it, or fail on; or a type holding a field type whose values Beam's
// own coder loses or refuses (every one with a shadow but time.Time, which
// Beam keeps in the years 0-9999) that has no coder of its own. register
// names the function that registers t (the IO's RegisterType), for the
// error.
func Check(t reflect.Type, register string) error {
	et := deref(t)
	if key, ok := runtime.TypeKey(et); ok {
		if rt, found := runtime.LookupType(key); !found || rt != et {
			return fmt.Errorf("element type %v is not registered with Beam: call %s(reflect.TypeFor[%v]()) in an init function of its package", t, register, et)
		}
	}
	if coder.LookupCustomCoder(t) != nil {
		return nil
	}
	mu.Lock()
	path := needing(t, map[reflect.Type]bool{})
	mu.Unlock()
	if path != "" {
		return fmt.Errorf("element type %v holds %s, which Beam's own coder cannot carry between stages: register %v with %s(reflect.TypeFor[%v]()) in an init function of its package, in place of beam.RegisterType, to give it a coder that keeps every value", t, path, t, register, t)
	}
	return nil
}

// needing returns the path in t to a field type whose values Beam's own
// coder loses or refuses, "" if there is none.
func needing(t reflect.Type, path map[reflect.Type]bool) string {
	if _, ok := shadows[t]; ok {
		if t == timeType {
			return ""
		}
		return t.String()
	}
	if path[t] {
		return ""
	}
	path[t] = true
	defer delete(path, t)
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return needing(t.Elem(), path)
	case reflect.Map:
		if p := needing(t.Key(), path); p != "" {
			return p
		}
		return needing(t.Elem(), path)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if p := needing(t.Field(i).Type, path); p != "" {
				return fmt.Sprintf("%s (field %s)", p, t.Field(i).Name)
			}
		}
	}
	return ""
}

var timeType = reflect.TypeFor[time.Time]()
