package datastoreio_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/datastoreio"
)

func init() { register.Function1x1(keyID) }

func keyID(k *datastore.Key) string { return k.Namespace + "|" + k.String() }

// TestKeysOnlyRead: GQL SELECT __key__, a KeysOnly() query, and a plain
// query read into *datastore.Key emit the keys of the entities, split, on
// Prism; a keys-only query read into a struct is refused at construction
// (its results hold no properties to load).
func TestKeysOnlyRead(t *testing.T) {
	project := loadMedium(t)
	var want []any
	for _, it := range medium.items {
		want = append(want, it.K.Namespace+"|"+it.K.String())
	}
	p, s := beam.NewPipelineWithRoot()
	for _, q := range []datastoreio.Query{
		datastoreio.GQL("SELECT __key__ FROM Item"),
		datastoreio.NewQuery("Item").KeysOnly(),
		datastoreio.NewQuery("Item"),
	} {
		keys := datastoreio.Read(s, project, q, reflect.TypeFor[*datastore.Key](), datastoreio.WithNamespace(medium.ns),
			datastoreio.WithNumQuerySplits(3), datastoreio.WithKeysPerSplit(2))
		passert.Equals(s, beam.ParDo(s, keyID, keys), want...)
	}
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}

	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "keys-only: read it into *datastore.Key") {
			t.Fatalf("keys-only into a struct: %v", r)
		}
	}()
	_, s = beam.NewPipelineWithRoot()
	datastoreio.Read(s, project, datastoreio.NewQuery("Item").KeysOnly(), reflect.TypeFor[item]())
}

// TestKeysOnlyGQLIntoStruct: a GQL keys-only query, parsed when the read
// runs, read into a struct fails naming the query and the type, where it
// used to read full entities.
func TestKeysOnlyGQLIntoStruct(t *testing.T) {
	t.Parallel()
	project := loadMedium(t)
	_, err := readWith(t, project, datastoreio.GQL("SELECT __key__ FROM Item"), reflect.TypeFor[item](), datastoreio.WithNamespace(medium.ns))
	if err == nil || !strings.Contains(err.Error(), "keys-only: read it into *datastore.Key") || !strings.Contains(err.Error(), "datastoreio_test.item") {
		t.Fatalf("GQL keys-only into a struct: %v", err)
	}
}
