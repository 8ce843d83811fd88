package avroio_test

import (
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio"
)

// Schemas inferred from Go types (SchemaOf, and Write without a schema).

type inferMD5 [4]byte

type inferAddress struct {
	Street string  `avro:"street"`
	Zip    *string `avro:"zip"`
}

type inferLine struct {
	SKU    string   `avro:"sku"`
	Amount *big.Rat `avro:"amount,decimal(12,2)"`
}

type InferBase struct {
	Tenant string `avro:"tenant"`
}

// inferOrder holds every Go type inference maps.
type inferOrder struct {
	InferBase
	ID    int64            `avro:"id"`
	Qty   int32            `avro:"qty"`
	Small int16            `avro:"small"`
	Count int              `avro:"count"`
	Ratio float32          `avro:"ratio"`
	Score float64          `avro:"score"`
	OK    bool             `avro:"ok"`
	Name  string           `avro:"name"`
	Raw   []byte           `avro:"raw"`
	Sum   inferMD5         `avro:"sum"`
	Code  [2]byte          `avro:"code"`
	At    time.Time        `avro:"at"`
	Seen  *time.Time       `avro:"seen"`
	Price *big.Rat         `avro:"price,decimal(38,9)"`
	Tax   **big.Rat        `avro:"tax,decimal(10,2)"`
	Ship  inferAddress     `avro:"ship"`
	Bill  *inferAddress    `avro:"bill"`
	Lines []inferLine      `avro:"lines"`
	Tags  []string         `avro:"tags"`
	Attrs map[string]int64 `avro:"attrs"`
	Note  *string          `avro:"note"`
	Meta  struct {
		K string `avro:"k"`
	} `avro:"meta"`
	Extra   int8
	Skipped string `avro:"-"`
	hidden  int
}

const inferNS = "github_com.sdfio.sdfio.avroio_test"

// inferOrderSchema is the schema SchemaOf must give inferOrder, written
// out by hand from SchemaOf's rules.
const inferOrderSchema = `{"type":"record","name":"inferOrder","namespace":"` + inferNS + `","fields":[
 {"name":"id","type":"long"},
 {"name":"qty","type":"int"},
 {"name":"small","type":"int"},
 {"name":"count","type":"long"},
 {"name":"ratio","type":"float"},
 {"name":"score","type":"double"},
 {"name":"ok","type":"boolean"},
 {"name":"name","type":"string"},
 {"name":"raw","type":"bytes"},
 {"name":"sum","type":{"type":"fixed","name":"inferMD5","namespace":"` + inferNS + `","size":4}},
 {"name":"code","type":{"type":"fixed","name":"inferOrder_code","namespace":"` + inferNS + `","size":2}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"seen","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":9}},
 {"name":"tax","type":["null",{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}],"default":null},
 {"name":"ship","type":{"type":"record","name":"inferAddress","namespace":"` + inferNS + `","fields":[
   {"name":"street","type":"string"},
   {"name":"zip","type":["null","string"],"default":null}]}},
 {"name":"bill","type":["null","` + inferNS + `.inferAddress"],"default":null},
 {"name":"lines","type":{"type":"array","items":{"type":"record","name":"inferLine","namespace":"` + inferNS + `","fields":[
   {"name":"sku","type":"string"},
   {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}}]}}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"meta","type":{"type":"record","name":"inferOrder_meta","namespace":"` + inferNS + `","fields":[{"name":"k","type":"string"}]}},
 {"name":"Extra","type":"int"},
 {"name":"tenant","type":"string"}
]}`

// sameSchema reports whether two schemas (JSON) are the same schema,
// logical types, names and defaults included, whatever their spelling.
func sameSchema(t *testing.T, a, b string) bool {
	t.Helper()
	norm := func(s string) string {
		sch, err := avro.ParseWithCache(s, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatalf("%v: %s", err, s)
		}
		j, err := json.Marshal(sch)
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	return norm(a) == norm(b)
}

func TestSchemaOfExact(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[inferOrder](), reflect.TypeFor[*inferOrder]()} {
		got, err := avroio.SchemaOf(typ)
		if err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if !sameSchema(t, got, inferOrderSchema) {
			t.Errorf("SchemaOf(%v) =\n%s\nwant\n%s", typ, got, inferOrderSchema)
		}
	}
}

