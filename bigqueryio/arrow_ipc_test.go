package bigqueryio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// TestArrowHostileFraming: Arrow IPC payloads whose lengths lie (a
// negative or huge metadata length, a body length beyond the payload or
// negative) or whose bytes are damaged anywhere fail the decode with an
// error, never a panic, and allocate nothing of the size they claim.
// arrow/go/v15's reader alone panics on the first and allocates the
// second before failing.
func TestArrowHostileFraming(t *testing.T) {
	srv := newTestServer(t)
	rows := make([][]bigquery.Value, 40)
	for i := range rows {
		var name bigquery.Value = "user-" + strings.Repeat("x", i%7)
		if i%4 == 0 {
			name = nil
		}
		rows[i] = []bigquery.Value{int64(i), name, float64(i) / 8, "kind"}
	}
	eventsTable(t, srv, rows)
	info, resps := sessionResponses(t, srv, "p.d.events", storagepb.DataFormat_ARROW)
	if len(resps) == 0 {
		t.Fatal("no responses")
	}
	schema, vals, err := info.decoder()
	if err != nil {
		t.Fatal(err)
	}
	sd, err := newStructDecoder(reflect.TypeOf(benchEvent{}), schema, info.Format, info.Arrow, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	good := resps[0]
	decodeBoth := func(payload []byte, n int64) (errVals, errStruct error) {
		errVals = vals.decode(payload, n, func([]bigquery.Value) error { return nil })
		var bt batch
		errStruct = sd.decodeBatch(payload, n, &bt)
		return errVals, errStruct
	}
	if e1, e2 := decodeBoth(good.payload, good.rows); e1 != nil || e2 != nil {
		t.Fatalf("the payload as sent: %v, %v", e1, e2)
	}

	// The body length of the payload's first message, located as
	// messageBodyLength reads it.
	meta := good.payload[8:]
	root := int(binary.LittleEndian.Uint32(meta))
	vt := root - int(int32(binary.LittleEndian.Uint32(meta[root:])))
	bodyAt := 8 + root + int(binary.LittleEndian.Uint16(meta[vt+10:]))
	if got, err := messageBodyLength(meta[:binary.LittleEndian.Uint32(good.payload[4:])]); err != nil || int64(binary.LittleEndian.Uint64(good.payload[bodyAt:])) != got || got <= 0 {
		t.Fatalf("body length %d (%v) at byte %d", got, err, bodyAt)
	}
	withBody := func(n uint64) []byte {
		p := append([]byte(nil), good.payload...)
		binary.LittleEndian.PutUint64(p[bodyAt:], n)
		return p
	}
	for _, c := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"negative metadata length", []byte{0xff, 0xff, 0xff, 0xff, 0xf8, 0xff, 0xff, 0xff, 1, 2, 3, 4}, "metadata of -8 bytes"},
		{"2 GB of metadata", append([]byte{0xff, 0xff, 0xff, 0xff, 0xf0, 0xff, 0xff, 0x7f}, make([]byte, 64)...), "metadata of 2147483632 bytes"},
		{"legacy negative length", []byte{0x00, 0x00, 0x00, 0x80, 1, 2, 3, 4}, "metadata of -2147483648 bytes"},
		{"1 TB body", withBody(1 << 40), "a body of 1099511627776 bytes"},
		{"negative body", withBody(1<<64 - 1), "a body of -1 bytes"},
		{"truncated", good.payload[:len(good.payload)-3], "bytes left"},
	} {
		e1, e2 := decodeBoth(c.payload, good.rows)
		for _, err := range []error{e1, e2} {
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
			}
		}
	}

	// Every byte of the payload damaged, one at a time: an error or rows,
	// never a panic, and no allocation of a claimed size.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	damaged := 0
	for i := range good.payload {
		for _, v := range []byte{0x00, 0x7f, 0x80, 0xff} {
			p := append([]byte(nil), good.payload...)
			if p[i] == v {
				continue
			}
			p[i] = v
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("byte %d set to %#x: panic %v\n%s", i, v, r, debug.Stack())
					}
				}()
				if e1, _ := decodeBoth(p, good.rows); e1 != nil {
					damaged++
				}
			}()
		}
	}
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > 1<<30 {
		t.Errorf("decoding %d damaged payloads allocated %d bytes", 4*len(good.payload), a)
	}
	t.Logf("%d of %d damaged payloads refused, %d bytes each", damaged, 4*len(good.payload), len(good.payload))
}

