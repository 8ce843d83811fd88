package datastoreio_test

import (
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	register.Function1x1(itemID)
	register.Function1x1(entityItemID)
	register.Function1x1(plsID)
	datastoreio.RegisterType(reflect.TypeFor[plsItem]())
}

func itemID(it item) string { return it.id() }

// entityItemID is itemID of an item read as a *datastore.Entity.
func entityItemID(e *datastore.Entity) string {
	for _, p := range e.Properties {
		if p.Name == "N" {
			return fmt.Sprintf("%s|%s=%d", e.Key.Namespace, e.Key.String(), p.Value.(int64))
		}
	}
	return "no N: " + e.Key.String()
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestPipelineRead reads 1,000 entities on Prism with 8 splits: exact
// output, keys carried through Beam's coders, metrics.
func TestPipelineRead(t *testing.T) {
	project := loadMedium(t)
	p, s := beam.NewPipelineWithRoot()
	items := datastoreio.Read(s, project, datastoreio.NewQuery("Item"), reflect.TypeFor[item](),
		datastoreio.WithNamespace(medium.ns), datastoreio.WithNumQuerySplits(8), datastoreio.WithKeysPerSplit(3))
	passert.Equals(s, beam.ParDo(s, itemID, items), anySlice(ids(medium.items))...)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := counter(t, res, "entities"); n != 1000 {
		t.Errorf("entities metric = %d, want 1000", n)
	}
	if n := counter(t, res, "initial_splits"); n != 8 {
		t.Errorf("initial_splits metric = %d, want 8", n)
	}
	// One query per sub-range, and one more for each runner split that
	// refused the first claim of a sub-range already queried (Prism splits
	// a slow read, as under -race on a loaded machine).
	subRanges, accepted := counter(t, res, "sub_ranges"), counter(t, res, "splits_accepted")
	if q := counter(t, res, "queries"); subRanges != 7*3+1 || q < subRanges || q > subRanges+accepted {
		t.Errorf("queries metric = %d, sub_ranges %d, splits accepted %d; want %d sub-ranges, as many queries plus at most one per split",
			q, subRanges, accepted, 7*3+1)
	}
	if n := counter(t, res, "pages"); n < subRanges {
		t.Errorf("pages metric = %d, want at least one per sub-range (%d)", n, subRanges)
	}
	if n := counter(t, res, "bytes"); n < 1000*20 {
		t.Errorf("bytes metric = %d, implausibly small", n)
	}
}

// TestPipelineRunnerSplit slows every query of a kind beyond Prism's
// progress poll, so that Prism splits the running read between sub-ranges:
// a split must be accepted and the output stay exact.
func TestPipelineRunnerSplit(t *testing.T) {
	e, c := client(t)
	ns := dstest.Namespace(t)
	want := mixedItems(ns, "Slow", 60, 11)
	put(t, c, want)
	hook.reset()
	hook.set(func(h *hookState) { h.delay, h.delayKind = 600*time.Millisecond, "Slow" })
	defer hook.reset()
	p, s := beam.NewPipelineWithRoot()
	items := datastoreio.Read(s, e.Project(), datastoreio.NewQuery("Slow"), reflect.TypeFor[item](),
		datastoreio.WithNamespace(ns), datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(8), datastoreio.WithClientOptions("hook"))
	passert.Equals(s, beam.ParDo(s, itemID, items), anySlice(ids(want))...)
	res, err := ptest.RunWithMetrics(p)
	if err != nil {
		t.Fatal(err)
	}
	accepted, refused := counter(t, res, "splits_accepted"), counter(t, res, "splits_refused")
	t.Logf("%d initial splits, %d sub-ranges, %d queries: splits accepted %d, refused %d",
		counter(t, res, "initial_splits"), counter(t, res, "sub_ranges"), counter(t, res, "queries"), accepted, refused)
	if accepted < 1 {
		t.Errorf("no runner-initiated split was accepted (refused: %d)", refused)
	}
	if n := counter(t, res, "entities"); n != 60 {
		t.Errorf("entities metric = %d, want 60", n)
	}
}

// TestPipelineSeparateWorker reads through Prism with SDK workers in
// separate processes, as on Dataflow and Flink: the Range coder, the key
// coder, the entity coder (a read into *datastore.Entity, reshuffled) and
// the DoFns must reach them through the pipeline and the binary's
// registrations; the emulator through DATASTORE_EMULATOR_HOST.
func TestPipelineSeparateWorker(t *testing.T) {
	project := loadMedium(t)
	p, s := beam.NewPipelineWithRoot()
	items := datastoreio.Read(s, project, datastoreio.GQL("SELECT * FROM Item WHERE Inner.B = 'Item'"), reflect.TypeFor[item](),
		datastoreio.WithNamespace(medium.ns), datastoreio.WithNumQuerySplits(4), datastoreio.WithKeysPerSplit(2))
	passert.Equals(s, beam.ParDo(s, itemID, items), anySlice(ids(medium.items))...)
	ents := datastoreio.Read(s, project, datastoreio.NewQuery("Item"), reflect.TypeFor[*datastore.Entity](),
		datastoreio.WithNamespace(medium.ns), datastoreio.WithNumQuerySplits(2), datastoreio.WithKeysPerSplit(2))
	passert.Equals(s, beam.ParDo(s, entityItemID, beam.Reshuffle(s, ents)), anySlice(ids(medium.items))...)
	res, err := workertest.Run(t, p)
	if err != nil {
		t.Fatalf("pipeline with separate worker processes failed: %v", err)
	}
	if len(res.Workers) == 0 {
		t.Fatal("no worker process was started")
	}
	for _, w := range res.Workers {
		if w.PID == 0 || w.PID == os.Getpid() {
			t.Errorf("worker %s ran as pid %d, want a separate process", w.ID, w.PID)
		}
	}
	if n := counter(t, res, "entities"); n != 2000 {
		t.Errorf("entities metric = %d, want 2000", n)
	}
}

// plsItem loads itself (PropertyLoadSaver and KeyLoader), as Get would.
type plsItem struct {
	Key  string
	Seen string
}

func (p *plsItem) Load(props []datastore.Property) error {
	for _, pr := range props {
		if pr.Name == "N" {
			p.Seen = fmt.Sprintf("N=%d", pr.Value.(int64))
		}
	}
	return nil
}

func (p *plsItem) Save() ([]datastore.Property, error) { return nil, nil }

func (p *plsItem) LoadKey(k *datastore.Key) error {
	p.Key = k.String()
	return nil
}

func plsID(p plsItem) string { return p.Key + "=" + p.Seen[2:] }

// TestPipelinePropertyLoadSaver reads into a PropertyLoadSaver with a key
// loader.
func TestPipelinePropertyLoadSaver(t *testing.T) {
	project := loadMedium(t)
	p, s := beam.NewPipelineWithRoot()
	items := datastoreio.Read(s, project, datastoreio.NewQuery("Item"), reflect.TypeFor[plsItem](),
		datastoreio.WithNamespace(medium.ns), datastoreio.WithNumQuerySplits(3), datastoreio.WithKeysPerSplit(1))
	want := make([]any, len(medium.items))
	for i, it := range medium.items {
		want[i] = fmt.Sprintf("%s=%d", it.K.String(), it.N)
	}
	passert.Equals(s, beam.ParDo(s, plsID, items), want...)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}
