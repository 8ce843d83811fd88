package bqwrite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"cloud.google.com/go/bigquery"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// compactJSON is s with protojson's insignificant spaces taken away, or
// s if it is not JSON.
func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

var (
	jsonStrings = []string{"", "plain", `quo"te`, `back\slash`, "tab\tnew\nline\r", "\x00\x01\x1f\x7f", "ünïcödé ✓ \u2028\u2029 \ufffd",
		"<html>&amp;", "2024-01-02T03:04:05.123456", "1234567890.123456789"}
	jsonDoubles = []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-7, 1e-6, 123456789e13, 1e21, 1e300, 5e-324,
		math.MaxFloat64, math.NaN(), math.Inf(1), math.Inf(-1)}
	jsonInts = []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1 << 53, 1<<53 + 1}
)

// randomMessage fills m with random values: every REQUIRED field, most
// optional ones, 0 to 3 values of a REPEATED one.
func randomMessage(m protoreflect.Message, r *rand.Rand, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		switch {
		case f.IsList():
			l := m.Mutable(f).List()
			for n := r.IntN(4); n > 0; n-- {
				if f.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					randomMessage(e.Message(), r, depth+1)
					l.Append(e)
				} else {
					l.Append(randomScalar(f, r))
				}
			}
		case f.Cardinality() == protoreflect.Required || r.IntN(10) < 7:
			if f.Kind() == protoreflect.MessageKind {
				randomMessage(m.Mutable(f).Message(), r, depth+1)
			} else {
				m.Set(f, randomScalar(f, r))
			}
		}
	}
}

func randomScalar(f protoreflect.FieldDescriptor, r *rand.Rand) protoreflect.Value {
	switch f.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(jsonStrings[r.IntN(len(jsonStrings))])
	case protoreflect.BytesKind:
		b := make([]byte, r.IntN(7))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return protoreflect.ValueOfBytes(b)
	case protoreflect.Int64Kind:
		if r.IntN(2) == 0 {
			return protoreflect.ValueOfInt64(jsonInts[r.IntN(len(jsonInts))])
		}
		return protoreflect.ValueOfInt64(r.Int64() - math.MaxInt64/2)
	case protoreflect.Int32Kind:
		return protoreflect.ValueOfInt32(r.Int32() - math.MaxInt32/2)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(jsonDoubles[r.IntN(len(jsonDoubles))])
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	}
	panic("no random " + f.Kind().String())
}

// TestProtoJSONRoundTrip: protoJSON shows the random rows of every writer
// schema of the descriptor tests, and of a CDC write's, as JSON that
// protojson reads back as the same message.
func TestProtoJSONRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	schemas := descriptorSchemas()
	schemas["inner base64 names"] = bigquery.Schema{col(innerPlusName, bigquery.NumericFieldType, "R"),
		col("r", bigquery.RecordFieldType, "N", col(innerSlashSub, bigquery.BytesFieldType, "N"))}
	for name, schema := range schemas {
		desc, err := writerDescriptor(schema)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, d := range []*descriptorpb.DescriptorProto{desc, changeColumns(desc)} {
			fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{Name: proto.String("row.proto"), Syntax: proto.String("proto2"),
				MessageType: []*descriptorpb.DescriptorProto{d}}, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			md := fd.Messages().Get(0)
			for range 30 {
				m := dynamicpb.NewMessage(md)
				randomMessage(m, r, 0)
				row, err := proto.Marshal(m)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := protoJSON(d, row)
				if !json.Valid([]byte(got)) {
					t.Fatalf("%s: protoJSON of %x is %s, not JSON", name, row, got)
				}
				if sharedJSONNames(md) {
					continue // shown twice: TestProtoJSONSharedJSONName
				}
				back := dynamicpb.NewMessage(md)
				if err := protojson.Unmarshal([]byte(got), back); err != nil {
					t.Fatalf("%s: protoJSON of %x is %s: %v", name, row, got, err)
				}
				if !proto.Equal(back, m) {
					t.Fatalf("%s: protoJSON of %x is %s, read back as %v, want %v", name, row, got, back, m)
				}
			}
		}
	}
}

// sharedJSONNames tells whether two fields of a message of md have one
// JSON name (as columns a_b and aB do).
func sharedJSONNames(md protoreflect.MessageDescriptor) bool {
	names := map[string]bool{}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		if names[f.JSONName()] || f.Message() != nil && sharedJSONNames(f.Message()) {
			return true
		}
		names[f.JSONName()] = true
	}
	return false
}

