package globaltest_test

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx/schema"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/datastoreio"
	"github.com/sdfio/sdfio/internal/globaltest/probe"
	"github.com/sdfio/sdfio/internal/workertest"
)

func TestMain(m *testing.M) { workertest.Main(m) }

// order is an element type of sdfio's transforms holding the same types.
type order struct {
	Key    *datastore.Key `datastore:"__key__" avro:"-" bigquery:"-"`
	ID     int64          `avro:"id" bigquery:"id"`
	At     time.Time      `avro:"at" bigquery:"at"`
	Amount *big.Rat       `avro:"amount" bigquery:"amount"`
	Day    civil.Date     `avro:"-" bigquery:"day" datastore:"-"`
}

func init() {
	avroio.RegisterType(reflect.TypeFor[order]())
	register.Function1x1(describeOrder)
}

func describeOrder(o order) string { return probe.Describe(o) }

const orderSchema = `{"type":"record","name":"order","fields":[
 {"name":"id","type":"long"},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":4}}]}`

// useIOs builds (does not run) a pipeline that writes orders with each of
// the IOs.
func useIOs(t *testing.T) {
	p, s := beam.NewPipelineWithRoot()
	orders := beam.Create(s, order{ID: 1})
	avroio.Write(s, t.TempDir()+"/o", orderSchema, orders)
	if _, err := bqwrite.TryWrite(s, "p.d.t", orders); err != nil {
		t.Fatal(err)
	}
	datastoreio.Write(s, "p", orders)
	_ = p
}

// TestSameAsWithoutSdfio: a program that imports and uses all three IOs
// encodes its own PCollections of time.Time (of years 0-9999 and beyond,
// offsets of whole minutes and of seconds), *big.Rat, civil.Date,
// civil.Time, civil.DateTime and structs holding them with the coders,
// schemas and bytes of the same program without sdfio, decodes them to
// the same values, and a Prism pipeline shuffling them delivers the same
// values.
func TestSameAsWithoutSdfio(t *testing.T) {
	useIOs(t)
	got := probe.Report()
	out, err := probe.RunPipeline(context.Background())
	if err != nil {
		t.Fatalf("the pipeline of this program failed: %v", err)
	}
	got += "pipeline:\n" + out

	cmd := exec.Command("go", "run", "./without")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run ./without: %v\n%s", err, stderr.String())
	}
	want := stdout.String()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("line %d differs:\nwith sdfio:    %s\nwithout sdfio: %s", i+1, gl, wl)
		}
	}
}

// TestIOsKeepTheirValues: order, the element type given to the IOs and
// registered with avroio.RegisterType, has a coder that keeps what Beam's
// own would lose or refuse (the key, the decimal, the date, a time of year
// 12000 with an offset of seconds).
func TestIOsKeepTheirValues(t *testing.T) {
	useIOs(t)
	in := order{
		Key:    datastore.NameKey("Order", "o1", datastore.IDKey("Shop", 7, nil)),
		ID:     1,
		At:     time.Date(12000, 1, 2, 3, 4, 5, 6, time.FixedZone("", -17762)),
		Amount: big.NewRat(-1234567, 1000),
		Day:    civil.Date{Year: 2024, Month: 2, Day: 29},
	}
	var buf bytes.Buffer
	if err := beam.NewElementEncoder(reflect.TypeFor[order]()).Encode(in, &buf); err != nil {
		t.Fatal(err)
	}
	v, err := beam.NewElementDecoder(reflect.TypeFor[order]()).Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := probe.Describe(v), probe.Describe(in); got != want {
		t.Errorf("round trip:\n got %s\nwant %s", got, want)
	}
	if !v.(order).Key.Equal(in.Key) {
		t.Errorf("key %v came back as %v", in.Key, v.(order).Key)
	}
}

// TestOrdersOnSeparateWorkers: order's coder, registered in init, is the
// same in the process that builds the pipeline and in separate worker
// processes (as on Dataflow and Flink): orders created here and shuffled
// arrive with every value.
func TestOrdersOnSeparateWorkers(t *testing.T) {
	in := []order{
		{Key: datastore.NameKey("Order", "o1", nil), ID: 1, At: time.Date(12000, 1, 2, 3, 4, 5, 6, time.FixedZone("", -17762)), Amount: big.NewRat(-1234567, 1000), Day: civil.Date{Year: 2024, Month: 2, Day: 29}},
		{ID: 2, At: time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)},
	}
	var want []any
	for _, o := range in {
		want = append(want, probe.Describe(o))
	}
	p, s := beam.NewPipelineWithRoot()
	got := beam.ParDo(s, describeOrder, beam.Reshuffle(s, beam.CreateList(s, in)))
	passert.Equals(s, got, want...)
	workertest.MustRun(t, p)
}

// TestDatastoreCodersOnlyForTypesBeamCannotEncode: datastoreio registers
// program-wide Beam coders for *datastore.Key, datastore.Property,
// PropertyList, *PropertyList and *Entity, the one place sdfio registers
// a coder for a type it does not own (docs: datastoreio's package doc,
// internal/beamtypes). They must be global: a program's own PCollection of
// keys (the input of DeleteKey, say) has no sdfio element type to hang a
// coder on. It changes nothing that worked without sdfio, because Beam
// cannot encode any of them on its own: its schema coder refuses each (a
// recursive key; a property's interface{} value). This test fails the day
// Beam can encode one of them, when the global coder would change how a
// program's working PCollection is encoded.
func TestDatastoreCodersOnlyForTypesBeamCannotEncode(t *testing.T) {
	types := map[string]reflect.Type{
		"key":          reflect.TypeFor[*datastore.Key](),
		"property":     reflect.TypeFor[datastore.Property](),
		"propertylist": reflect.TypeFor[datastore.PropertyList](),
		"plistptr":     reflect.TypeFor[*datastore.PropertyList](),
		"entity":       reflect.TypeFor[*datastore.Entity](),
	}
	if name := os.Getenv("GLOBALTEST_SCHEMA_OF"); name != "" {
		// The child: Beam's schema of one type. A recursive type overflows
		// the stack (Beam v2.78), which is why this runs in a process of
		// its own.
		if _, err := schema.FromType(types[name]); err != nil {
			fmt.Println("refused:", err)
			return
		}
		fmt.Println("encodable")
		return
	}
	for name, typ := range types {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDatastoreCodersOnlyForTypesBeamCannotEncode$")
		cmd.Env = append(os.Environ(), "GLOBALTEST_SCHEMA_OF="+name, "TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		switch {
		case err == nil && bytes.Contains(out, []byte("encodable")):
			t.Errorf("Beam's schema coder can encode %v: datastoreio's program-wide coder for it changes how a program's own PCollections of it are encoded; register it per transform instead (as RegisterType does for element types)", typ)
		case err == nil && bytes.Contains(out, []byte("refused:")):
			line, _, _ := bytes.Cut(out[bytes.Index(out, []byte("refused:")):], []byte("\n"))
			t.Logf("%v: Beam cannot encode it on its own: %s", typ, line)
		case bytes.Contains(out, []byte("stack overflow")):
			t.Logf("%v: Beam cannot encode it on its own: its schema coder overflows the stack (a recursive type)", typ)
		default:
			t.Errorf("%v: the child process failed otherwise: %v\n%s", typ, err, out)
		}
	}
}
