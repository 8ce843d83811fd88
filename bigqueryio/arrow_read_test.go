package bigqueryio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// Arrow's Type union (Schema.fbs), the members these tests build.
const (
	typeInt    = 2
	typeUtf8   = 5
	typeList   = 12
	typeStruct = 13
	typeUnion  = 14
)

// fbField adds an Arrow Field table: name, nullable, a type of kind with
// the type table typ (0 for an empty one, none for a union), and
// children.
func fbField(b *flatbuffers.Builder, name string, kind byte, typ flatbuffers.UOffsetT, dict bool, children []flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	if typ == 0 && kind != typeUnion {
		// A type of no parameters (Utf8, Struct_, List) still has its
		// table, empty: arrow/ipc refuses a field without one.
		b.StartObject(0)
		typ = b.EndObject()
	}
	n := b.CreateString(name)
	var kids flatbuffers.UOffsetT
	if children != nil {
		b.StartVector(4, len(children), 4)
		for i := len(children) - 1; i >= 0; i-- {
			b.PrependUOffsetT(children[i])
		}
		kids = b.EndVector(len(children))
	}
	var dt flatbuffers.UOffsetT
	if dict {
		b.StartObject(4)
		b.PrependInt64Slot(0, 1, 0)
		dt = b.EndObject()
	}
	b.StartObject(7)
	b.PrependUOffsetTSlot(0, n, 0)
	b.PrependBoolSlot(1, true, false)
	b.PrependByteSlot(2, kind, 0)
	if typ != 0 {
		b.PrependUOffsetTSlot(3, typ, 0)
	}
	if dt != 0 {
		b.PrependUOffsetTSlot(4, dt, 0)
	}
	if children != nil {
		b.PrependUOffsetTSlot(5, kids, 0)
	}
	return b.EndObject()
}

// schemaMessage is an encapsulated IPC schema message of the fields made
// by fields, and an end-of-stream marker.
func schemaMessage(fields func(b *flatbuffers.Builder) []flatbuffers.UOffsetT) []byte {
	b := flatbuffers.NewBuilder(0)
	fs := fields(b)
	b.StartVector(4, len(fs), 4)
	for i := len(fs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(fs[i])
	}
	vec := b.EndVector(len(fs))
	b.StartObject(4)
	b.PrependUOffsetTSlot(1, vec, 0)
	schema := b.EndObject()
	b.StartObject(5)
	b.PrependInt16Slot(0, 4, 0)
	b.PrependByteSlot(1, headerSchema, 0)
	b.PrependUOffsetTSlot(2, schema, 0)
	b.PrependInt64Slot(3, 0, 0)
	b.Finish(b.EndObject())
	meta := b.FinishedBytes()
	for len(meta)%8 != 0 {
		meta = append(meta, 0)
	}
	out := binary.LittleEndian.AppendUint32(nil, 0xFFFFFFFF)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(meta)))
	out = append(out, meta...)
	return append(out, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0)
}

