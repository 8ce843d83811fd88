package container

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

type allInner struct {
	Z float64 `avro:"z"`
}

type allNested struct {
	A     int64    `avro:"a"`
	B     string   `avro:"b"`
	Inner allInner `avro:"inner"`
}

// allRec is allSchema as a Go struct; the union field u is left out (hamba
// skips writer fields the struct lacks).
type allRec struct {
	ID     int64            `avro:"id"`
	Flag   bool             `avro:"flag"`
	I32    int32            `avro:"i32"`
	F32    float32          `avro:"f32"`
	F64    float64          `avro:"f64"`
	Name   string           `avro:"name"`
	Raw    []byte           `avro:"raw"`
	Opt    *string          `avro:"opt"`
	Color  string           `avro:"color"`
	Fx     [4]byte          `avro:"fx"`
	Tags   []string         `avro:"tags"`
	Attrs  map[string]int64 `avro:"attrs"`
	Nested allNested        `avro:"nested"`
	Dec    *big.Rat         `avro:"dec"`
	Day    time.Time        `avro:"day"`
	Tsms   time.Time        `avro:"tsms"`
	Tsus   time.Time        `avro:"tsus"`
	UID    string           `avro:"uid"`
}

// expectedAll is record i of genPy.
func expectedAll(i int) allRec {
	r := allRec{
		ID: int64(i), Flag: i%2 == 0, I32: int32(-i), F32: float32(i) / 4, F64: float64(i) * 1.5,
		Name:   fmt.Sprintf("rec-%d", i),
		Raw:    []byte{byte(1 + i%250), 255, 128},
		Color:  []string{"RED", "GREEN", "BLUE"}[i%3],
		Tags:   []string{},
		Attrs:  map[string]int64{},
		Nested: allNested{A: int64(i * 7), B: fmt.Sprintf("n%d", i), Inner: allInner{Z: float64(i)}},
		Dec:    big.NewRat(int64(i*3-100), 100),
		Day:    time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i),
		Tsms:   time.Date(2021, 3, 4, 5, 6, 7, 123000000, time.UTC).Add(time.Duration(i) * time.Second),
		Tsus:   time.Date(2021, 3, 4, 5, 6, 7, 123456000, time.UTC).Add(time.Duration(i) * time.Microsecond),
	}
	if i%3 != 0 {
		s := fmt.Sprintf("x%d", i)
		r.Opt = &s
	}
	b := byte(i % 256)
	r.Fx = [4]byte{b, b, b, b}
	for j := 0; j < i%4; j++ {
		r.Tags = append(r.Tags, fmt.Sprintf("t%d", j))
	}
	for j := 0; j < i%3; j++ {
		r.Attrs[fmt.Sprintf("k%d", j)] = int64(j * i)
	}
	u := fmt.Sprintf("%032x", i*7919)
	r.UID = u[:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:]
	return r
}

// expectedPeers is expectedAll(i) for the records of the peer files, made
// once: the split tests compare hundreds of thousands of records.
var expectedPeers = sync.OnceValue(func() []allRec {
	recs := make([]allRec, peerRecords)
	for i := range recs {
		recs[i] = expectedAll(i)
	}
	return recs
})

// expectedPeer is expectedAll(i), from expectedPeers when it is there.
func expectedPeer(i int) allRec {
	if i >= 0 && i < peerRecords {
		return expectedPeers()[i]
	}
	return expectedAll(i)
}

// equalAll is reflect.DeepEqual for allRec (nil and empty slices and maps
// differ), but for times (equal instants) and decimals (equal values), by
// hand: the split tests call it for every record they read.
func equalAll(a, b allRec) bool {
	if !a.Day.Equal(b.Day) || !a.Tsms.Equal(b.Tsms) || !a.Tsus.Equal(b.Tsus) {
		return false
	}
	if (a.Dec == nil) != (b.Dec == nil) || a.Dec != nil && a.Dec.Cmp(b.Dec) != 0 {
		return false
	}
	if a.ID != b.ID || a.Flag != b.Flag || a.I32 != b.I32 || a.F32 != b.F32 || a.F64 != b.F64 ||
		a.Name != b.Name || a.Color != b.Color || a.Fx != b.Fx || a.Nested != b.Nested || a.UID != b.UID {
		return false
	}
	if (a.Opt == nil) != (b.Opt == nil) || a.Opt != nil && *a.Opt != *b.Opt {
		return false
	}
	if (a.Raw == nil) != (b.Raw == nil) || !bytes.Equal(a.Raw, b.Raw) {
		return false
	}
	if (a.Tags == nil) != (b.Tags == nil) || !slices.Equal(a.Tags, b.Tags) {
		return false
	}
	return (a.Attrs == nil) == (b.Attrs == nil) && maps.Equal(a.Attrs, b.Attrs)
}

