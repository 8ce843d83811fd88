package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamavroio "github.com/apache/beam/sdks/v2/go/pkg/beam/io/avroio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/benchdata"
)

// The write measurements: N records of the benchmark schema (benchdata.Make
// 0..N-1), made inside the pipeline from writeSeeds ranges spread by a
// Reshuffle (so that the runner can make and write them in parallel), then
// written by sdfio's avroio.Write (as structs, and with NumShards(1)) or by
// Beam Go's avroio.Write (which takes the records as Avro JSON text, parses
// each with goavro and groups them all by shard first). The child counts
// the records of the files written, outside the timing.
const (
	modeWriteSdfio        = "write_sdfio"         // avroio.Write of benchdata.Record, runner-chosen files
	modeWriteSdfioOne     = "write_sdfio_1shard"  // avroio.Write of benchdata.Record, NumShards(1)
	modeWriteSdfioGeneric = "write_sdfio_generic" // avroio.Write of avroio.Record
	modeWriteBeam         = "write_beam_avroio"   // Beam Go's avroio.Write of Avro JSON strings
	writeSeeds            = 16
)

func init() {
	register.DoFn2x0[[]byte, func(int64)](&writeSeedsFn{})
	register.DoFn2x0[int64, func(benchdata.Record)](&makeRecordsFn{})
	register.DoFn2x0[int64, func(avroio.Record)](&makeGenericFn{})
	register.DoFn2x0[int64, func(string)](&makeJSONFn{})
	register.Emitter1[benchdata.Record]()
	register.Emitter1[avroio.Record]()
	register.Emitter1[string]()
}

// writeSeedsFn emits the first index of each of writeSeeds ranges of N
// records.
type writeSeedsFn struct{ N int64 }

func (fn *writeSeedsFn) ProcessElement(_ []byte, emit func(int64)) {
	for i := int64(0); i < writeSeeds; i++ {
		emit(i)
	}
}

// seedRange is the range of record indexes of seed k of n records.
func seedRange(k, n int64) (int64, int64) {
	return k * n / writeSeeds, (k + 1) * n / writeSeeds
}

type makeRecordsFn struct{ N int64 }

func (fn *makeRecordsFn) ProcessElement(k int64, emit func(benchdata.Record)) {
	lo, hi := seedRange(k, fn.N)
	for i := lo; i < hi; i++ {
		emit(benchdata.Make(i))
	}
}

type makeGenericFn struct{ N int64 }

func (fn *makeGenericFn) ProcessElement(k int64, emit func(avroio.Record)) {
	lo, hi := seedRange(k, fn.N)
	for i := lo; i < hi; i++ {
		emit(genericRecord(benchdata.Make(i)))
	}
}

// genericRecord is r as ReadGeneric would give it.
func genericRecord(r benchdata.Record) avroio.Record {
	values := make([]any, len(r.Values))
	for i, v := range r.Values {
		values[i] = v
	}
	var note any
	if r.Note != nil {
		note = *r.Note
	}
	return avroio.Record{
		"id": r.ID, "score": r.Score, "name": r.Name, "payload": r.Payload, "note": note,
		"values": values, "point": map[string]any{"x": r.Point.X, "y": r.Point.Y}, "kind": r.Kind,
	}
}

type makeJSONFn struct{ N int64 }

func (fn *makeJSONFn) ProcessElement(k int64, emit func(string)) {
	lo, hi := seedRange(k, fn.N)
	var b []byte
	for i := lo; i < hi; i++ {
		b = appendAvroJSON(b[:0], benchdata.Make(i))
		emit(string(b))
	}
}

