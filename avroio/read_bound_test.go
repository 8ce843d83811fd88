package avroio

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/workertest"
)

// The memory bound of a read (issue 37, item 16): a file is read, or
// refused, within WithMaxAlloc plus a fixed allowance, whatever its shape.
// Each shape is generated here and read in a child process (the test
// binary, run again), which reports its peak resident set above its
// resident set just before the read (VmHWM, reset through
// /proc/self/clear_refs): what the read made the process take, the
// collector's garbage and headroom included.

const (
	boundChildEnv = "SDFIO_BOUND_CHILD" // mode|path
	// boundSlack is the fixed allowance over WithMaxAlloc: the reader's
	// buffers, the schema, the runner's own memory while it runs the
	// read.
	boundSlack = 60 << 20
)

// boundShape is a file of one hostile or merely large shape.
type boundShape struct {
	name   string
	schema string
	datums func() [][]byte
	// field is the field a refusal must name.
	field string
}

// appendKey appends the map key of entry i: 4 printable bytes.
func appendKey(b []byte, i int) []byte {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_"
	b = appendLong(b, 4)
	return append(b, digits[i>>18&63], digits[i>>12&63], digits[i>>6&63], digits[i&63])
}

func boundShapes() []boundShape {
	var branches []string
	for i := range 10000 {
		branches = append(branches, fmt.Sprintf(`{"type":"record","name":"U%d","fields":[{"name":"a","type":"long"}]}`, i))
	}
	return []boundShape{
		{
			// Estimated at 64,000,200 bytes before, just under the
			// limit, and read at 332 MB of peak RSS.
			name:   "map of 1,000,000 longs",
			schema: `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"m","type":{"type":"map","values":"long"}}]}`,
			field:  "m",
			datums: func() [][]byte {
				d := appendLong(appendLong(nil, 1), 1_000_000)
				for i := range 1_000_000 {
					d = append(appendLong(d, 8), fmt.Sprintf("%08d", i)...)
					d = appendLong(d, int64(1000+i))
				}
				return [][]byte{append(d, 0)}
			},
		},
		{
			// Just under the limit by the estimate: read, within it.
			name:   "map of 270,000 longs",
			schema: `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"m","type":{"type":"map","values":"long"}}]}`,
			datums: func() [][]byte {
				d := appendLong(appendLong(nil, 1), 270_000)
				for i := range 270_000 {
					d = append(appendLong(d, 8), fmt.Sprintf("%08d", i)...)
					d = appendLong(d, int64(1000+i))
				}
				return [][]byte{append(d, 0)}
			},
		},
		{
			// Just under the limit by the estimate, as a list.
			name:   "array of 580,000 longs",
			schema: `{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"array","items":"long"}}]}`,
			datums: func() [][]byte {
				d := appendLong(nil, 580_000)
				for i := range 580_000 {
					d = appendLong(d, int64(1000+i))
				}
				return [][]byte{append(d, 0)}
			},
		},
		{
			// 66 MB read directly, 243 MB in a pipeline.
			name:   "union of 10,000 records",
			schema: `{"type":"record","name":"R","fields":[{"name":"u","type":[` + strings.Join(branches, ",") + `]}]}`,
			datums: func() [][]byte {
				var out [][]byte
				for i := range 2000 {
					out = append(out, appendLong(appendLong(nil, int64(i*5%10000)), int64(i)))
				}
				return out
			},
		},
		{
			// Refused, but only after reaching 163 MB.
			name:   "map of 8M nulls",
			schema: `{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":"null"}}]}`,
			field:  "m",
			datums: func() [][]byte {
				d := appendLong(nil, 8<<20)
				for i := range 8 << 20 {
					d = appendKey(d, i)
				}
				return [][]byte{append(d, 0)}
			},
		},
	}
}

