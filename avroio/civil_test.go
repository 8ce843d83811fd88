package avroio

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

// Civil types in structs, without a pipeline: the bytes Write encodes
// for every logical type they map to, the values read back, the values
// refused on either side, and the types refused at construction.

const civilMixedSchema = `{"type":"record","name":"Mixed","namespace":"sdfio.test","fields":[
 {"name":"id","type":"long"},
 {"name":"d","type":{"type":"int","logicalType":"date"}},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"lm","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"lu","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"ds","type":"string"},
 {"name":"nd","type":["null",{"type":"int","logicalType":"date"}]},
 {"name":"nlu","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]}
]}`

type civilMixed struct {
	ID  int64           `avro:"id"`
	D   civil.Date      `avro:"d"`
	TM  civil.Time      `avro:"tm"`
	TU  civil.Time      `avro:"tu"`
	LM  civil.DateTime  `avro:"lm"`
	LU  civil.DateTime  `avro:"lu"`
	DS  civil.Date      `avro:"ds"` // as text, by hamba/avro's TextMarshaler
	ND  *civil.Date     `avro:"nd"`
	NLU *civil.DateTime `avro:"nlu"`
}

// TestCivilEncodeDecode: every logical type a civil type maps to is
// written as Avro's number (a wall clock in the daylight-saving gap too),
// times cut to the schema's unit, the same for a struct and a pointer to
// it, and read back into the same Go values.
func TestCivilEncodeDecode(t *testing.T) {
	cfg, err := newWriteConfig("/x/out", civilMixedSchema, reflect.TypeFor[civilMixed](), nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newElementEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wall := civil.DateTime{Date: civil.Date{Year: 2024, Month: 3, Day: 10}, Time: civil.Time{Hour: 2, Minute: 30, Second: 15, Nanosecond: 123456789}}
	old := civil.DateTime{Date: civil.Date{Year: 1969, Month: 12, Day: 31}, Time: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999999}}
	nd := civil.Date{Year: 1, Month: 1, Day: 1}
	rows := []civilMixed{
		{ID: 1, D: civil.Date{Year: 1969, Month: 12, Day: 31}, TM: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999999},
			TU: civil.Time{Hour: 12, Nanosecond: 1999}, LM: wall, LU: wall, DS: civil.Date{Year: 2024, Month: 2, Day: 29}, ND: &nd, NLU: &old},
		{ID: 2, D: civil.Date{Year: 9999, Month: 12, Day: 31}, TM: civil.Time{}, TU: civil.Time{}, LM: old, LU: old, DS: civil.Date{Year: 1, Month: 1, Day: 1}},
	}
	for _, r := range rows {
		want := avro.NewWriter(nil, 64)
		want.WriteLong(r.ID)
		want.WriteInt(int32(civilDays(r.D)))
		want.WriteInt(int32(civilMicros(r.TM) / 1000))
		want.WriteLong(civilMicros(r.TU))
		want.WriteLong(r.LM.In(time.UTC).UnixMilli())
		want.WriteLong(r.LU.In(time.UTC).UnixMicro())
		want.WriteString(r.DS.String())
		if r.ND == nil {
			want.WriteLong(0)
		} else {
			want.WriteLong(1)
			want.WriteInt(int32(civilDays(*r.ND)))
		}
		if r.NLU == nil {
			want.WriteLong(0)
		} else {
			want.WriteLong(1)
			want.WriteLong(r.NLU.In(time.UTC).UnixMicro())
		}
		for _, elem := range []any{r, &r} {
			d, err := enc.encode(elem)
			if err != nil {
				t.Fatalf("%T %d: %v", elem, r.ID, err)
			}
			if string(d) != string(want.Buffer()) {
				t.Errorf("%T %d encoded as %x, want %x", elem, r.ID, d, want.Buffer())
			}
		}
	}

	// Read back, as structs and as pointers; times cut to the unit.
	path := writeEncoded(t, civilMixedSchema, rows, enc)
	ms := func(c civil.Time) civil.Time { c.Nanosecond -= c.Nanosecond % 1e6; return c }
	want := make([]civilMixed, len(rows))
	for i, r := range rows {
		r.TM, r.TU = ms(r.TM), micro(r.TU)
		r.LM.Time, r.LU.Time = ms(r.LM.Time), micro(r.LU.Time)
		if r.NLU != nil {
			v := *r.NLU
			v.Time = micro(v.Time)
			r.NLU = &v
		}
		want[i] = r
	}
	got, err := sdftestReadAll(t, newSource(t, path, reflect.TypeFor[civilMixed]()))
	if err != nil {
		t.Fatal(err)
	}
	gotPtr, err := sdftestReadAll(t, newSource(t, path, reflect.TypeFor[*civilMixed]()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(gotPtr) != len(want) {
		t.Fatalf("read %d and %d records, want %d", len(got), len(gotPtr), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
		if p, ok := gotPtr[i].(*civilMixed); !ok || !reflect.DeepEqual(*p, want[i]) {
			t.Errorf("record %d as a pointer:\n got %+v\nwant %+v", i, gotPtr[i], want[i])
		}
	}
}

// writeEncoded writes elems, encoded by enc, as a container file of
// schema, and returns its path.
func writeEncoded[T any](t *testing.T, schema string, elems []T, enc *elementEncoder) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.avro")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := container.NewWriter(f, schema, container.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range elems {
		if err := enc.append(w, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCivilWriteRefusesInvalid: a civil value that is no date or time of
// day, or a date beyond an Avro date, fails the write naming its field,
// wherever it is; the container writer's path (runner sharding) too.
func TestCivilWriteRefusesInvalid(t *testing.T) {
	cfg, err := newWriteConfig("/x/out", "", reflect.TypeFor[civilRow](), nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newElementEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.encode(civilRowOf(3)); err != nil {
		t.Fatalf("a valid row: %v", err)
	}
	bad := civil.Date{Year: 2023, Month: 2, Day: 29}
	for _, c := range []struct {
		name   string
		break_ func(r *civilRow)
		want   []string
	}{
		{"day", func(r *civilRow) { r.Day = civil.Date{Year: 2024, Month: 2, Day: 30} }, []string{"field day", "2024-02-30"}},
		{"zero day", func(r *civilRow) { r.Day = civil.Date{} }, []string{"field day"}},
		{"far day", func(r *civilRow) { r.Day = civil.Date{Year: 6000000, Month: 1, Day: 1} }, []string{"field day", "cannot hold"}},
		{"far wall clock", func(r *civilRow) { r.When = civil.DateTime{Date: civil.Date{Year: 300000, Month: 1, Day: 1}} }, []string{"field when", "2^63"}},
		{"clock", func(r *civilRow) { r.Clock = civil.Time{Hour: 24} }, []string{"field clock", "24:00:00"}},
		{"negative clock", func(r *civilRow) { r.Clock = civil.Time{Second: -1} }, []string{"field clock"}},
		{"when", func(r *civilRow) { r.When.Time.Minute = 60 }, []string{"field when"}},
		{"maybe day", func(r *civilRow) { r.MaybeDay = &bad }, []string{"field maybe_day", "2023-02-29"}},
		{"holiday", func(r *civilRow) { r.Holidays = []civil.Date{{Year: 2024, Month: 1, Day: 1}, bad} }, []string{"item 1", "field holidays[]"}},
		{"opens", func(r *civilRow) { r.Opens = map[string]civil.Time{"x": {Hour: -1}} }, []string{`key "x"`, "field opens{}"}},
		{"slot", func(r *civilRow) { r.Slot.Day = bad }, []string{"field slot.day"}},
		{"slots", func(r *civilRow) { r.Slots = []*civilSlot{nil, {Day: bad}} }, []string{"item 1", "field slots[].day"}},
		{"embedded", func(r *civilRow) { r.Opened = bad }, []string{"field opened"}},
	} {
		r := civilRowOf(3)
		c.break_(&r)
		_, err := enc.encode(r)
		if err == nil {
			t.Errorf("%s: encoded", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", c.name, err, w)
			}
		}
		w, werr := container.NewWriter(discard{}, cfg.Schema, container.WriterOptions{})
		if werr != nil {
			t.Fatal(werr)
		}
		if err := enc.append(w, &r); err == nil || !strings.Contains(err.Error(), "record 0") || !strings.Contains(err.Error(), c.want[0]) {
			t.Errorf("%s: appended: %v", c.name, err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestCivilReadRefusesNoTimeOfDay: a time-micros outside [0, 24h), valid
// Avro that no civil.Time holds, fails the read with an ErrRange naming
// the field, the file and the record; the records before it are read.
func TestCivilReadRefusesNoTimeOfDay(t *testing.T) {
	const schema = `{"type":"record","name":"T","fields":[{"name":"id","type":"long"},{"name":"clock","type":{"type":"long","logicalType":"time-micros"}}]}`
	type raw struct {
		ID    int64         `avro:"id"`
		Clock time.Duration `avro:"clock"`
	}
	type clocked struct {
		ID    int64      `avro:"id"`
		Clock civil.Time `avro:"clock"`
	}
	for _, badClock := range []time.Duration{24 * time.Hour, -time.Microsecond} {
		cfg, err := newWriteConfig("/x/out", schema, reflect.TypeFor[raw](), nil)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := newElementEncoder(cfg)
		if err != nil {
			t.Fatal(err)
		}
		last := 24*time.Hour - time.Microsecond
		path := writeEncoded(t, schema, []raw{{1, 0}, {2, last}, {3, badClock}}, enc)
		got, err := sdftestReadAll(t, newSource(t, path, reflect.TypeFor[clocked]()))
		var ce *container.Error
		if !errors.As(err, &ce) || !errors.Is(err, container.ErrRange) || ce.Record != 2 || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "field clock") {
			t.Fatalf("reading a time-micros of %v: %v", badClock, err)
		}
		if len(got) != 2 || got[1].(clocked).Clock != (civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000}) {
			t.Errorf("read before the error: %+v", got)
		}
	}
}

type civilTree struct {
	Day  civil.Date  `avro:"day"`
	Kids []civilTree `avro:"kids"`
}

type civilInLong struct {
	ID  int64      `avro:"id"`
	Day civil.Date `avro:"day"`
}

type civilHidden struct {
	Day civil.Date `avro:"day"`
}

type CivilPtrBase struct {
	When civil.DateTime `avro:"when"`
}

// civilEmbeds embeds a struct of an unexported type and a pointer to a
// struct, both holding civil types.
type civilEmbeds struct {
	civilHidden
	*CivilPtrBase
	ID int64 `avro:"id"`
}

// TestCivilTypesRefused: types and schemas that do not fit are refused
// when Write is built, or when a read opens the file, naming the field.
func TestCivilTypesRefused(t *testing.T) {
	const treeSchema = `{"type":"record","name":"Tree","fields":[{"name":"day","type":{"type":"int","logicalType":"date"}},{"name":"kids","type":{"type":"array","items":"Tree"}}]}`
	const longSchema = `{"type":"record","name":"L","fields":[{"name":"id","type":"long"},{"name":"day","type":"long"}]}`
	for _, c := range []struct {
		typ    reflect.Type
		schema string
		want   []string
	}{
		{reflect.TypeFor[civilTree](), treeSchema, []string{"civilTree holds itself"}},
		{reflect.TypeFor[civilInLong](), longSchema, []string{"Go field Day", "cannot hold Avro long", "civil.Date holds an Avro date"}},
		{reflect.TypeFor[civil.Date](), "", []string{"only a struct type"}},
	} {
		_, err := newWriteConfig("/x/out", c.schema, c.typ, nil)
		if err == nil {
			t.Errorf("Write of %v by %s was built", c.typ, c.schema)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Write of %v: %v\nwant it to say %q", c.typ, err, w)
			}
		}
	}

	// Read: a file whose "day" is a long.
	type longRow struct {
		ID  int64 `avro:"id"`
		Day int64 `avro:"day"`
	}
	cfg, err := newWriteConfig("/x/out", longSchema, reflect.TypeFor[longRow](), nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newElementEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := writeEncoded(t, longSchema, []longRow{{1, 2}}, enc)
	_, err = sdftestReadAll(t, newSource(t, path, reflect.TypeFor[civilInLong]()))
	if !errors.Is(err, container.ErrSchema) || !strings.Contains(err.Error(), "Go field Day") || !strings.Contains(err.Error(), path) {
		t.Errorf("reading a long into a civil.Date: %v", err)
	}
}

// TestCivilEmbedded: civil fields of embedded structs, one of an
// unexported type and one through a pointer, are written, and read back
// with the pointer allocated; a nil embedded pointer fails the write
// naming the field.
func TestCivilEmbedded(t *testing.T) {
	cfg, err := newWriteConfig("/x/out", "", reflect.TypeFor[civilEmbeds](), nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := newElementEncoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rows := []civilEmbeds{
		{civilHidden{civil.Date{Year: 2000, Month: 1, Day: 2}}, &CivilPtrBase{civil.DateTime{Date: civil.Date{Year: 1900, Month: 3, Day: 4}, Time: civil.Time{Hour: 5}}}, 1},
		{civilHidden{civil.Date{Year: 1960, Month: 6, Day: 7}}, &CivilPtrBase{civil.DateTime{Date: civil.Date{Year: 2100, Month: 8, Day: 9}, Time: civil.Time{Second: 10}}}, 2},
	}
	path := writeEncoded(t, cfg.Schema, rows, enc)
	got, err := sdftestReadAll(t, newSource(t, path, reflect.TypeFor[civilEmbeds]()))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("read %d records", len(got))
	}
	for i := range rows {
		if !reflect.DeepEqual(got[i], rows[i]) {
			t.Errorf("record %d: got %+v (%+v), want %+v (%+v)", i, got[i], got[i].(civilEmbeds).CivilPtrBase, rows[i], rows[i].CivilPtrBase)
		}
	}
	if _, err := enc.encode(civilEmbeds{civilHidden: civilHidden{civil.Date{Year: 2000, Month: 1, Day: 1}}, ID: 3}); err == nil || !strings.Contains(err.Error(), "CivilPtrBase.When") || !strings.Contains(err.Error(), "nil embedded") {
		t.Errorf("a nil embedded pointer: %v", err)
	}
}

// TestSchemaOfCivil: SchemaOf maps the civil types (SchemaOf's table).
func TestSchemaOfCivil(t *testing.T) {
	got, err := SchemaOf(reflect.TypeFor[civilRow]())
	if err != nil {
		t.Fatal(err)
	}
	if !sameParsedSchema(t, got, civilRowSchema) {
		t.Errorf("SchemaOf(civilRow) =\n%s\nwant\n%s", got, civilRowSchema)
	}
}
