package avroio

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/internal/avrotest"
)

// Civil dates and times (cloud.google.com/go/civil) written with an
// inferred schema (date, time-micros, local-timestamp-micros), read back
// by Read into the same struct, by python3-avro and by avrocat, all under
// TZ=America/New_York, where a wall clock in the daylight-saving gap
// would move if the worker's zone took part.

type CivilBase struct {
	Opened civil.Date `avro:"opened"`
}

type civilSlot struct {
	Day  civil.Date `avro:"day"`
	From civil.Time `avro:"from"`
}

type civilRow struct {
	CivilBase
	ID         int64                 `avro:"id"`
	Day        civil.Date            `avro:"day"`
	Clock      civil.Time            `avro:"clock"`
	When       civil.DateTime        `avro:"when"`
	MaybeDay   *civil.Date           `avro:"maybe_day"`
	MaybeClock *civil.Time           `avro:"maybe_clock"`
	MaybeWhen  *civil.DateTime       `avro:"maybe_when"`
	Holidays   []civil.Date          `avro:"holidays"`
	Opens      map[string]civil.Time `avro:"opens"`
	Slot       civilSlot             `avro:"slot"`
	Slots      []*civilSlot          `avro:"slots"`
	Name       string                `avro:"name"`
}

// civilRowSchema is the schema SchemaOf must give civilRow.
const civilRowSchema = `{"type":"record","name":"civilRow","namespace":"github_com.sdfio.sdfio.avroio","fields":[
 {"name":"id","type":"long"},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"clock","type":{"type":"long","logicalType":"time-micros"}},
 {"name":"when","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"maybe_day","type":["null",{"type":"int","logicalType":"date"}],"default":null},
 {"name":"maybe_clock","type":["null",{"type":"long","logicalType":"time-micros"}],"default":null},
 {"name":"maybe_when","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}],"default":null},
 {"name":"holidays","type":{"type":"array","items":{"type":"int","logicalType":"date"}}},
 {"name":"opens","type":{"type":"map","values":{"type":"long","logicalType":"time-micros"}}},
 {"name":"slot","type":{"type":"record","name":"civilSlot","namespace":"github_com.sdfio.sdfio.avroio","fields":[
   {"name":"day","type":{"type":"int","logicalType":"date"}},
   {"name":"from","type":{"type":"long","logicalType":"time-micros"}}]}},
 {"name":"slots","type":{"type":"array","items":["null","github_com.sdfio.sdfio.avroio.civilSlot"]}},
 {"name":"name","type":"string"},
 {"name":"opened","type":{"type":"int","logicalType":"date"}}
]}`

// The edge values the rows cycle through: the first and last days Python
// and Avro Java (LocalDate, years 1-9999) share, days around 1970, a leap
// day, and wall clocks in New York's daylight-saving gap and overlap and
// before its standard time (1883), to the microsecond, with nanoseconds
// that the write truncates.
var (
	civilDates = []civil.Date{
		{Year: 1, Month: 1, Day: 1}, {Year: 1969, Month: 12, Day: 31}, {Year: 1970, Month: 1, Day: 1},
		{Year: 2024, Month: 2, Day: 29}, {Year: 9999, Month: 12, Day: 31}, {Year: 1582, Month: 10, Day: 4},
		{Year: 1582, Month: 10, Day: 15}, {Year: 2038, Month: 1, Day: 19},
	}
	civilTimes = []civil.Time{
		{}, {Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999999}, {Hour: 12, Minute: 34, Second: 56, Nanosecond: 789012345},
		{Hour: 2, Minute: 30}, {Nanosecond: 999}, {Hour: 1, Minute: 59, Second: 59, Nanosecond: 999999000},
	}
	civilDateTimes = []civil.DateTime{
		{Date: civil.Date{Year: 2024, Month: 3, Day: 10}, Time: civil.Time{Hour: 2, Minute: 30, Second: 15, Nanosecond: 123456789}},
		{Date: civil.Date{Year: 2024, Month: 11, Day: 3}, Time: civil.Time{Hour: 1, Minute: 30}},
		{Date: civil.Date{Year: 1850, Month: 6, Day: 1}, Time: civil.Time{Hour: 12, Nanosecond: 123456000}},
		{Date: civil.Date{Year: 1, Month: 1, Day: 1}},
		{Date: civil.Date{Year: 9999, Month: 12, Day: 31}, Time: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999999}},
		{Date: civil.Date{Year: 1969, Month: 12, Day: 31}, Time: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999500}},
	}
)

