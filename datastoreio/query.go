package datastoreio

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	pb "cloud.google.com/go/datastore/apiv1/datastorepb"
)

// Query describes what a Read reads. Unlike the client's *datastore.Query it
// is plain data, so it travels inside the pipeline (Beam serialises it with
// the DoFns). Build one with NewQuery and its methods, or with GQL; the zero
// value is not a query.
//
// A structured query has a Kind and optional Filters (all ANDed), an
// Ancestor, a Projection, DistinctOn, Order and Limit, with the semantics of
// the client's methods of those names. A GQL query is a literal GQL
// string (with literal values, no bindings) that the server parses when the
// read starts; its parsed form is then split like a structured query.
type Query struct {
	// Kind is the kind queried. Required unless GQL is set.
	Kind string `json:",omitempty"`
	// Filters are property filters, all of which must hold.
	Filters []Filter `json:",omitempty"`
	// AncestorKey, when set, is the encoded key (Key.Encode) whose descendants
	// (and itself) the query returns.
	AncestorKey string `json:",omitempty"`
	// Projection lists the properties of a projection query.
	Projection []string `json:",omitempty"`
	// Distinct lists the properties a projection query is distinct on.
	Distinct []string `json:",omitempty"`
	// Order lists sort orders: a property name, "-" before it for descending.
	Order []string `json:",omitempty"`
	// Limit, when > 0, is the most entities returned.
	Limit int32 `json:",omitempty"`
	// Offset, when > 0, skips that many entities first (GQL's OFFSET).
	Offset int32 `json:",omitempty"`
	// Keys makes the query keys-only (KeysOnly; GQL's SELECT __key__): it
	// returns the entities' keys, read as *datastore.Key.
	Keys bool `json:",omitempty"`
	// GQL is a literal GQL query, used instead of everything above.
	GQL string `json:",omitempty"`

	err error // from a builder method; reported by Read
}

// Filter is one property filter: Property Op Value.
type Filter struct {
	Property string
	// Op is one of "=", "<", "<=", ">", ">=", "!=".
	Op    string
	Value Value
}

// Value is a filter value in serialisable form. Build it with ValueOf.
type Value struct {
	// Type is one of "null", "int", "float", "string", "bool", "time",
	// "key", "bytes", "geo".
	Type   string
	Int    int64   `json:",omitempty"` // int; time in Unix microseconds
	Float  float64 `json:",omitempty"` // float; geo latitude
	Float2 float64 `json:",omitempty"` // geo longitude
	Str    string  `json:",omitempty"` // string; key (encoded); bytes (base64)
	Bool   bool    `json:",omitempty"`
}

// NewQuery returns a query of kind.
func NewQuery(kind string) Query { return Query{Kind: kind} }

// GQL returns a query given as a literal GQL string, such as
// "SELECT * FROM Task WHERE done = false". The server parses it when the
// read starts; bindings (@1, @name) are not supported.
func GQL(gql string) Query { return Query{GQL: gql} }

func (q Query) clone() Query {
	q.Filters = append([]Filter(nil), q.Filters...)
	q.Projection = append([]string(nil), q.Projection...)
	q.Distinct = append([]string(nil), q.Distinct...)
	q.Order = append([]string(nil), q.Order...)
	return q
}

// Filter returns q with one more filter, as the client's FilterField: op is
// one of =, <, <=, >, >=, != and value any value the client accepts in a
// filter (integers, floats, strings, bool, time.Time, *datastore.Key,
// []byte, datastore.GeoPoint, nil).
func (q Query) Filter(property, op string, value any) Query {
	q = q.clone()
	v, err := ValueOf(value)
	if err == nil {
		err = checkOp(op)
	}
	if err != nil && q.err == nil {
		q.err = fmt.Errorf("datastoreio: filter %s %s %v: %w", property, op, value, err)
	}
	q.Filters = append(q.Filters, Filter{Property: property, Op: op, Value: v})
	return q
}

// KeysOnly returns q as a keys-only query: it returns the keys of the
// entities, and a Read of it emits *datastore.Key (as Java's keys-only
// queries emit entities holding only their keys). A Read into
// *datastore.Key reads any query keys-only.
func (q Query) KeysOnly() Query {
	q = q.clone()
	q.Keys = true
	return q
}

// Ancestor returns q restricted to the descendants of k (and k itself).
// k's namespace must be the read's (WithNamespace), as the client requires.
func (q Query) Ancestor(k *datastore.Key) Query {
	q = q.clone()
	if k == nil || k.Incomplete() {
		if q.err == nil {
			q.err = errors.New("datastoreio: the ancestor of a query must be a complete key")
		}
		return q
	}
	q.AncestorKey = encodeKey(k)
	return q
}

