package avroio_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
)

func init() {
	register.DoFn2x0[[]byte, func(evRecord)](&longNameFn{})
}

// longNameFn emits the records [0, N), record Long with a name of 5,000
// bytes when Long >= 0.
type longNameFn struct{ N, Long int64 }

func (fn *longNameFn) ProcessElement(_ []byte, emit func(evRecord)) {
	for i := int64(0); i < fn.N; i++ {
		e := makeEvent(i)
		if i == fn.Long {
			e.Name = strings.Repeat("n", 5000)
		}
		emit(e)
	}
}

// maxBlockBytes reads every block of path with a MaxAlloc of limit and
// returns the largest block's data size.
func maxBlockBytes(t *testing.T, path string, limit int64) int64 {
	t.Helper()
	br, err := container.Open(path, container.FileOpener(path), 0, container.Limits{MaxAlloc: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var most int64
	for {
		b, err := br.Next()
		if err == io.EOF {
			return most
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		most = max(most, int64(len(b.Data)))
	}
}

// TestWriteMaxBlockSize (issue 14, item 22): Write's blocks stay within
// MaxBlockSize (by default the largest block Read reads with its default
// MaxAlloc), so a reader with that MaxAlloc reads them; a record that alone
// is larger fails the write naming its size, in both sharding modes, and
// leaves nothing. (MaxBlockSize below the sync interval, or negative, is
// refused at construction: TestWriteConstructionErrors.)
func TestWriteMaxBlockSize(t *testing.T) {
	const limit = 4096
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	in := beam.ParDo(s, &longNameFn{N: 3000, Long: -1}, beam.Impulse(s))
	out := filepath.Join(dir, "ok/part")
	avroio.Write(s, out, eventSchema, in, avroio.WithNumShards(1), avroio.WithSyncInterval(4000), avroio.WithMaxBlockSize(limit), avroio.WithCodec("null"))
	runWritePipeline(t, p)
	checkEvents(t, []string{out + "-00000-of-00001"}, 3000)
	if most := maxBlockBytes(t, out+"-00000-of-00001", limit); most > limit {
		t.Fatalf("a block of %d bytes, over MaxBlockSize %d", most, limit)
	}

	for _, shards := range []int{0, 2} {
		dir := t.TempDir()
		p, s := beam.NewPipelineWithRoot()
		in := beam.ParDo(s, &longNameFn{N: 100, Long: 50}, beam.Impulse(s))
		avroio.Write(s, filepath.Join(dir, "out/part"), eventSchema, in, avroio.WithNumShards(shards), avroio.WithSyncInterval(1000), avroio.WithMaxBlockSize(limit))
		err := runFailing(p)
		if err == nil || !strings.Contains(err.Error(), "serializes to") || !strings.Contains(err.Error(), "MaxBlockSize 4096") {
			t.Fatalf("NumShards(%d): pipeline error %v, want one naming the record's size and MaxBlockSize", shards, err)
		}
		if left := tempLeftovers(t, dir); len(left) > 0 {
			t.Errorf("NumShards(%d): the failed write left %v", shards, left)
		}
		if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
			if names := dirNames(t, filepath.Join(dir, "out")); len(names) > 0 {
				t.Errorf("NumShards(%d): out/ holds %v after a failed write", shards, names)
			}
		}
	}

}
