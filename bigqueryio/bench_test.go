package bigqueryio

import (
	"context"
	"reflect"
	"testing"

	"cloud.google.com/go/bigquery"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/sdf"
)

type benchRow struct {
	ID    int64               `bigquery:"id"`
	Name  bigquery.NullString `bigquery:"name"`
	Score float64             `bigquery:"score"`
}

// BenchmarkStreamRead reads one stream of 100,000 rows through the tracker,
// the decoder and the struct loader, without Beam (the server runs in the
// same process and shares its CPU).
func BenchmarkStreamRead(b *testing.B) {
	for _, format := range []DataFormat{Avro, Arrow} {
		b.Run(map[DataFormat]string{Avro: "avro", Arrow: "arrow"}[format], func(b *testing.B) {
			srv := newTestServer(b, bqtest.WithBlockRows(1024), bqtest.WithResponseRows(1024))
			const n = 100_000
			numbersTable(b, srv, n)
			ctx := context.Background()
			cfg, _ := newConfig("p.d.nums", []ReadOption{WithEndpoint(srv.Addr()), WithInsecure(), WithMaxStreams(1), WithDataFormat(format)})
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
				schema, dec, err := info.decoder()
				if err != nil {
					b.Fatal(err)
				}
				l, err := newLoader(reflect.TypeOf(benchRow{}), schema)
				if err != nil {
					b.Fatal(err)
				}
				rt := NewStreamTracker(StreamRestriction{Stream: s.GetStreams()[0].GetName(), End: sdf.Unbounded}, c, 0)
				var st readStats
				var sink any
				err = readStream(ctx, c, cfg, info, rt, dec, func(row []bigquery.Value) error {
					v := reflect.New(l.typ).Elem()
					if err := l.load(v, row); err != nil {
						return err
					}
					sink = v.Interface()
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