// Project returns q as a projection query of the given properties.
func (q Query) Project(properties ...string) Query {
	q = q.clone()
	q.Projection = append(q.Projection, properties...)
	return q
}

// DistinctOn returns q distinct on the given (projected) properties.
func (q Query) DistinctOn(properties ...string) Query {
	q = q.clone()
	q.Distinct = append(q.Distinct, properties...)
	return q
}

// OrderBy returns q with one more sort order: a property name, "-" before it
// for descending.
func (q Query) OrderBy(property string) Query {
	q = q.clone()
	q.Order = append(q.Order, property)
	return q
}

// WithLimit returns q returning at most n entities (n <= 0: no limit).
func (q Query) WithLimit(n int32) Query {
	q = q.clone()
	q.Limit = max(n, 0)
	return q
}

func checkOp(op string) error {
	switch op {
	case "=", "<", "<=", ">", ">=", "!=":
		return nil
	}
	return fmt.Errorf("operator %q is not one of =, <, <=, >, >=, !=", op)
}

func isInequality(op string) bool { return op != "=" }

// Validate reports a query that cannot be read.
func (q Query) Validate() error {
	if q.err != nil {
		return q.err
	}
	if q.GQL != "" {
		if q.Kind != "" || len(q.Filters) > 0 || q.AncestorKey != "" || len(q.Projection) > 0 || len(q.Distinct) > 0 || len(q.Order) > 0 || q.Limit != 0 || q.Offset != 0 || q.Keys {
			return errors.New("datastoreio: a GQL query cannot have structured parts too")
		}
		return nil
	}
	if q.Kind == "" {
		return errors.New("datastoreio: the query has no kind (use NewQuery(kind) or GQL)")
	}
	for _, f := range q.Filters {
		if f.Property == "" {
			return errors.New("datastoreio: a filter has no property")
		}
		if err := checkOp(f.Op); err != nil {
			return fmt.Errorf("datastoreio: filter on %s: %w", f.Property, err)
		}
		if _, err := f.Value.goValue(); err != nil {
			return fmt.Errorf("datastoreio: filter on %s: %w", f.Property, err)
		}
	}
	if _, err := decodeKey(q.AncestorKey); err != nil {
		return err
	}
	if q.Limit < 0 || q.Offset < 0 {
		return errors.New("datastoreio: negative limit or offset")
	}
	if q.Keys && len(q.Projection) > 0 {
		return fmt.Errorf("datastoreio: a keys-only query cannot project properties (%s)", strings.Join(q.Projection, ", "))
	}
	return nil
}

// checkNamespace refuses an ancestor in another namespace than the read's,
// as the client does ("The query namespace is ... but ancestor namespace
// is ..."): reading the read's namespace under the ancestor's path instead
// would read other entities than the ancestor's.
func (q Query) checkNamespace(ns string) error {
	if q.AncestorKey == "" {
		return nil
	}
	a, err := decodeKey(q.AncestorKey)
	if err != nil {
		return err
	}
	if a.Namespace != ns {
		return fmt.Errorf("datastoreio: the ancestor %s is in namespace %q but the read is of namespace %q: read it WithNamespace(%q)",
			keyString(a, ""), a.Namespace, ns, a.Namespace)
	}
	return nil
}

// splittable reports whether the query may be split into key ranges, and if
// not, why: Java's rule (a limit, a sort order or an inequality filter reads
// unsplit), plus an offset and distinct-on, whose results depend on the
// whole result set.
func (q Query) splittable() (bool, string) {
	switch {
	case q.Limit > 0:
		return false, "it has a limit"
	case q.Offset > 0:
		return false, "it has an offset"
	case len(q.Order) > 0:
		return false, "it has a sort order"
	case len(q.Distinct) > 0:
		return false, "it is distinct on properties"
	}
	for _, f := range q.Filters {
		if isInequality(f.Op) {
			return false, "it has an inequality filter on " + f.Property
		}
	}
	return true, ""
}

