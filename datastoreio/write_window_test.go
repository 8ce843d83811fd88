package datastoreio_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/internal/streamtest"
)

func init() {
	register.Function1x2(wStamp)
	register.Function1x2(wStampKey)
	register.DoFn1x1[int64, wEnt](&wSeqFn{})
}

// wStamp gives entity N the event time N seconds.
func wStamp(e wEnt) (beam.EventTime, wEnt) { return beam.EventTime(e.N * 1000), e }

func wStampKey(k *datastore.Key) (beam.EventTime, *datastore.Key) {
	return beam.EventTime(k.ID % 1000 * 1000), k
}

// wSeqFn makes entity i of Kind in NS from element i of a sequence.
type wSeqFn struct{ NS, Kind string }

func (fn *wSeqFn) ProcessElement(i int64) wEnt { return wMake(fn.NS, fn.Kind, int(i), 0) }

// TestWriteWindowed writes, deletes by entity and deletes by key
// PCollections in fixed, sliding and session windows: each ends as it
// must (an entity of three sliding windows is upserted three times, which
// leaves it once).
func TestWriteWindowed(t *testing.T) {
	project, c := wEmulator(t)
	ns := dstest.Namespace(t)
	ctx := context.Background()
	const n = 60
	windows := map[string]*window.Fn{
		"Fixed":   window.NewFixedWindows(10 * time.Second),
		"Sliding": window.NewSlidingWindows(time.Second, 3*time.Second),
		"Session": window.NewSessions(1500 * time.Millisecond),
	}
	// Entities to delete: [0, n) of each kind "WDel"+name, deleted half
	// by entity, half by key.
	for name := range windows {
		all := wWant([]string{ns}, "WDel"+name, 0, n, 0)
		var keys []*datastore.Key
		for _, e := range all {
			keys = append(keys, e.K)
		}
		if _, err := c.PutMulti(ctx, keys, all); err != nil {
			t.Fatal(err)
		}
	}
	p, s := beam.NewPipelineWithRoot()
	imp := beam.Impulse(s)
	opt := datastoreio.WithRampupThrottlingDisabled()
	for name, fn := range windows {
		s := s.Scope(name)
		put := beam.ParDo(s, wStamp, beam.ParDo(s, &wGenFn{NS: []string{ns}, Kind: "WWin" + name, From: 0, To: n}, imp))
		datastoreio.Write(s, project, beam.WindowInto(s, fn, put), opt)
		del := beam.ParDo(s, wStamp, beam.ParDo(s, &wGenFn{NS: []string{ns}, Kind: "WDel" + name, From: 0, To: n / 2}, imp))
		datastoreio.DeleteEntity(s, project, beam.WindowInto(s, fn, del), opt)
		keys := beam.ParDo(s, wStampKey, beam.ParDo(s, &wGenKeyFn{NS: ns, Kind: "WDel" + name, From: n / 2, To: n - 10}, imp))
		datastoreio.DeleteKey(s, project, beam.WindowInto(s, fn, keys), opt)
	}
	wRun(t, p)
	for name := range windows {
		wSameMultiset(t, name+" writes", wReadAll(t, c, ns, "WWin"+name), wWant([]string{ns}, "WWin"+name, 0, n, 0))
		wSameMultiset(t, name+" deletes", wReadAll(t, c, ns, "WDel"+name), wWant([]string{ns}, "WDel"+name, n-10, n, 0))
	}
}

// TestWriteUnbounded writes an unbounded PCollection (a periodic sequence
// of 30 entities over 3 s, in fixed windows of one second): entities are
// there while the pipeline runs (each bundle commits its mutations), and
// at the end all of them, once.
func TestWriteUnbounded(t *testing.T) {
	project, c := wEmulator(t)
	ns := dstest.Namespace(t)
	const n = 30
	p, s := beam.NewPipelineWithRoot()
	seq := streamtest.Sequence(s, n, 100*time.Millisecond)
	ents := beam.ParDo(s, &wSeqFn{NS: ns, Kind: "WStream"}, seq)
	datastoreio.Write(s, project, beam.WindowInto(s, window.NewFixedWindows(time.Second), ents), datastoreio.WithRampupThrottlingDisabled())

	stop := streamtest.WatchPartial(func() int {
		keys, _ := c.GetAll(context.Background(), datastore.NewQuery("WStream").Namespace(ns).KeysOnly(), nil)
		return len(keys)
	}, n)
	wRun(t, p)
	if !stop() {
		t.Error("no poll saw the kind partly written: entities waited for the end of the input")
	}
	wSameMultiset(t, "streamed", wReadAll(t, c, ns, "WStream"), wWant([]string{ns}, "WStream", 0, n, 0))
}
