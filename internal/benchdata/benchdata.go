// Package benchdata generates the Avro object container files that the
// avroio performance benchmarks read (internal/cmd/avrobench, run by
// `make bench`): one large file of at least 1 GiB and a set of small files,
// all of the 8-field benchmark schema of DESIGN.md (long, double, string,
// bytes, nullable string, array<long>, nested record, enum), snappy blocks.
//
// Files are generated under a cache directory only when missing, and never
// belong in the repository. Each file has a sidecar "<file>.json" written
// after the file itself was completely written and renamed into place; a file
// without a matching sidecar (an interrupted run, another generator version,
// a different size) is generated again.
//
// Record i is a pure function of i (Make), so a reader can check what it read.
package benchdata

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sdfio/sdfio/avroio/container"
)

// Schema is the 8-field benchmark schema of DESIGN.md, the same as
// avroio/container's benchmarks use.
const Schema = `{"type":"record","name":"Bench","namespace":"sdfio.bench","fields":[
 {"name":"id","type":"long"},
 {"name":"score","type":"double"},
 {"name":"name","type":"string"},
 {"name":"payload","type":"bytes"},
 {"name":"note","type":["null","string"]},
 {"name":"values","type":{"type":"array","items":"long"}},
 {"name":"point","type":{"type":"record","name":"Point","fields":[{"name":"x","type":"long"},{"name":"y","type":"double"}]}},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C","D"]}}
]}`

// Point is the nested record of Schema.
type Point struct {
	X int64   `avro:"x"`
	Y float64 `avro:"y"`
}

// Record is one record of Schema as a Go struct for hamba/avro (avro tags).
type Record struct {
	ID      int64   `avro:"id"`
	Score   float64 `avro:"score"`
	Name    string  `avro:"name"`
	Payload []byte  `avro:"payload"`
	Note    *string `avro:"note"`
	Values  []int64 `avro:"values"`
	Point   Point   `avro:"point"`
	Kind    string  `avro:"kind"`
}

var kinds = [...]string{"A", "B", "C", "D"}

// Make returns record i: the same values as avroio/container's benchmark
// records (about 87 bytes serialized, about 46 with snappy).
func Make(i int64) Record {
	r := Record{
		ID:      i * 7919,
		Score:   float64(i) * 0.37,
		Name:    fmt.Sprintf("user-%08d", i),
		Payload: make([]byte, 24),
		Values:  []int64{i, i * 3, -i, 42, i << 20},
		Point:   Point{X: i % 1000, Y: float64(i) / 3},
		Kind:    kinds[i%4],
	}
	for j := 0; j < 24; j += 2 {
		r.Payload[j], r.Payload[j+1] = byte(i), byte(i>>8)
	}
	if i%2 == 0 {
		s := "note-" + strconv.FormatInt(i, 10)
		r.Note = &s
	}
	return r
}

// Codec is the block codec of the generated files.
const Codec = "snappy"

// version changes whenever Make, Schema, Codec or the layout change, so
// that cached files of an older generator are replaced.
const version = 1

