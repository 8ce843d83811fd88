package avroflink_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/internal/flinktest"
	"github.com/sdfio/sdfio/sdf"
)

// Initial bundles of the reads: small, so that every file is cut into
// several restrictions.
const (
	readBundle    = 700
	readMinBundle = 300
)

// TestReadCodecs reads 17 files in every codec avroio reads, written by
// python3-avro (null, deflate, snappy, zstandard, bzip2, xz: two files
// each) and by Avro C's avromod (lzma twice, null, deflate, snappy), with
// avroio.Read into structs and avroio.ReadGeneric into Records, in one
// Flink job, each file cut into several initial restrictions. Each read
// must yield every record of every file once, equal field by field to the
// oracle, and count them in its records metric; ranges_read must be the
// planned initial bundles (Flink's batch mode splits no running bundle).
func TestReadCodecs(t *testing.T) {
	requireTools(t)
	const perFile = 200
	dir, src := t.TempDir(), t.TempDir()
	var py []pyFile
	var ids [][2]int64
	next := int64(0)
	add := func(path, codec string) pyFile {
		f := pyFile{Path: path, Codec: codec, First: next * 100000, N: perFile}
		ids = append(ids, [2]int64{f.First, f.N})
		next++
		return f
	}
	for _, codec := range []string{"null", "deflate", "snappy", "zstandard", "bzip2", "xz"} {
		for k := 0; k < 2; k++ {
			py = append(py, add(filepath.Join(dir, fmt.Sprintf("py-%s-%d.avro", codec, k)), codec))
		}
	}
	// Avro C's files: python3-avro writes them uncompressed elsewhere,
	// avromod rewrites them in its codecs.
	cCodecs := []string{"lzma", "lzma", "null", "deflate", "snappy"}
	var cSrc []pyFile
	for i := range cCodecs {
		cSrc = append(cSrc, add(filepath.Join(src, fmt.Sprintf("c-%d.avro", i)), "null"))
	}
	writePython(t, 600, append(py, cSrc...)...)
	for i, codec := range cCodecs {
		avromod(t, cSrc[i].Path, filepath.Join(dir, fmt.Sprintf("c-%s-%d.avro", codec, i)), codec, 600)
	}

	// Every codec is there, and every file is cut into several bundles.
	files, err := filepath.Glob(filepath.Join(dir, "*.avro"))
	if err != nil {
		t.Fatal(err)
	}
	codecs := map[string]int{}
	planned := 0
	for _, f := range files {
		br, err := container.Open(f, container.FileOpener(f), 0, container.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		codec := br.Header().Codec
		br.Close()
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n := len(sdf.SplitIntoBundles(sdf.OffsetRange{Start: 0, End: fi.Size()}, readBundle, readMinBundle, 1))
		if n < 2 {
			t.Fatalf("%s (%d bytes) is cut into %d initial bundles, want several", f, fi.Size(), n)
		}
		codecs[codec]++
		planned += n
	}
	var names []string
	for c, n := range codecs {
		names = append(names, fmt.Sprintf("%s x%d", c, n))
	}
	sort.Strings(names)
	t.Logf("%d files (%v), %d initial bundles per read", len(files), names, planned)
	for _, c := range []string{"null", "deflate", "snappy", "zstandard", "bzip2", "xz", "lzma"} {
		if codecs[c] < 2 {
			t.Fatalf("%d files of codec %s, want several", codecs[c], c)
		}
	}

	out := t.TempDir()
	glob := filepath.Join(dir, "*.avro")
	p, s := beam.NewPipelineWithRoot()
	ts := s.Scope("typed")
	typed := avroio.Read(ts, glob, reflect.TypeFor[Event](),
		avroio.WithDesiredBundleSize(readBundle), avroio.WithMinBundleSize(readMinBundle), avroio.WithMetricsNamespace("typed"))
	dump(ts, beam.ParDo(ts, eventKey, typed), filepath.Join(out, "typed.json"))
	gs := s.Scope("generic")
	generic := avroio.ReadGeneric(gs, glob,
		avroio.WithDesiredBundleSize(readBundle), avroio.WithMinBundleSize(readMinBundle), avroio.WithMetricsNamespace("generic"))
	dump(gs, beam.ParDo(gs, recordKey, generic), filepath.Join(out, "generic.json"))

	res := flinktest.MustRun(t, p)
	t.Logf("ran in %v on %d workers", res.Elapsed, len(res.Workers))

	want := newOracle(ids...)
	for _, ns := range []string{"typed", "generic"} {
		want.check(t, "avroio.Read "+ns, readDump(t, filepath.Join(out, ns+".json")))
		if got := counter(res, ns, "records"); got != int64(len(want)) {
			t.Errorf("%s: records metric %d, want %d", ns, got, len(want))
		}
		ranges := counter(res, ns, "ranges_read")
		if ranges != int64(planned) {
			t.Errorf("%s: ranges_read %d, want the %d initial bundles planned", ns, ranges, planned)
		}
		t.Logf("%s: records %d, bytes_read %d, ranges_read %d, splits accepted %d, refused %d", ns,
			counter(res, ns, "records"), counter(res, ns, "bytes_read"), ranges,
			counter(res, ns, "splits_accepted"), counter(res, ns, "splits_refused"))
	}
}