// civilRowOf is row i as written.
func civilRowOf(i int64) civilRow {
	n := int(i)
	r := civilRow{
		CivilBase: CivilBase{Opened: civilDates[(n+3)%len(civilDates)]},
		ID:        i,
		Day:       civilDates[n%len(civilDates)],
		Clock:     civilTimes[n%len(civilTimes)],
		When:      civilDateTimes[n%len(civilDateTimes)],
		Holidays:  []civil.Date{},
		Opens:     map[string]civil.Time{},
		Slot:      civilSlot{Day: civilDates[(n+1)%len(civilDates)], From: civilTimes[(n+1)%len(civilTimes)]},
		Slots:     []*civilSlot{},
		Name:      fmt.Sprintf("row-%d", i),
	}
	r.When.Time.Second = (r.When.Time.Second + n) % 60
	// Days around each edge, within years 1-9999.
	if shift := n / len(civilDates); r.Day.Year < 9999 {
		r.Day = r.Day.AddDays(shift)
	} else {
		r.Day = r.Day.AddDays(-shift)
	}
	if n%3 != 0 {
		d := civilDates[(n+5)%len(civilDates)]
		r.MaybeDay = &d
	}
	if n%4 != 1 {
		c := civilTimes[(n+2)%len(civilTimes)]
		r.MaybeClock = &c
	}
	if n%5 != 2 {
		w := civilDateTimes[(n+1)%len(civilDateTimes)]
		r.MaybeWhen = &w
	}
	for j := range n % 4 {
		r.Holidays = append(r.Holidays, civilDates[(n+j)%len(civilDates)])
	}
	for j := range n % 3 {
		r.Opens[fmt.Sprintf("k%d", j)] = civilTimes[(n+j)%len(civilTimes)]
	}
	for j := range n % 3 {
		if j == 1 {
			r.Slots = append(r.Slots, nil)
			continue
		}
		r.Slots = append(r.Slots, &civilSlot{Day: civilDates[(n+j+2)%len(civilDates)], From: civilTimes[(n+j)%len(civilTimes)]})
	}
	return r
}

// micro is t cut to the microsecond, as every value is written.
func micro(t civil.Time) civil.Time {
	t.Nanosecond -= t.Nanosecond % 1000
	return t
}

// civilRowRead is row i as read back: times to the microsecond.
func civilRowRead(i int64) civilRow {
	r := civilRowOf(i)
	r.Clock = micro(r.Clock)
	r.When.Time = micro(r.When.Time)
	if r.MaybeClock != nil {
		c := micro(*r.MaybeClock)
		r.MaybeClock = &c
	}
	if r.MaybeWhen != nil {
		w := *r.MaybeWhen
		w.Time = micro(w.Time)
		r.MaybeWhen = &w
	}
	for k, v := range r.Opens {
		r.Opens[k] = micro(v)
	}
	r.Slot.From = micro(r.Slot.From)
	for _, s := range r.Slots {
		if s != nil {
			s.From = micro(s.From)
		}
	}
	return r
}

// civilDays is d as an Avro date: days since 1970-01-01.
func civilDays(d civil.Date) int64 {
	return int64(d.DaysSince(civil.Date{Year: 1970, Month: 1, Day: 1}))
}

// civilMicros is t as a time-micros: microseconds since midnight.
func civilMicros(t civil.Time) int64 {
	return ((int64(t.Hour)*60+int64(t.Minute))*60+int64(t.Second))*1e6 + int64(t.Nanosecond)/1000
}

// civilWall is dt as a local-timestamp-micros.
func civilWall(dt civil.DateTime) int64 { return dt.In(time.UTC).UnixMicro() }

// civilExpected is row i as Avro's numbers (dates as days, times and wall
// clocks as microseconds, null as nil), for python3-avro's and avrocat's
// checks.
func civilExpected(i int64) map[string]any {
	r := civilRowOf(i)
	m := map[string]any{
		"id": i, "day": civilDays(r.Day), "clock": civilMicros(r.Clock), "when": civilWall(r.When),
		"maybe_day": nil, "maybe_clock": nil, "maybe_when": nil, "name": r.Name, "opened": civilDays(r.Opened),
		"slot": map[string]any{"day": civilDays(r.Slot.Day), "from": civilMicros(r.Slot.From)},
	}
	if r.MaybeDay != nil {
		m["maybe_day"] = civilDays(*r.MaybeDay)
	}
	if r.MaybeClock != nil {
		m["maybe_clock"] = civilMicros(*r.MaybeClock)
	}
	if r.MaybeWhen != nil {
		m["maybe_when"] = civilWall(*r.MaybeWhen)
	}
	hol := []any{}
	for _, d := range r.Holidays {
		hol = append(hol, civilDays(d))
	}
	m["holidays"] = hol
	opens := map[string]any{}
	for k, v := range r.Opens {
		opens[k] = civilMicros(v)
	}
	m["opens"] = opens
	slots := []any{}
	for _, s := range r.Slots {
		if s == nil {
			slots = append(slots, nil)
			continue
		}
		slots = append(slots, map[string]any{"day": civilDays(s.Day), "from": civilMicros(s.From)})
	}
	m["slots"] = slots
	return m
}

