package avrotest_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/avrotest"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// TestSubjectOfTestdata: the subject over a python3-avro file of the
// repository reads all its records and keeps the split contract; a missing
// file fails naming it.
func TestSubjectOfTestdata(t *testing.T) {
	s, err := avrotest.Subject(t.Context(), "../testdata/events-deflate.avro", avroio.RecordType)
	if err != nil {
		t.Fatal(err)
	}
	if got := sdftest.AssertReadAll(t, s); len(got) == 0 {
		t.Fatal("read no records")
	}
	sdftest.AssertSplitAtFractionExhaustive(t, s)
	if _, err := avrotest.Subject(t.Context(), "../testdata/missing.avro", reflect.TypeFor[struct{ A int64 }]()); err == nil || !strings.Contains(err.Error(), "missing.avro") {
		t.Fatalf("missing file: %v", err)
	}
}
