package commitplan

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func item(g string, shard int, it string, n int64) Report {
	return Report{Group: g, Shard: shard, Item: it, Count: n}
}

func refusal(t *testing.T, err error) *Refusal {
	t.Helper()
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %v: want a *Refusal", err)
	}
	return r
}

// TestFixedShards: under fixed sharding each expected group's items come
// in shard order with their records summed; a shard whose unit is missing
// refuses the commit, naming the group and the shard, as do an item of a
// group not expected, a shard out of range and two items of one shard.
// Faults of the reports come first, in their order, then missing shards by
// group.
func TestFixedShards(t *testing.T) {
	want := Expect{Shards: 2, Groups: []string{"b", "a", "a"}}
	p, err := Make([]Report{item("b", 1, "t3", 3), item("a", 0, "t1", 1), item("b", 0, "t2", 2), item("a", 1, "t4", 4)}, want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Groups, []string{"a", "b"}) || !reflect.DeepEqual(p.Items, map[string][]string{"a": {"t1", "t4"}, "b": {"t2", "t3"}}) ||
		!reflect.DeepEqual(p.Counts, map[string]int64{"a": 5, "b": 5}) {
		t.Fatalf("plan %+v", p)
	}
	for _, c := range []struct {
		reports []Report
		want    Refusal
		says    string
	}{
		{[]Report{item("c", 0, "t1", 1)}, Refusal{Kind: Unknown, Group: "c", Shard: 0, Shards: 2, Item: "t1"}, `t1 of "c", a group no unit was expected to write`},
		{[]Report{item("a", 2, "t1", 1)}, Refusal{Kind: BadShard, Group: "a", Shard: 2, Shards: 2, Item: "t1"}, `t1 of "a" has shard 2, want one of [0, 2)`},
		{[]Report{item("a", -1, "t1", 1)}, Refusal{Kind: BadShard, Group: "a", Shard: -1, Shards: 2, Item: "t1"}, "has shard -1"},
		{[]Report{item("a", 1, "t1", 1), item("a", 1, "t2", 1)}, Refusal{Kind: Twice, Group: "a", Shard: 1, Shards: 2, Item: "t2", Other: "t1"}, `shard 1 of "a" was written twice (t1 and t2)`},
		{[]Report{item("a", 0, "t1", 1), item("a", 1, "t2", 1), item("b", 1, "t3", 1)}, Refusal{Kind: Missing, Group: "b", Shard: 0, Shards: 2}, `shard 0 of 2 of "b" has no item (its unit failed)`},
		{nil, Refusal{Kind: Missing, Group: "a", Shard: 0, Shards: 2}, `shard 0 of 2 of "a"`},
	} {
		_, err := Make(c.reports, want)
		if r := refusal(t, err); !reflect.DeepEqual(*r, c.want) || !strings.Contains(r.Error(), c.says) {
			t.Errorf("%v: refusal %+v (%v), want %+v saying %q", c.reports, r, r, c.want, c.says)
		}
	}
}

// TestMissingBundle: under a runner's sharding the commit cannot count
// bundles, so it needs evidence: a group that began (a marker a failing
// bundle removed, a table a bundle made) without any report is refused,
// naming the group and the evidence; one report of it, even one that made
// nothing, is enough. Without evidence, no report is an empty write.
func TestMissingBundle(t *testing.T) {
	began := Expect{Began: map[string]string{"t": "its staging table exists"}}
	_, err := Make([]Report{item("u", Unsharded, "s1", 5)}, began)
	r := refusal(t, err)
	if r.Kind != Missing || r.Group != "t" || r.Shard != Unsharded || r.Error() != `no unit reported of "t", but its staging table exists` {
		t.Errorf("refusal %+v: %v", r, r)
	}
	p, err := Make([]Report{{Group: "t", Shard: Unsharded}}, began)
	if err != nil || !reflect.DeepEqual(p.Groups, []string{"t"}) || len(p.Items["t"]) != 0 || p.Counts["t"] != 0 {
		t.Errorf("a report that made nothing: plan %+v, %v", p, err)
	}
	if p, err := Make(nil, Expect{}); err != nil || len(p.Groups) != 0 {
		t.Errorf("no report, no evidence: plan %+v, %v; want an empty plan", p, err)
	}
}

