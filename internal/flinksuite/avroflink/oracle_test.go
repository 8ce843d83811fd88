package avroflink_test

import (
	"testing"

	"github.com/sdfio/sdfio/avroio"
)

// TestOracle: the oracle's comparison finds a duplicate, a missing record
// and a record changed in one field, and recordKey gives a generic record
// the key of its struct, and a record of the wrong shape a key no file
// holds.
func TestOracle(t *testing.T) {
	want := newOracle([2]int64{7, 5})
	var exact []string
	for i := int64(7); i < 12; i++ {
		exact = append(exact, eventKey(expectedEvent(i)))
	}
	changed := expectedEvent(9)
	changed.Tags = append(changed.Tags, "x")
	cases := []struct {
		name                          string
		got                           []string
		dups, missing, unexpected, ex int
	}{
		{"exact", exact, 0, 0, 0, 0},
		{"a duplicate", append([]string{exact[3]}, exact...), 1, 0, 0, 1},
		{"a missing record", exact[1:], 0, 1, 0, 0},
		{"one lost, one twice", append([]string{exact[2]}, exact[1:]...), 1, 1, 0, 1},
		{"a changed field", append(append([]string{}, exact[:2]...), eventKey(changed), exact[3], exact[4]), 0, 1, 1, 0},
		{"nothing", nil, 0, 5, 0, 0},
	}
	for _, c := range cases {
		dups, missing, unexpected, extra := want.diff(c.got)
		if len(dups) != c.dups || len(missing) != c.missing || len(unexpected) != c.unexpected || extra != c.ex {
			t.Errorf("%s: duplicated %v (%d extra), missing %v, unexpected %v", c.name, dups, extra, missing, unexpected)
		}
	}

	e := expectedEvent(10)
	r := avroio.Record{"id": e.ID, "name": e.Name, "score": e.Score, "tags": []any{"t0"}, "note": *e.Note, "kind": e.Kind}
	if got, want := recordKey(r), eventKey(e); got != want {
		t.Errorf("recordKey = %s, want %s", got, want)
	}
	r["id"] = int(e.ID)
	if got := recordKey(r); want[got] || got[:3] != "BAD" {
		t.Errorf("a record with an int id has the key %s", got)
	}
}