// TestProtoJSONSharedJSONName: columns whose fields have one JSON name
// (a_b and aB: aB) are both shown under it, as protojson shows them (and
// as the hand-written protoJSON before it did).
func TestProtoJSONSharedJSONName(t *testing.T) {
	desc, err := writerDescriptor(bigquery.Schema{col("a_b", bigquery.StringFieldType, "N"), col("aB", bigquery.StringFieldType, "N")})
	if err != nil {
		t.Fatal(err)
	}
	row := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "x")
	row = protowire.AppendString(protowire.AppendTag(row, 2, protowire.BytesType), "y")
	if got, want := compactJSON(protoJSON(desc, row)), `{"aB":"x","aB":"y"}`; got != want {
		t.Errorf("protoJSON: %s, want %s", got, want)
	}
}

// TestProtoJSONWire: rows not as the encoder makes them are shown as
// protojson shows them, or in base64 where it cannot decode them.
func TestProtoJSONWire(t *testing.T) {
	schema := descriptorSchemas()["two equal records"] // a {x NUMERIC, y REPEATED STRING}, b REPEATED of the same
	schema = append(schema, col("n", bigquery.IntegerFieldType, "R"), col("q", bigquery.IntegerFieldType, "Q"), col("d", bigquery.DateFieldType, "N"))
	desc, err := writerDescriptor(schema)
	if err != nil {
		t.Fatal(err)
	}
	str := func(b []byte, num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
	}
	varint := func(b []byte, num protowire.Number, x uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), x)
	}
	msg := func(b []byte, num protowire.Number, m []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), m)
	}
	q := slices.Clip(varint(nil, 4, 7)) // every append copies it
	for _, c := range []struct {
		name string
		row  []byte
		want string // "" for the row in base64
	}{
		{"required only", q, `{"q":"7"}`},
		{"required missing", varint(nil, 3, 1), ""},
		{"unpacked repeated", varint(varint(q, 3, 1), 3, 2), `{"n":["1","2"],"q":"7"}`},
		{"packed repeated", append(protowire.AppendTag(q, 3, protowire.BytesType), 3, 1, 2, 3), `{"n":["1","2","3"],"q":"7"}`},
		{"message in two parts, and a repeated string", msg(msg(q, 1, str(nil, 1, "1.5")), 1, str(nil, 2, "y")), `{"a":{"x":"1.5","y":["y"]},"q":"7"}`},
		{"singular string twice", msg(q, 1, str(str(nil, 1, "1"), 1, "2")), `{"a":{"x":"2"},"q":"7"}`},
		{"singular int twice", varint(varint(q, 4, 9), 4, 10), `{"q":"10"}`},
		{"int32 of a big varint", varint(q, 5, 1<<40+5), `{"q":"7","d":5}`},
		{"negative int32", varint(q, 5, math.MaxUint64), `{"q":"7","d":-1}`},
		{"unknown field", varint(str(q, 99, "x"), 100, 1), `{"q":"7"}`},
		{"unknown group", protowire.AppendTag(protowire.AppendTag(q, 50, protowire.StartGroupType), 50, protowire.EndGroupType), `{"q":"7"}`},
		{"wrong wire type", str(varint(q, 1, 5), 5, "x"), `{"q":"7"}`},
		{"packed singular", append(protowire.AppendTag(q, 5, protowire.BytesType), 1, 1), `{"q":"7"}`},
		{"invalid UTF-8", msg(q, 2, str(nil, 2, "\xff")), ""},
		{"truncated", q[:1], ""},
		{"truncated message", append(protowire.AppendTag(q, 1, protowire.BytesType), 5, 1), ""},
		{"field zero", varint(q, 0, 1), ""},
		{"stray end group", protowire.AppendTag(q, 3, protowire.EndGroupType), ""},
		{"required missing in a repeated record", msg(q, 2, nil), `{"b":[{}],"q":"7"}`},
		{"empty", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, want := protoJSON(desc, c.row), c.want
			if want == "" {
				want = base64.StdEncoding.EncodeToString(c.row)
			}
			if compactJSON(got) != want {
				t.Fatalf("protoJSON of %x\ngot:  %s\nwant: %s", c.row, got, want)
			}
		})
	}
}
