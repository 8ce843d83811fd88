package bqwrite_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"google.golang.org/api/iterator"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/streamtest"
	"github.com/sdfio/sdfio/internal/workertest"
)

// Change is a CDC change of the tests: the row of key ID, with the
// sequence number Seq, deleted or upserted.
type Change struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
	Seq  int64  `bigquery:"seq"`
	Del  bool   `bigquery:"del"`
}

func init() {
	beam.RegisterType(reflect.TypeFor[Change]())
	register.Function1x1(changeOf)
	register.Function1x1(changeMutation)
	register.Function1x1(badMutation)
	register.Function1x1(unorderedMutation)
	register.Function2x0(tickChanges)
	register.Emitter1[Change]()
}

// changesPerTick is how many changes tickChanges makes of one tick.
const changesPerTick = 500

// tickChanges emits the changes of tick i of a periodic sequence:
// changeOf(i*changesPerTick) on. (Few ticks: Beam v2.77's periodic
// sequence races its watermark estimator with the runner's progress
// requests, which -race reports when it ticks thousands of times.)
func tickChanges(i int64, emit func(Change)) {
	for j := range int64(changesPerTick) {
		emit(changeOf(i*changesPerTick + j))
	}
}

// unorderedMutation upserts a Change without a sequence number.
func unorderedMutation(c Change) bqwrite.RowMutation {
	return bqwrite.RowMutation{Type: bqwrite.Upsert}
}

// cdcKeys is how many keys the changes of changeOf spread over.
const cdcKeys = 500

// changeOf is change i of the CDC tests: keys repeat, sequence numbers
// are a permutation of 0..10006 (10007 is prime), so that the changes of a
// key come out of order, and about one in four is a delete.
func changeOf(i int64) Change {
	h := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	h ^= h >> 29
	seq := (i * 7919) % 10007
	return Change{ID: int64(h % cdcKeys), Name: fmt.Sprintf("v%d", i), Seq: seq, Del: h>>40%4 == 0}
}

// changeMutation is the RowMutation of a Change, its sequence number in
// two sections.
func changeMutation(c Change) bqwrite.RowMutation {
	typ := bqwrite.Upsert
	if c.Del {
		typ = bqwrite.Delete
	}
	return bqwrite.RowMutation{Type: typ, SequenceNumber: bqwrite.SequenceNumber(uint64(c.Seq>>8), uint64(c.Seq&0xff))}
}

// badMutation gives change 3 a sequence number the service refuses.
func badMutation(c Change) bqwrite.RowMutation {
	m := changeMutation(c)
	if c.Name == "v3" {
		m.SequenceNumber = "7/G"
	}
	return m
}

// expectedCDC is the table changes 0..n-1 leave, computed without the
// pipeline: for each key, the change of the highest sequence number,
// unless it is a delete; as sorted "id name seq" lines.
func expectedCDC(n int) []string {
	last := map[int64]Change{}
	for i := 0; i < n; i++ {
		c := changeOf(int64(i))
		if p, ok := last[c.ID]; !ok || c.Seq > p.Seq {
			last[c.ID] = c
		}
	}
	var out []string
	for _, c := range last {
		if !c.Del {
			out = append(out, fmt.Sprintf("%d %s %d", c.ID, c.Name, c.Seq))
		}
	}
	sort.Strings(out)
	return out
}

// readCDC reads table back with the official client over the Storage Read
// API, as sorted "id name seq" lines.
func readCDC(t *testing.T, srv *bqtest.Server, table string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := bigquery.NewClient(ctx, "p", srv.RESTClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.EnableStorageReadClient(ctx, srv.ClientOptions()...); err != nil {
		t.Fatal(err)
	}
	it := c.DatasetInProject("p", "d").Table(strings.TrimPrefix(table, "p.d.")).Read(ctx)
	var out []string
	for {
		var r Change
		err := it.Next(&r)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("reading %s back: %v", table, err)
		}
		if r.Del {
			t.Errorf("%s holds a deleted row: %+v", table, r)
		}
		out = append(out, fmt.Sprintf("%d %s %d", r.ID, r.Name, r.Seq))
	}
	sort.Strings(out)
	return out
}

// checkCDC fails unless table holds exactly the rows of want (each key
// once).
func checkCDC(t *testing.T, srv *bqtest.Server, table string, want []string) {
	t.Helper()
	got := readCDC(t, srv, table)
	if len(got) != len(want) {
		t.Errorf("%s: %d rows, want %d", table, len(got), len(want))
	}
	missing, extra := diffLines(want, got)
	if len(missing)+len(extra) > 0 {
		t.Errorf("%s: %d rows missing (%q...), %d not expected (%q...)", table, len(missing), missing[:min(len(missing), 5)], len(extra), extra[:min(len(extra), 5)])
	}
}

// diffLines returns the lines of want not in got and those of got not in
// want, counting repeats.
func diffLines(want, got []string) (missing, extra []string) {
	n := map[string]int{}
	for _, w := range want {
		n[w]++
	}
	for _, g := range got {
		n[g]--
	}
	for k, c := range n {
		for ; c > 0; c-- {
			missing = append(missing, k)
		}
		for ; c < 0; c++ {
			extra = append(extra, k)
		}
	}
	return missing, extra
}

