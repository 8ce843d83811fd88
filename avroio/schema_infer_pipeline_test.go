package avroio_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/avroio/internal/avrotest"
)

// Files written with an inferred schema (Write given no schema), read back
// by Read into the same struct, by python3-avro and by avrocat.

func init() {
	avroio.RegisterType(reflect.TypeFor[inferOrder]())
	beam.RegisterType(reflect.TypeFor[inferAddress]())
	avroio.RegisterType(reflect.TypeFor[inferLine]())
	register.DoFn2x0[[]byte, func(inferOrder)](&ordersFn{})
	register.DoFn3x0[inferOrder, func(string), func(int64)](&checkOrderFn{})
	register.Emitter1[inferOrder]()
	register.Emitter1[int64]()
}

var orderBase = time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)

// makeOrder is order i; orderPy computes the same in Python.
func makeOrder(i int64) inferOrder {
	at := orderBase.Add(time.Duration(i*1001) * time.Microsecond)
	o := inferOrder{
		inferBase: inferBase{Tenant: fmt.Sprintf("t%d", i%3)},
		ID:        i, Qty: int32(i*3 - 7), Small: int16(-i), Count: int(i * 1000003),
		Ratio: float32(i) / 4, Score: float64(i) * 1.5, OK: i%2 == 0, Name: fmt.Sprintf("order-%d", i),
		Raw: []byte{byte(i), 0, 255}, Sum: inferMD5{byte(i), 1, 2, 3}, Code: [2]byte{byte(i >> 8), byte(i)},
		At:    at,
		Price: big.NewRat(i*1000000007-5, 1000),
		Ship:  inferAddress{Street: fmt.Sprintf("s%d", i)},
		Tags:  []string{}, Attrs: map[string]int64{}, Lines: []inferLine{},
		Extra: int8(i % 100),
	}
	o.Meta.K = fmt.Sprintf("m%d", i)
	if i%3 != 0 {
		seen := at.Add(time.Hour)
		o.Seen = &seen
	}
	if i%4 != 0 {
		tax := big.NewRat(i*25, 100)
		o.Tax = &tax
	}
	if i%2 == 0 {
		z := fmt.Sprintf("z%d", i)
		o.Ship.Zip = &z
	} else {
		n := fmt.Sprintf("n%d", i)
		o.Note = &n
	}
	if i%5 != 0 {
		z := "bz"
		o.Bill = &inferAddress{Street: fmt.Sprintf("b%d", i), Zip: &z}
	}
	for j := int64(0); j < i%3; j++ {
		o.Lines = append(o.Lines, inferLine{SKU: fmt.Sprintf("k%d-%d", i, j), Amount: big.NewRat(j*i+1, 100)})
	}
	for j := int64(0); j < i%4; j++ {
		o.Tags = append(o.Tags, fmt.Sprintf("t%d", j))
	}
	for j := int64(0); j < i%3; j++ {
		o.Attrs[fmt.Sprintf("k%d", j)] = j * i
	}
	return o
}

// describeOrder spells out every value of o, decimals and times exactly,
// a nil and an empty slice or map alike (Avro has no null array).
func describeOrder(o inferOrder) string {
	rat := func(r *big.Rat) string {
		if r == nil {
			return "nil"
		}
		return r.RatString()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d|%d|%d|%d|%v|%v|%v|%q|%x|%x|%x|%s|", o.Tenant, o.ID, o.Qty, o.Small, o.Count, o.Ratio, o.Score, o.OK, o.Name, o.Raw, o.Sum, o.Code, o.At.UTC().Format(time.RFC3339Nano))
	if o.Seen != nil {
		b.WriteString(o.Seen.UTC().Format(time.RFC3339Nano))
	}
	fmt.Fprintf(&b, "|%s|", rat(o.Price))
	if o.Tax != nil {
		b.WriteString(rat(*o.Tax))
	}
	addr := func(a *inferAddress) string {
		if a == nil {
			return "nil"
		}
		z := "nil"
		if a.Zip != nil {
			z = *a.Zip
		}
		return a.Street + "/" + z
	}
	fmt.Fprintf(&b, "|%s|%s|", addr(&o.Ship), addr(o.Bill))
	for _, l := range o.Lines {
		fmt.Fprintf(&b, "%s=%s,", l.SKU, rat(l.Amount))
	}
	fmt.Fprintf(&b, "|%v|", o.Tags)
	keys := make([]string, 0, len(o.Attrs))
	for k := range o.Attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d,", k, o.Attrs[k])
	}
	note := "nil"
	if o.Note != nil {
		note = *o.Note
	}
	fmt.Fprintf(&b, "|%s|%s|%d|%q", note, o.Meta.K, o.Extra, o.Skipped)
	return b.String()
}

