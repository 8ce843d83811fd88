package bigqueryio

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/sdf"
)

type benchRow struct {
	ID    int64               `bigquery:"id"`
	Name  bigquery.NullString `bigquery:"name"`
	Score float64             `bigquery:"score"`
}

// BenchmarkStreamRead reads one stream of 100,000 rows through the tracker
// and the struct decoder, without Beam: what the reading DoFn costs apart
// from the runner's per-element work. The server runs in the same process
// and shares its CPU (and its allocations are counted too).
func BenchmarkStreamRead(b *testing.B) {
	for _, format := range []DataFormat{Avro, Arrow} {
		b.Run(map[DataFormat]string{Avro: "avro", Arrow: "arrow"}[format], func(b *testing.B) {
			srv := newTestServer(b, bqtest.WithBlockRows(1024), bqtest.WithResponseRows(1024))
			const n = 100_000
			numbersTable(b, srv, n)
			ctx := context.Background()
			cfg, _ := newConfig("bigqueryio.Read", "p.d.nums", []ReadOption{WithEndpoint(srv.Addr()), WithInsecure(), WithMaxStreams(1), WithDataFormat(format)})
			c, err := newClient(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := createSession(ctx, c, cfg)
				if err != nil {
					b.Fatal(err)
				}
				info, _ := sessionInfoOf(s)
				schema, _, err := info.decoder()
				if err != nil {
					b.Fatal(err)
				}
				dec, err := newStructDecoder(reflect.TypeOf(benchRow{}), schema, info.Format, info.Arrow, fieldRules{})
				if err != nil {
					b.Fatal(err)
				}
				rt := NewStreamTracker(StreamRestriction{Stream: s.GetStreams()[0].GetName(), End: sdf.Unbounded}, c, 0)
				var st readStats
				var sink any
				err = readStream(ctx, c, cfg, info, rt, dec, func(v any) error {
					sink = v
					return nil
				}, &st)
				if err != nil || st.rows != n {
					b.Fatalf("%d rows, %v", st.rows, err)
				}
				_ = sink
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

type benchEvent struct {
	ID    int64               `bigquery:"id"`
	Name  bigquery.NullString `bigquery:"name"`
	Score float64             `bigquery:"score"`
	Kind  string              `bigquery:"kind"`
}

// BenchmarkDecode decodes ReadRows responses of 1024 rows of bqbench's
// table (received once beforehand) into structs: with the struct decoder
// the reader uses ("struct"), and through []bigquery.Value and the loader
// ("values", the way before it), in Avro and Arrow. No server, no Beam.
func BenchmarkDecode(b *testing.B) {
	srv := newTestServer(b, bqtest.WithBlockRows(1024), bqtest.WithResponseRows(1024))
	const n = 32 * 1024
	rows := make([][]bigquery.Value, n)
	kinds := []string{"click", "view", "buy"}
	for i := range rows {
		var name bigquery.Value = "user-" + strconv.Itoa(i%5000)
		if i%10 == 0 {
			name = nil
		}
		rows[i] = []bigquery.Value{int64(i), name, float64(i%1000) / 8, kinds[i%3]}
	}
	eventsTable(b, srv, rows)
	typ := reflect.TypeOf(benchEvent{})
	for _, format := range []storagepb.DataFormat{storagepb.DataFormat_AVRO, storagepb.DataFormat_ARROW} {
		info, resps := sessionResponses(b, srv, "p.d.events", format)
		schema, vals, err := info.decoder()
		if err != nil {
			b.Fatal(err)
		}
		name := strings.ToLower(format.String())
		b.Run(name+"/struct", func(b *testing.B) {
			d, err := newStructDecoder(typ, schema, info.Format, info.Arrow, fieldRules{})
			if err != nil {
				b.Fatal(err)
			}
			benchStruct(b, d, resps, n)
		})
		b.Run(name+"/struct_columns", func(b *testing.B) {
			// The struct decoder column by column, through its avroOps:
			// what it did before rowInline, for comparison.
			d, err := newStructDecoder(typ, schema, info.Format, info.Arrow, fieldRules{})
			if err != nil {
				b.Fatal(err)
			}
			d.inline, d.cols = false, make([]avroCol, len(d.cols))
			benchStruct(b, d, resps, n)
		})
		b.Run(name+"/values", func(b *testing.B) {
			l, err := newLoader(typ, schema, fieldRules{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var sink any
			for i := 0; i < b.N; i++ {
				for _, r := range resps {
					if err := vals.decode(r.payload, r.rows, func(row []bigquery.Value) error {
						v := reflect.New(typ).Elem()
						if err := l.load(v, row); err != nil {
							return err
						}
						sink = v.Interface()
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
			}
			_ = sink
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
	}
}

// benchStruct decodes resps, of n rows in all, with d b.N times.
func benchStruct(b *testing.B, d *structDecoder, resps []response, n int) {
	b.ReportAllocs()
	var bt batch
	for i := 0; i < b.N; i++ {
		for _, r := range resps {
			if err := d.decodeBatch(r.payload, r.rows, &bt); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}