func cdcOpts(srv *bqtest.Server, more ...bqwrite.WriteOption) []bqwrite.WriteOption {
	return writeOpts(srv, append([]bqwrite.WriteOption{bqwrite.WithAtLeastOnce(), bqwrite.WithRowMutation(changeMutation),
		bqwrite.WithPrimaryKey("id"), bqwrite.WithMaxAppendBytes(2000)}, more...)...)
}

// TestWriteCDC writes 10,000 changes of 500 keys, their sequence numbers
// out of order, from a bounded input over several bundles, into a table
// CreateIfNeeded makes with a primary key, with no faults and under
// appends answered with errors after they were applied, in the answer or
// by a connection reset, and failing before: the table read back holds,
// for each key, the change of the highest sequence number unless it is a
// delete, once.
func TestWriteCDC(t *testing.T) {
	const n = 10_000
	want := expectedCDC(n)
	changes := make([]Change, n)
	for i := range changes {
		changes[i] = changeOf(int64(i))
	}
	for name, f := range map[string]bqtest.WriteFaults{
		"none":             {},
		"answers lost":     {AppendUnavailableShare: 0.2, AfterWrite: true, InBand: true},
		"reset after":      {AppendUnavailableShare: 0.2, AfterWrite: true},
		"reset before":     {AppendUnavailableShare: 0.2},
		"connection close": {CloseAfterRequests: 3},
	} {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			srv.SetWriteFaults(f)
			p, s := beam.NewPipelineWithRoot()
			col := beam.Reshuffle(s, beam.Create(s, anys(changes)...))
			res := bqwrite.Write(s, "p.d.cdc", col, cdcOpts(srv)...)
			passert.Empty(s, res.FailedRows)
			run(t, p)
			checkCDC(t, srv, "p.d.cdc", want)
			st := srv.WriteStats()
			if (f.AppendUnavailableShare > 0) != (st.InjectedFailures > 0) || (f.CloseAfterRequests > 0) != (st.InjectedCloses > 0) || st.StreamsCreated != 0 || st.Commits != 0 {
				t.Errorf("server %+v: want failures as injected, _default only, no commit", st)
			}
			if st.RowsAppended < n {
				t.Errorf("server applied %d changes, want at least %d", st.RowsAppended, n)
			}
		})
	}
}

// TestWriteCDCUnbounded writes the 10,000 changes from an unbounded input
// (a periodic sequence of 20 ticks of 500 changes, while appends' answers
// are lost after the write): changes are applied while the input runs,
// and the table ends as for a bounded one.
func TestWriteCDCUnbounded(t *testing.T) {
	const n = 10_000
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	srv.SetWriteFaults(bqtest.WriteFaults{AppendUnavailableShare: 0.1, AfterWrite: true})
	p, s := beam.NewPipelineWithRoot()
	changes := beam.ParDo(s, tickChanges, streamtest.Sequence(s, n/changesPerTick, 100*time.Millisecond))
	res := bqwrite.Write(s, "p.d.cdc_stream", changes, cdcOpts(srv)...)
	passert.Empty(s, res.FailedRows)
	stop := streamtest.WatchPartial(func() int { return int(srv.WriteStats().RowsAppended) }, n)
	run(t, p)
	if !stop() {
		t.Error("no poll saw the table partly written: changes waited for the end of the input")
	}
	checkCDC(t, srv, "p.d.cdc_stream", expectedCDC(n))
}

// TestWriteCDCRefusedRow: a change whose sequence number the service
// would refuse goes to FailedRows, named, and the others are applied.
func TestWriteCDCRefusedRow(t *testing.T) {
	const n = 300
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	changes := make([]Change, n)
	for i := range changes {
		changes[i] = changeOf(int64(i))
	}
	bad := changes[3]
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.cdc_bad", beam.Create(s, anys(changes)...),
		writeOpts(srv, bqwrite.WithAtLeastOnce(), bqwrite.WithRowMutation(badMutation), bqwrite.WithPrimaryKey("id"))...)
	passert.Equals(s, beam.ParDo(s, failedText, res.FailedRows), fmt.Sprintf("p.d.cdc_bad {\"ID\":%d,\"Name\":\"v3\",\"Seq\":%d,\"Del\":%v}", bad.ID, bad.Seq, bad.Del))
	run(t, p)
	got, err := srv.TableRows("p.d.cdc_bad")
	if err != nil || len(got) == 0 {
		t.Fatalf("table: %d rows, %v", len(got), err)
	}
}

