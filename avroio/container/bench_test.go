package container

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"sync"
	"testing"

	"github.com/hamba/avro/v2/ocf"
)

// The 8-field benchmark schema of DESIGN.md: long, double, string, bytes,
// nullable string, array<long>, nested record, enum.
const benchSchema = `{"type":"record","name":"Bench","namespace":"sdfio.bench","fields":[
 {"name":"id","type":"long"},
 {"name":"score","type":"double"},
 {"name":"name","type":"string"},
 {"name":"payload","type":"bytes"},
 {"name":"note","type":["null","string"]},
 {"name":"values","type":{"type":"array","items":"long"}},
 {"name":"point","type":{"type":"record","name":"Point","fields":[{"name":"x","type":"long"},{"name":"y","type":"double"}]}},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C","D"]}}
]}`

type benchPoint struct {
	X int64   `avro:"x"`
	Y float64 `avro:"y"`
}

type benchRec struct {
	ID      int64      `avro:"id"`
	Score   float64    `avro:"score"`
	Name    string     `avro:"name"`
	Payload []byte     `avro:"payload"`
	Note    *string    `avro:"note"`
	Values  []int64    `avro:"values"`
	Point   benchPoint `avro:"point"`
	Kind    string     `avro:"kind"`
}

func makeBenchRec(i int) benchRec {
	r := benchRec{
		ID:      int64(i) * 7919,
		Score:   float64(i) * 0.37,
		Name:    fmt.Sprintf("user-%08d", i),
		Payload: bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 12),
		Values:  []int64{int64(i), int64(i) * 3, -int64(i), 42, int64(i) << 20},
		Point:   benchPoint{X: int64(i % 1000), Y: float64(i) / 3},
		Kind:    []string{"A", "B", "C", "D"}[i%4],
	}
	if i%2 == 0 {
		s := fmt.Sprintf("note-%d", i)
		r.Note = &s
	}
	return r
}

const benchRecords = 200_000

var (
	benchOnce  sync.Once
	benchFiles map[string][]byte
)

// benchFile is benchRecords records of the benchmark schema in blocks of
// about 64 KB (Java's default sync interval), per codec.
func benchFile(t testing.TB, codec string) []byte {
	benchOnce.Do(func() {
		recs := make([]benchRec, benchRecords)
		for i := range recs {
			recs[i] = makeBenchRec(i)
		}
		benchFiles = map[string][]byte{}
		for _, c := range []string{"null", "snappy", "deflate"} {
			benchFiles[c] = writeFile(t, benchSchema, c, recs, 700)
		}
	})
	return benchFiles[codec]
}

// TestBenchFileRoundTrip makes sure the benchmark decodes what was written.
func TestBenchFileRoundTrip(t *testing.T) {
	// The benchmarks' file is benchRecords records; the same generator at
	// a fraction of the size checks that they read what they think.
	const n = 5000
	recs := make([]benchRec, n)
	for i := range recs {
		recs[i] = makeBenchRec(i)
	}
	b := writeFile(t, benchSchema, "snappy", recs, 700)
	r, err := OpenReader[benchRec]("bench", bytesOpener(b), 0, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		rec, _, _, err := r.Next()
		if err == io.EOF {
			if i != n {
				t.Fatalf("%d records", i)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := makeBenchRec(i); !reflect.DeepEqual(rec, want) {
			t.Fatalf("record %d: %+v, want %+v", i, rec, want)
		}
	}
	t.Logf("%d records, %d bytes snappy", n, len(b))
}

func benchRead[T any](b *testing.B, codec string, opts Options) {
	file := benchFile(b, codec)
	b.SetBytes(int64(len(file)))
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		r, err := OpenReader[T]("bench", bytesOpener(file), 0, opts)
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, _, _, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rec/s")
}

// BenchmarkDecode measures single-core decoding of the 8-field schema through
// this package: framing, codec and hamba/avro datum decoding.
// Run with: go test ./avroio/container -run '^$' -bench Decode -cpu 1
func BenchmarkDecode(b *testing.B) {
	for _, codec := range []string{"null", "snappy", "deflate"} {
		b.Run("typed/"+codec, func(b *testing.B) { benchRead[benchRec](b, codec, Options{}) })
	}
	b.Run("typed-validated/null", func(b *testing.B) { benchRead[benchRec](b, "null", Options{Validate: ValidateAlways}) })
	b.Run("typed-validated/snappy", func(b *testing.B) { benchRead[benchRec](b, "snappy", Options{Validate: ValidateAlways}) })
	b.Run("generic/snappy", func(b *testing.B) { benchRead[map[string]any](b, "snappy", Options{}) })
}

// BenchmarkHambaOCF is the same file through hamba/avro's own container
// decoder (which can only start at offset 0): the cost of our framing
// shows as the difference.
func BenchmarkHambaOCF(b *testing.B) {
	for _, codec := range []string{"null", "snappy"} {
		b.Run(codec, func(b *testing.B) {
			file := benchFile(b, codec)
			b.SetBytes(int64(len(file)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				d, err := ocf.NewDecoder(bytes.NewReader(file))
				if err != nil {
					b.Fatal(err)
				}
				for d.HasNext() {
					var r benchRec
					if err := d.Decode(&r); err != nil {
						b.Fatal(err)
					}
					n++
				}
				if d.Error() != nil {
					b.Fatal(d.Error())
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "rec/s")
		})
	}
}