type badChan struct {
	ID int64    `avro:"id"`
	C  chan int `avro:"c"`
}

type badNested struct {
	ID    int64 `avro:"id"`
	Lines []struct {
		F func() `avro:"f"`
	} `avro:"lines"`
}

type badIface struct {
	V any `avro:"v"`
}

type badMapKey struct {
	M map[int]string `avro:"m"`
}

type badRecursive struct {
	ID   int64           `avro:"id"`
	Next *badRecursive   `avro:"next"`
	Kids []badRecursive2 `avro:"kids"`
}

type badRecursive2 struct {
	Up []badRecursive2 `avro:"up"`
}

type badRatNoTag struct {
	P *big.Rat `avro:"p"`
}

type badRatValue struct {
	P big.Rat `avro:"p,decimal(10,2)"`
}

type badTagOption struct {
	N int64 `avro:"n,omitempty"`
}

type badDecimalOnInt struct {
	N int64 `avro:"n,decimal(10,2)"`
}

type badScale struct {
	P *big.Rat `avro:"p,decimal(4,5)"`
}

type badUint struct {
	U uint64 `avro:"u"`
}

type badArray struct {
	A [3]int32 `avro:"a"`
}

type badPtrPtr struct {
	P **string `avro:"p"`
}

type badName struct {
	N string `avro:"my-name"`
}

type badComplex struct {
	C complex128 `avro:"c"`
}

func TestSchemaOfRefuses(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		want []string
	}{
		{reflect.TypeFor[badChan](), []string{"field badChan.C", "chan"}},
		{reflect.TypeFor[badNested](), []string{"field badNested.Lines[].F", "func"}},
		{reflect.TypeFor[badIface](), []string{"field badIface.V", "interface"}},
		{reflect.TypeFor[badMapKey](), []string{"field badMapKey.M", "keys are strings, not int"}},
		{reflect.TypeFor[badRecursive](), []string{"field badRecursive.Next", "holds itself", "recursive"}},
		{reflect.TypeFor[badRecursive2](), []string{"field badRecursive2.Up[]", "holds itself"}},
		{reflect.TypeFor[badRatNoTag](), []string{"field badRatNoTag.P", `avro:"p,decimal(P,S)"`}},
		{reflect.TypeFor[badRatValue](), []string{"field badRatValue.P", "*big.Rat"}},
		{reflect.TypeFor[badTagOption](), []string{"field badTagOption.N", `unknown option "omitempty"`}},
		{reflect.TypeFor[badDecimalOnInt](), []string{"field badDecimalOnInt.N", "holds none"}},
		{reflect.TypeFor[badScale](), []string{"field badScale.P", "decimal(4,5)"}},
		{reflect.TypeFor[badUint](), []string{"field badUint.U", "uint64"}},
		{reflect.TypeFor[badArray](), []string{"field badArray.A", "use a slice"}},
		{reflect.TypeFor[badPtrPtr](), []string{"field badPtrPtr.P", "pointer to a pointer"}},
		{reflect.TypeFor[badName](), []string{"field badName.N", "my-name"}},
		{reflect.TypeFor[badComplex](), []string{"field badComplex.C", "complex128"}},
		{reflect.TypeFor[string](), []string{"only a struct type"}},
		{reflect.TypeFor[time.Time](), []string{"only a struct type"}},
	} {
		_, err := avroio.SchemaOf(c.typ)
		if err == nil {
			t.Errorf("SchemaOf(%v) succeeded", c.typ)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("SchemaOf(%v): %v\nwant it to say %q", c.typ, err, w)
			}
		}
	}
}
