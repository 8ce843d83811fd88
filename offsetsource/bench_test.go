package offsetsource_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beamsdf "github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

func init() {
	register.DoFn3x1[*beamsdf.LockRTracker, string, func(string), error](&beamFixedFn{})
}

// beamFixedFn is the fixed-width read written by hand on Beam's own offset
// range restriction and tracker, for comparison: the element is the file's
// path, positions are byte offsets, every record a split point.
type beamFixedFn struct {
	Width             int64
	DesiredBundleSize int64
}

func (fn *beamFixedFn) CreateInitialRestriction(path string) (offsetrange.Restriction, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return offsetrange.Restriction{}, err
	}
	return offsetrange.Restriction{Start: 0, End: fi.Size()}, nil
}

func (fn *beamFixedFn) SplitRestriction(path string, rest offsetrange.Restriction) []offsetrange.Restriction {
	return rest.SizedSplits(fn.DesiredBundleSize)
}

func (fn *beamFixedFn) RestrictionSize(path string, rest offsetrange.Restriction) float64 {
	return rest.Size()
}

func (fn *beamFixedFn) CreateTracker(rest offsetrange.Restriction) *beamsdf.LockRTracker {
	return beamsdf.NewLockRTracker(offsetrange.NewTracker(rest))
}

func (fn *beamFixedFn) ProcessElement(rt *beamsdf.LockRTracker, path string, emit func(string)) error {
	rest := rt.GetRestriction().(offsetrange.Restriction)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	pos := (rest.Start + fn.Width - 1) / fn.Width * fn.Width
	if _, err := f.Seek(pos, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	buf := make([]byte, fn.Width)
	for {
		if _, err := io.ReadFull(r, buf); err == io.EOF {
			rt.TryClaim(rest.End) // the input ended: claim the rest
			return nil
		} else if err != nil {
			return fmt.Errorf("%s: record at offset %d: %w", path, pos, err)
		}
		if !rt.TryClaim(pos) {
			return nil
		}
		emit(string(buf[:fn.Width-1]))
		pos += fn.Width
	}
}

// BenchmarkPipeline reads a file of 1.5 M fixed-width records on Prism and
// counts them, with offsetsource and with the hand-written SDF on Beam's
// offsetrange tracker; both cut the file into initial bundles of 4 MiB.
func BenchmarkPipeline(b *testing.B) {
	const n = 1_500_000
	const bundle = 4 << 20
	src, _ := writeFixedFile(b, b.TempDir(), n)
	// Prism logs every job at INFO; quiet it so that its lines do not cut
	// the benchmark result lines that make bench parses.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	defer slog.SetDefault(prev)
	bench := func(b *testing.B, read func(s beam.Scope) beam.PCollection) {
		var elapsed time.Duration
		for b.Loop() {
			p, s := beam.NewPipelineWithRoot()
			passert.Equals(s, countRecords(s, read(s)), int64(n))
			start := time.Now()
			if err := ptest.Run(p); err != nil {
				b.Fatal(err)
			}
			elapsed += time.Since(start)
		}
		b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "records/s")
		b.SetBytes(n * fixedWidth)
	}
	b.Run("sdfio", func(b *testing.B) {
		bench(b, func(s beam.Scope) beam.PCollection {
			return offsetsource.Read(s, src, offsetsource.WithDesiredBundleSize(bundle))
		})
	})
	b.Run("beam_offsetrange", func(b *testing.B) {
		bench(b, func(s beam.Scope) beam.PCollection {
			fn := &beamFixedFn{Width: fixedWidth, DesiredBundleSize: bundle}
			return beam.ParDo(s, fn, beam.Create(s, src.Path))
		})
	})
}

// BenchmarkReadLoop is the read loop alone, without a runner: offsetsource's
// ReadRestriction on an sdf.Tracker against the hand-written ProcessElement
// on Beam's offsetrange tracker, over the same file of 1.5 M records.
func BenchmarkReadLoop(b *testing.B) {
	const n = 1_500_000
	src, _ := writeFixedFile(b, b.TempDir(), n)
	whole := sdf.OffsetRange{Start: 0, End: n * fixedWidth}
	bench := func(b *testing.B, read func(emit func(string)) error) {
		var count int
		emit := func(string) { count++ }
		start := time.Now()
		for b.Loop() {
			count = 0
			if err := read(emit); err != nil {
				b.Fatal(err)
			}
			if count != n {
				b.Fatalf("read %d records, want %d", count, n)
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds(), "records/s")
		b.SetBytes(n * fixedWidth)
	}
	b.Run("sdfio", func(b *testing.B) {
		bench(b, func(emit func(string)) error {
			return offsetsource.ReadRestriction(context.Background(), src, sdf.NewTracker(whole), emit)
		})
	})
	b.Run("beam_offsetrange", func(b *testing.B) {
		fn := &beamFixedFn{Width: fixedWidth}
		bench(b, func(emit func(string)) error {
			rest := offsetrange.Restriction{Start: whole.Start, End: whole.End}
			return fn.ProcessElement(fn.CreateTracker(rest), src.Path, emit)
		})
	})
}
