package offsetsource_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

func init() {
	offsetsource.Register[beam.X, dynSource]()
	beam.RegisterType(reflect.TypeFor[fixedRec]())
	register.Function1x1[fixedRec, string](fixedRecText)
}

// fixedRec is a record type the source below learns only at run time.
type fixedRec struct{ Text string }

func fixedRecText(r fixedRec) string { return r.Text }

// dynSource reads a fixed-width file as records of a universal type: each
// record a fixedRec in an any, as a source would whose record type comes
// from a reflect.Type carried in the pipeline.
type dynSource struct{ F FixedSource }

func (s dynSource) Range() sdf.OffsetRange { return s.F.Range() }
func (s dynSource) Subrange(start, end int64) offsetsource.Source[beam.X] {
	return dynSource{s.F.Subrange(start, end).(FixedSource)}
}
func (s dynSource) MaxEndOffset(ctx context.Context) (int64, error) { return s.F.MaxEndOffset(ctx) }
func (s dynSource) BytesPerOffset() int64                           { return 1 }
func (s dynSource) MinBundleSize() int64                            { return s.F.MinBundleSize() }
func (s dynSource) EstimatedSizeBytes(ctx context.Context) (int64, error) {
	return s.F.EstimatedSizeBytes(ctx)
}
func (s dynSource) Open(ctx context.Context) (offsetsource.Reader[beam.X], error) {
	r, err := s.F.Open(ctx)
	if err != nil {
		return nil, err
	}
	return dynReader{r}, nil
}

type dynReader struct{ r offsetsource.Reader[string] }

func (r dynReader) Next() (beam.X, int64, bool, error) {
	rec, off, sp, err := r.r.Next()
	if err != nil {
		return nil, off, sp, err
	}
	return fixedRec{Text: rec}, off, sp, nil
}
func (r dynReader) Close() error { return r.r.Close() }

// TestPipelineOutputType reads records of a type bound at construction by
// OutputType, and reports metrics under the namespace MetricsNamespace sets.
func TestPipelineOutputType(t *testing.T) {
	src, want := writeFixedFile(t, t.TempDir(), 300)
	p, s := beam.NewPipelineWithRoot()
	const ns = "sdfio/test-dyn"
	got := offsetsource.Read(s, dynSource{src},
		offsetsource.WithOutputType(reflect.TypeFor[fixedRec]()),
		offsetsource.WithMetricsNamespace(ns),
		offsetsource.WithDesiredBundleSize(40*fixedWidth))
	if et := got.Type().Type(); et != reflect.TypeFor[fixedRec]() {
		t.Fatalf("output element type %v, want fixedRec", et)
	}
	// A DoFn typed on fixedRec consumes the records directly.
	texts := beam.ParDo(s, fixedRecText, got)
	passert.Equals(s, texts, anySlice(want)...)
	res := run(t, p)
	q := res.Metrics().Query(func(r metrics.SingleResult) bool { return r.Namespace() == ns && r.Name() == "records" })
	var n int64
	for _, c := range q.Counters() {
		n += c.Result()
	}
	if n != int64(len(want)) {
		t.Errorf("records metric in namespace %q = %d, want %d", ns, n, len(want))
	}
	def := res.Metrics().Query(func(r metrics.SingleResult) bool {
		return r.Namespace() == offsetsource.Namespace && r.Name() == "records"
	})
	for _, c := range def.Counters() {
		if c.Result() != 0 {
			t.Errorf("records counted under the default namespace too: %v", c)
		}
	}
}

// TestOutputTypeNeedsUniversalT: binding a concrete T is a construction error.
func TestOutputTypeNeedsUniversalT(t *testing.T) {
	src, _ := writeFixedFile(t, t.TempDir(), 3)
	_, s := beam.NewPipelineWithRoot()
	defer func() {
		if recover() == nil {
			t.Fatal("OutputType on a read of concrete records did not fail at construction")
		}
	}()
	offsetsource.Read(s, src, offsetsource.WithOutputType(reflect.TypeFor[fixedRec]()))
}
