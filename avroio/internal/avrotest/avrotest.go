// Package avrotest holds what the tests of avroio and avroio/container
// share to check them against independent Avro implementations: Debian's
// python3-avro (run by DebianPython, not a pyenv python) and avro-bin's
// avromod and avrocat. It is a test helper; nothing else imports it.
//
// When a tool is missing RequireTools skips the test, except under CI=true,
// where it fails it: the Makefile installs avro-bin, python3-avro,
// python3-snappy and python3-zstandard.
package avrotest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// DebianPython is Debian's python3, which has python3-avro; the pyenv
// python first on PATH does not.
const DebianPython = "/usr/bin/python3"

// AllSchema uses every Avro type: primitives, nested records, unions (nullable
// and of four branches, one a named record), enums, fixed, maps, arrays and
// the logical types decimal, date, timestamp-millis/micros and uuid.
const AllSchema = `{"type":"record","name":"All","namespace":"sdfio.test","fields":[
 {"name":"id","type":"long"},
 {"name":"flag","type":"boolean"},
 {"name":"i32","type":"int"},
 {"name":"f32","type":"float"},
 {"name":"f64","type":"double"},
 {"name":"name","type":"string"},
 {"name":"raw","type":"bytes"},
 {"name":"opt","type":["null","string"]},
 {"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}},
 {"name":"fx","type":{"type":"fixed","name":"Four","size":4}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"nested","type":{"type":"record","name":"Nested","fields":[
   {"name":"a","type":"long"},{"name":"b","type":"string"},
   {"name":"inner","type":{"type":"record","name":"Inner","fields":[{"name":"z","type":"double"}]}}]}},
 {"name":"u","type":["null","long","string","Nested"]},
 {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"tsms","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tsus","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"uid","type":{"type":"string","logicalType":"uuid"}}
]}`

// GenPy writes argv[3] records with schema argv[1] to argv[2] with codec
// argv[4], cutting blocks after argv[5] bytes. Record i is a pure function of
// i; container's expectedAll computes the same values.
const GenPy = `
import sys, lzma, uuid, datetime, decimal
import avro.schema, avro.datafile, avro.io, avro.codecs

class XzCodec(avro.codecs.Codec):
    @staticmethod
    def compress(data):
        c = lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64)
        return c, len(c)
    @staticmethod
    def decompress(readers_decoder):
        raise NotImplementedError
avro.codecs.KNOWN_CODECS["xz"] = XzCodec

schema = avro.schema.parse(open(sys.argv[1]).read())
out, n, codec = sys.argv[2], int(sys.argv[3]), sys.argv[4]
avro.datafile.SYNC_INTERVAL = int(sys.argv[5])
w = avro.datafile.DataFileWriter(open(out, "wb"), avro.io.DatumWriter(), schema, codec=codec)
w.set_meta("user.note", b"written by python3-avro")
ms = datetime.datetime(2021, 3, 4, 5, 6, 7, 123000, tzinfo=datetime.timezone.utc)
us = datetime.datetime(2021, 3, 4, 5, 6, 7, 123456, tzinfo=datetime.timezone.utc)
for i in range(n):
    w.append({
      "id": i, "flag": i % 2 == 0, "i32": -i, "f32": i / 4.0, "f64": i * 1.5, "name": "rec-%d" % i,
      "raw": bytes([1 + i % 250, 255, 128]),
      "opt": None if i % 3 == 0 else "x%d" % i,
      "color": ["RED", "GREEN", "BLUE"][i % 3],
      "fx": bytes([i % 256]) * 4,
      "tags": ["t%d" % j for j in range(i % 4)],
      "attrs": {"k%d" % j: j * i for j in range(i % 3)},
      "nested": {"a": i * 7, "b": "n%d" % i, "inner": {"z": float(i)}},
      "u": [None, i, "s%d" % i, {"a": i, "b": "u", "inner": {"z": 1.0}}][i % 4],
      "dec": decimal.Decimal(i * 3 - 100).scaleb(-2),
      "day": datetime.date(2020, 1, 1) + datetime.timedelta(days=i),
      "tsms": ms + datetime.timedelta(seconds=i),
      "tsus": us + datetime.timedelta(microseconds=i),
      "uid": str(uuid.UUID(int=i * 7919)),
    })
w.close()
`