// TestWriteCDCConstruction: what the service refuses is refused when the
// pipeline is built, naming the option.
func TestWriteCDCConstruction(t *testing.T) {
	nested := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "name", Type: bigquery.StringFieldType},
		{Name: "seq", Type: bigquery.IntegerFieldType}, {Name: "del", Type: bigquery.BooleanFieldType},
		{Name: "tags", Type: bigquery.StringFieldType, Repeated: true},
		{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}}}}
	pseudo := append(bigquery.Schema{{Name: "_change_type", Type: bigquery.StringFieldType}}, nested[:4]...)
	mut, alo, pk := bqwrite.WithRowMutation(changeMutation), bqwrite.WithAtLeastOnce(), bqwrite.WithPrimaryKey("id")
	never := bqwrite.WithCreateDisposition(bqwrite.CreateNever)
	for _, c := range []struct {
		opts []bqwrite.WriteOption
		want string // "" for none
	}{
		{[]bqwrite.WriteOption{alo, mut, pk}, ""},
		{[]bqwrite.WriteOption{alo, mut, never}, ""},
		{[]bqwrite.WriteOption{pk}, ""},
		{[]bqwrite.WriteOption{mut, pk}, "WithRowMutation(github.com/sdfio/sdfio/bigqueryio/bqwrite_test.changeMutation) needs WithAtLeastOnce"},
		{[]bqwrite.WriteOption{alo, mut}, "has no primary key, which CDC changes are applied by: give WithPrimaryKey"},
		{[]bqwrite.WriteOption{alo, bqwrite.WithRowMutation(simpleID), pk}, "want a func(bqwrite_test.Change) bqwrite.RowMutation"},
		{[]bqwrite.WriteOption{alo, mut, pk, never}, "WithCreateDisposition(1): the table's spec (WithPrimaryKey(\"id\")) only applies to a table CreateIfNeeded creates"},
		{[]bqwrite.WriteOption{bqwrite.WithPrimaryKey("nope")}, "WithPrimaryKey(\"nope\"): column \"nope\" is not a top-level column"},
		{[]bqwrite.WriteOption{bqwrite.WithPrimaryKey("id", "ID")}, "column ID named twice"},
		{[]bqwrite.WriteOption{bqwrite.WithPrimaryKey()}, "WithPrimaryKey(): 0 columns, a primary key has 1 to 16"},
		{[]bqwrite.WriteOption{bqwrite.WithSchema(nested), bqwrite.WithPrimaryKey("tags")}, "column tags is REPEATED STRING, which a primary key cannot hold"},
		{[]bqwrite.WriteOption{bqwrite.WithSchema(nested), bqwrite.WithPrimaryKey("rec")}, "column rec is RECORD, which a primary key cannot hold"},
		{[]bqwrite.WriteOption{bqwrite.WithSchema(pseudo), alo, mut, pk}, "the schema has a column _change_type"},
	} {
		_, s := beam.NewPipelineWithRoot()
		_, err := bqwrite.TryWrite(s, "p.d.t", beam.Create(s, Change{}), c.opts...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.opts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	if got := bqwrite.SequenceNumber(0, 255, 1<<63); got != "0/FF/8000000000000000" {
		t.Errorf("SequenceNumber: %q", got)
	}
}

// TestWriteCDCRetryKeepsOrder writes five changes of one key without
// sequence numbers, one append each, all in flight when the first one's
// answer is lost after the service applied it: the writer applies it
// again and then every append behind it again, so that the key ends with
// the last change, not the retried first.
func TestWriteCDCRetryKeepsOrder(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	srv.SetWriteFaults(bqtest.WriteFaults{AppendUnavailableCalls: 1, AfterWrite: true, InBand: true})
	var changes []Change
	for i := range 5 {
		changes = append(changes, Change{ID: 1, Name: fmt.Sprintf("v%d", i)})
	}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.cdc_order", beam.Create(s, anys(changes)...), writeOpts(srv, bqwrite.WithAtLeastOnce(),
		bqwrite.WithRowMutation(unorderedMutation), bqwrite.WithUnorderedChanges(), bqwrite.WithPrimaryKey("id"), bqwrite.WithMaxAppendBytes(25))...)
	passert.Empty(s, res.FailedRows)
	run(t, p)
	checkCDC(t, srv, "p.d.cdc_order", []string{"1 v4 0"})
	if st := srv.WriteStats(); st.InjectedFailures != 1 || st.Appends < 10 {
		t.Errorf("server %+v: want the first append failed, and it and the four behind it appended again", st)
	}
}

// TestWriteCDCWorkers writes 3,000 changes with every SDK worker a
// process of its own, as on Dataflow or Flink, while appends' answers are
// lost: WithRowMutation's function and the shared connections travel, and
// the table ends right.
func TestWriteCDCWorkers(t *testing.T) {
	const n = 3000
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	srv.SetWriteFaults(bqtest.WriteFaults{AppendUnavailableShare: 0.1, AfterWrite: true, InBand: true})
	changes := make([]Change, n)
	for i := range changes {
		changes[i] = changeOf(int64(i))
	}
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.cdc_workers", beam.Reshuffle(s, beam.Create(s, anys(changes)...)), cdcOpts(srv)...)
	if _, err := workertest.Run(t, p); err != nil {
		t.Fatal(err)
	}
	checkCDC(t, srv, "p.d.cdc_workers", expectedCDC(n))
	if st := srv.WriteStats(); st.InjectedFailures == 0 {
		t.Errorf("server %+v: no fault struck", st)
	}
}
