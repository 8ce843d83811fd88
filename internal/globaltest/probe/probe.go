// Package probe reports how Beam encodes a program's own PCollections of
// time.Time, *big.Rat, the civil types and a struct holding them: the
// coder Beam infers, the schema, every sample's bytes and what they decode
// to, and what a Prism pipeline carrying them through a shuffle delivers.
// It imports nothing of sdfio: package globaltest compares its report in a
// program that imports all of sdfio's IOs with the report of the program
// in globaltest/without, which does not.
package probe

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"google.golang.org/protobuf/encoding/prototext"
)

// Holder is a program's own struct holding the types.
type Holder struct {
	Name   string
	At     time.Time
	Amount *big.Rat
	Exact  big.Rat
	Day    civil.Date
	Clock  civil.Time
	When   civil.DateTime
	Amts   []*big.Rat
}

// Clocks is a program's own struct holding civil times only (which Beam's
// schema coder keeps).
type Clocks struct {
	At    time.Time
	Clock civil.Time
	Times []time.Time
}

func init() {
	beam.RegisterType(reflect.TypeFor[Holder]())
	beam.RegisterType(reflect.TypeFor[Clocks]())
	// As a program that sends them between stages must.
	beam.RegisterType(reflect.TypeFor[civil.Date]())
	beam.RegisterType(reflect.TypeFor[civil.Time]())
	beam.RegisterType(reflect.TypeFor[civil.DateTime]())
	register.Function1x1(describeHolder)
	register.Function1x1(describeClocks)
	register.Function1x1(describeTime)
	register.Function1x0(collect)
}