func init() {
	RegisterType(reflect.TypeFor[civilRow]())
	register.DoFn2x0[[]byte, func(civilRow)](&civilRowsFn{})
	register.DoFn3x0[civilRow, func(string), func(int64)](&checkCivilFn{})
	register.Emitter1[civilRow]()
	register.Emitter1[string]()
	register.Emitter1[int64]()
}

// civilRowsFn emits rows [0, N), fused with the write.
type civilRowsFn struct{ N int64 }

func (fn *civilRowsFn) ProcessElement(_ []byte, emit func(civilRow)) {
	for i := range fn.N {
		emit(civilRowOf(i))
	}
}

// checkCivilFn emits each row's id, and a line for each row that is not
// civilRowRead(id).
type checkCivilFn struct{}

func (fn *checkCivilFn) ProcessElement(r civilRow, bad func(string), ids func(int64)) {
	ids(r.ID)
	if want := civilRowRead(r.ID); !reflect.DeepEqual(r, want) {
		bad(fmt.Sprintf("row %d:\n got %+v\nwant %+v", r.ID, r, want))
	}
}

// civilPy reads the container file argv[1] and checks each record against
// the JSON lines of argv[2] (civilExpected): python3-avro 1.11 gives dates
// as datetime.date and time-micros as datetime.time; it predates
// local-timestamp-micros and gives the long (a newer one, a naive
// datetime: both are taken).
const civilPy = `
import sys, json, datetime
import avro.datafile, avro.io
epoch = datetime.date(1970, 1, 1)
def days(v):
    if type(v) is not datetime.date:
        sys.exit("not a datetime.date: %r" % (v,))
    return (v - epoch).days
def micros(v):
    if type(v) is not datetime.time:
        sys.exit("not a datetime.time: %r" % (v,))
    return ((v.hour * 60 + v.minute) * 60 + v.second) * 1000000 + v.microsecond
def wall(v):
    if isinstance(v, datetime.datetime):
        d = v.replace(tzinfo=None) - datetime.datetime(1970, 1, 1)
        return (d.days * 86400 + d.seconds) * 1000000 + d.microseconds
    if type(v) is not int:
        sys.exit("not a long: %r" % (v,))
    return v
def opt(f, v):
    return None if v is None else f(v)
def slot(s):
    return None if s is None else {"day": days(s["day"]), "from": micros(s["from"])}
want = {w["id"]: w for w in (json.loads(l) for l in open(sys.argv[2]))}
r = avro.datafile.DataFileReader(open(sys.argv[1], "rb"), avro.io.DatumReader())
n = 0
seen = set()
for rec in r:
    got = {"id": rec["id"], "day": days(rec["day"]), "clock": micros(rec["clock"]), "when": wall(rec["when"]),
           "maybe_day": opt(days, rec["maybe_day"]), "maybe_clock": opt(micros, rec["maybe_clock"]),
           "maybe_when": opt(wall, rec["maybe_when"]), "holidays": [days(d) for d in rec["holidays"]],
           "opens": {k: micros(v) for k, v in rec["opens"].items()}, "slot": slot(rec["slot"]),
           "slots": [slot(s) for s in rec["slots"]], "name": rec["name"], "opened": days(rec["opened"])}
    # By id: a shard's order is its group's, which no runner promises.
    if got["id"] in seen:
        sys.exit("record %d: id %r read twice" % (n, got["id"]))
    seen.add(got["id"])
    if got != want.get(got["id"]):
        sys.exit("record %d: python3-avro read\n%r\nwant\n%r" % (n, got, want.get(got["id"])))
    n += 1
if n != len(want):
    sys.exit("%d records, want %d" % (n, len(want)))
print("ok", n)
`

const civilDirEnv = "SDFIO_TEST_CIVIL_DIR"