type readRec[T any] struct {
	rec        T
	offset     int64
	splitPoint bool
}

// readAll reads every record of path from start.
func readAll[T any](t testing.TB, path string, start int64, opts Options) ([]readRec[T], *Reader[T]) {
	t.Helper()
	r, err := OpenReader[T](path, FileOpener(path), start, opts)
	if err != nil {
		t.Fatalf("open %s at %d: %v", path, start, err)
	}
	defer r.Close()
	var out []readRec[T]
	for {
		rec, off, sp, err := r.Next()
		if err == io.EOF {
			return out, r
		}
		if err != nil {
			t.Fatalf("%s from %d, record %d: %v", path, start, len(out), err)
		}
		out = append(out, readRec[T]{rec, off, sp})
	}
}

// TestPeersMatchAvrocat: every record we decode generically from a peer's
// file equals what avrocat prints for it, for every file avrocat reads (the
// codecs Avro C lacks, bzip2, zstandard and xz, hold the datums of py-null:
// TestPeersTyped checks their decompression record by record).
func TestPeersMatchAvrocat(t *testing.T) {
	ps := peerFiles(t)
	writer := avro.MustParse(allSchema)
	for _, key := range ps.order {
		lines, ok := ps.avrocatJSON[key]
		if !ok {
			continue
		}
		t.Run(key, func(t *testing.T) {
			if len(lines) != peerRecords {
				t.Fatalf("avrocat printed %d records, want %d", len(lines), peerRecords)
			}
			recs, r := readAll[map[string]any](t, ps.files[key], 0, Options{})
			if len(recs) != len(lines) {
				t.Fatalf("read %d records, avrocat printed %d", len(recs), len(lines))
			}
			for i, rec := range recs {
				theirs, err := decodeJSONLine(lines[i])
				if err != nil {
					t.Fatalf("avrocat line %d: %v", i, err)
				}
				if err := matchAvrocat(writer, rec.rec, theirs, fmt.Sprintf("record %d", i)); err != nil {
					t.Fatal(err)
				}
			}
			codec := strings.SplitN(key, "-", 2)[1]
			if got := r.Header().Codec; got != codec {
				t.Errorf("header codec %q, want %q", got, codec)
			}
		})
	}
}

