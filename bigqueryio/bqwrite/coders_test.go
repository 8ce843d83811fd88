package bqwrite

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
	"github.com/sdfio/sdfio/bigqueryio/internal/codertest"
)

// crossingTypes are the types of this package that cross a PCollection
// between steps (or sit in a state cell), with where; each must have a
// coder that a runner decoding rows (Flink) cannot corrupt: the wire
// coder when it holds a slice, map or pointer, which Beam's row coder
// may write as a null the schema does not allow.
var crossingTypes = []codertest.Crossing{
	{T: reflect.TypeFor[streamDone](), Where: "Write: appendFn's KV values, GroupByKey, the failures side input, truncateKeyFn"},
	{T: reflect.TypeFor[TableResult](), Where: "Write: Results"},
	{T: reflect.TypeFor[FailedRow](), Where: "Write: FailedRows"},
	{T: reflect.TypeFor[streamChunk](), Where: "streaming Write: streamKeyFn's KV values, the batch step's bag state"},
	{T: reflect.TypeFor[streamBatch](), Where: "streaming Write: streamBatchFn's KV values, the append step's bag state"},
	{T: reflect.TypeFor[flushOp](), Where: "streaming Write: streamAppendFn's KV values, Reshuffle"},
	{T: reflect.TypeFor[batchMeta](), Where: "streaming Write: the batch step's value state"},
	{T: reflect.TypeFor[shardStream](), Where: "streaming Write: the append step's value state"},
	{T: reflect.TypeFor[streamDesc](), Where: "streaming Write: both stateful steps' writer schema state"},
}

var pkgPath = reflect.TypeFor[TableResult]().PkgPath()

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
	// A huge count.
	if _, err := bqcore.DecodeWire(reflect.TypeFor[streamChunk](), []byte{0, 0xff, 0xff, 0xff, 0xff, 0x0f}); err == nil {
		t.Error("a count of 2^32: no error")
	}
	if _, err := bqcore.EncodeWire(reflect.TypeFor[flushOp](), flushOp{}); err == nil {
		t.Error("encodeWire of a type without the wire coder: no error")
	}
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

func coderMutation(coderRow) RowMutation { return RowMutation{Type: Upsert} }

func init() {
	RegisterType(reflect.TypeFor[coderRow]())
	beam.RegisterType(reflect.TypeFor[coderRowWithSlice]())
	register.Function1x1(coderRowOf)
	register.Function1x1(coderMutation)
}

// TestPipelineCodersSafe builds Read, Query and every kind of Write
// (exactly once, WriteTruncate, at least once bounded and unbounded, CDC,
// the streaming write of unbounded input) and finds, in the coders of each
// pipeline's proto, no row coder with a field Beam Go may write as a null
// its schema does not allow; a pipeline of a type holding a slice is found
// out (the check works).
func TestPipelineCodersSafe(t *testing.T) {
	rowsOf := func(s beam.Scope, unbounded bool) beam.PCollection {
		if unbounded {
			start := time.Unix(1700000000, 0)
			return beam.ParDo(s, coderRowOf, periodic.Impulse(s, start, start.Add(time.Minute), time.Second, false))
		}
		return beam.Create(s, coderRow{ID: 1, Name: "a"})
	}
	write := func(unbounded bool, opts ...WriteOption) func(s beam.Scope) error {
		return func(s beam.Scope) error {
			res, err := TryWrite(s, "p.d.t", rowsOf(s, unbounded), opts...)
			if err == nil {
				beam.ParDo0(s, keepResult, res.Results)
			}
			return err
		}
	}
	for _, c := range []struct {
		name  string
		build func(s beam.Scope) error
	}{
		{"write", write(false)},
		{"write truncate", write(false, WithWriteDisposition(WriteTruncate))},
		{"write at least once", write(false, WithAtLeastOnce())},
		{"write at least once unbounded", write(true, WithAtLeastOnce())},
		{"write cdc", write(false, WithAtLeastOnce(), WithRowMutation(coderMutation), WithUnorderedChanges(), WithPrimaryKey("id"))},
		{"write streaming", write(true)},
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

// BenchmarkWireCoder encodes and decodes a streaming write's chunk of 500 rows of 100 bytes with the
// wire coder, through Beam's element coders.
func BenchmarkWireCoder(b *testing.B) {
	rows := make([][]byte, 500)
	for i := range rows {
		rows[i] = bytes.Repeat([]byte{byte(i)}, 100)
	}
	for _, v := range []any{
		streamChunk{Desc: make([]byte, 200), Rows: rows},
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
