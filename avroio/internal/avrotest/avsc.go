package avrotest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// UnionsSchema has the unions whose shape generic decoders get wrong: null
// with a record, array, map, enum or fixed; two branches of one Go type
// (date and timestamp-millis, time-millis and time-micros, string and enum,
// two records, decimals in bytes and in fixed); int with string; and the
// local timestamps, whose wall clocks must not depend on the time zone.
const UnionsSchema = `{"type":"record","name":"U","namespace":"sdfio.unions","fields":[
 {"name":"id","type":"long"},
 {"name":"when","type":["null",{"type":"int","logicalType":"date"},{"type":"long","logicalType":"timestamp-millis"}]},
 {"name":"tod","type":[{"type":"int","logicalType":"time-millis"},{"type":"long","logicalType":"time-micros"}]},
 {"name":"lms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"lus","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"nrec","type":["null",{"type":"record","name":"Rec","fields":[{"name":"a","type":"long"}]}]},
 {"name":"narr","type":["null",{"type":"array","items":"long"}]},
 {"name":"nmap","type":["null",{"type":"map","values":"string"}]},
 {"name":"nenum","type":["null",{"type":"enum","name":"Color","symbols":["RED","GREEN"]}]},
 {"name":"nfix","type":["null",{"type":"fixed","name":"Two","size":2}]},
 {"name":"is","type":["int","string"]},
 {"name":"se","type":["string","Color"]},
 {"name":"recs","type":["null","Rec",{"type":"record","name":"Other","fields":[{"name":"b","type":"string"}]}]},
 {"name":"decs","type":[{"type":"bytes","logicalType":"decimal","precision":9,"scale":2},{"type":"fixed","name":"D4","size":4,"logicalType":"decimal","precision":9,"scale":2}]}
]}`

// UnionsBaseMillis is the first local wall clock of UnionsSchema's lms
// field, 2021-03-14 02:00 (as UTC fields): record i holds it plus i%120
// minutes, so that 60 of every 120 records lie in New York's
// daylight-saving gap.
const UnionsBaseMillis = 1615687200000

// UnionsJS writes (argv: write schema out n) or checks (argv: check schema
// in n) a container file of n records of UnionsSchema with avsc, wrapped
// unions naming every branch. Record i is a pure function of i; check
// compares the encoding of each record read with that of record i, so a
// branch that changed fails it. It prints "ok n" or the first mismatch.
const UnionsJS = `
const avro = require('avsc');
const fs = require('fs');
const [mode, schemaPath, path, nStr] = process.argv.slice(2);
const n = parseInt(nStr);
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
const type = avro.Type.forSchema(schema, {wrapUnions: true});
const ns = 'sdfio.unions.';
function dec(v, size) {
  const b = Buffer.alloc(size);
  if (size === 2) b.writeInt16BE(v); else b.writeInt32BE(v);
  return b;
}
function rec(i) {
  const lms = ${BASE} + (i % 120) * 60000;
  const w = {}; w[ns + 'Rec'] = {a: i};
  const o = {}; o[ns + 'Other'] = {b: 'o' + i};
  const col = {}; col[ns + 'Color'] = 'GREEN';
  const ne = {}; ne[ns + 'Color'] = ['RED', 'GREEN'][i % 2];
  const fx = {}; fx[ns + 'Two'] = Buffer.from([i & 255, (i >> 8) & 255]);
  const d4 = {}; d4[ns + 'D4'] = dec(i * 37 - 500, 4);
  return {
    id: i,
    when: [null, {int: 18000 + i}, {long: 1600000000000 + i * 1000 + (i % 1000)}][i % 3],
    tod: i % 2 === 0 ? {int: (i * 1000) % 86400000} : {long: (i * 1000003) % 86400000000},
    lms: lms,
    lus: lms * 1000 + (i % 1000),
    nrec: i % 2 ? w : null,
    narr: i % 3 ? {array: [i, -i]} : null,
    nmap: i % 4 ? {map: {k: 'v' + i}} : null,
    nenum: i % 3 ? ne : null,
    nfix: i % 5 ? fx : null,
    is: i % 2 ? {int: -i} : {string: 's' + i},
    se: i % 2 ? {string: 'RED'} : col,
    recs: [null, w, o][i % 3],
    decs: i % 2 ? {bytes: dec(i * 37 - 500, 4)} : d4,
  };
}
// norm writes a bytes decimal in 4 bytes: writers may use any number of
// bytes for the same value.
function norm(r) {
  if (r.decs && r.decs.bytes) {
    let v = 0;
    for (const b of r.decs.bytes) v = v * 256 + b;
    if (r.decs.bytes.length > 0 && r.decs.bytes[0] & 0x80) v -= Math.pow(256, r.decs.bytes.length);
    r.decs = {bytes: dec(v, 4)};
  }
  return r;
}
if (mode === 'write') {
  // The header gets the schema as given (avsc's own export drops the
  // logical types it does not implement); records go by the wrapped type.
  const enc = avro.createFileEncoder(path, schema, {blockSize: 4096});
  enc._type = type;
  for (let i = 0; i < n; i++) enc.write(rec(i));
  enc.end();
} else {
  let i = 0, bad = null;
  avro.createFileDecoder(path, {readerSchema: type})
    .on('data', (r) => {
      if (bad === null && !type.toBuffer(norm(r)).equals(type.toBuffer(rec(i)))) bad = 'record ' + i + ': ' + JSON.stringify(type.toString ? r : r);
      i++;
    })
    .on('error', (e) => { console.log('error ' + e); process.exit(1); })
    .on('end', () => { console.log(bad !== null ? bad : (i === n ? 'ok ' + i : 'count ' + i)); });
}
`

// AvscDir is where `make deps` installs avsc (npm): $SDFIO_AVSC_DIR, or
// ~/.cache/sdfio/avsc.
func AvscDir() string {
	if d := os.Getenv("SDFIO_AVSC_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "sdfio", "avsc")
}

// RequireAvsc returns the node_modules directory that holds avsc; it
// fails t under CI=true and skips it elsewhere when node or avsc is
// missing (`make deps` installs them).
func RequireAvsc(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(AvscDir(), "node_modules")
	_, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "avsc", "package.json"))
	}
	if err != nil {
		msg := "avsc (npm) missing, run make deps: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// Avsc runs UnionsJS with node in mode "write" or "check" on the file at
// path with n records, and returns what it printed.
func Avsc(t testing.TB, mode, path string, n int) (string, error) {
	t.Helper()
	modules := RequireAvsc(t)
	dir := t.TempDir()
	schema := filepath.Join(dir, "unions.avsc")
	script := filepath.Join(dir, "unions.js")
	if err := os.WriteFile(schema, []byte(UnionsSchema), 0o644); err != nil {
		return "", err
	}
	js := strings.ReplaceAll(UnionsJS, "${BASE}", strconv.Itoa(UnionsBaseMillis))
	if err := os.WriteFile(script, []byte(js), 0o644); err != nil {
		return "", err
	}
	cmd := exec.Command("node", script, mode, schema, path, strconv.Itoa(n))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("node %s %s: %v\n%s", script, mode, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