var (
	utc     = time.Date(2024, 2, 29, 23, 59, 58, 123456789, time.UTC)
	plusOne = time.Date(1999, 12, 31, 1, 2, 3, 4, time.FixedZone("", 3600))
	far     = time.Date(12000, 1, 2, 3, 4, 5, 6, time.UTC)
	seconds = time.Date(1850, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", -17762))
	day     = civil.Date{Year: 2024, Month: time.February, Day: 29}
	clock   = civil.Time{Hour: 23, Minute: 59, Second: 58, Nanosecond: 7}
)

// samples are the values reported, by type.
func samples() []any {
	return []any{
		utc, plusOne, far, seconds,
		big.NewRat(1, 3), big.NewRat(-1234567890123456789, 1000),
		day, clock, civil.DateTime{Date: day, Time: clock},
		Holder{Name: "h", At: utc, Amount: big.NewRat(7, 2), Exact: *big.NewRat(1, 3), Day: day, Clock: clock, When: civil.DateTime{Date: day, Time: clock}, Amts: []*big.Rat{big.NewRat(5, 1), nil}},
		&Holder{Name: "p", At: plusOne},
		Clocks{At: utc, Clock: clock, Times: []time.Time{utc, plusOne}},
	}
}

// Report describes, for each sample, Beam's coder of its type, the type's
// schema, the sample's encoding and its decoding.
func Report() string {
	var b strings.Builder
	seen := map[reflect.Type]bool{}
	for _, v := range samples() {
		t := reflect.TypeOf(v)
		if !seen[t] {
			seen[t] = true
			fmt.Fprintf(&b, "type %v\n  coder: %s\n  schema: %s\n", t, try(func() string { return beam.NewCoder(typex.New(t)).String() }), schemaOf(t))
		}
		fmt.Fprintf(&b, "  value %s\n", Describe(v))
		fmt.Fprintf(&b, "    %s\n", try(func() string { return roundTrip(v) }))
	}
	return b.String()
}

func schemaOf(t reflect.Type) string {
	s, err := schema.FromType(t)
	if err != nil {
		return "error: " + err.Error()
	}
	// Schema ids are random per process: leave them out. prototext puts
	// one or two spaces between fields, chosen per binary (so that nobody
	// relies on its layout): compare the fields, not the spaces.
	return strings.Join(strings.Fields(schemaID.ReplaceAllString(prototext.MarshalOptions{}.Format(s), "")), " ")
}

var schemaID = regexp.MustCompile(`\s*id:"[^"]*"`)

func roundTrip(v any) string {
	t := reflect.TypeOf(v)
	var buf strings.Builder
	w := &hexWriter{}
	if err := beam.NewElementEncoder(t).Encode(v, w); err != nil {
		return "encoding error: " + err.Error()
	}
	fmt.Fprintf(&buf, "bytes %s", hex.EncodeToString(w.b))
	out, err := beam.NewElementDecoder(t).Decode(strings.NewReader(string(w.b)))
	if err != nil {
		return buf.String() + " decoding error: " + err.Error()
	}
	fmt.Fprintf(&buf, " decoded %s", Describe(out))
	return buf.String()
}

type hexWriter struct{ b []byte }

func (w *hexWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// try runs f, reporting a panic as its text.
func try(f func() string) (s string) {
	defer func() {
		if p := recover(); p != nil {
			s = fmt.Sprintf("panic: %v", p)
		}
	}()
	return f()
}

// Describe writes v exactly, pointers followed: a time as its instant and
// offset, a big.Rat as its text.
func Describe(v any) string {
	var b strings.Builder
	describe(&b, reflect.ValueOf(v))
	return b.String()
}

func describe(b *strings.Builder, v reflect.Value) {
	if !v.IsValid() {
		b.WriteString("<invalid>")
		return
	}
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		t := v.Interface().(time.Time)
		name, off := t.Zone()
		fmt.Fprintf(b, "time(%d.%09d%+d %q)", t.Unix(), t.Nanosecond(), off, name)
		return
	case reflect.TypeFor[big.Rat]():
		r := v.Interface().(big.Rat)
		fmt.Fprintf(b, "rat(%s)", r.RatString())
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteString("&")
		describe(b, v.Elem())
	case reflect.Struct:
		fmt.Fprintf(b, "%v{", v.Type())
		for i := 0; i < v.NumField(); i++ {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			fmt.Fprintf(b, "%s:", v.Type().Field(i).Name)
			describe(b, v.Field(i))
			b.WriteString(" ")
		}
		b.WriteString("}")
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteString("[")
		for i := 0; i < v.Len(); i++ {
			describe(b, v.Index(i))
			b.WriteString(" ")
		}
		b.WriteString("]")
	default:
		fmt.Fprintf(b, "%v", v.Interface())
	}
}

func describeHolder(h Holder) string  { return Describe(h) }
func describeClocks(c Clocks) string  { return Describe(c) }
func describeTime(t time.Time) string { return Describe(t) }

var (
	mu        sync.Mutex
	collected []string
)

func collect(s string) {
	mu.Lock()
	defer mu.Unlock()
	collected = append(collected, s)
}

// RunPipeline runs, on Prism, a pipeline that creates PCollections of
// Holder, Clocks and time.Time, shuffles them (each element encoded and
// decoded by the runner) and describes what arrives, sorted. The workers
// run in this process (LOOPBACK).
func RunPipeline(ctx context.Context) (string, error) {
	mu.Lock()
	collected = nil
	mu.Unlock()
	p, s := beam.NewPipelineWithRoot()
	holders := beam.Create(s, Holder{Name: "h", At: utc, Amount: big.NewRat(7, 2), Exact: *big.NewRat(1, 3), Day: day, Clock: clock, When: civil.DateTime{Date: day, Time: clock}, Amts: []*big.Rat{big.NewRat(5, 1), nil}}, Holder{Name: "z"})
	clocks := beam.Create(s, Clocks{At: plusOne, Clock: clock, Times: []time.Time{utc, plusOne}})
	times := beam.Create(s, utc, plusOne)
	beam.ParDo0(s, collect, beam.ParDo(s, describeHolder, beam.Reshuffle(s, holders)))
	beam.ParDo0(s, collect, beam.ParDo(s, describeClocks, beam.Reshuffle(s, clocks)))
	beam.ParDo0(s, collect, beam.ParDo(s, describeTime, beam.Reshuffle(s, times)))
	if _, err := prism.Execute(ctx, p); err != nil {
		return "", err
	}
	mu.Lock()
	defer mu.Unlock()
	out := slices.Clone(collected)
	slices.Sort(out)
	return strings.Join(out, "\n") + "\n", nil
}
