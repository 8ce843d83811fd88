package datastoreio_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"google.golang.org/grpc/codes"

	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/datastoreio/dstest"
	"github.com/sdfio/sdfio/sdf"
)

// TestAncestorNamespaceRefused: an ancestor in namespace t1 read without
// WithNamespace (the default namespace) is refused at construction, naming
// both namespaces, as the client refuses it; the default namespace's
// entities under the same path are never read. With WithNamespace of the
// ancestor's, the read returns the ancestor's own children. A GQL query
// naming an ancestor of another namespace fails when it is planned: the
// service refuses it when it parses the GQL (this part guards that the
// error reaches the user; it passed on the code before the fix too).
func TestAncestorNamespaceRefused(t *testing.T) {
	t.Parallel()
	e, c := client(t)
	ns := dstest.Namespace(t)
	type child struct{ N int64 }
	var keys []*datastore.Key
	var vals []child
	for i, space := range []string{"", ns} {
		parent := datastore.NameKey("AncP", "x", nil)
		parent.Namespace = space
		for j := range 3 {
			k := datastore.IDKey("AncC", int64(j+1), parent)
			k.Namespace = space
			keys = append(keys, k)
			vals = append(vals, child{int64(10*i + j)})
		}
	}
	if _, err := c.PutMulti(context.Background(), keys, vals); err != nil {
		t.Fatal(err)
	}
	parent := datastore.NameKey("AncP", "x", nil)
	parent.Namespace = ns
	q := datastoreio.NewQuery("AncC").Ancestor(parent)
	_, err := datastoreio.Plan(context.Background(), e.Project(), q, datastoreio.WithNumQuerySplits(2))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf(`is in namespace %q but the read is of namespace ""`, ns)) {
		t.Fatalf("ancestor of namespace %s read in the default namespace: %v", ns, err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "WithNamespace") {
				t.Errorf("Read did not refuse it: %v", r)
			}
		}()
		_, s := beam.NewPipelineWithRoot()
		datastoreio.Read(s, e.Project(), q, reflect.TypeFor[item]())
	}()
	type got struct {
		K *datastore.Key `datastore:"__key__"`
		N int64
	}
	read, err := readWith(t, e.Project(), q, reflect.TypeFor[got](), datastoreio.WithNamespace(ns), datastoreio.WithNumQuerySplits(2))
	if err != nil {
		t.Fatal(err)
	}
	var ns_ []int64
	for _, v := range read {
		g := v.(got)
		if g.K.Namespace != ns {
			t.Errorf("read %v of namespace %q", g.K, g.K.Namespace)
		}
		ns_ = append(ns_, g.N)
	}
	if fmt.Sprint(ns_) != "[10 11 12]" {
		t.Errorf("read N = %v, want the children of %s's ancestor: [10 11 12]", ns_, ns)
	}
	_, err = datastoreio.Plan(context.Background(), e.Project(),
		datastoreio.GQL(fmt.Sprintf("SELECT * FROM AncC WHERE __key__ HAS ANCESTOR KEY(NAMESPACE('%s'), AncP, 'x')", ns)))
	if err == nil || !strings.Contains(err.Error(), "ancestor namespace is "+ns) {
		t.Fatalf("GQL with an ancestor of another namespace: %v, want the service's refusal naming namespace %s", err, ns)
	}
	t.Logf("GQL: %v", err)
}

// readWith plans q and reads every range into values of typ.
func readWith(t *testing.T, project string, q datastoreio.Query, typ reflect.Type, opts ...datastoreio.ReadOption) ([]any, error) {
	t.Helper()
	ctx := context.Background()
	ranges, err := datastoreio.Plan(ctx, project, q, opts...)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, r := range ranges {
		rr, err := datastoreio.NewRangeReader(ctx, r)
		if err != nil {
			return out, err
		}
		err = rr.Read(ctx, r, sdf.NewTracker(r.Restriction()), typ, func(v any) { out = append(out, v) })
		rr.Close()
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

type floatEnt struct {
	K *datastore.Key `datastore:"__key__"`
	F float64
}

func init() {
	datastoreio.RegisterType(reflect.TypeFor[floatEnt]())
	register.Function1x1(floatEntID)
}

func floatEntID(e floatEnt) string { return e.K.Name }

// TestFilterNonFinite: filters on NaN, +Inf and -Inf (and -0) travel
// through a Prism pipeline (Beam serialises the DoFns as JSON, which has no
// such numbers) and the emulator answers them, one entity each.
func TestFilterNonFinite(t *testing.T) {
	t.Parallel()
	e, c := client(t)
	ns := dstest.Namespace(t)
	values := map[string]float64{"nan": math.NaN(), "pinf": math.Inf(1), "ninf": math.Inf(-1), "one": 1, "max": math.MaxFloat64}
	var keys []*datastore.Key
	var ents []floatEnt
	for name, f := range values {
		k := datastore.NameKey("Flt", name, nil)
		k.Namespace = ns
		keys = append(keys, k)
		ents = append(ents, floatEnt{K: k, F: f})
	}
	if _, err := c.PutMulti(context.Background(), keys, ents); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	for _, name := range []string{"nan", "pinf", "ninf"} {
		got := datastoreio.Read(s, e.Project(), datastoreio.NewQuery("Flt").Filter("F", "=", values[name]), reflect.TypeFor[floatEnt](),
			datastoreio.WithNamespace(ns))
		passert.Equals(s, beam.ParDo(s, floatEntID, got), name)
	}
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// TestOversizedPageNotRetried: an answer over gRPC's size limit
// (RESOURCE_EXHAUSTED "received message larger than max") is not retried
// as it is: the page is halved until it fits, and the read is exact; when
// not even one entity fits, the read fails after the halvings, without
// retries.
func TestOversizedPageNotRetried(t *testing.T) {
	project := loadMedium(t)
	ctx := context.Background()
	ranges, err := datastoreio.Plan(ctx, project, datastoreio.NewQuery("Item"), datastoreio.WithNamespace(medium.ns),
		datastoreio.WithNumQuerySplits(1), datastoreio.WithKeysPerSplit(1), datastoreio.WithClientOptions("hook"))
	if err != nil {
		t.Fatal(err)
	}
	r := ranges[0]
	const tooLarge = "grpc: received message larger than max (9437184 vs. 4194304)"
	for _, c := range []struct {
		failFirst int
		ok        bool
	}{{2, true}, {1 << 20, false}} {
		hook.reset()
		hook.set(func(h *hookState) {
			h.failFirst, h.failCode, h.failMsg = c.failFirst, codes.ResourceExhausted, tooLarge
		})
		rr, err := datastoreio.NewRangeReader(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		var got []item
		err = rr.Read(ctx, r, sdf.NewTracker(r.Restriction()), reflect.TypeFor[item](), func(v any) { got = append(got, v.(item)) })
		rr.Close()
		hook.mu.Lock()
		calls := hook.calls
		hook.mu.Unlock()
		if c.ok {
			if err != nil {
				t.Fatal(err)
			}
			sameMultiset(t, "halved pages", ids(got), ids(medium.items))
			continue
		}
		// 500, 250, ..., 1: nine page sizes, each tried once.
		if err == nil || !strings.Contains(err.Error(), "larger than max") || calls != 9 {
			t.Fatalf("%d calls, %v; want 9 calls and the size error", calls, err)
		}
	}
}