// TestFailuresRefuse: a unit that passed its failure on refuses the
// commit whatever else came, every failure counted once, the first in
// order named.
func TestFailuresRefuse(t *testing.T) {
	reports := []Report{item("", Unsharded, "f1", 3), {Shard: Unsharded, Err: "z: bad"}, {Shard: 1, Err: "b: bad"}, {Shard: Unsharded, Err: "z: bad"}}
	_, err := Make(reports, Expect{})
	r := refusal(t, err)
	if r.Kind != Failed || !reflect.DeepEqual(r.Failures, []string{"b: bad", "z: bad"}) || r.Error() != "b: bad (and 1 more bundles failed)" {
		t.Errorf("refusal %+v: %v", r, r)
	}
	if s := FailureSummary(nil); s != "" {
		t.Errorf("FailureSummary(nil) = %q", s)
	}
}

// TestDuplicateDelivery: a report delivered twice (a runner giving a
// bundle's output again) is one report: its item committed once and its
// records counted once. The same item reported otherwise (another count,
// another shard) is refused.
func TestDuplicateDelivery(t *testing.T) {
	once, err := Make([]Report{item("t", Unsharded, "s1", 10), item("t", Unsharded, "s2", 5)}, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	twice, err := Make([]Report{item("t", Unsharded, "s1", 10), item("t", Unsharded, "s2", 5), item("t", Unsharded, "s1", 10)}, Expect{})
	if err != nil || !reflect.DeepEqual(once, twice) || twice.Counts["t"] != 15 {
		t.Errorf("delivered twice: %+v, %v; want %+v (15 records)", twice, err, once)
	}
	fixed := Expect{Shards: 2, Groups: []string{""}}
	if p, err := Make([]Report{item("", 0, "a", 1), item("", 1, "b", 2), item("", 0, "a", 1)}, fixed); err != nil || !reflect.DeepEqual(p.Items[""], []string{"a", "b"}) || p.Counts[""] != 3 {
		t.Errorf("fixed shards delivered twice: %+v, %v", p, err)
	}
	_, err = Make([]Report{item("t", Unsharded, "s1", 10), item("t", Unsharded, "s1", 7)}, Expect{})
	if r := refusal(t, err); r.Kind != Conflict || r.Error() != `s1 was reported twice, unlike: group "t", 10 records, then group "t", 7 records` {
		t.Errorf("refusal %+v: %v", r, r)
	}
	_, err = Make([]Report{item("", 0, "a", 1), item("", 1, "a", 1)}, fixed)
	if r := refusal(t, err); r.Kind != Conflict || !strings.Contains(r.Error(), "shard 0, 1 records, then shard 1, 1 records") {
		t.Errorf("refusal %+v: %v", r, r)
	}
}

// TestRetriedCommit: a retried commit step, given the same reports in
// another order and with some delivered again, makes the same plan under
// the same key, so it commits (or names) the same items; and a store's
// answer that every item was committed before is an earlier attempt's
// success, none is a commit still to make, and a part is refused.
func TestRetriedCommit(t *testing.T) {
	var reports []Report
	for i, name := range []string{"s3", "s1", "s4", "s2", "s5"} {
		reports = append(reports, item("t", Unsharded, name, int64(i+1)), item("u", Unsharded, "u-"+name, 1))
	}
	first, err := Make(reports, Expect{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first.Items["t"], []string{"s1", "s2", "s3", "s4", "s5"}) || first.Counts["t"] != 15 {
		t.Fatalf("plan %+v", first)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		again := append([]Report(nil), reports...)
		again = append(again, reports[rng.IntN(len(reports))])
		rng.Shuffle(len(again), func(i, j int) { again[i], again[j] = again[j], again[i] })
		p, err := Make(again, Expect{})
		if err != nil || !reflect.DeepEqual(p, first) || p.Key("t") != first.Key("t") {
			t.Fatalf("retry %d: %+v, %v; want %+v", i, p, err, first)
		}
	}
	if first.Key("t") == first.Key("u") || first.Key("t") == (Plan{Items: map[string][]string{"t": {"s1", "s2"}}}).Key("t") {
		t.Error("keys of other items are equal")
	}
	items := first.Items["t"]
	if all, err := Retried(items, []string{"s5", "s4", "s3", "s2", "s1"}); !all || err != nil {
		t.Errorf("all committed before: %v, %v; want done", all, err)
	}
	if all, err := Retried(items, nil); all || err != nil {
		t.Errorf("none committed before: %v, %v; want a commit to make", all, err)
	}
	all, err := Retried(items, []string{"s2"})
	if all || err == nil || !strings.Contains(err.Error(), "1 of 5 items were committed before (s2), 4 not (s1)") {
		t.Errorf("a part committed before: %v, %v; want an error naming s2 and s1", all, err)
	}
}
