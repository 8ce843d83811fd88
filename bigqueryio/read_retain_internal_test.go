package bigqueryio

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// TestReadKeptRowsBounded: a downstream DoFn that keeps 1 row in 1,000 of
// what the struct decoder emits (a cache, a top-N) keeps alive at most a
// bounded multiple of those rows' own size (struct and strings), not the
// response each came from: heap in use after GC with the rows kept, less
// heap in use after GC once they are dropped. The responses are bqtest's,
// 1,024 rows each, in Avro and Arrow, decoded by the reader's decoder;
// the kept rows keep their values.
func TestReadKeptRowsBounded(t *testing.T) {
	const (
		tableRows = 8 * 1024
		rounds    = 32 // 256 Ki rows decoded per format
		every     = 1000
		bound     = 64 // times the kept rows' own size
	)
	srv := newTestServer(t, bqtest.WithBlockRows(1024), bqtest.WithResponseRows(1024))
	rows := make([][]bigquery.Value, tableRows)
	kinds := []string{"click", "view", "buy"}
	for i := range rows {
		rows[i] = []bigquery.Value{int64(i), fmt.Sprintf("user-%d", i), float64(i) / 8, kinds[i%3]}
	}
	eventsTable(t, srv, rows)
	for _, format := range []storagepb.DataFormat{storagepb.DataFormat_AVRO, storagepb.DataFormat_ARROW} {
		t.Run(strings.ToLower(format.String()), func(t *testing.T) {
			d, resps := eventsDecoder(t, srv, format)
			var kept []any
			seen := 0
			for range rounds {
				for _, r := range resps {
					var b batch
					if err := d.decodeBatch(r.payload, r.rows, &b); err != nil {
						t.Fatal(err)
					}
					for i := 0; i < b.len; i++ {
						if seen%every == 0 {
							kept = append(kept, b.at(i))
						}
						seen++
					}
				}
			}
			own := 0
			for _, v := range kept {
				e := v.(benchEvent)
				want := rows[e.ID]
				if e.Name.StringVal != want[1] || e.Kind != want[3] || e.Score != want[2] {
					t.Fatalf("kept row %+v, want %v", e, want)
				}
				own += int(unsafe.Sizeof(e)) + len(e.Name.StringVal) + len(e.Kind)
			}
			with := heapInUse()
			runtime.KeepAlive(kept)
			n := len(kept)
			kept = nil
			retained := with - heapInUse()
			t.Logf("%d rows decoded, %d kept (%d bytes of their own): %d bytes retained, %.1fx, %d bytes a row",
				seen, n, own, retained, float64(retained)/float64(own), retained/int64(n))
			if retained > int64(bound*own) {
				t.Errorf("%d kept rows of %d bytes keep %d bytes alive: over %dx", n, own, retained, bound)
			}
		})
	}
}

// heapInUse is the heap's live bytes after a garbage collection.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestDecodeChunkBoundaries: rows land in chunks of rowChunk whatever the
// responses' and record batches' sizes (7 rows a block, 100 a response:
// blocks straddle chunks), every row with its own values, NULLs included.
func TestDecodeChunkBoundaries(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(7), bqtest.WithResponseRows(100))
	const n = 1000
	rows := make([][]bigquery.Value, n)
	for i := range rows {
		var name bigquery.Value = fmt.Sprintf("user-%d", i)
		if i%5 == 2 {
			name = nil
		}
		rows[i] = []bigquery.Value{int64(i), name, float64(i) / 8, strings.Repeat("k", i%4)}
	}
	eventsTable(t, srv, rows)
	for _, format := range []storagepb.DataFormat{storagepb.DataFormat_AVRO, storagepb.DataFormat_ARROW} {
		t.Run(strings.ToLower(format.String()), func(t *testing.T) {
			d, resps := eventsDecoder(t, srv, format)
			var got []any
			for i := 0; i < len(resps); i++ {
				r := resps[i]
				if format == storagepb.DataFormat_ARROW && i+1 < len(resps) {
					// Two record batches of 100 rows in one payload: the
					// second starts inside a chunk.
					i++
					r = response{append(append([]byte(nil), r.payload...), resps[i].payload...), r.rows + resps[i].rows}
				}
				var err error
				if got, err = d.decode(r.payload, r.rows, got); err != nil {
					t.Fatal(err)
				}
			}
			if len(got) != n {
				t.Fatalf("%d rows, want %d", len(got), n)
			}
			seen := make([]bool, n)
			for _, v := range got {
				e := v.(benchEvent)
				if e.ID < 0 || e.ID >= n || seen[e.ID] {
					t.Fatalf("row %+v: id out of range or twice", e)
				}
				seen[e.ID] = true
				w := rows[e.ID]
				wantName := bigquery.NullString{}
				if w[1] != nil {
					wantName = bigquery.NullString{StringVal: w[1].(string), Valid: true}
				}
				if e.Name != wantName || e.Score != w[2] || e.Kind != w[3] {
					t.Fatalf("row %+v, want %v", e, w)
				}
			}
		})
	}
}