// TestCivilRoundTrip: Write given no schema writes civil types as
// SchemaOf's date, time-micros and local-timestamp-micros, plain, nullable,
// in arrays, maps, nested and embedded records; Read gives every row back
// exactly (times to the microsecond), through a shuffle (RegisterType's
// coder); python3-avro and avrocat read the same days and microseconds;
// all of it in a process whose zone is New York's.
func TestCivilRoundTrip(t *testing.T) {
	if dir := os.Getenv(civilDirEnv); dir != "" {
		civilRoundTrip(t, dir)
		return
	}
	avrotest.RequireTools(t)
	runInNewYork(t, civilDirEnv+"="+t.TempDir())
}

func civilRoundTrip(t *testing.T, dir string) {
	if _, off := time.Date(2024, 7, 1, 0, 0, 0, 0, time.Local).Zone(); off != -4*3600 {
		t.Fatalf("time.Local has offset %d s in July, want New York's -14400", off)
	}
	const n = 200
	schema, err := SchemaOf(reflect.TypeFor[civilRow]())
	if err != nil {
		t.Fatal(err)
	}
	if !sameParsedSchema(t, schema, civilRowSchema) {
		t.Fatalf("SchemaOf(civilRow) =\n%s\nwant\n%s", schema, civilRowSchema)
	}

	// Runner-sharded and NumShards(2) writes.
	p, s := beam.NewPipelineWithRoot()
	rows := beam.ParDo(s, &civilRowsFn{N: n}, beam.Impulse(s))
	Write(s.Scope("one"), filepath.Join(dir, "one/part"), "", rows, WithNumShards(1), WithSuffix(".avro"))
	Write(s.Scope("two"), filepath.Join(dir, "two/part"), "", rows, WithNumShards(2))
	run(t, p)

	path := filepath.Join(dir, "one/part-00000-of-00001.avro")
	for _, pattern := range []string{path, filepath.Join(dir, "two/part-*")} {
		p, s := beam.NewPipelineWithRoot()
		read := Read(s, pattern, reflect.TypeFor[civilRow]())
		bad, ids := beam.ParDo2(s, &checkCivilFn{}, beam.Reshuffle(s, read))
		passert.Empty(s, bad)
		want := make([]any, n)
		for i := range want {
			want[i] = int64(i)
		}
		passert.Equals(s, ids, want...)
		run(t, p)
	}

	// python3-avro reads the same values.
	var lines []string
	for i := range int64(n) {
		b, err := json.Marshal(civilExpected(i))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	wantPath, script := filepath.Join(dir, "want.jsonl"), filepath.Join(dir, "check.py")
	if err := os.WriteFile(wantPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(civilPy), 0o644); err != nil {
		t.Fatal(err)
	}
	// (It warns on stderr that it does not know local-timestamp-micros.)
	py := exec.Command(avrotest.DebianPython, script, path, wantPath)
	var stderr strings.Builder
	py.Stderr = &stderr
	if out, err := py.Output(); err != nil || strings.TrimSpace(string(out)) != fmt.Sprintf("ok %d", n) {
		t.Fatalf("python3-avro: %v\n%s\n%s", err, out, stderr.String())
	}

	// avrocat (Avro C) prints the same numbers.
	got, err := avrotest.Avrocat(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("avrocat printed %d records, want %d", len(got), n)
	}
	// By id: a shard's order is its group's, which no runner promises.
	seen := map[int64]bool{}
	for i, line := range got {
		v, err := avrotest.DecodeJSONLine(line)
		if err != nil {
			t.Fatalf("avrocat line %d: %v: %s", i, err, line)
		}
		g := avrocatNumbers(v)
		m, _ := g.(map[string]any)
		id, ok := m["id"].(int64)
		if !ok || id < 0 || id >= n || seen[id] {
			t.Errorf("avrocat record %d: id %v missing, out of range or seen before: %v", i, m["id"], g)
			continue
		}
		seen[id] = true
		if w := civilExpected(id); fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("avrocat record %d:\n got %v\nwant %v", i, g, w)
		}
	}
}

// sameParsedSchema reports whether two schemas (JSON) are the same
// schema, logical types, names and defaults included, whatever their
// spelling.
func sameParsedSchema(t *testing.T, a, b string) bool {
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

// avrocatNumbers is an avrocat record with its unions' branches unwrapped
// ({"int": 7} is 7) and its numbers as int64, to compare with
// civilExpected.
func avrocatNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		n, _ := x.Int64()
		return n
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = avrocatNumbers(e)
		}
		return out
	case map[string]any:
		if len(x) == 1 {
			for k, e := range x {
				if k == "int" || k == "long" || strings.HasSuffix(k, "civilSlot") {
					return avrocatNumbers(e)
				}
			}
		}
		out := map[string]any{}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out[k] = avrocatNumbers(x[k])
		}
		return out
	}
	return v
}