// File is one generated file.
type File struct {
	Path    string `json:"path"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
	// First is the index (as in Make) of the file's first record.
	First int64 `json:"first"`
}

// Set is the large file and the small files under one directory.
type Set struct {
	Dir   string
	Large File
	// Small are the small files; SmallPattern is a glob that matches
	// exactly them.
	Small        []File
	SmallPattern string
}

// SmallRecords is the sum of the small files' records.
func (s *Set) SmallRecords() int64 {
	var n int64
	for _, f := range s.Small {
		n += f.Records
	}
	return n
}

// SmallBytes is the sum of the small files' sizes.
func (s *Set) SmallBytes() int64 {
	var n int64
	for _, f := range s.Small {
		n += f.Bytes
	}
	return n
}

// Config says what to generate.
type Config struct {
	// LargeBytes is the least size of the large file; records are added
	// until the file reaches it.
	LargeBytes int64
	// SmallFiles files of SmallRecords records each.
	SmallFiles   int
	SmallRecords int64
}

// DefaultConfig is what `make bench` reads: a 1 GiB file and 64 files of
// 20,000 records.
var DefaultConfig = Config{LargeBytes: 1 << 30, SmallFiles: 64, SmallRecords: 20_000}

// sidecar is the content of "<file>.json".
type sidecar struct {
	Version int    `json:"version"`
	Codec   string `json:"codec"`
	Target  string `json:"target"` // what was asked for, e.g. "bytes>=1073741824"
	File
}

// Ensure makes sure the files of cfg exist under dir, generating those that
// are missing or stale, and returns them. Progress goes to logw.
func Ensure(dir string, cfg Config, logw io.Writer) (*Set, error) {
	if cfg.LargeBytes <= 0 || cfg.SmallFiles <= 0 || cfg.SmallRecords <= 0 {
		return nil, fmt.Errorf("benchdata: invalid config %+v", cfg)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("benchdata: %w", err)
	}
	set := &Set{Dir: dir}
	large := filepath.Join(dir, fmt.Sprintf("large-%d.avro", cfg.LargeBytes))
	f, err := ensureFile(large, fmt.Sprintf("bytes>=%d", cfg.LargeBytes), 0, func(w *container.Writer) (bool, error) {
		return w.Offset() >= cfg.LargeBytes, nil
	}, logw)
	if err != nil {
		return nil, err
	}
	set.Large = f
	smallDir := filepath.Join(dir, fmt.Sprintf("small-%dx%d", cfg.SmallFiles, cfg.SmallRecords))
	if err := os.MkdirAll(smallDir, 0o755); err != nil {
		return nil, fmt.Errorf("benchdata: %w", err)
	}
	for i := 0; i < cfg.SmallFiles; i++ {
		path := filepath.Join(smallDir, fmt.Sprintf("part-%05d.avro", i))
		first := int64(i) * cfg.SmallRecords
		f, err := ensureFile(path, fmt.Sprintf("records=%d", cfg.SmallRecords), first, func(w *container.Writer) (bool, error) {
			return w.Records() >= cfg.SmallRecords, nil
		}, logw)
		if err != nil {
			return nil, err
		}
		set.Small = append(set.Small, f)
	}
	set.SmallPattern = filepath.Join(smallDir, "part-*.avro")
	return set, nil
}

// ensureFile returns the file at path if its sidecar says it is complete
// and current, and otherwise writes it, records first, first+1, ... until
// done says so.
func ensureFile(path, target string, first int64, done func(*container.Writer) (bool, error), logw io.Writer) (File, error) {
	if sc, ok := readSidecar(path); ok && sc.Version == version && sc.Codec == Codec && sc.Target == target && sc.First == first {
		if fi, err := os.Stat(path); err == nil && fi.Size() == sc.Bytes {
			sc.Path = path
			return sc.File, nil
		}
	}
	os.Remove(path + ".json")
	start := time.Now()
	// A temporary file of this process's own: two runs generating the same
	// file at once used to write into one path.tmp and leave a corrupt file
	// that its sidecar called complete.
	out, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return File{}, fmt.Errorf("benchdata: %w", err)
	}
	tmp := out.Name()
	defer os.Remove(tmp) // a no-op once renamed
	bw := bufio.NewWriterSize(out, 1<<20)
	w, err := container.NewWriter(bw, Schema, container.WriterOptions{Codec: Codec})
	if err != nil {
		out.Close()
		return File{}, fmt.Errorf("benchdata: %s: %w", path, err)
	}
	i := first
	for {
		stop, err := done(w)
		if err != nil {
			out.Close()
			return File{}, err
		}
		if stop {
			break
		}
		rec := Make(i)
		if err := w.Append(&rec); err != nil {
			out.Close()
			return File{}, fmt.Errorf("benchdata: %s: record %d: %w", path, i, err)
		}
		i++
	}
	err = w.Close()
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return File{}, fmt.Errorf("benchdata: writing %s: %w", path, err)
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return File{}, fmt.Errorf("benchdata: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return File{}, fmt.Errorf("benchdata: %w", err)
	}
	f := File{Path: path, Records: i - first, Bytes: fi.Size(), First: first}
	b, _ := json.MarshalIndent(sidecar{Version: version, Codec: Codec, Target: target, File: f}, "", "  ")
	if err := os.WriteFile(path+".json", append(b, '\n'), 0o644); err != nil {
		return File{}, fmt.Errorf("benchdata: %w", err)
	}
	if d := time.Since(start); d > time.Second {
		fmt.Fprintf(logw, "benchdata: wrote %s: %d records, %d bytes, in %v\n", path, f.Records, f.Bytes, d.Round(time.Millisecond))
	}
	return f, nil
}

func readSidecar(path string) (sidecar, bool) {
	b, err := os.ReadFile(path + ".json")
	if err != nil {
		return sidecar{}, false
	}
	var sc sidecar
	if err := json.Unmarshal(b, &sc); err != nil {
		return sidecar{}, false
	}
	return sc, true
}