// keptRows holds the rows keepRow kept (the pipeline runs in this
// process).
var keptRows struct {
	sync.Mutex
	rows []any
}

// keepRow keeps 1 row in 1,000 as it came, as a generic cache or top-N
// (of beam.T) would.
func keepRow(x beam.T) {
	if x.(benchRow).ID%1000 == 0 {
		keptRows.Lock()
		keptRows.rows = append(keptRows.rows, x)
		keptRows.Unlock()
	}
}

func init() { register.Function1x0(keepRow) }

// BenchmarkReadKeptRows reads 2 M rows from bqtest (responses of 1,024
// rows) on the default runner into a DoFn, fused with the read, that
// keeps 1 row in 1,000, and reports what the kept rows hold alive: heap
// in use after GC with them, less after they are dropped, per kept row
// and as a multiple of the rows' own size (struct and string). Run it
// alone: -bench '^BenchmarkReadKeptRows$' -benchtime 1x.
func BenchmarkReadKeptRows(b *testing.B) {
	const n = 2_000_000
	srv := newTestServer(b, bqtest.WithBlockRows(1024), bqtest.WithResponseRows(1024))
	numbersTable(b, srv, n)
	for _, format := range []DataFormat{Avro, Arrow} {
		b.Run(map[DataFormat]string{Avro: "avro", Arrow: "arrow"}[format], func(b *testing.B) {
			for range b.N {
				keptRows.Lock()
				keptRows.rows = nil
				keptRows.Unlock()
				p, s := beam.NewPipelineWithRoot()
				rows := Read(s, "p.d.nums", reflect.TypeFor[benchRow](), WithEndpoint(srv.Addr()), WithInsecure(), WithMaxStreams(1), WithDataFormat(format))
				beam.ParDo0(s, keepRow, rows)
				if err := ptest.Run(p); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			keptRows.Lock()
			kept := keptRows.rows
			keptRows.rows = nil
			keptRows.Unlock()
			own := 0
			for _, x := range kept {
				r := x.(benchRow)
				own += int(unsafe.Sizeof(r)) + len(r.Name.StringVal)
			}
			with := heapInUse()
			runtime.KeepAlive(kept)
			k := len(kept)
			kept = nil
			retained := with - heapInUse()
			if k != n/1000 {
				b.Fatalf("%d rows kept, want %d", k, n/1000)
			}
			b.ReportMetric(float64(retained)/float64(k), "retained-B/kept-row")
			b.ReportMetric(float64(retained)/float64(own), "x-own-size")
		})
	}
}

// eventsTable adds p.d.events, the table of benchEvent, with rows (id,
// name, score, kind).
func eventsTable(t testing.TB, srv *bqtest.Server, rows [][]bigquery.Value) {
	t.Helper()
	if err := srv.AddTable("p.d.events", bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType},
		{Name: "score", Type: bigquery.FloatFieldType},
		{Name: "kind", Type: bigquery.StringFieldType, Required: true},
	}, Rows: rows}); err != nil {
		t.Fatal(err)
	}
}

// eventsDecoder is the reader's decoder of benchEvent for p.d.events in
// format, and the table's responses.
func eventsDecoder(t testing.TB, srv *bqtest.Server, format storagepb.DataFormat) (*structDecoder, []response) {
	t.Helper()
	info, resps := sessionResponses(t, srv, "p.d.events", format)
	schema, _, err := info.decoder()
	if err != nil {
		t.Fatal(err)
	}
	d, err := newStructDecoder(reflect.TypeFor[benchEvent](), schema, info.Format, info.Arrow, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	return d, resps
}
