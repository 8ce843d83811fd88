package avroio_test

// The README's schema inference, compiled and run. internal/readme checks
// that README.md quotes this file verbatim.

import (
	"context"
	"fmt"
	"log"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/avroio"
)

// Order's Avro schema is inferred from its fields and tags.
type Order struct {
	ID      int64      `avro:"id"`
	Placed  time.Time  `avro:"placed"`              // long timestamp-micros
	Due     civil.Date `avro:"due"`                 // int date
	Total   *big.Rat   `avro:"total,decimal(12,2)"` // bytes decimal(12,2)
	Coupon  *string    `avro:"coupon"`              // ["null", "string"]
	Lines   []Line     `avro:"lines"`               // array of record Line
	Tracked [16]byte   `avro:"tracked"`             // fixed Order_tracked, size 16
}

type Line struct {
	SKU string `avro:"sku"`
	Qty int32  `avro:"qty"` // int
}

func init() {
	avroio.RegisterType(reflect.TypeFor[Order]()) // it holds a decimal and a civil.Date
	beam.RegisterType(reflect.TypeFor[Line]())
	register.DoFn2x0[[]byte, func(Order)](&makeOrders{})
}

// makeOrders emits three orders.
type makeOrders struct{}

func (makeOrders) ProcessElement(_ []byte, emit func(Order)) {
	for i := range int64(3) {
		emit(Order{ID: i, Placed: time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC), Due: civil.Date{Year: 2026, Month: 12, Day: 24},
			Total: big.NewRat(1999+i, 100), Lines: []Line{{SKU: "A-1", Qty: 2}}})
	}
}

// Write structs with no schema: Write infers it (avroio.SchemaOf) and
// writes it in every file's header.
func Example_inferSchema() {
	out, err := os.MkdirTemp("", "readme-infer")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(out)

	p, s := beam.NewPipelineWithRoot()
	orders := beam.ParDo(s, &makeOrders{}, beam.Impulse(s))
	avroio.Write(s, filepath.Join(out, "orders"), "", orders, avroio.WithNumShards(1))
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "orders*"))
	fmt.Println(len(files), "file")

	schema, err := avroio.SchemaOf(reflect.TypeFor[Order]())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(schema)
	// Output:
	// 1 file
	// {"name":"github_com.sdfio.sdfio.avroio_test.Order","type":"record","fields":[{"name":"id","type":"long"},{"name":"placed","type":{"type":"long","logicalType":"timestamp-micros"}},{"name":"due","type":{"type":"int","logicalType":"date"}},{"name":"total","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},{"name":"coupon","type":["null","string"],"default":null},{"name":"lines","type":{"type":"array","items":{"name":"github_com.sdfio.sdfio.avroio_test.Line","type":"record","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}}},{"name":"tracked","type":{"name":"github_com.sdfio.sdfio.avroio_test.Order_tracked","type":"fixed","size":16}}]}
}
