package avroio

import (
	"fmt"
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

	"github.com/sdfio/sdfio/avroio/internal/avrotest"
)

// Local timestamps are written and read by one rule whatever the worker's
// time zone: the wall clock is a time.Time's UTC fields. The test writes
// them in a child process whose TZ is America/New_York (Go reads TZ once,
// at start), where hamba/avro's own rule (the wall clock of t.Local())
// moves wall clocks by the zone's offset, and loses or shifts those in
// the daylight-saving gap and overlap.

const localSchema = `{"type":"record","name":"Local","namespace":"sdfio.test","fields":[
 {"name":"id","type":"long"},
 {"name":"ms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"us","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"nms","type":["null",{"type":"long","logicalType":"local-timestamp-millis"}]},
 {"name":"nus","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}
]}`

type localRec struct {
	ID  int64      `avro:"id"`
	Ms  time.Time  `avro:"ms"`
	Us  time.Time  `avro:"us"`
	NMs *time.Time `avro:"nms"`
	NUs *time.Time `avro:"nus"`
	At  time.Time  `avro:"at"`
}

// localWallClocks are the wall clocks written, as UTC fields (to the
// microsecond; millisecond fields take them cut to the millisecond).
var localWallClocks = []time.Time{
	// New York springs forward: 02:00 to 03:00 does not exist there.
	time.Date(2024, 3, 10, 1, 59, 59, 999999000, time.UTC),
	time.Date(2024, 3, 10, 2, 0, 0, 0, time.UTC),
	time.Date(2024, 3, 10, 2, 30, 15, 123456000, time.UTC),
	time.Date(2024, 3, 10, 2, 59, 59, 999999000, time.UTC),
	time.Date(2024, 3, 10, 3, 0, 0, 0, time.UTC),
	// and falls back: 01:00 to 02:00 happens twice.
	time.Date(2024, 11, 3, 1, 0, 0, 0, time.UTC),
	time.Date(2024, 11, 3, 1, 30, 0, 500000000, time.UTC),
	time.Date(2024, 11, 3, 1, 59, 59, 999000, time.UTC),
	time.Date(2024, 11, 3, 2, 0, 0, 0, time.UTC),
	// Before 1883-11-18 12:03:58 New York kept local mean time, -4:56:02.
	time.Date(1850, 6, 1, 12, 0, 0, 123456000, time.UTC),
	time.Date(1883, 11, 18, 12, 3, 57, 999999000, time.UTC),
	time.Date(1700, 1, 1, 0, 0, 0, 1000, time.UTC),
	time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC),
	time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
}

// localRecords is every wall clock in each of three zones.
var localRecords = 3 * len(localWallClocks)

// localWall is record i's wall clock (UTC fields) and the zone its values
// are given in: the worker's own (New York in the child), UTC, or +05:30.
// The zone never matters: the UTC fields are written.
func localWall(i int) (wall time.Time, in func(time.Time) time.Time) {
	wall = localWallClocks[i%len(localWallClocks)]
	switch (i / len(localWallClocks)) % 3 {
	case 0:
		return wall, func(t time.Time) time.Time { return t.In(time.Local) }
	case 1:
		return wall, func(t time.Time) time.Time { return t }
	}
	ist := time.FixedZone("IST", 5*3600+1800)
	return wall, func(t time.Time) time.Time { return t.In(ist) }
}

// localStruct is record i as a struct.
func localStruct(i int) localRec {
	wall, in := localWall(i)
	ms := wall.Truncate(time.Millisecond)
	r := localRec{ID: int64(i), Ms: in(ms), Us: in(wall), At: in(ms)}
	if i%2 == 0 {
		v := in(ms)
		r.NMs = &v
	}
	if i%4 != 3 {
		v := in(wall)
		r.NUs = &v
	}
	return r
}

// localRecord is record i as a Record.
func localRecord(i int) Record {
	s := localStruct(i)
	r := Record{"id": s.ID, "ms": s.Ms, "us": s.Us, "nms": nil, "nus": nil, "at": s.At}
	if s.NMs != nil {
		r["nms"] = *s.NMs
	}
	if s.NUs != nil {
		r["nus"] = *s.NUs
	}
	return r
}

func init() {
	register.DoFn2x0[[]byte, func(localRec)](&localStructsFn{})
	register.DoFn2x0[[]byte, func(Record)](&localRecordsFn{})
	register.Emitter1[localRec]()
	register.Emitter1[Record]()
	RegisterType(reflect.TypeFor[localRec]())
}

// localStructsFn and localRecordsFn emit the records where Write encodes
// them (fused): no Beam coder touches the times, so their zones reach
// Write as made.
type localStructsFn struct{}

func (fn *localStructsFn) ProcessElement(_ []byte, emit func(localRec)) {
	for i := range localRecords {
		emit(localStruct(i))
	}
}

type localRecordsFn struct{}

func (fn *localRecordsFn) ProcessElement(_ []byte, emit func(Record)) {
	for i := range localRecords {
		emit(localRecord(i))
	}
}

const localDirEnv = "SDFIO_TEST_LOCALTS_DIR"

