// Package codertest checks the coders of the types that cross a
// PCollection in bigqueryio and bqwrite: the wire coder (bqcore) where a
// type holds a slice, map or pointer that Beam's row coder may write as a
// null the schema does not allow, a round trip through the coder a worker
// has, bad input refused, and no unsafe row coder in a pipeline's proto.
// Tests only; it takes a TB (a *testing.T) rather than importing testing.
package codertest

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/exec"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/proto"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
)

// Crossing is a type that crosses a PCollection between steps (or sits in
// a state cell), and where.
type Crossing struct {
	T     reflect.Type
	Where string
}

// TB is what the checks need of a *testing.T.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

var typeOfTime = reflect.TypeFor[time.Time]()

// nullablePath is the path to a field of t that Beam's row coder writes as a
// null when nil (a slice, map or pointer), "" if none.
func nullablePath(t reflect.Type, seen map[reflect.Type]bool) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
		return t.String()
	case reflect.Struct:
		if seen[t] {
			return ""
		}
		seen[t] = true
		for i := range t.NumField() {
			if p := nullablePath(t.Field(i).Type, seen); p != "" {
				return t.Field(i).Name + " (" + p + ")"
			}
		}
	}
	return ""
}

// CrossingTypesCoded checks: every type crossing a PCollection that holds a
// field Beam's row coder may write as a null has the wire coder, and the
// wire coder is given to nothing else.
func CrossingTypesCoded(t TB, crossingTypes []Crossing, pkgPath string) {
	t.Helper()
	listed := map[reflect.Type]bool{}
	for _, c := range crossingTypes {
		listed[c.T] = true
		p := nullablePath(c.T, map[reflect.Type]bool{})
		wired := bqcore.HasWire(c.T)
		switch {
		case p != "" && !wired:
			t.Errorf("%v (%s) holds %s but has no wire coder: give it bqcore.RegisterWire", c.T, c.Where, p)
		case p == "" && wired:
			t.Errorf("%v holds nothing the row coder writes as null, yet has the wire coder", c.T)
		}
		cc := coder.LookupCustomCoder(c.T)
		if wired && (cc == nil || cc.Enc.Fn.Name() != reflectx.FunctionName(bqcore.EncodeWire) || cc.Dec.Fn.Name() != reflectx.FunctionName(bqcore.DecodeWire)) {
			t.Errorf("%v: Beam's custom coder is %v, want the wire coder", c.T, cc)
		}
		if !wired && cc != nil {
			t.Errorf("%v: an unexpected custom coder %v", c.T, cc)
		}
	}
	for _, wt := range bqcore.WireTypes(pkgPath) {
		if !listed[wt] {
			t.Errorf("%v has the wire coder but is not in crossingTypes", wt)
		}
	}
}

// fill sets every field of v to a value that is not its zero, distinct
// per field (seed), slices non-empty; nilSlices false leaves them nil.
func fill(v reflect.Value, seed *int, nilSlices bool) {
	*seed++
	n := *seed
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d-é", n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n) + 0.5)
	case reflect.Slice:
		if nilSlices {
			return
		}
		s := reflect.MakeSlice(v.Type(), 3, 3)
		for i := range 3 {
			fill(s.Index(i), seed, nilSlices)
		}
		v.Set(s)
	case reflect.Struct:
		if v.Type() == typeOfTime {
			v.Set(reflect.ValueOf(time.Unix(1700000000+int64(n), int64(n))))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), seed, nilSlices)
		}
	default:
		panic(fmt.Sprintf("fill: %v", v.Type()))
	}
}

// emptySlices makes every nil slice of v empty (not nil).
func emptySlices(v reflect.Value) {
	switch v.Kind() {
	case reflect.Slice:
		if v.IsNil() {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		}
		for i := range v.Len() {
			emptySlices(v.Index(i))
		}
	case reflect.Struct:
		if v.Type() != typeOfTime {
			for i := range v.NumField() {
				emptySlices(v.Field(i))
			}
		}
	}
}

// samples are values of t: zero (slices nil), with every slice empty, with
// every field set, with every field set but slices nil, and every field set
// with one slice item nil or empty.
func samples(t reflect.Type) map[string]any {
	out := map[string]any{"zero": reflect.Zero(t).Interface()}
	v := reflect.New(t).Elem()
	emptySlices(v)
	out["empty slices"] = v.Interface()
	seed := 0
	v = reflect.New(t).Elem()
	fill(v, &seed, false)
	out["full"] = v.Interface()
	v = reflect.New(t).Elem()
	fill(v, &seed, true)
	out["full, nil slices"] = v.Interface()
	v = reflect.New(t).Elem()
	fill(v, &seed, false)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Slice {
			f.Index(0).Set(reflect.Zero(f.Type().Elem()))
			f.Index(1).Set(reflect.MakeSlice(f.Type().Elem(), 0, 0))
		}
	}
	out["nil and empty items"] = v.Interface()
	return out
}

