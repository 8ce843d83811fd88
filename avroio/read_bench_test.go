package avroio

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

// benchFile writes n events in blocks of 500 with codec, once per run.
func benchFile(b *testing.B, codec string, n int) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench-"+codec+".avro")
	data, _ := layoutFile(b, eventsSchema, codec, eventRecords(0, n), []int{500})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkReadRestriction is the read's per-record path outside a
// pipeline: the source's reader (records of a run-time type) under the
// tracker, as ProcessElement runs it, against the container's typed reader
// alone.
func BenchmarkReadRestriction(b *testing.B) {
	const n = 200000
	for _, codec := range []string{"null", "snappy"} {
		path := benchFile(b, codec, n)
		b.Run(codec+"/container typed", func(b *testing.B) {
			for b.Loop() {
				r, err := container.OpenReader[event](path, container.FileOpener(path), 0, container.Options{})
				if err != nil {
					b.Fatal(err)
				}
				k := 0
				for {
					_, _, _, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					k++
				}
				r.Close()
				if k != n {
					b.Fatalf("read %d records", k)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
		})
		for _, typ := range []reflect.Type{reflect.TypeFor[event](), RecordType} {
			b.Run(codec+"/source "+typ.String(), func(b *testing.B) {
				src := newSource(b, path, typ)
				for b.Loop() {
					rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: src.File.Size})
					k := 0
					if err := offsetsource.ReadRestriction(context.Background(), src, rt, func(beam.X) { k++ }); err != nil {
						b.Fatal(err)
					}
					if k != n {
						b.Fatalf("read %d records", k)
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
