package bigqueryio

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/sdfio/sdfio/bigqueryio/internal/codertest"
)

// crossingTypes are the types of this package that cross a PCollection
// between steps (or sit in a state cell), with where; each must have a
// coder that a runner decoding rows (Flink) cannot corrupt: the wire
// coder when it holds a slice, map or pointer, which Beam's row coder
// may write as a null the schema does not allow.
var crossingTypes = []codertest.Crossing{
	{T: reflect.TypeFor[StreamElement](), Where: "Read and Query: sessionFn/bqquery's queryFn output, Reshuffle, the stream read's SDF element"},
	{T: reflect.TypeFor[StreamRestriction](), Where: "Read and Query: the stream read's SDF restriction"},
}

var pkgPath = reflect.TypeFor[StreamElement]().PkgPath()

// TestCrossingTypesCoded: every type crossing a PCollection that holds a
// field Beam's row coder may write as a null has the wire coder, and the
// wire coder is given to nothing else.
func TestCrossingTypesCoded(t *testing.T) { codertest.CrossingTypesCoded(t, crossingTypes, pkgPath) }

// TestWireCoderRoundTrip: every crossing type round-trips through the
// coder a worker has, nil as nil, empty as empty.
func TestWireCoderRoundTrip(t *testing.T) { codertest.WireCoderRoundTrip(t, crossingTypes) }

// TestWireCoderBadInput: the wire decoder refuses a cut, a longer or a
// corrupt encoding with an error, never a panic.
func TestWireCoderBadInput(t *testing.T) {
	codertest.WireCoderBadInput(t, pkgPath)
}

// coderRow is the rows of the pipelines TestPipelineCodersSafe builds.
type coderRow struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

// coderRowWithSlice is a row type holding a slice, the negative control.
type coderRowWithSlice struct {
	ID   int64
	Tags []string
}

func coderRowOf(b []byte) coderRow { return coderRow{ID: int64(len(b))} }

func init() {
	RegisterType(reflect.TypeFor[coderRow]())
	beam.RegisterType(reflect.TypeFor[coderRowWithSlice]())
	register.Function1x1(coderRowOf)
}

// TestPipelineCodersSafe builds Read (bqquery's builds Query, bqwrite's every
// kind of Write) and finds, in the coders of each
// pipeline's proto, no row coder with a field Beam Go may write as a null
// its schema does not allow; a pipeline of a type holding a slice is found
// out (the check works).
func TestPipelineCodersSafe(t *testing.T) {
	row := reflect.TypeFor[coderRow]()
	for _, c := range []struct {
		name  string
		build func(s beam.Scope) error
	}{
		{"read avro", func(s beam.Scope) error { _, err := TryRead(s, "p.d.t", row, WithDataFormat(Avro)); return err }},
		{"read arrow", func(s beam.Scope) error { _, err := TryRead(s, "p.d.t", row, WithDataFormat(Arrow)); return err }},
		{"read rows", func(s beam.Scope) error { _, err := TryRead(s, "p.d.t", typeOfRow); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			if err := c.build(s); err != nil {
				t.Fatal(err)
			}
			if bad := codertest.UnsafeRowCoders(t, p); len(bad) != 0 {
				t.Errorf("row coders whose nulls a runner would corrupt: %v", bad)
			}
		})
	}
	p, s := beam.NewPipelineWithRoot()
	beam.Reshuffle(s, beam.Create(s, coderRowWithSlice{ID: 1}))
	if bad := codertest.UnsafeRowCoders(t, p); len(bad) == 0 {
		t.Errorf("a PCollection of %v: its Tags field not found unsafe", reflect.TypeFor[coderRowWithSlice]())
	}
}

// BenchmarkWireCoder encodes and decodes a StreamElement of an Avro
// session and a streaming write's chunk of 500 rows of 100 bytes with the
// wire coder, through Beam's element coders.
func BenchmarkWireCoder(b *testing.B) {
	rows := make([][]byte, 500)
	for i := range rows {
		rows[i] = bytes.Repeat([]byte{byte(i)}, 100)
	}
	for _, v := range []any{
		StreamElement{Info: sessionInfo{Table: "projects/p/datasets/d/tables/t", Session: "projects/p/locations/us/sessions/s1", Format: 1,
			Avro: `{"fields":[{"name":"id","type":"long"},{"name":"name","type":"string"}],"name":"__root__","type":"record"}`},
			Stream: "projects/p/locations/us/sessions/s1/streams/r5", EstRows: 1000},
	} {
		t := reflect.TypeOf(v)
		b.Run(t.Name(), func(b *testing.B) {
			enc, dec := beam.NewElementEncoder(t), beam.NewElementDecoder(t)
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := enc.Encode(v, &buf); err != nil {
					b.Fatal(err)
				}
				if _, err := dec.Decode(&buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Cap()), "buf-bytes")
		})
	}
}
