package beamtypes_test

import (
	"bytes"
	"math/big"
	"reflect"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"

	"github.com/sdfio/sdfio/internal/beamtypes"
)

type decimals struct {
	Value big.Rat
	Ptr   *big.Rat
	Nil   *big.Rat
	List  []*big.Rat
}

func TestBigRatThroughSchemaCoder(t *testing.T) {
	beamtypes.RegisterBigRat()
	beamtypes.RegisterBigRat() // a second call is harmless
	in := decimals{
		Value: *big.NewRat(-1234567890123456789, 1000),
		Ptr:   big.NewRat(1, 3),
		List:  []*big.Rat{big.NewRat(7, 2), big.NewRat(0, 1)},
	}
	typ := reflect.TypeOf(in)
	enc, err := coder.RowEncoderForStruct(typ)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := coder.RowDecoderForStruct(typ)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := enc(in, &buf); err != nil {
		t.Fatal(err)
	}
	got, err := dec(&buf)
	if err != nil {
		t.Fatal(err)
	}
	out := got.(decimals)
	if out.Value.Cmp(&in.Value) != 0 || out.Ptr.Cmp(in.Ptr) != 0 || out.Nil != nil || len(out.List) != 2 || out.List[0].Cmp(in.List[0]) != 0 || out.List[1].Sign() != 0 {
		t.Fatalf("round trip: got %v %v %v %v, want %v %v <nil> %v", out.Value.RatString(), out.Ptr, out.Nil, out.List, in.Value.RatString(), in.Ptr, in.List)
	}
}
