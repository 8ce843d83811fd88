package idcheck_test

import (
	"testing"

	"github.com/sdfio/sdfio/internal/flinksuite/idcheck"
)

// TestCompare: the check fails on a missing, a duplicated or an
// unexpected id and on a wrong count, and passes on an exact multiset in
// any order.
func TestCompare(t *testing.T) {
	want := []string{"a", "b", "c"}
	for _, c := range []struct {
		got                  []string
		ok                   bool
		missing, dup, unexpd int
	}{
		{[]string{"c", "a", "b"}, true, 0, 0, 0},
		{[]string{"a", "b"}, false, 1, 0, 0},
		{[]string{"a", "b", "c", "b"}, false, 0, 1, 0},
		{[]string{"a", "b", "b"}, false, 1, 1, 0},
		{[]string{"a", "b", "c", "d"}, false, 0, 0, 1},
		{nil, false, 3, 0, 0},
	} {
		d := idcheck.Compare(c.got, want)
		if d.OK() != c.ok || d.Missing != c.missing || d.Duplicated != c.dup || d.Unexpected != c.unexpd || (d.Err("x") == nil) != c.ok {
			t.Errorf("compare(%q) = %+v, err %v", c.got, d, d.Err("x"))
		}
	}
}