// TestArrowSchemaRefused: malformed schema messages fail with an error
// of arrow/ipc's (which reads the schema), and a schema whose flatbuffer
// points to one field table from many places (20 levels of 4 children
// each: 4^20 fields if followed) is refused by checkArrowSchemaShape's
// field budget at once, not expanded as arrow/ipc alone would (it follows
// every reference: alone, it was still expanding this schema after 20 s),
// as is one nested over 64 levels. Types the package does not
// convert are not refused here (TestArrowEvolvingTypes).
func TestArrowSchemaRefused(t *testing.T) {
	utf8 := func(b *flatbuffers.Builder, name string) flatbuffers.UOffsetT {
		return fbField(b, name, typeUtf8, 0, false, nil)
	}
	intType := func(b *flatbuffers.Builder, bits int32) flatbuffers.UOffsetT {
		b.StartObject(2)
		b.PrependInt32Slot(0, bits, 0)
		b.PrependBoolSlot(1, true, false)
		return b.EndObject()
	}
	for _, c := range []struct {
		name   string
		fields func(b *flatbuffers.Builder) []flatbuffers.UOffsetT
		want   string
	}{
		{"a good one", func(b *flatbuffers.Builder) []flatbuffers.UOffsetT {
			return []flatbuffers.UOffsetT{utf8(b, "s"), fbField(b, "i", typeInt, intType(b, 64), false, nil),
				fbField(b, "r", typeStruct, 0, false, []flatbuffers.UOffsetT{utf8(b, "x")})}
		}, ""},
		{"a dictionary encoding without its index type", func(b *flatbuffers.Builder) []flatbuffers.UOffsetT {
			return []flatbuffers.UOffsetT{fbField(b, "d", typeUtf8, 0, true, nil)}
		}, "arrow/ipc"},
		{"a union without its type table", func(b *flatbuffers.Builder) []flatbuffers.UOffsetT {
			return []flatbuffers.UOffsetT{fbField(b, "u", typeUnion, 0, false, nil)}
		}, "could not convert field 0"},
		{"a list of two", func(b *flatbuffers.Builder) []flatbuffers.UOffsetT {
			return []flatbuffers.UOffsetT{fbField(b, "l", typeList, 0, false, []flatbuffers.UOffsetT{utf8(b, "a"), utf8(b, "b")})}
		}, "List must have exactly 1 child field (got=2)"},
		{"shared fields", func(b *flatbuffers.Builder) []flatbuffers.UOffsetT {
			f := utf8(b, "leaf")
			for range 20 {
				f = fbField(b, "r", typeStruct, 0, false, []flatbuffers.UOffsetT{f, f, f, f})
			}
			return []flatbuffers.UOffsetT{f}
		}, "an Arrow schema of over 32768 fields"},
		{"nested too deep", func(b *flatbuffers.Builder) []flatbuffers.UOffsetT {
			f := utf8(b, "leaf")
			for range 70 {
				f = fbField(b, "r", typeStruct, 0, false, []flatbuffers.UOffsetT{f})
			}
			return []flatbuffers.UOffsetT{f}
		}, "nested over 64 levels"},
	} {
		start := time.Now()
		s, err := parseArrowSchema(schemaMessage(c.fields))
		if c.want == "" {
			if err != nil || s.NumFields() != 3 || s.Field(2).Type.String() != "struct<x: utf8>" {
				t.Errorf("%s: %v, %v", c.name, s, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "the session's Arrow schema") {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		// Expanded, the shared fields would take hours; refused, well
		// under a second (10 s: CI runs beside other work, under -race).
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: refused after %v", c.name, d)
		}
	}
}

// TestArrowReaderMatchesIPC: the schema and every record batch of
// responses of every column type (NULLs, repeated, nested records, empty
// strings and lists) read by arrowBatches (the schema message checked
// once, a reader per response over it and the response's bytes, memory
// from the reused arena) equal what a plain ipc.NewReader makes of the
// concatenated bytes (array.RecordEqual).
func TestArrowReaderMatchesIPC(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(2), bqtest.WithResponseRows(2))
	rows := make([][]bigquery.Value, 9)
	for i := range rows {
		r := slices.Clone(allTypesRows[i%len(allTypesRows)])
		r[0] = int64(i)
		if i%3 == 0 {
			for c := 1; c < len(r); c++ {
				if !allTypesSchema[c].Required && !allTypesSchema[c].Repeated {
					r[c] = nil
				}
			}
		}
		rows[i] = r
	}
	if err := srv.AddTable("p.d.same", bqtest.Table{Schema: allTypesSchema, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	info, resps := sessionResponses(t, srv, "p.d.same", storagepb.DataFormat_ARROW)
	ours, err := parseArrowSchema(info.Arrow)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := ipc.NewReader(bytes.NewReader(info.Arrow))
	if err != nil {
		t.Fatal(err)
	}
	if !ours.Equal(ref.Schema()) || !slices.EqualFunc(ours.Fields(), ref.Schema().Fields(), func(a, b arrow.Field) bool { return a.Metadata.Equal(b.Metadata) }) {
		t.Fatalf("schema\n%v\nwant (arrow/ipc)\n%v", ours, ref.Schema())
	}
	ref.Release()
	schema, err := schemaFromArrow(ours)
	if err != nil {
		t.Fatal(err)
	}
	var s arrowScratch
	batches := 0
	for _, r := range resps {
		rd, err := ipc.NewReader(bytes.NewReader(append(slices.Clone(info.Arrow), r.payload...)))
		if err != nil {
			t.Fatal(err)
		}
		var want []arrow.Record
		for rd.Next() {
			rec := rd.Record()
			rec.Retain()
			want = append(want, rec)
		}
		if err := rd.Err(); err != nil {
			t.Fatal(err)
		}
		k := 0
		if _, err := arrowBatches(&s, info.Arrow, r.payload, schema, func(rec arrow.Record, _ int64) error {
			if k >= len(want) || !array.RecordEqual(rec, want[k]) {
				return fmt.Errorf("batch %d differs from arrow/ipc's:\n%v", k, rec)
			}
			k++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if k != len(want) {
			t.Fatalf("%d batches, arrow/ipc read %d", k, len(want))
		}
		batches += k
		for _, rec := range want {
			rec.Release()
		}
		rd.Release()
	}
	if batches < 5 {
		t.Fatalf("%d batches compared", batches)
	}
}
