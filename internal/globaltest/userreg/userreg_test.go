// Package userreg_test is a program that imports all of sdfio's IOs and
// registers schema logical types and coders of its own for the types
// sdfio's element types hold. It is a test binary of its own: those
// registrations are for the whole process.
package userreg_test

import (
	"bytes"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/datastoreio"
)

// mine is the program's own struct of those types.
type mine struct {
	R *big.Rat
	D civil.Date
	K *datastore.Key
	P datastore.PropertyList
	E *datastore.Entity
}

// theirs is an element type of sdfio's transforms holding them.
type theirs struct {
	K  *datastore.Key `datastore:"__key__"`
	R  *big.Rat
	D  civil.Date
	At time.Time
}

func init() {
	avroio.RegisterType(reflect.TypeFor[theirs]())
	bigqueryio.RegisterType(reflect.TypeFor[theirs]()) // the same registration, again
	datastoreio.RegisterType(reflect.TypeFor[theirs]())
}

// textProviders registers, for t, schema providers that write fmt's text
// of a value, as a program might.
func textProviders(t reflect.Type) {
	coder.RegisterSchemaProviders(t,
		func(reflect.Type) (func(any, io.Writer) error, error) {
			return func(v any, w io.Writer) error {
				if err := coder.WriteSimpleRowHeader(1, w); err != nil {
					return err
				}
				return coder.EncodeStringUTF8("mine:"+fmt.Sprint(v), w)
			}, nil
		},
		func(reflect.Type) (func(io.Reader) (any, error), error) {
			return func(r io.Reader) (any, error) {
				if err := coder.ReadSimpleRowHeader(1, r); err != nil {
					return nil, err
				}
				if _, err := coder.DecodeStringUTF8(r); err != nil {
					return nil, err
				}
				return reflect.Zero(t).Interface(), nil
			}, nil
		})
}

// TestProgramRegistersItsOwn: sdfio registered no logical type for
// big.Rat, civil.Date, *datastore.Key, datastore.PropertyList or
// *datastore.Entity, so the program registering its own (under its own
// identifiers, or under those sdfio used before) panics on no Beam
// version (v2.78 panics on a second, different registration of a Go type
// or an identifier), its registrations are what its own PCollections use,
// and sdfio's element types keep their own coder, values and all.
func TestProgramRegistersItsOwn(t *testing.T) {
	textStorage := reflect.TypeFor[struct{ Text string }]()
	types := map[string]reflect.Type{
		"sdfio.BigRat":                    reflect.TypeFor[big.Rat](),
		"sdfio.bigqueryio.CivilDate":      reflect.TypeFor[civil.Date](),
		"sdfio.datastoreio.Key":           reflect.TypeFor[*datastore.Key](),
		"sdfio.datastoreio.PropertyList":  reflect.TypeFor[datastore.PropertyList](),
		"sdfio.datastoreio.Entity":        reflect.TypeFor[*datastore.Entity](),
		"sdfio.datastoreio.PropertyListP": reflect.TypeFor[*datastore.PropertyList](),
	}
	// (mine is registered with Beam only once its logical types are: Beam's
	// schema of a *datastore.Key without one recurses until the stack
	// overflows.)
	before, err := schema.FromType(reflect.TypeFor[struct {
		R *big.Rat
		D civil.Date
	}]())
	if err == nil && strings.Contains(prototext.Format(before), "sdfio") {
		t.Errorf("importing sdfio registered logical types used by the program's own struct:\n%s", prototext.Format(before))
	}
	for id, typ := range types {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("registering %s for %v panicked: %v", id, typ, p)
				}
			}()
			schema.RegisterLogicalType(schema.ToLogicalType(id, typ, textStorage))
			textProviders(typ)
		}()
	}
	beam.RegisterType(reflect.TypeFor[mine]())
	after, err := schema.FromType(reflect.TypeFor[mine]())
	if err != nil {
		t.Fatalf("the program's struct has no schema with its own logical types: %v", err)
	}
	for id := range types {
		if id == "sdfio.datastoreio.PropertyListP" {
			continue // not a field of mine
		}
		if !strings.Contains(prototext.Format(after), id) {
			t.Errorf("the program's logical type %s is not in its struct's schema:\n%s", id, prototext.Format(after))
		}
	}
	var buf bytes.Buffer
	if err := beam.NewElementEncoder(reflect.TypeFor[mine]()).Encode(mine{R: big.NewRat(1, 3)}, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "mine:") {
		t.Errorf("the program's struct was not encoded by its own providers: %q", buf.String())
	}

	in := theirs{
		K:  datastore.IDKey("Order", 7, nil),
		R:  big.NewRat(-22, 7),
		D:  civil.Date{Year: 2024, Month: 2, Day: 29},
		At: time.Date(12000, 1, 2, 3, 4, 5, 6, time.UTC),
	}
	buf.Reset()
	if err := beam.NewElementEncoder(reflect.TypeFor[theirs]()).Encode(in, &buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "mine:") {
		t.Errorf("sdfio's element type was encoded by the program's providers: %q", buf.String())
	}
	v, err := beam.NewElementDecoder(reflect.TypeFor[theirs]()).Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	out := v.(theirs)
	if !out.K.Equal(in.K) || out.R.Cmp(in.R) != 0 || out.D != in.D || !out.At.Equal(in.At) {
		t.Errorf("sdfio's element type: %+v came back as %+v", in, out)
	}
}