// ordersFn emits orders [0, N) on an impulse, fused with the write.
type ordersFn struct{ N int64 }

func (fn *ordersFn) ProcessElement(_ []byte, emit func(inferOrder)) {
	for i := range fn.N {
		emit(makeOrder(i))
	}
}

// checkOrderFn emits, for each order read, its id, and a line for each
// difference from makeOrder(id).
type checkOrderFn struct{}

func (fn *checkOrderFn) ProcessElement(o inferOrder, bad func(string), ids func(int64)) {
	ids(o.ID)
	if got, want := describeOrder(o), describeOrder(makeOrder(o.ID)); got != want {
		bad(fmt.Sprintf("order %d:\n got %s\nwant %s", o.ID, got, want))
	}
}

// orderPy reads the file argv[1] and checks that it holds the orders
// [0, argv[2]) of makeOrder, value and type, each once, in order.
const orderPy = `
import sys, datetime, decimal
import avro.datafile, avro.io
from decimal import Decimal
utc = datetime.timezone.utc
base = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=utc)
def expected(i):
    at = base + datetime.timedelta(microseconds=i * 1001)
    return {
      "id": i, "qty": i * 3 - 7, "small": -i, "count": i * 1000003, "ratio": i / 4.0, "score": i * 1.5,
      "ok": i % 2 == 0, "name": "order-%d" % i, "raw": bytes([i % 256, 0, 255]), "sum": bytes([i % 256, 1, 2, 3]),
      "code": bytes([(i >> 8) % 256, i % 256]), "at": at,
      "seen": None if i % 3 == 0 else at + datetime.timedelta(hours=1),
      "price": Decimal(i * 1000000007 - 5).scaleb(-3),
      "tax": None if i % 4 == 0 else Decimal(i * 25).scaleb(-2),
      "ship": {"street": "s%d" % i, "zip": "z%d" % i if i % 2 == 0 else None},
      "bill": None if i % 5 == 0 else {"street": "b%d" % i, "zip": "bz"},
      "lines": [{"sku": "k%d-%d" % (i, j), "amount": Decimal(j * i + 1).scaleb(-2)} for j in range(i % 3)],
      "tags": ["t%d" % j for j in range(i % 4)],
      "attrs": {"k%d" % j: j * i for j in range(i % 3)},
      "note": None if i % 2 == 0 else "n%d" % i,
      "meta": {"k": "m%d" % i}, "Extra": i % 100, "tenant": "t%d" % (i % 3),
    }
path, want_n = sys.argv[1], int(sys.argv[2])
r = avro.datafile.DataFileReader(open(path, "rb"), avro.io.DatumReader())
# A shard's records come in the order its group gave them, which no runner
# promises: each record is checked against the one of its id, and the ids
# must be 0..n-1, each once.
n, seen = 0, set()
for rec in r:
    rec = dict(rec)
    i = rec.get("id")
    if not isinstance(i, int) or i < 0 or i >= want_n or i in seen:
        sys.exit("record %d has id %r: not one of 0..%d, or seen before" % (n, i, want_n - 1))
    seen.add(i)
    want = expected(i)
    if set(rec) != set(want):
        sys.exit("record %d (id %d) has fields %s, want %s" % (n, i, sorted(rec), sorted(want)))
    for k in want:
        if rec[k] != want[k] or type(rec[k]) != type(want[k]):
            sys.exit("record %d (id %d) field %s: python3-avro read %r, want %r" % (n, i, k, rec[k], want[k]))
    n += 1
if n != want_n:
    sys.exit("%d records, want %d" % (n, want_n))
print("ok", n)
`