// arenaRow is a struct the struct decoder fills from p.d.arena.
type arenaRow struct {
	I int64               `bigquery:"i"`
	S bigquery.NullString `bigquery:"s"`
	B []byte              `bigquery:"b"`
	N *big.Rat            `bigquery:"n"`
	G bigquery.NullGeography
}

// TestArrowArenaReuse: each decoder reuses the memory Arrow's reader copies
// a response's buffers into for the next response (batchArena); values
// and structs of every earlier response, kept while the later ones are
// decoded over that memory, keep their values (strings, bytes, decimals,
// dates, records: nothing aliases the arena).
func TestArrowArenaReuse(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(2), bqtest.WithResponseRows(2))
	rows := make([][]bigquery.Value, 41)
	for i := range rows {
		r := slices.Clone(allTypesRows[0])
		r[0] = int64(i)
		r[1] = big.NewRat(int64(i)*1000003-7, 1000)
		r[7] = fmt.Sprintf("POINT(%d %d)", i, -i)
		r[9] = bytes.Repeat([]byte{byte(i)}, i%9)
		r[12] = strings.Repeat(string(rune('a'+i%26)), 1+i%17)
		r[13] = []bigquery.Value{fmt.Sprint("rec-", i), []bigquery.Value{int64(i), int64(-i)}}
		if i%5 == 0 {
			r[12], r[9], r[1] = nil, nil, nil
		}
		rows[i] = r
	}
	if err := srv.AddTable("p.d.arena", bqtest.Table{Schema: allTypesSchema, Rows: rows}); err != nil {
		t.Fatal(err)
	}
	info, resps := sessionResponses(t, srv, "p.d.arena", storagepb.DataFormat_ARROW)
	if len(resps) < 10 {
		t.Fatalf("%d responses, want one per 2 rows", len(resps))
	}
	schema, vals, err := info.decoder()
	if err != nil {
		t.Fatal(err)
	}
	var got [][]bigquery.Value
	for _, r := range resps {
		if err := vals.decode(r.payload, r.rows, func(row []bigquery.Value) error {
			got = append(got, slices.Clone(row))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	sd, err := newStructDecoder(reflect.TypeOf(arenaRow{}), schema, info.Format, info.Arrow, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	var structs []arenaRow
	var batches []*batch
	for _, r := range resps {
		b := new(batch)
		if err := sd.decodeBatch(r.payload, r.rows, b); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	for _, b := range batches {
		for i := range b.len {
			structs = append(structs, b.at(i).(arenaRow))
		}
	}
	if len(got) != len(rows) || len(structs) != len(rows) {
		t.Fatalf("%d rows and %d structs, want %d", len(got), len(structs), len(rows))
	}
	for _, g := range got {
		want := rows[g[0].(int64)]
		for c := range want {
			if !sameValue(g[c], want[c]) {
				t.Errorf("row %d column %s: %#v, want %#v", g[0], schema[c].Name, g[c], want[c])
			}
		}
	}
	for _, s := range structs {
		want := rows[s.I]
		if (want[12] == nil) != !s.S.Valid || want[12] != nil && s.S.StringVal != want[12] ||
			!bytes.Equal(s.B, func() []byte { b, _ := want[9].([]byte); return b }()) ||
			(want[1] == nil) != (s.N == nil) || s.N != nil && s.N.Cmp(want[1].(*big.Rat)) != 0 ||
			s.G.GeographyVal != want[7] {
			t.Errorf("struct %d: %+v, want %v", s.I, s, want)
		}
	}
}

// FuzzArrowDecode: any session schema message and response payload decode
// to rows or fail with an error, never a panic, through the values decoder
// and the struct decoder. Its seeds (testdata/fuzz/FuzzArrowDecode) are
// bqtest's Arrow of a table of every column type, three rows a response.
func FuzzArrowDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, header, payload []byte, n int64) {
		// An input that takes 10 s hangs: crash the worker, so that the
		// fuzzer reports it with its input (it has no timeout per input).
		wd := time.AfterFunc(10*time.Second, func() { panic("FuzzArrowDecode: an input took over 10 s") })
		defer wd.Stop()
		as, err := parseArrowSchema(header)
		if err != nil {
			return
		}
		schema, err := schemaFromArrow(as)
		if err != nil {
			return
		}
		_ = newArrowDecoder(schema, header).decode(payload, n, func([]bigquery.Value) error { return nil })
		if sd, err := newStructDecoder(reflect.TypeOf(arenaRow{}), schema, int32(Arrow), header, fieldRules{}); err == nil {
			var b batch
			_ = sd.decodeBatch(payload, n, &b)
		}
	})
}