// TestPeersTyped decodes every peer file into Go structs and checks each
// record against the values the generator wrote, and the split-point shape
// of the iteration: offsets strictly increase from block to block, the first
// record of each block (and only it) is a split point, BlockInfo matches.
func TestPeersTyped(t *testing.T) {
	ps := peerFiles(t)
	for _, key := range ps.order {
		t.Run(key, func(t *testing.T) {
			// Avro C drops logical types from the schemas it writes; a reader
			// schema with them brings them back.
			var opts Options
			if strings.HasPrefix(key, "c-") {
				opts.ReaderSchema = avro.MustParse(allSchema)
			}
			r, err := OpenReader[allRec](key, FileOpener(ps.files[key]), 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := string(r.Header().Meta["user.note"]); key[:3] == "py-" && got != "written by python3-avro" {
				t.Errorf("user metadata %q", got)
			}
			var i int
			var blocks, lastOff, inBlock, blockRecs int64 = 0, -1, 0, 0
			var all []allRec
			for ; ; i++ {
				rec, off, sp, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				all = append(all, rec)
				if want := expectedPeer(i); !equalAll(rec, want) {
					t.Fatalf("record %d:\n got %+v\nwant %+v", i, rec, want)
				}
				if sp != (off != lastOff) {
					t.Fatalf("record %d: split point %v at offset %d, previous block at %d", i, sp, off, lastOff)
				}
				if sp {
					if off <= lastOff {
						t.Fatalf("block offsets do not increase: %d after %d", off, lastOff)
					}
					if lastOff >= 0 && inBlock != blockRecs {
						t.Fatalf("block at %d gave %d records, declared %d", lastOff, inBlock, blockRecs)
					}
					blocks++
					lastOff, inBlock = off, 0
					var size int64
					size, blockRecs = r.BlockInfo()
					if size <= SyncSize || blockRecs <= 0 {
						t.Fatalf("BlockInfo() = %d, %d", size, blockRecs)
					}
				}
				inBlock++
			}
			if i != peerRecords {
				t.Fatalf("read %d records, want %d", i, peerRecords)
			}
			// Records do not share memory with the reader's block buffers.
			for j, rec := range all {
				if !equalAll(rec, expectedPeer(j)) {
					t.Fatalf("record %d changed after later blocks were read", j)
				}
			}
			if blocks < 10 {
				t.Errorf("only %d blocks; the tests want files of many blocks", blocks)
			}
			t.Logf("%s: %d records in %d blocks", key, i, blocks)
		})
	}
}

// TestReaderSchema reads a peer file through reader schemas that project,
// add fields with defaults, promote numbers and rename through aliases.
func TestReaderSchema(t *testing.T) {
	ps := peerFiles(t)
	reader := avro.MustParse(`{"type":"record","name":"All","namespace":"sdfio.test","fields":[
		{"name":"id","type":"long"},
		{"name":"i32","type":"long"},
		{"name":"f32","type":"double"},
		{"name":"label","aliases":["name"],"type":"string"},
		{"name":"added","type":"string","default":"dflt"},
		{"name":"opt","type":["null","string"],"default":null}
	]}`)
	type proj struct {
		ID    int64   `avro:"id"`
		I32   int64   `avro:"i32"`
		F32   float64 `avro:"f32"`
		Label string  `avro:"label"`
		Added string  `avro:"added"`
		Opt   *string `avro:"opt"`
	}
	for _, key := range []string{"py-snappy", "c-deflate"} {
		recs, _ := readAll[proj](t, ps.files[key], 0, Options{ReaderSchema: reader})
		if len(recs) != peerRecords {
			t.Fatalf("%s: %d records", key, len(recs))
		}
		for i, rec := range recs {
			e := expectedAll(i)
			want := proj{ID: e.ID, I32: int64(e.I32), F32: float64(e.F32), Label: e.Name, Added: "dflt", Opt: e.Opt}
			if !reflect.DeepEqual(rec.rec, want) {
				t.Fatalf("%s record %d: got %+v want %+v", key, i, rec.rec, want)
			}
		}
		// Generic records through the same reader schema.
		gen, _ := readAll[map[string]any](t, ps.files[key], 0, Options{ReaderSchema: reader})
		if g := gen[7].rec; g["added"] != "dflt" || g["label"] != "rec-7" || g["i32"] != int64(-7) || g["f32"] != float64(1.75) || len(g) != 6 {
			t.Fatalf("%s generic record 7 through reader schema: %v", key, g)
		}
	}
	// A Go type that cannot hold the writer schema is an ErrSchema error.
	type wrong struct {
		Name int64 `avro:"name"`
	}
	_, err := drain[wrong](seedFiles(t)["py-null.avro"], "py-null.avro", 0, Options{})
	checkErr(t, err, ErrSchema, "py-null.avro")
	// An incompatible reader schema is an ErrSchema error naming the file.
	bad := avro.MustParse(`{"type":"record","name":"All","namespace":"sdfio.test","fields":[{"name":"name","type":"long"}]}`)
	_, err = OpenReader[map[string]any]("py-null", FileOpener(ps.files["py-null"]), 0, Options{ReaderSchema: bad})
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "py-null") {
		t.Fatalf("incompatible reader schema: %v", err)
	}
}

// TestConcurrentReaders reads one file from several goroutines at once (the
// parsed schema and hamba's decoders are shared); run under -race.
func TestConcurrentReaders(t *testing.T) {
	files := seedFiles(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		for name, b := range files {
			if !strings.HasPrefix(name, "py-") {
				continue
			}
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				var n int
				var err error
				if g%2 == 0 {
					n, err = drain[allRec](b, name, int64(g*100), Options{})
				} else {
					n, err = drain[map[string]any](b, name, int64(g*100), Options{})
				}
				if err != nil || n == 0 && g == 0 {
					errs <- fmt.Errorf("%s from %d: %d records, %v", name, g*100, n, err)
				}
			}(g)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