// WireCoderRoundTrip encodes values of every crossing type (nil and
// empty slices, every field set) with the coder Beam gives its
// PCollections and decodes them with that coder as a worker has it, read
// back from the pipeline's proto: every field comes back, nil as nil,
// empty as empty. (A field added to a type that the wire coder cannot
// encode panics at init; one it can encode is checked here.)
func WireCoderRoundTrip(t TB, crossingTypes []Crossing) {
	t.Helper()
	for _, c := range crossingTypes {
		worker := workerCoder(t, c.T)
		wired := bqcore.HasWire(c.T)
		if got := worker.Kind == coder.Custom && worker.Custom.Dec.Fn.Name() == reflectx.FunctionName(bqcore.DecodeWire); got != wired {
			t.Errorf("%v: the worker's coder %v, want the wire coder: %v", c.T, worker, wired)
		}
		enc, dec := beam.NewElementEncoder(c.T), exec.MakeElementDecoder(worker)
		for name, v := range samples(c.T) {
			var buf bytes.Buffer
			if err := enc.Encode(v, &buf); err != nil {
				t.Fatalf("%v %s: %v", c.T, name, err)
			}
			got, err := dec.Decode(&buf)
			if err != nil {
				t.Fatalf("%v %s: %v", c.T, name, err)
			}
			if !reflect.DeepEqual(got.Elm, v) {
				t.Errorf("%v %s:\n got %#v\nwant %#v", c.T, name, got.Elm, v)
			}
			if buf.Len() != 0 {
				t.Errorf("%v %s: %d bytes left", c.T, name, buf.Len())
			}
		}
	}
}

// workerCoder is the coder of a PCollection of t as a worker has it: read
// from the proto of a pipeline creating one.
func workerCoder(t TB, typ reflect.Type) *coder.Coder {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	beam.Create(s, reflect.Zero(typ).Interface())
	pipe := marshal(t, p)
	u := graphx.NewCoderUnmarshaller(pipe.GetComponents().GetCoders())
	for _, pc := range pipe.GetComponents().GetPcollections() {
		c, err := u.Coder(pc.GetCoderId())
		if err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if c.T.Type() == typ {
			return c
		}
	}
	t.Fatalf("no PCollection of %v in the pipeline", typ)
	return nil
}
func marshal(t TB, p *beam.Pipeline) *pipepb.Pipeline {
	t.Helper()
	edges, _, err := p.Build()
	if err != nil {
		t.Fatal(err)
	}
	pipe, err := graphx.Marshal(edges, &graphx.Options{Environment: &pipepb.Environment{Urn: graphx.URNEnvDocker}})
	if err != nil {
		t.Fatal(err)
	}
	return pipe
}

// WireCoderBadInput checks that the wire decoder refuses a cut, a longer or a
// corrupt encoding with an error, never a panic, and a slice count beyond
// the bytes left allocates nothing.
func WireCoderBadInput(t TB, pkgPath string) {
	t.Helper()
	for _, wt := range bqcore.WireTypes(pkgPath) {
		seed := 0
		v := reflect.New(wt).Elem()
		fill(v, &seed, false)
		b, err := bqcore.EncodeWire(wt, v.Interface())
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(b) {
			if _, err := bqcore.DecodeWire(wt, b[:n]); err == nil {
				t.Errorf("%v cut at %d of %d bytes: no error", wt, n, len(b))
			}
		}
		if _, err := bqcore.DecodeWire(wt, append(b, 0)); err == nil || !strings.Contains(err.Error(), "1 bytes after") {
			t.Errorf("%v with a byte more: %v", wt, err)
		}
		// Every byte changed in turn: an error or a value, never a panic.
		for i := range b {
			c := append([]byte(nil), b...)
			c[i] ^= 0xff
			bqcore.DecodeWire(wt, c)
		}
	}
}

// UnsafeRowCoders walks every coder of p's proto (the PCollections',
// KVs', side inputs', SDF restrictions') and names each field of a row
// coder's schema that Beam Go may write as a null (a nil slice or map, or
// []byte) while the schema says it is never null: bytes a runner decoding
// rows (Flink's RowCoder) corrupts.
func UnsafeRowCoders(t TB, p *beam.Pipeline) []string {
	t.Helper()
	pipe := marshal(t, p)
	var bad []string
	var walk func(where string, ft *pipepb.FieldType)
	walkSchema := func(where string, s *pipepb.Schema) {
		for _, f := range s.GetFields() {
			walk(where+"."+f.GetName(), f.GetType())
		}
	}
	walk = func(where string, ft *pipepb.FieldType) {
		switch ti := ft.GetTypeInfo().(type) {
		case *pipepb.FieldType_AtomicType:
			if ti.AtomicType == pipepb.AtomicType_BYTES && !ft.GetNullable() {
				bad = append(bad, where+" (BYTES)")
			}
		case *pipepb.FieldType_ArrayType:
			if !ft.GetNullable() {
				bad = append(bad, where+" (ARRAY)")
			}
			walk(where+"[]", ti.ArrayType.GetElementType())
		case *pipepb.FieldType_IterableType:
			if !ft.GetNullable() {
				bad = append(bad, where+" (ITERABLE)")
			}
			walk(where+"[]", ti.IterableType.GetElementType())
		case *pipepb.FieldType_MapType:
			if !ft.GetNullable() {
				bad = append(bad, where+" (MAP)")
			}
			walk(where+"{key}", ti.MapType.GetKeyType())
			walk(where+"{}", ti.MapType.GetValueType())
		case *pipepb.FieldType_RowType:
			walkSchema(where, ti.RowType.GetSchema())
		case *pipepb.FieldType_LogicalType:
			walk(where, ti.LogicalType.GetRepresentation())
		}
	}
	rows := 0
	for id, c := range pipe.GetComponents().GetCoders() {
		if c.GetSpec().GetUrn() != "beam:coder:row:v1" {
			continue
		}
		rows++
		var s pipepb.Schema
		if err := proto.Unmarshal(c.GetSpec().GetPayload(), &s); err != nil {
			t.Fatalf("coder %s: %v", id, err)
		}
		walkSchema("coder "+id, &s)
	}
	t.Logf("%d coders, %d row coders, %d fields unsafe", len(pipe.GetComponents().GetCoders()), rows, len(bad))
	return bad
}
