package bqwrite

import (
	"context"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/direct"
)

// TestWriteAppendSizes: without WithMaxAppendBytes the first append of a
// stream is sent once it holds 64 KiB of rows and the later ones at 1 MiB
// (so the service decodes one while the next is encoded), each as full as
// the next row allows; a row larger than the 64 KiB chunks rows are
// encoded into, among the others, is written whole, and every row is in
// the table once, with its value.
func TestWriteAppendSizes(t *testing.T) {
	srv := newTestServer(t)
	srv.AddDataset("p", "d", "")
	const n = 3000
	rows := make([]any, n)
	for i := range rows {
		size := 1000 + i%7
		if i%700 == 350 {
			size = 100_000 // over arenaChunk
		}
		rows[i] = onceRow{ID: int64(i), Name: strings.Repeat(string(rune('a'+i%26)), size)}
	}
	p, s := beam.NewPipelineWithRoot()
	Write(s, "p.d.sizes", beam.Create(s, rows...), WithEndpoint(srv.Addr()), WithInsecure(), WithRESTEndpoint(srv.RESTEndpoint()))
	if _, err := direct.Execute(context.Background(), p); err != nil {
		t.Fatal(err)
	}

	got, err := srv.TableRows("p.d.sizes")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("the table has %d rows, want %d", len(got), n)
	}
	seen := make([]bool, n)
	for _, r := range got {
		id, _ := r[0].(int64)
		if id < 0 || id >= n || seen[id] {
			t.Fatalf("row %v: an id out of range or twice", r[0])
		}
		seen[id] = true
		if want := rows[id].(onceRow).Name; r[1] != want {
			t.Fatalf("row %d: name of %d bytes, want %d bytes of %q", id, len(r[1].(string)), len(want), want[:1])
		}
	}

	// One bundle, one stream, the rows in order: the appends' offsets
	// are the batches' first rows.
	var offsets []int64
	streams := map[string]bool{}
	for at := range srv.AppendAttempts() {
		streams[at.Stream] = true
		offsets = append(offsets, at.Offset)
	}
	if len(streams) != 1 {
		t.Fatalf("appends to %d streams, want 1 (one bundle)", len(streams))
	}
	slices.Sort(offsets)
	enc, err := newRowEncoder(mustInfer(t), reflect.TypeFor[onceRow]())
	if err != nil {
		t.Fatal(err)
	}
	size := make([]int, n)
	for i, r := range rows {
		b, err := enc.encode(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		size[i] = len(b)
	}
	if len(offsets) < 4 {
		t.Fatalf("%d appends at offsets %v, want the first at 64 KiB and then one per 1 MiB of the %d rows", len(offsets), offsets, n)
	}
	for j, off := range offsets {
		end := int64(n)
		if j+1 < len(offsets) {
			end = offsets[j+1]
		}
		limit := sendBytes
		if j == 0 {
			limit = firstAppendBytes
		}
		bytes := 0
		for i := off; i < end; i++ {
			bytes += size[i]
		}
		if bytes > limit && end-off > 1 {
			t.Errorf("append %d (rows %d to %d) holds %d bytes, over %d", j, off, end, bytes, limit)
		}
		if end < n && bytes+size[end] <= limit {
			t.Errorf("append %d (rows %d to %d) was sent at %d bytes, with room for the next row's %d under %d", j, off, end, bytes, size[end], limit)
		}
	}
}

func mustInfer(t *testing.T) bigquery.Schema {
	t.Helper()
	s, err := inferSchema(reflect.TypeFor[onceRow]())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWriteAppendAllocsPerRow: appending a row to its batch allocates
// nothing of its own (rows are encoded into shared chunks, batches grow
// twofold); chunks and slices cost a few allocations per thousands of
// rows. The rows measured are appended after the stream's first append
// was answered and before the next is sent (WithMaxAppendBytes at 9 MB),
// so that no work of the in-process server or of gRPC is counted. Every
// row is then in the stream, finalized.
func TestWriteAppendAllocsPerRow(t *testing.T) {
	srv := newTestServer(t)
	srv.AddDataset("p", "d", "")
	cfg, err := newWriteConfig("p.d.allocs", []WriteOption{WithEndpoint(srv.Addr()), WithInsecure(), WithRESTEndpoint(srv.RESTEndpoint()), WithMaxAppendBytes(maxAppendBytes)})
	if err != nil {
		t.Fatal(err)
	}
	f := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: reflect.TypeFor[benchRow]()}}
	f.Setup()
	defer f.Teardown()
	ctx := context.Background()
	var done []streamDone
	emit := func(_ string, sd streamDone) { done = append(done, sd) }
	failed := func(r FailedRow) { t.Errorf("refused: %+v", r) }
	f.StartBundle(ctx, emit, failed)
	const warm, n = 5_000, 45_000 // 64 KiB is about 2,600 rows; 9 MB far more than n
	rows := make([]any, warm+n)
	for i := range rows {
		rows[i] = benchRowAt(i)
	}
	for _, x := range rows[:warm] {
		if err := f.ProcessElement(ctx, x, emit, failed); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.order) != 1 {
		t.Fatalf("after %d rows: destinations %v, want one", warm, f.order)
	}
	if err := f.drain(ctx, f.dests[f.order[0]], failed, 0); err != nil { // the first append answered
		t.Fatal(err)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for _, x := range rows[warm:] {
		if err := f.ProcessElement(ctx, x, emit, failed); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&m1)
	allocs := float64(m1.Mallocs-m0.Mallocs) / n
	t.Logf("%.4f allocations per row", allocs)
	if allocs > 0.2 {
		t.Errorf("%.2f allocations per row appended, want at most 0.2", allocs)
	}
	if err := f.FinishBundle(ctx, emit, failed); err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].Rows != warm+n {
		t.Fatalf("streams finalized %+v, want one of %d rows", done, warm+n)
	}
}
