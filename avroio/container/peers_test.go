package container

// Files written by independent Avro implementations, made at test time:
//
//   - python3-avro (Debian's, run by /usr/bin/python3, not a pyenv python)
//     writes py-<codec>.avro for null, deflate, bzip2, snappy (python3-snappy),
//     zstandard (python3-zstandard), and xz (a codec registered by the script
//     around Python's own lzma module, framed by python-avro's writer);
//   - avro-bin's avromod (Avro C) rewrites py-null.avro as c-<codec>.avro for
//     null, deflate, snappy and lzma, with 4 KiB blocks;
//   - avro-bin's avrocat prints every file it can read as JSON.
//
// When a tool is missing the tests skip, except under CI=true, where they fail:
// the Makefile must install avro-bin, python3-avro, python3-snappy and
// python3-zstandard.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const debianPython = "/usr/bin/python3"

// peerRecords is the number of records in each peer file.
const peerRecords = 2000

// allSchema uses every Avro type: primitives, nested records, unions (nullable
// and of four branches, one a named record), enums, fixed, maps, arrays and
// the logical types decimal, date, timestamp-millis/micros and uuid.
const allSchema = `{"type":"record","name":"All","namespace":"sdfio.test","fields":[
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

// genPy writes argv[3] records with schema argv[1] to argv[2] with codec
// argv[4], cutting blocks after argv[5] bytes. Record i is a pure function of
// i; expectedAll in Go computes the same values.
const genPy = `
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

var (
	pyCodecs = []string{"null", "deflate", "bzip2", "snappy", "zstandard", "xz"}
	cCodecs  = []string{"null", "deflate", "snappy", "lzma"}
)

type peerSet struct {
	dir   string
	files map[string]string // "py-null" -> path
	order []string          // file keys in a stable order
	// avrocatJSON holds avrocat's output for each file avrocat can read.
	avrocatJSON map[string][]string
	err         error
}

var (
	peersOnce sync.Once
	peers     peerSet
	peersDir  string // set by TestMain
)

// requireTools fails under CI=true and skips elsewhere when a peer is missing.
func requireTools(t testing.TB) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"avrocat", "avromod"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (apt-get install avro-bin)")
		}
	}
	if _, err := os.Stat(debianPython); err != nil {
		missing = append(missing, debianPython)
	} else {
		out, err := exec.Command(debianPython, "-c", "import avro.codecs as c, sys; sys.exit(0 if {'snappy','zstandard'} <= set(c.KNOWN_CODECS) else 3)").CombinedOutput()
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

// peerFiles makes the peer files once per test binary.
func peerFiles(t testing.TB) *peerSet {
	t.Helper()
	requireTools(t)
	peersOnce.Do(func() { peers = makePeers(peersDir) })
	if peers.err != nil {
		t.Fatal(peers.err)
	}
	return &peers
}

func makePeers(dir string) peerSet {
	ps := peerSet{dir: dir, files: map[string]string{}, avrocatJSON: map[string][]string{}}
	run := func(name string, args ...string) error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	schemaPath := filepath.Join(dir, "all.avsc")
	scriptPath := filepath.Join(dir, "gen.py")
	if err := os.WriteFile(schemaPath, []byte(allSchema), 0o644); err != nil {
		ps.err = err
		return ps
	}
	if err := os.WriteFile(scriptPath, []byte(genPy), 0o644); err != nil {
		ps.err = err
		return ps
	}
	for _, c := range pyCodecs {
		p := filepath.Join(dir, "py-"+c+".avro")
		if err := run(debianPython, scriptPath, schemaPath, p, fmt.Sprint(peerRecords), c, "4000"); err != nil {
			ps.err = err
			return ps
		}
		ps.files["py-"+c] = p
		ps.order = append(ps.order, "py-"+c)
	}
	for _, c := range cCodecs {
		p := filepath.Join(dir, "c-"+c+".avro")
		if err := run("avromod", "--codec="+c, "--block-size=4096", ps.files["py-null"], p); err != nil {
			ps.err = err
			return ps
		}
		ps.files["c-"+c] = p
		ps.order = append(ps.order, "c-"+c)
	}
	for _, key := range ps.order {
		// Avro C reads null, deflate, snappy and lzma.
		if !strings.HasSuffix(key, "-null") && !strings.HasSuffix(key, "-deflate") &&
			!strings.HasSuffix(key, "-snappy") && !strings.HasSuffix(key, "-lzma") {
			continue
		}
		out, err := exec.Command("avrocat", ps.files[key]).Output()
		if err != nil {
			ps.err = fmt.Errorf("avrocat %s: %v", key, err)
			return ps
		}
		var lines []string
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		ps.avrocatJSON[key] = lines
	}
	return ps
}

// decodeJSONLine parses one avrocat line keeping numbers exact.
func decodeJSONLine(line string) (any, error) {
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "avroio-peers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	peersDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