// TestLocalTimestampsAnyZone writes local timestamps with Write, from
// structs and from Records, with runner sharding and NumShards(2), under
// TZ=America/New_York, then reads the files back as Records and with
// avro-bin's avrocat: every wall clock comes back as written, in the
// daylight-saving gap and overlap, before 1883, to the millisecond and the
// microsecond, plain and nullable, whatever zone the values were in.
func TestLocalTimestampsAnyZone(t *testing.T) {
	if dir := os.Getenv(localDirEnv); dir != "" {
		writeLocalTimestamps(t, dir)
		return
	}
	avrotest.RequireTools(t)
	dir := t.TempDir()
	runInNewYork(t, localDirEnv+"="+dir)
}

// runInNewYork runs the calling test again in a child process whose TZ is
// America/New_York (Go reads TZ once, at start; setting time.Local in this
// process would race with the timers of other tests' Prism jobs), with env
// added to its environment to tell it what to do, and fails unless it
// passes.
func runInNewYork(t *testing.T, env string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TZ=America/New_York", env)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test under TZ=America/New_York: %v\n%s", err, out)
	}
}

// writeLocalTimestamps is the child's part of TestLocalTimestampsAnyZone.
func writeLocalTimestamps(t *testing.T, dir string) {
	if _, off := time.Date(2024, 7, 1, 0, 0, 0, 0, time.Local).Zone(); off != -4*3600 {
		t.Fatalf("time.Local has offset %d s in July, want New York's -14400", off)
	}
	p, s := beam.NewPipelineWithRoot()
	structs := beam.ParDo(s, &localStructsFn{}, beam.Impulse(s))
	records := beam.ParDo(s, &localRecordsFn{}, beam.Impulse(s))
	Write(s.Scope("structs"), filepath.Join(dir, "structs/part"), localSchema, structs)
	Write(s.Scope("structs2"), filepath.Join(dir, "structs2/part"), localSchema, structs, WithNumShards(2))
	Write(s.Scope("records"), filepath.Join(dir, "records/part"), localSchema, records)
	// Records cross a shuffle, through their coder, before NumShards(2).
	Write(s.Scope("records2"), filepath.Join(dir, "records2/part"), localSchema, beam.Reshuffle(s, records), WithNumShards(2))
	run(t, p)

	for _, out := range []string{"structs", "structs2", "records", "records2"} {
		files, err := filepath.Glob(filepath.Join(dir, out, "part-*"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files written (%v)", out, err)
		}
		seen := map[int64]bool{}
		for _, f := range files {
			for _, r := range readAllRecords(t, f) {
				id := r["id"].(int64)
				seen[id] = true
				checkLocalRecord(t, out, r)
			}
			checkLocalAvrocat(t, out, f)
		}
		if len(seen) != localRecords {
			t.Errorf("%s: %d distinct records, want %d", out, len(seen), localRecords)
		}
	}
}

// checkLocalRecord checks a record read back: each local timestamp is a
// time.Time in UTC whose fields are the wall clock written.
func checkLocalRecord(t *testing.T, out string, r Record) {
	t.Helper()
	i := int(r["id"].(int64))
	wall, _ := localWall(i)
	ms := wall.Truncate(time.Millisecond)
	want := map[string]any{"ms": ms, "us": wall, "nms": nil, "nus": nil, "at": ms}
	if i%2 == 0 {
		want["nms"] = ms
	}
	if i%4 != 3 {
		want["nus"] = wall
	}
	for _, k := range []string{"ms", "us", "nms", "nus", "at"} {
		w := want[k]
		got := r[k]
		if w == nil {
			if got != nil {
				t.Errorf("%s: record %d: %s = %v, want null", out, i, k, got)
			}
			continue
		}
		g, ok := got.(time.Time)
		if !ok || !g.Equal(w.(time.Time)) || g.Location() != time.UTC {
			t.Errorf("%s: record %d: %s = %v, want %v (UTC fields of the wall clock written)", out, i, k, got, w)
		}
	}
}

// checkLocalAvrocat checks the longs avrocat prints for the file: the wall
// clock's UTC fields as milliseconds or microseconds since 1970-01-01.
func checkLocalAvrocat(t *testing.T, out, path string) {
	t.Helper()
	lines, err := avrotest.Avrocat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range lines {
		v, err := avrotest.DecodeJSONLine(line)
		if err != nil {
			t.Fatalf("%s: avrocat line %q: %v", out, line, err)
		}
		m := v.(map[string]any)
		long := func(k string) string {
			x := m[k]
			if u, ok := x.(map[string]any); ok && len(u) == 1 {
				x = u["long"]
			}
			return fmt.Sprint(x)
		}
		id, _ := m["id"].(interface{ Int64() (int64, error) }).Int64()
		wall, _ := localWall(int(id))
		ms, us := fmt.Sprint(wall.UnixMilli()), fmt.Sprint(wall.UnixMicro())
		want := map[string]string{"ms": ms, "us": us, "nms": "<nil>", "nus": "<nil>", "at": ms}
		if id%2 == 0 {
			want["nms"] = ms
		}
		if id%4 != 3 {
			want["nus"] = us
		}
		keys := make([]string, 0, len(want))
		for k := range want {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if got := long(k); got != want[k] {
				t.Errorf("%s: avrocat: record %d: %s = %s, want %s (wall clock %v)", out, id, k, got, want[k], wall)
			}
		}
	}
}