// appendAvroJSON appends r in Avro's JSON encoding, which Beam Go's
// avroio.Write takes (goavro's NativeFromTextual): bytes as a string of
// code points U+0000-U+00FF, a union's non-null value as {"type": value}.
func appendAvroJSON(b []byte, r benchdata.Record) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, r.ID, 10)
	b = append(b, `,"score":`...)
	b = appendJSONFloat(b, r.Score)
	b = append(b, `,"name":`...)
	b = strconv.AppendQuote(b, r.Name)
	b = append(b, `,"payload":"`...)
	for _, c := range r.Payload {
		switch {
		case c < 0x20 || c == '"' || c == '\\' || c == 0x7f:
			b = append(b, `\u00`...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			b = utf8.AppendRune(b, rune(c))
		}
	}
	b = append(b, `","note":`...)
	if r.Note == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"string":`...)
		b = strconv.AppendQuote(b, *r.Note)
		b = append(b, '}')
	}
	b = append(b, `,"values":[`...)
	for i, v := range r.Values {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	b = append(b, `],"point":{"x":`...)
	b = strconv.AppendInt(b, r.Point.X, 10)
	b = append(b, `,"y":`...)
	b = appendJSONFloat(b, r.Point.Y)
	b = append(b, `},"kind":`...)
	b = strconv.AppendQuote(b, r.Kind)
	return append(b, '}')
}

// appendJSONFloat writes f so that it reads back exactly and always as a
// floating-point number.
func appendJSONFloat(b []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.AppendFloat(b, f, 'f', 1, 64)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

func isWrite(mode string) bool {
	switch mode {
	case modeWriteSdfio, modeWriteSdfioOne, modeWriteSdfioGeneric, modeWriteBeam:
		return true
	}
	return false
}

// runWrite writes n records by mode into files named out/part*.avro. The
// parent counts them after the child has gone (countWritten), so that
// neither the child's time nor its CPU or memory include the counting.
func runWrite(ctx context.Context, mode, out string, n int64) (childResult, error) {
	prefix := filepath.Join(out, "part")
	p, s := beam.NewPipelineWithRoot()
	seeds := beam.Reshuffle(s, beam.ParDo(s, &writeSeedsFn{N: n}, beam.Impulse(s)))
	switch mode {
	case modeWriteSdfio, modeWriteSdfioOne:
		recs := beam.ParDo(s, &makeRecordsFn{N: n}, seeds)
		var opts []avroio.WriteOption
		if mode == modeWriteSdfioOne {
			opts = append(opts, avroio.WithNumShards(1))
		}
		avroio.Write(s, prefix, benchdata.Schema, recs, append(opts, avroio.WithSuffix(".avro"))...)
	case modeWriteSdfioGeneric:
		recs := beam.ParDo(s, &makeGenericFn{N: n}, seeds)
		avroio.Write(s, prefix, benchdata.Schema, recs, avroio.WithSuffix(".avro"))
	case modeWriteBeam:
		recs := beam.ParDo(s, &makeJSONFn{N: n}, seeds)
		beamavroio.Write(s, prefix, benchdata.Schema, recs)
	default:
		return childResult{}, fmt.Errorf("unknown write mode %q", mode)
	}
	pr, err := prism.Execute(ctx, p)
	if err != nil {
		return childResult{}, err
	}
	res := childResult{Records: n, Counters: map[string]int64{}}
	for _, c := range pr.Metrics().AllMetrics().Counters() {
		res.Counters[c.Namespace()+"/"+c.Name()] += c.Result()
	}
	return res, nil
}

// countWritten counts the records and bytes of the files a write child
// left in dir, reading them back with avroio/container.
func countWritten(dir string) (records, bytes int64, files int, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "part*.avro"))
	if err != nil {
		return 0, 0, 0, err
	}
	if len(paths) == 0 {
		return 0, 0, 0, fmt.Errorf("no files written under %s", dir)
	}
	for _, f := range paths {
		k, size, err := countFile(f)
		if err != nil {
			return 0, 0, 0, err
		}
		records += k
		bytes += size
	}
	return records, bytes, len(paths), nil
}

// countFile counts the records of one written file.
func countFile(path string) (int64, int64, error) {
	r, err := container.OpenReader[benchdata.Record](path, container.FileOpener(path), 0, container.Options{})
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	var n int64
	for {
		_, _, _, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, 0, fmt.Errorf("%s: %w", path, err)
		}
		n++
	}
	fi, err := os.Stat(path)
	if err != nil {
		return n, 0, err
	}
	return n, fi.Size(), nil
}
