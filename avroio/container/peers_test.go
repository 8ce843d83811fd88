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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sdfio/sdfio/avroio/internal/avrotest"
	"github.com/sdfio/sdfio/internal/testtmp"
)

const debianPython = avrotest.DebianPython

// peerRecords is the number of records in each peer file.
const peerRecords = 2000

// allSchema and genPy are shared with avroio's tests; see package avrotest.
const (
	allSchema = avrotest.AllSchema
	genPy     = avrotest.GenPy
)

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
func requireTools(t testing.TB) { avrotest.RequireTools(t) }

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
func decodeJSONLine(line string) (any, error) { return avrotest.DecodeJSONLine(line) }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "avroio-peers-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	peersDir = dir
	code := testtmp.Main(m.Run)
	os.RemoveAll(dir)
	os.Exit(code)
}
