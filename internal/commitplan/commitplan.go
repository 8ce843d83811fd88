// Package commitplan is the rule by which the commit step of a batch write
// decides whether it may commit, shared by avroio's finalize step and
// bigqueryio's commit step ("commit once every bundle is done").
//
// A write's units of work (the bundles of a runner, or the bundle of each
// fixed shard) each report what they made ready to commit: an item (a
// temporary file, a PENDING write stream) of a group (a destination, a
// table), or the failure they passed on instead of failing (a record that
// cannot be written fails every attempt alike, so a runner's retry could
// not help). Only the units the runner committed reach the commit step,
// and some runners (Prism v2.77 and v2.78) run it after a unit failed,
// with the reports of the others. Make commits only on evidence that no
// unit is missing, and otherwise refuses, naming what is missing:
//
//   - No report carries a failure (Failed).
//   - Under fixed sharding (Expect.Shards n), every group expected has
//     exactly one item for each shard in [0, n) (Missing, Twice,
//     BadShard), and no item belongs to another group (Unknown): every
//     shard gets a unit of its own, items or not, so the commit knows how
//     many it must see.
//   - Under a runner's sharding, the number of bundles is not known; a
//     group that evidence outside the reports shows to have begun
//     (Expect.Began: a marker a failing bundle removes, a table a bundle
//     made) must have at least one report (Missing).
//   - A report delivered twice is one report; one item reported with two
//     record counts is refused (Conflict).
//
// What no report and no evidence shows is not covered: under a runner's
// sharding, a bundle that failed while others of the same group
// committed, on a runner that then runs the commit step anyway, is not
// seen. (Bundles have no identity that survives a retry, so a mark left
// by a failed attempt cannot be told from one whose retry committed.)
//
// The plan is the same for the same reports in any order, with any
// duplicates: a retried commit step commits the same items in the same
// order, under the same Key, and Retried tells a store's answer that an
// earlier attempt committed them all from a partial commit.
//
// The package has no Beam, no filesystem and no service in it: the IOs
// turn their results into Reports, their evidence into Expect, and a
// Refusal into their own error.
package commitplan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Unsharded is Report.Shard of a unit of a runner's sharding.
const Unsharded = -1

// Report is what one unit of a write reported to the commit step.
type Report struct {
	// Group is the item's destination (a file prefix, a table); "" for a
	// write with one.
	Group string
	// Shard is the unit's shard under fixed sharding, Unsharded otherwise.
	Shard int
	// Item is what the unit made ready to commit (a temporary file's path,
	// a write stream's name); "" for a unit that made nothing (every
	// record of it went elsewhere), which still counts as a report.
	Item string
	// Count is the records in Item.
	Count int64
	// Err, when set, is why the unit could not write its records: the
	// write fails, and nothing of it is committed.
	Err string
}

// Expect is what the commit step must see before it commits.
type Expect struct {
	// Shards, when above 0, is the fixed number of shards: each group of
	// Groups has exactly one item for each shard in [0, Shards), and no
	// other group has any.
	Shards int
	// Groups are the groups expected under fixed sharding (duplicates
	// allowed).
	Groups []string
	// Began maps a group that evidence outside the reports shows had
	// records (a bundle began writing it) to that evidence, said as a
	// phrase ("the temporary directory's marker is gone"): such a group
	// must have at least one report.
	Began map[string]string
}

// Plan is what a commit step commits.
type Plan struct {
	// Groups are the groups with reports (and, under fixed sharding, the
	// groups expected), sorted.
	Groups []string
	// Items holds each group's items: in shard order under fixed
	// sharding, else sorted. A group whose reports made nothing has none.
	Items map[string][]string
	// Counts holds each group's records, each item counted once.
	Counts map[string]int64
}

// Kind is why a commit step refuses to commit.
type Kind int