// boundFile writes the shape's file into dir.
func boundFile(t *testing.T, dir string, sh boundShape) (string, int) {
	var buf bytes.Buffer
	w, err := container.NewWriter(&buf, sh.schema, container.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds := sh.datums()
	for _, d := range ds {
		if err := w.AppendEncoded(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, strings.ReplaceAll(sh.name, " ", "_")+".avro")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, len(ds)
}

func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// boundChild is the child's side: read the file, by mode, and print the
// peak above the base, the records read and the error.
func boundChild(t *testing.T, spec string) {
	mode, path, _ := strings.Cut(spec, "|")
	var read func() (int64, error)
	switch mode {
	case "direct":
		read = func() (int64, error) {
			var n int64
			s := subject(t, newSource(t, path, RecordType))
			err := s.Read(t.Context(), s.NewTracker(s.Restriction), func(beam.X) { n++ })
			return n, err
		}
	case "pipeline":
		// Start the runner first, so that its own memory is in the base.
		p, s := beam.NewPipelineWithRoot()
		beam.Combine(s, &countRecordsFn{}, beam.Create(s, Record{"x": int64(1)}))
		if err := ptest.Run(p); err != nil {
			t.Fatalf("warming up: %v", err)
		}
		read = func() (int64, error) {
			p, s := beam.NewPipelineWithRoot()
			n := beam.Combine(s, &countRecordsFn{}, ReadGeneric(s, path))
			beam.ParDo0(s, printCount, n)
			return -1, ptest.Run(p)
		}
	default:
		t.Fatalf("mode %q", mode)
	}
	runtime.GC()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
	base := procStatusKB("VmRSS")
	n, err := read()
	peak := procStatusKB("VmHWM")
	msg := "<nil>"
	if err != nil {
		msg = strings.ReplaceAll(err.Error(), "\n", " ")
	}
	fmt.Printf("BOUND peak_above_base_kb=%d base_kb=%d records=%d limit=%v err=%s\n", peak-base, base, n, errors.Is(err, container.ErrLimit) || strings.Contains(msg, "limit"), msg)
}

func printCount(n int64) { fmt.Printf("BOUNDCOUNT %d\n", n) }

func init() {
	register.Function1x0[int64](printCount)
}

// TestReadWithinMaxAlloc reads files of shapes whose decoding cost more
// than the bound allowed (issue 37, item 16), directly (the read's
// source, as a worker runs it) and in a pipeline on Prism (ReadGeneric,
// counted by a combine), each in a child process, and checks that each
// is read in full, or refused with an error of kind ErrLimit naming the
// field, within DefaultMaxAlloc plus 60 MB of peak RSS above the child's
// base. Not under the race detector, whose shadow memory is part of the
// resident set.
func TestReadWithinMaxAlloc(t *testing.T) {
	if spec := os.Getenv(boundChildEnv); spec != "" {
		boundChild(t, spec)
		return
	}
	if workertest.RaceEnabled || testing.Short() {
		t.Skip("resident-set figures need a build without -race, and not -short")
	}
	dir := t.TempDir()
	for _, sh := range boundShapes() {
		path, records := boundFile(t, dir, sh)
		for _, mode := range []string{"direct", "pipeline"} {
			t.Run(sh.name+"/"+mode, func(t *testing.T) {
				cmd := exec.Command(os.Args[0], "-test.run=^TestReadWithinMaxAlloc$", "-test.count=1")
				cmd.Env = append(os.Environ(), boundChildEnv+"="+mode+"|"+path)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("child: %v\n%s", err, out)
				}
				i := bytes.Index(out, []byte("BOUND "))
				if i < 0 {
					t.Fatalf("child said %s", out)
				}
				line := string(out[i:])
				line = line[:strings.IndexByte(line, '\n')]
				var peakKB, baseKB, n int64
				var refused bool
				if _, err := fmt.Sscanf(line, "BOUND peak_above_base_kb=%d base_kb=%d records=%d limit=%t", &peakKB, &baseKB, &n, &refused); err != nil {
					t.Fatalf("child said %q: %v", line, err)
				}
				msg := line[strings.Index(line, " err=")+5:]
				if mode == "pipeline" && msg == "<nil>" {
					n = -1
					if j := bytes.Index(out, []byte("BOUNDCOUNT ")); j >= 0 {
						fmt.Sscanf(string(out[j:]), "BOUNDCOUNT %d", &n)
					}
				}
				peak := peakKB << 10
				t.Logf("%s, %s: peak RSS %.1f MiB above a base of %.1f MiB; %d records; %s", sh.name, mode, float64(peak)/(1<<20), float64(baseKB)/1024, n, msg)
				switch {
				case msg == "<nil>" && n != int64(records):
					t.Errorf("read %d records of %d", n, records)
				case msg != "<nil>" && !refused:
					t.Errorf("failed, but not by the limit: %s", msg)
				case msg != "<nil>" && sh.field == "":
					t.Errorf("refused a file it should read: %s", msg)
				case msg != "<nil>" && !strings.Contains(msg, fmt.Sprintf("field %q", sh.field)) && !strings.Contains(msg, "field "+sh.field):
					t.Errorf("the refusal does not name field %s: %s", sh.field, msg)
				}
				if peak > DefaultMaxAlloc+boundSlack {
					t.Errorf("peak RSS %.1f MiB above the base, over WithMaxAlloc (%d MiB) + %d MiB", float64(peak)/(1<<20), DefaultMaxAlloc>>20, boundSlack>>20)
				}
			})
		}
	}
}