// RequireTools fails t under CI=true and skips it elsewhere when avrocat,
// avromod, or Debian's python3 with python3-avro, snappy and zstandard, is
// missing.
func RequireTools(t testing.TB) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"avrocat", "avromod"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (apt-get install avro-bin)")
		}
	}
	if _, err := os.Stat(DebianPython); err != nil {
		missing = append(missing, DebianPython)
	} else {
		out, err := exec.Command(DebianPython, "-c", "import avro.codecs as c, sys; sys.exit(0 if {'snappy','zstandard'} <= set(c.KNOWN_CODECS) else 3)").CombinedOutput()
		if err != nil {
			missing = append(missing, "python3-avro with snappy and zstandard (apt-get install python3-avro python3-snappy python3-zstandard): "+strings.TrimSpace(string(out))+" "+err.Error())
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "peer Avro implementations missing: " + strings.Join(missing, "; ")
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Run runs a command, returning its combined output in the error when it
// fails.
func Run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// WritePython writes n records of GenPy (schema AllSchema) with codec
// (null, deflate, bzip2, snappy, zstandard or xz) to dir/py-<codec>.avro
// with Debian's python3-avro, cutting blocks after syncInterval bytes, and
// returns the file's path.
func WritePython(dir, codec string, n, syncInterval int) (string, error) {
	schemaPath := filepath.Join(dir, "all.avsc")
	scriptPath := filepath.Join(dir, "gen.py")
	if err := os.WriteFile(schemaPath, []byte(AllSchema), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(scriptPath, []byte(GenPy), 0o644); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "py-"+codec+".avro")
	return p, Run(DebianPython, scriptPath, schemaPath, p, fmt.Sprint(n), codec, fmt.Sprint(syncInterval))
}

// Avromod rewrites the container file src as dst with Avro C's avromod,
// with codec (null, deflate, snappy or lzma) and blocks of blockSize bytes.
func Avromod(src, dst, codec string, blockSize int) error {
	return Run("avromod", "--codec="+codec, fmt.Sprintf("--block-size=%d", blockSize), src, dst)
}

// Avrocat returns the lines avrocat prints for the file at path: one JSON
// record per line.
func Avrocat(path string) ([]string, error) {
	out, err := exec.Command("avrocat", path).Output()
	if err != nil {
		return nil, fmt.Errorf("avrocat %s: %v", path, err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// DecodeJSONLine parses one avrocat line keeping numbers exact.
func DecodeJSONLine(line string) (any, error) {
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// MatchAvrocat checks that ours (a value hamba/avro decoded generically by
// schema s) equals theirs (what avrocat printed for it, parsed as JSON with
// json.Number). avrocat prints Avro's JSON encoding with two quirks of Avro
// C: bytes and fixed are C strings (cut at the first NUL, one code point per
// byte), and union branches of named types carry the short name. Logical
// types print as their underlying values.
//
// hamba/avro gives a union's value either bare or as a one-key map from
// the branch's full name to the value, depending on the branch and on the
// union (it wraps ["null", SomeRecord] and nullable arrays, maps, enums
// and fixed, and gives ["int","string"] bare); MatchAvrocat accepts both,
// and checks the branch either names or holds.
func MatchAvrocat(s avro.Schema, ours, theirs any, path string) error {
	return match(s, ours, theirs, path, false)
}

// MatchRecord is MatchAvrocat for avroio.Record values, whose unions have
// one documented shape: nil for null, the bare value, or, where two
// branches of the union share a Go type, a one-key map from the branch's
// name to the value. It fails on any other shape.
func MatchRecord(s avro.Schema, ours, theirs any, path string) error {
	return match(s, ours, theirs, path, true)
}

func match(s avro.Schema, ours, theirs any, path string, record bool) error {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s (ours %T %v, avrocat %v)", path, fmt.Sprintf(format, args...), ours, ours, theirs)
	}
	logical := ""
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		logical = string(ls.Logical().Type())
	}
	num := func() (json.Number, error) {
		n, ok := theirs.(json.Number)
		if !ok {
			return "", bad("avrocat did not print a number")
		}
		return n, nil
	}
	switch s.Type() {
	case avro.Null:
		if ours != nil || theirs != nil {
			return bad("want null")
		}
	case avro.Boolean:
		if b, ok := ours.(bool); !ok || theirs != b {
			return bad("booleans differ")
		}
	case avro.Int, avro.Long:
		n, err := num()
		if err != nil {
			return err
		}
		want, err := n.Int64()
		if err != nil {
			return bad("avrocat printed %v", n)
		}
		var got int64
		switch v := ours.(type) {
		case int:
			got = int64(v)
		case int32:
			got = int64(v)
		case int64:
			got = v
		case time.Time:
			switch logical {
			case "date":
				got = v.Unix() / 86400
			case "timestamp-millis", "local-timestamp-millis":
				got = v.UnixMilli()
			case "timestamp-micros", "local-timestamp-micros":
				got = v.UnixMicro()
			default:
				return bad("time for logical type %q", logical)
			}
		case time.Duration:
			switch logical {
			case "time-millis":
				got = v.Milliseconds()
			case "time-micros":
				got = v.Microseconds()
			default:
				return bad("duration for logical type %q", logical)
			}
		default:
			return bad("unexpected Go type")
		}
		if got != want {
			return bad("numbers differ: %d != %d", got, want)
		}
	case avro.Float, avro.Double:
		n, err := num()
		if err != nil {
			return err
		}
		want, err := n.Float64()
		if err != nil {
			return bad("avrocat printed %v", n)
		}
		var got float64
		switch v := ours.(type) {
		case float32:
			got = float64(v)
		case float64:
			got = v
		default:
			return bad("unexpected Go type")
		}
		if got != want {
			return bad("floats differ")
		}
	case avro.String, avro.Enum:
		if str, ok := ours.(string); !ok || theirs != str {
			return bad("strings differ")
		}
	case avro.Bytes, avro.Fixed:
		var b []byte
		switch v := ours.(type) {
		case []byte:
			b = v
		case *big.Rat:
			scale := 0
			if d, ok := s.(avro.LogicalTypeSchema).Logical().(*avro.DecimalLogicalSchema); ok {
				scale = d.Scale()
			}
			size := -1
			if f, ok := s.(*avro.FixedSchema); ok {
				size = f.Size()
			}
			var err error
			if b, err = decimalBytes(v, scale, size); err != nil {
				return bad("%v", err)
			}
		default:
			rv := reflect.ValueOf(ours)
			if rv.Kind() != reflect.Array || rv.Type().Elem().Kind() != reflect.Uint8 {
				return bad("unexpected Go type")
			}
			b = make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
		}
		if cString(b) != theirs {
			return bad("bytes differ: %q", cString(b))
		}
	case avro.Array:
		a, ok1 := ours.([]any)
		t, ok2 := theirs.([]any)
		if !ok1 || !ok2 || len(a) != len(t) {
			return bad("arrays differ")
		}
		items := s.(*avro.ArraySchema).Items()
		for i := range a {
			if err := match(items, a[i], t[i], fmt.Sprintf("%s[%d]", path, i), record); err != nil {
				return err
			}
		}
	case avro.Map:
		m, ok1 := ours.(map[string]any)
		t, ok2 := theirs.(map[string]any)
		if !ok1 || !ok2 || len(m) != len(t) {
			return bad("maps differ")
		}
		vals := s.(*avro.MapSchema).Values()
		for _, k := range sortedKeys(m) {
			if err := match(vals, m[k], t[k], path+"."+k, record); err != nil {
				return err
			}
		}
	case avro.Record, avro.Error:
		m, ok1 := ours.(map[string]any)
		t, ok2 := theirs.(map[string]any)
		fields := s.(*avro.RecordSchema).Fields()
		if !ok1 || !ok2 || len(m) != len(fields) || len(t) != len(fields) {
			return bad("records differ")
		}
		for _, f := range fields {
			if err := match(f.Type(), m[f.Name()], t[f.Name()], path+"."+f.Name(), record); err != nil {
				return err
			}
		}
	case avro.Union:
		u := s.(*avro.UnionSchema)
		if theirs == nil {
			if ours != nil || !hasNull(u) {
				return bad("want null")
			}
			return nil
		}
		t, ok := theirs.(map[string]any)
		if !ok || len(t) != 1 {
			return bad("avrocat union is not a one-key object")
		}
		var key string
		for k := range t {
			key = k
		}
		branch := unionBranch(u, key)
		if branch == nil {
			return bad("no branch %q", key)
		}
		val := ours
		full := branchName(branch, true)
		m, isMap := ours.(map[string]any)
		inner, named := m[full]
		named = named && isMap && len(m) == 1
		if record {
			if wrapped(u, branch) {
				if !named {
					return bad("want a one-key map naming branch %q, which shares its Go type with another branch", full)
				}
				val = inner
			} else if named && goType(branch) != "map" {
				return bad("branch %q is wrapped, but no other branch shares its Go type", full)
			}
		} else if named && !(goType(branch) == "map" && recordHasField(branch, full)) {
			val = inner
		}
		return match(branch, val, t[key], path+"|"+key, record)
	default:
		return bad("unhandled schema type %s", s.Type())
	}
	return nil
}

// wrapped reports whether Record wraps branch b of union u: whether
// another branch has b's Go type.
func wrapped(u *avro.UnionSchema, b avro.Schema) bool {
	n := 0
	for _, o := range u.Types() {
		if goType(o) == goType(b) {
			n++
		}
	}
	return n > 1
}

// goType names the Go type of a generic value of s, as Record documents it.
func goType(s avro.Schema) string {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	lt := ""
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		lt = string(ls.Logical().Type())
	}
	switch s.Type() {
	case avro.Int:
		switch lt {
		case "date":
			return "time"
		case "time-millis":
			return "duration"
		}
		return "int"
	case avro.Long:
		switch lt {
		case "time-micros":
			return "duration"
		case "timestamp-millis", "timestamp-micros", "local-timestamp-millis", "local-timestamp-micros":
			return "time"
		}
		return "int64"
	case avro.Enum, avro.String:
		return "string"
	case avro.Record, avro.Map:
		return "map"
	case avro.Bytes:
		if lt == "decimal" {
			return "rat"
		}
		return "bytes"
	case avro.Fixed:
		switch lt {
		case "decimal":
			return "rat"
		case "duration":
			return "logicalduration"
		}
		return fmt.Sprintf("[%d]byte", s.(*avro.FixedSchema).Size())
	}
	return string(s.Type())
}

// recordHasField reports whether record b has a field called name (a bare
// record that could pass for a wrapper).
func recordHasField(b avro.Schema, name string) bool {
	if ref, ok := b.(*avro.RefSchema); ok {
		b = ref.Schema()
	}
	rs, ok := b.(*avro.RecordSchema)
	if !ok {
		return false
	}
	for _, f := range rs.Fields() {
		if f.Name() == name {
			return true
		}
	}
	return false
}

func hasNull(u *avro.UnionSchema) bool {
	for _, b := range u.Types() {
		if b.Type() == avro.Null {
			return true
		}
	}
	return false
}

func unionBranch(u *avro.UnionSchema, key string) avro.Schema {
	for _, b := range u.Types() {
		if branchName(b, true) == key || branchName(b, false) == key {
			return b
		}
	}
	return nil
}

func branchName(s avro.Schema, full bool) string {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		if full {
			return n.FullName()
		}
		return n.Name()
	}
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil && full {
		return string(s.Type()) + "." + string(ls.Logical().Type())
	}
	return string(s.Type())
}

// cString renders bytes the way avrocat does: up to the first NUL, each byte
// one code point.
func cString(b []byte) string {
	r := make([]rune, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		r = append(r, rune(c))
	}
	return string(r)
}

// decimalBytes encodes the unscaled value of r as python-avro does for bytes
// decimals: two's complement in ceil((bitlen(|x|)+1)/8) bytes. Fixed
// decimals sign-extend to size bytes.
func decimalBytes(r *big.Rat, scale, size int) ([]byte, error) {
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !x.IsInt() {
		return nil, fmt.Errorf("decimal %v has more than %d digits of scale", r, scale)
	}
	v := x.Num()
	n := (new(big.Int).Abs(v).BitLen() + 1 + 7) / 8
	if size >= 0 {
		n = size
	}
	mod := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
	u := new(big.Int).Set(v)
	if u.Sign() < 0 {
		u.Add(u, mod)
	}
	b := u.Bytes()
	out := make([]byte, n)
	copy(out[n-len(b):], b)
	if v.Sign() < 0 {
		for i := 0; i < n-len(b); i++ {
			out[i] = 0xff
		}
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