const (
	// Failed: a unit reported a failure (Refusal.Failures).
	Failed Kind = iota + 1
	// Unknown: an item of a group not expected (fixed sharding).
	Unknown
	// BadShard: an item of a shard outside [0, Expect.Shards).
	BadShard
	// Twice: two items of one shard (Item and Other).
	Twice
	// Conflict: one item reported twice, otherwise than the same report
	// again: with two counts, or of two groups or shards (OtherGroup,
	// OtherShard, OtherCount are the first report's).
	Conflict
	// Missing: a shard without its item (fixed sharding), or a group that
	// began without any report (Refusal.Evidence).
	Missing
)

// Refusal is why a commit step must not commit: the first fault found
// (failures first, then the reports in the order given, then missing
// shards or groups in sorted order).
type Refusal struct {
	Kind  Kind
	Group string
	// Shard is the shard at fault (Unsharded for a group that began).
	Shard int
	// Shards is Expect.Shards.
	Shards int
	// Item is the item at fault; Other, the shard's other item (Twice).
	Item, Other string
	// Count is Item's count (Conflict); OtherGroup, OtherShard and
	// OtherCount, those of its first report.
	Count      int64
	OtherGroup string
	OtherShard int
	OtherCount int64
	// Failures are the failures reported, sorted (Failed).
	Failures []string
	// Evidence is Expect.Began's evidence of the group (Missing).
	Evidence string
}

// Error says what is missing or wrong, naming the group, shard and items.
func (r *Refusal) Error() string {
	g := ""
	if r.Group != "" {
		g = fmt.Sprintf(" of %q", r.Group)
	}
	switch r.Kind {
	case Failed:
		return FailureSummary(r.Failures)
	case Unknown:
		return fmt.Sprintf("%s%s, a group no unit was expected to write", r.Item, g)
	case BadShard:
		return fmt.Sprintf("%s%s has shard %d, want one of [0, %d)", r.Item, g, r.Shard, r.Shards)
	case Twice:
		return fmt.Sprintf("shard %d%s was written twice (%s and %s)", r.Shard, g, r.Other, r.Item)
	case Conflict:
		return fmt.Sprintf("%s was reported twice, unlike: %s, then %s", r.Item, placed(r.OtherGroup, r.OtherShard, r.OtherCount), placed(r.Group, r.Shard, r.Count))
	case Missing:
		if r.Shard == Unsharded {
			return fmt.Sprintf("no unit reported%s, but %s", g, r.Evidence)
		}
		return fmt.Sprintf("shard %d of %d%s has no item (its unit failed)", r.Shard, r.Shards, g)
	}
	return fmt.Sprintf("refusal of kind %d", r.Kind)
}

// placed says where a report put an item, for Conflict.
func placed(group string, shard int, count int64) string {
	s := fmt.Sprintf("%d records", count)
	if shard != Unsharded {
		s = fmt.Sprintf("shard %d, ", shard) + s
	}
	if group != "" {
		s = fmt.Sprintf("group %q, ", group) + s
	}
	return s
}

// FailureSummary is the failures of units (errs) said in one line: the
// first in order and how many more there were; "" for none. It sorts errs.
func FailureSummary(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	sort.Strings(errs)
	if len(errs) > 1 {
		return fmt.Sprintf("%s (and %d more bundles failed)", errs[0], len(errs)-1)
	}
	return errs[0]
}

