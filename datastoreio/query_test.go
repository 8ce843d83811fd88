package datastoreio

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestQuerySerialises(t *testing.T) {
	anc := datastore.NameKey("Parent", "p", nil)
	when := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	q := NewQuery("Task").Filter("Done", "=", false).Filter("Owner", "=", "ann").
		Filter("At", "=", when).Filter("Ref", "=", datastore.IDKey("X", 7, nil)).Filter("Blob", "=", []byte{0, 1}).
		Filter("N", "=", 3).Filter("F", "=", 1.5).Filter("Z", "=", nil).Filter("G", "=", datastore.GeoPoint{Lat: 1, Lng: 2}).
		Ancestor(anc).Project("Owner").DistinctOn("Owner")
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	var back Query
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, q) {
		t.Fatalf("JSON round trip changed the query:\n%+v\n%+v", q, back)
	}
	want := []any{false, "ann", when, datastore.IDKey("X", 7, nil), []byte{0, 1}, int64(3), 1.5, nil, datastore.GeoPoint{Lat: 1, Lng: 2}}
	for i, f := range back.Filters {
		v, err := f.Value.goValue()
		if err != nil {
			t.Fatal(err)
		}
		if k, ok := v.(*datastore.Key); ok {
			if !k.Equal(want[i].(*datastore.Key)) {
				t.Errorf("filter %d: %v, want %v", i, v, want[i])
			}
			continue
		}
		if !reflect.DeepEqual(v, want[i]) {
			t.Errorf("filter %d: %#v, want %#v", i, v, want[i])
		}
	}
	if _, err := back.clientQuery("ns", nil, nil, false); err != nil {
		t.Fatal(err)
	}
}

func TestQueryErrors(t *testing.T) {
	for _, c := range []struct {
		q    Query
		want string
	}{
		{Query{}, "no kind"},
		{NewQuery("K").Filter("a", "~", 1), `operator "~"`},
		{NewQuery("K").Filter("a", "=", struct{}{}), "not supported"},
		{NewQuery("K").Ancestor(datastore.IncompleteKey("K", nil)), "complete key"},
		{Query{GQL: "SELECT * FROM K", Kind: "K"}, "structured parts"},
	} {
		err := c.q.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error with %q", c.q, err, c.want)
		}
	}
}

func TestSplittable(t *testing.T) {
	for _, c := range []struct {
		q    Query
		want bool
	}{
		{NewQuery("K"), true},
		{NewQuery("K").Filter("a", "=", 1).Ancestor(datastore.IDKey("P", 1, nil)).Project("a"), true},
		{NewQuery("K").WithLimit(5), false},
		{NewQuery("K").OrderBy("-a"), false},
		{NewQuery("K").Filter("a", ">", 1), false},
		{NewQuery("K").Filter("a", "!=", 1), false},
		{NewQuery("K").Project("a").DistinctOn("a"), false},
	} {
		if got, why := c.q.splittable(); got != c.want {
			t.Errorf("splittable(%+v) = %v (%s), want %v", c.q, got, why, c.want)
		}
	}
}

func TestFromProto(t *testing.T) {
	anc := keyToProto(datastore.IDKey("P", 5, nil))
	p := &pb.Query{
		Kind: []*pb.KindExpression{{Name: "K"}},
		Filter: &pb.Filter{FilterType: &pb.Filter_CompositeFilter{CompositeFilter: &pb.CompositeFilter{Op: pb.CompositeFilter_AND, Filters: []*pb.Filter{
			propertyFilter("a", pb.PropertyFilter_EQUAL, &pb.Value{ValueType: &pb.Value_IntegerValue{IntegerValue: 4}}),
			propertyFilter("__key__", pb.PropertyFilter_HAS_ANCESTOR, &pb.Value{ValueType: &pb.Value_KeyValue{KeyValue: anc}}),
			propertyFilter("b", pb.PropertyFilter_GREATER_THAN_OR_EQUAL, &pb.Value{ValueType: &pb.Value_StringValue{StringValue: "x"}}),
		}}}},
		Order: []*pb.PropertyOrder{{Property: &pb.PropertyReference{Name: "b"}, Direction: pb.PropertyOrder_DESCENDING}},
		Limit: wrapperspb.Int32(9),
	}
	q, err := fromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	want := NewQuery("K").Filter("a", "=", int64(4)).Ancestor(datastore.IDKey("P", 5, nil)).Filter("b", ">=", "x").OrderBy("-b").WithLimit(9)
	if !reflect.DeepEqual(q, want) {
		t.Fatalf("fromProto:\n%+v\nwant\n%+v", q, want)
	}
	p.Filter = &pb.Filter{FilterType: &pb.Filter_CompositeFilter{CompositeFilter: &pb.CompositeFilter{Op: pb.CompositeFilter_OR}}}
	if _, err := fromProto(p); err == nil || !strings.Contains(err.Error(), "only AND") {
		t.Errorf("OR filter: %v", err)
	}
}