// describe shows the query in errors and logs.
func (q Query) describe() string {
	if q.GQL != "" {
		return fmt.Sprintf("GQL %q", q.GQL)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kind %s", q.Kind)
	for i, f := range q.Filters {
		if i == 0 {
			b.WriteString(" where ")
		} else {
			b.WriteString(" and ")
		}
		fmt.Fprintf(&b, "%s %s %s", f.Property, f.Op, f.Value)
	}
	if q.AncestorKey != "" {
		k, _ := decodeKey(q.AncestorKey)
		fmt.Fprintf(&b, " ancestor %s", keyString(k, "?"))
	}
	if q.Keys {
		b.WriteString(" (keys only)")
	}
	return b.String()
}

// ValueOf converts a Go value to a filter Value.
func ValueOf(v any) (Value, error) {
	switch x := v.(type) {
	case nil:
		return Value{Type: "null"}, nil
	case int:
		return Value{Type: "int", Int: int64(x)}, nil
	case int8:
		return Value{Type: "int", Int: int64(x)}, nil
	case int16:
		return Value{Type: "int", Int: int64(x)}, nil
	case int32:
		return Value{Type: "int", Int: int64(x)}, nil
	case int64:
		return Value{Type: "int", Int: x}, nil
	case float32:
		return Value{Type: "float", Float: float64(x)}, nil
	case float64:
		return Value{Type: "float", Float: x}, nil
	case string:
		return Value{Type: "string", Str: x}, nil
	case bool:
		return Value{Type: "bool", Bool: x}, nil
	case time.Time:
		return Value{Type: "time", Int: x.UnixMicro()}, nil
	case *datastore.Key:
		if x == nil {
			return Value{Type: "null"}, nil
		}
		return Value{Type: "key", Str: encodeKey(x)}, nil
	case []byte:
		return Value{Type: "bytes", Str: base64.StdEncoding.EncodeToString(x)}, nil
	case datastore.GeoPoint:
		if !x.Valid() {
			return Value{}, fmt.Errorf("datastoreio: GeoPoint %v is not valid (latitude in [-90, 90], longitude in [-180, 180])", x)
		}
		return Value{Type: "geo", Float: x.Lat, Float2: x.Lng}, nil
	}
	return Value{}, fmt.Errorf("datastoreio: a filter value of type %T is not supported", v)
}

// goValue is the value as the client's FilterField takes it.
func (v Value) goValue() (any, error) {
	switch v.Type {
	case "null":
		return nil, nil
	case "int":
		return v.Int, nil
	case "float":
		return v.Float, nil
	case "string":
		return v.Str, nil
	case "bool":
		return v.Bool, nil
	case "time":
		return time.UnixMicro(v.Int).UTC(), nil
	case "key":
		return decodeKey(v.Str)
	case "bytes":
		b, err := base64.StdEncoding.DecodeString(v.Str)
		if err != nil {
			return nil, fmt.Errorf("datastoreio: bytes value: %w", err)
		}
		return b, nil
	case "geo":
		return datastore.GeoPoint{Lat: v.Float, Lng: v.Float2}, nil
	}
	return nil, fmt.Errorf("datastoreio: unknown value type %q", v.Type)
}

func (v Value) String() string {
	g, err := v.goValue()
	if err != nil {
		return "?" + v.Type
	}
	switch x := g.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case *datastore.Key:
		return keyString(x, "null")
	}
	return fmt.Sprint(g)
}

// clientQuery builds the client's query for q in namespace ns, with the key
// range [lo, hi) added to its filters (a nil bound is open), keys-only when
// q is or keysOnly says.
func (q Query) clientQuery(ns string, lo, hi *datastore.Key, keysOnly bool) (*datastore.Query, error) {
	dq := datastore.NewQuery(q.Kind).Namespace(ns)
	for _, f := range q.Filters {
		v, err := f.Value.goValue()
		if err != nil {
			return nil, err
		}
		dq = dq.FilterField(f.Property, f.Op, v)
	}
	if q.AncestorKey != "" {
		a, err := decodeKey(q.AncestorKey)
		if err != nil {
			return nil, err
		}
		dq = dq.Ancestor(a) // in another namespace, refused by the client

	}
	if lo != nil {
		dq = dq.FilterField("__key__", ">=", withNamespace(lo, ns))
	}
	if hi != nil {
		dq = dq.FilterField("__key__", "<", withNamespace(hi, ns))
	}
	if len(q.Projection) > 0 {
		dq = dq.Project(q.Projection...)
	}
	if len(q.Distinct) > 0 {
		dq = dq.DistinctOn(q.Distinct...)
	}
	for _, o := range q.Order {
		dq = dq.Order(o)
	}
	if q.Offset > 0 {
		dq = dq.Offset(int(q.Offset))
	}
	if q.Keys || keysOnly {
		dq = dq.KeysOnly()
	}
	return dq, nil
}

// withNamespace returns k with every element in namespace ns.
func withNamespace(k *datastore.Key, ns string) *datastore.Key {
	if k == nil || k.Namespace == ns {
		return k
	}
	c := *k
	c.Namespace = ns
	c.Parent = withNamespace(k.Parent, ns)
	return &c
}