// Make checks reports against want and returns what to commit, or a
// *Refusal. It is pure: the same reports in any order give the same plan.
func Make(reports []Report, want Expect) (Plan, error) {
	var failures []string
	seenErr := map[string]bool{}
	for _, r := range reports {
		if r.Err != "" && !seenErr[r.Err] {
			seenErr[r.Err] = true
			failures = append(failures, r.Err)
		}
	}
	if len(failures) > 0 {
		sort.Strings(failures)
		return Plan{}, &Refusal{Kind: Failed, Shard: Unsharded, Failures: failures}
	}
	p := Plan{Items: map[string][]string{}, Counts: map[string]int64{}}
	var slots map[string][]string // fixed sharding: each group's items by shard
	if want.Shards > 0 {
		slots = map[string][]string{}
		for _, g := range want.Groups {
			if slots[g] == nil {
				slots[g] = make([]string, want.Shards)
			}
		}
	}
	type seen struct {
		group string
		shard int
		count int64
	}
	items := map[string]seen{} // by item
	reported := map[string]bool{}
	for _, r := range reports {
		reported[r.Group] = true
		if r.Item == "" {
			if slots != nil && slots[r.Group] == nil {
				return Plan{}, &Refusal{Kind: Unknown, Group: r.Group, Shard: r.Shard, Shards: want.Shards}
			}
			continue
		}
		if s, dup := items[r.Item]; dup {
			if s == (seen{r.Group, r.Shard, r.Count}) {
				continue // the same report delivered again
			}
			return Plan{}, &Refusal{Kind: Conflict, Group: r.Group, Shard: r.Shard, Shards: want.Shards, Item: r.Item, Count: r.Count,
				OtherGroup: s.group, OtherShard: s.shard, OtherCount: s.count}
		}
		if slots != nil {
			group, known := slots[r.Group]
			switch {
			case !known:
				return Plan{}, &Refusal{Kind: Unknown, Group: r.Group, Shard: r.Shard, Shards: want.Shards, Item: r.Item}
			case r.Shard < 0 || r.Shard >= want.Shards:
				return Plan{}, &Refusal{Kind: BadShard, Group: r.Group, Shard: r.Shard, Shards: want.Shards, Item: r.Item}
			case group[r.Shard] != "":
				return Plan{}, &Refusal{Kind: Twice, Group: r.Group, Shard: r.Shard, Shards: want.Shards, Item: r.Item, Other: group[r.Shard]}
			}
			group[r.Shard] = r.Item
		} else {
			p.Items[r.Group] = append(p.Items[r.Group], r.Item)
		}
		items[r.Item] = seen{r.Group, r.Shard, r.Count}
		p.Counts[r.Group] += r.Count
	}
	for g := range slots {
		reported[g] = true
	}
	for g := range reported {
		p.Groups = append(p.Groups, g)
	}
	sort.Strings(p.Groups)
	if slots != nil {
		for _, g := range p.Groups {
			for i, item := range slots[g] {
				if item == "" {
					return Plan{}, &Refusal{Kind: Missing, Group: g, Shard: i, Shards: want.Shards}
				}
			}
			p.Items[g] = slots[g]
		}
	} else {
		for _, g := range p.Groups {
			sort.Strings(p.Items[g])
		}
	}
	began := make([]string, 0, len(want.Began))
	for g := range want.Began {
		began = append(began, g)
	}
	sort.Strings(began)
	for _, g := range began {
		if !reported[g] {
			return Plan{}, &Refusal{Kind: Missing, Group: g, Shard: Unsharded, Evidence: want.Began[g]}
		}
	}
	return p, nil
}

// Key is a digest of the plan's items of group (the group and its items
// in order), the same for every attempt of a commit step given the same
// reports: a name for what the commit makes (a copy job, say), so that a
// retried attempt finds what an earlier one made.
func (p Plan) Key(group string) string {
	h := sha256.New()
	h.Write([]byte(group))
	for _, item := range p.Items[group] {
		h.Write([]byte{0})
		h.Write([]byte(item))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Retried judges the answer of a store to an all-or-nothing commit of
// items that says some of them were committed before (done): all of them
// is a retried commit whose earlier attempt applied and whose answer was
// lost, which is success (true); none is a commit still to make (false);
// some but not all cannot come of an all-or-nothing commit of these items,
// and is an error naming the first item committed and the first not.
func Retried(items, done []string) (bool, error) {
	committed := map[string]bool{}
	for _, d := range done {
		committed[d] = true
	}
	var yes, no []string
	for _, it := range items {
		if committed[it] {
			yes = append(yes, it)
		} else {
			no = append(no, it)
		}
	}
	switch {
	case len(yes) == 0:
		return false, nil
	case len(no) == 0:
		return true, nil
	}
	return false, fmt.Errorf("%d of %d items were committed before (%s), %d not (%s): not an earlier attempt of this commit",
		len(yes), len(items), strings.Join(yes[:1], ""), len(no), strings.Join(no[:1], ""))
}