// TestWriteInferredSchema: a Write given no schema writes the schema
// SchemaOf infers; Read reads every order back into inferOrder exactly,
// python3-avro reads the file as the same values (its own decimals,
// datetimes, bytes, unions), and avrocat (Avro C) reads every record.
func TestWriteInferredSchema(t *testing.T) {
	avrotest.RequireTools(t)
	const n = 240
	dir := t.TempDir()
	prefix := filepath.Join(dir, "orders")
	p, s := beam.NewPipelineWithRoot()
	orders := beam.ParDo(s, &ordersFn{N: n}, beam.Impulse(s))
	files := avroio.Write(s, prefix, "", orders, avroio.WithNumShards(1), avroio.WithSuffix(".avro"))
	passert.Equals(s, files, prefix+"-00000-of-00001.avro")
	runWritePipeline(t, p)
	path := prefix + "-00000-of-00001.avro"

	// The file's schema is SchemaOf's.
	recs, h := readAs[inferOrder](t, path)
	want, err := avroio.SchemaOf(reflect.TypeFor[inferOrder]())
	if err != nil {
		t.Fatal(err)
	}
	if !sameSchema(t, h.Schema, want) || !sameSchema(t, want, inferOrderSchema) {
		t.Fatalf("the file's schema is\n%s\nwant\n%s", h.Schema, inferOrderSchema)
	}
	if len(recs) != n {
		t.Fatalf("%d records in the file, want %d", len(recs), n)
	}

	// Read gives back the very structs.
	p, s = beam.NewPipelineWithRoot()
	bad, ids := beam.ParDo2(s, &checkOrderFn{}, avroio.Read(s, path, reflect.TypeFor[inferOrder]()))
	passert.Empty(s, bad)
	wantIDs := make([]any, n)
	for i := range wantIDs {
		wantIDs[i] = int64(i)
	}
	passert.Equals(s, ids, wantIDs...)
	runWritePipeline(t, p)

	// python3-avro reads the same values.
	script := filepath.Join(dir, "check.py")
	if err := os.WriteFile(script, []byte(orderPy), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(avrotest.DebianPython, script, path, fmt.Sprint(n)).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("ok %d", n) {
		t.Fatalf("python3-avro: %v\n%s", err, out)
	}

	// avrocat (Avro C) reads every record.
	lines, err := avrotest.Avrocat(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != n {
		t.Fatalf("avrocat printed %d records, want %d", len(lines), n)
	}
	seen := map[int64]bool{}
	for i, line := range lines {
		var rec struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
			Meta struct {
				K string `json:"k"`
			} `json:"meta"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("avrocat line %d: %v: %s", i, err, line)
		}
		// In the shard's order, which no runner promises: by id.
		if rec.ID < 0 || rec.ID >= n || seen[rec.ID] || rec.Name != fmt.Sprintf("order-%d", rec.ID) || rec.Meta.K != fmt.Sprintf("m%d", rec.ID) {
			t.Fatalf("avrocat line %d (an id out of 0..%d, repeated, or other values): %s", i, n-1, line)
		}
		seen[rec.ID] = true
	}
}

// readAs reads every record of the container file path as a T.
func readAs[T any](t *testing.T, path string) ([]T, *container.Header) {
	t.Helper()
	r, err := container.OpenReader[T](path, container.FileOpener(path), 0, container.Options{})
	if err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	defer r.Close()
	var out []T
	for {
		v, _, _, err := r.Next()
		if err == io.EOF {
			return out, r.Header()
		}
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		out = append(out, v)
	}
}