// fromProto converts the server's parsed form of a GQL query to a Query.
func fromProto(p *pb.Query) (Query, error) {
	var q Query
	if len(p.Kind) != 1 {
		return q, fmt.Errorf("datastoreio: the query names %d kinds; a read needs exactly one", len(p.Kind))
	}
	q.Kind = p.Kind[0].Name
	if p.StartCursor != nil || p.EndCursor != nil {
		return q, errors.New("datastoreio: cursors in a GQL query are not supported")
	}
	if err := addFilter(&q, p.Filter); err != nil {
		return q, err
	}
	keyProjected := false
	for _, pr := range p.Projection {
		if n := pr.GetProperty().GetName(); n != "__key__" {
			q.Projection = append(q.Projection, n)
		} else {
			keyProjected = true
		}
	}
	// SELECT __key__: keys only. (With other properties, a projection of
	// those: every entity read carries its key anyway.)
	q.Keys = keyProjected && len(q.Projection) == 0
	for _, d := range p.DistinctOn {
		q.Distinct = append(q.Distinct, d.Name)
	}
	for _, o := range p.Order {
		name := o.GetProperty().GetName()
		if o.Direction == pb.PropertyOrder_DESCENDING {
			name = "-" + name
		}
		q.Order = append(q.Order, name)
	}
	if p.Limit != nil {
		q.Limit = max(p.Limit.Value, 0)
	}
	q.Offset = p.Offset
	return q, nil
}

func addFilter(q *Query, f *pb.Filter) error {
	if f == nil {
		return nil
	}
	switch ft := f.FilterType.(type) {
	case *pb.Filter_CompositeFilter:
		if ft.CompositeFilter.Op != pb.CompositeFilter_AND {
			return fmt.Errorf("datastoreio: composite filter %v is not supported (only AND)", ft.CompositeFilter.Op)
		}
		for _, sub := range ft.CompositeFilter.Filters {
			if err := addFilter(q, sub); err != nil {
				return err
			}
		}
		return nil
	case *pb.Filter_PropertyFilter:
		pf := ft.PropertyFilter
		name := pf.GetProperty().GetName()
		if pf.Op == pb.PropertyFilter_HAS_ANCESTOR {
			kv, ok := pf.Value.GetValueType().(*pb.Value_KeyValue)
			if !ok {
				return errors.New("datastoreio: HAS ANCESTOR needs a key")
			}
			k, err := protoToKey(kv.KeyValue)
			if err != nil {
				return err
			}
			q.AncestorKey = encodeKey(k)
			return nil
		}
		op, ok := map[pb.PropertyFilter_Operator]string{
			pb.PropertyFilter_EQUAL: "=", pb.PropertyFilter_LESS_THAN: "<", pb.PropertyFilter_LESS_THAN_OR_EQUAL: "<=",
			pb.PropertyFilter_GREATER_THAN: ">", pb.PropertyFilter_GREATER_THAN_OR_EQUAL: ">=", pb.PropertyFilter_NOT_EQUAL: "!=",
		}[pf.Op]
		if !ok {
			return fmt.Errorf("datastoreio: filter operator %v on %s is not supported", pf.Op, name)
		}
		v, err := valueFromProto(pf.Value)
		if err != nil {
			return fmt.Errorf("datastoreio: filter on %s: %w", name, err)
		}
		q.Filters = append(q.Filters, Filter{Property: name, Op: op, Value: v})
		return nil
	}
	return fmt.Errorf("datastoreio: filter %v is not supported", f)
}

func valueFromProto(v *pb.Value) (Value, error) {
	switch x := v.GetValueType().(type) {
	case *pb.Value_NullValue:
		return Value{Type: "null"}, nil
	case *pb.Value_IntegerValue:
		return Value{Type: "int", Int: x.IntegerValue}, nil
	case *pb.Value_DoubleValue:
		return Value{Type: "float", Float: x.DoubleValue}, nil
	case *pb.Value_StringValue:
		return Value{Type: "string", Str: x.StringValue}, nil
	case *pb.Value_BooleanValue:
		return Value{Type: "bool", Bool: x.BooleanValue}, nil
	case *pb.Value_TimestampValue:
		return Value{Type: "time", Int: x.TimestampValue.AsTime().UnixMicro()}, nil
	case *pb.Value_KeyValue:
		k, err := protoToKey(x.KeyValue)
		if err != nil {
			return Value{}, err
		}
		return Value{Type: "key", Str: encodeKey(k)}, nil
	case *pb.Value_BlobValue:
		return Value{Type: "bytes", Str: base64.StdEncoding.EncodeToString(x.BlobValue)}, nil
	case *pb.Value_GeoPointValue:
		return Value{Type: "geo", Float: x.GeoPointValue.Latitude, Float2: x.GeoPointValue.Longitude}, nil
	}
	return Value{}, fmt.Errorf("value %v is not supported in a filter", v)
}
