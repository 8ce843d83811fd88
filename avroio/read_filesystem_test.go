package avroio

// A read that starts deep in a file does not read the bytes before it:
// seeking where a filesystem's stream can seek, ranged reads on GCS (served
// by fake-gcs-server in this process), skipping only where neither works.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/sdfio/sdfio/avroio/container"
	_ "github.com/sdfio/sdfio/offsetsource/filesource/gcsrange" // gs://, read in ranges
	"github.com/sdfio/sdfio/sdf"
)

// Two test filesystems over local files that count the bytes their streams
// deliver: countseek:// streams can seek, countskip:// streams cannot.
func init() {
	filesystem.Register("countseek", func(context.Context) filesystem.Interface { return &countingFS{scheme: "countseek://", seek: true} })
	filesystem.Register("countskip", func(context.Context) filesystem.Interface { return &countingFS{scheme: "countskip://"} })
}

var (
	countedMu sync.Mutex
	counted   = map[string]int64{} // path -> bytes delivered
)

func bytesDelivered(path string) int64 {
	countedMu.Lock()
	defer countedMu.Unlock()
	return counted[path]
}

type countingFS struct {
	scheme string
	seek   bool
}

func (fs *countingFS) local(path string) string { return strings.TrimPrefix(path, fs.scheme) }
func (fs *countingFS) Close() error             { return nil }
func (fs *countingFS) List(_ context.Context, glob string) ([]string, error) {
	if _, err := os.Stat(fs.local(glob)); err != nil {
		return nil, nil
	}
	return []string{glob}, nil
}
func (fs *countingFS) OpenWrite(context.Context, string) (io.WriteCloser, error) {
	return nil, fmt.Errorf("read only")
}
func (fs *countingFS) Size(_ context.Context, path string) (int64, error) {
	fi, err := os.Stat(fs.local(path))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
func (fs *countingFS) OpenRead(_ context.Context, path string) (io.ReadCloser, error) {
	f, err := os.Open(fs.local(path))
	if err != nil {
		return nil, err
	}
	c := &countingFile{f: f, path: path}
	if fs.seek {
		return &seekingFile{c}, nil
	}
	return c, nil
}

type countingFile struct {
	f    *os.File
	path string
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	countedMu.Lock()
	counted[c.path] += int64(n)
	countedMu.Unlock()
	return n, err
}
func (c *countingFile) Close() error { return c.f.Close() }

type seekingFile struct{ *countingFile }

func (s *seekingFile) Seek(off int64, whence int) (int64, error) { return s.f.Seek(off, whence) }

// bigFile writes 20,000 events in blocks of 100 (some 600 KB, far more
// than a header's read-ahead) and returns its path and bytes.
func bigFile(t *testing.T) (string, []byte) {
	t.Helper()
	b, _ := layoutFile(t, eventsSchema, "null", eventRecords(0, 20000), []int{100})
	path := t.TempDir() + "/big.avro"
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, b
}

// readFrom reads the source of path from start to the end and returns the
// number of records.
func readFrom(t *testing.T, path string, start int64) int {
	t.Helper()
	return len(readSource(t, newSource(t, path, reflect.TypeFor[event]()).Subrange(start, sdf.Unbounded)))
}

// headerReadAhead bounds what reading the header pulls from a stream
// opened at 0: one fill of the container's 64 KiB read-ahead.
const headerReadAhead = 64 << 10

func TestSeekInsteadOfRead(t *testing.T) {
	path, b := bigFile(t)
	size := int64(len(b))
	start := size * 3 / 4
	want := 0
	for _, o := range recordOffsets(t, path) {
		if o >= start {
			want++
		}
	}

	seekPath := "countseek://" + path
	if n := readFrom(t, seekPath, start); n != want {
		t.Fatalf("read %d records from byte %d, want %d", n, start, want)
	}
	got := bytesDelivered(seekPath)
	limit := headerReadAhead + size - (start - container.SyncSize)
	t.Logf("seekable stream: %d bytes delivered to read [%d, %d) of a %d-byte file", got, start, size, size)
	if got > limit {
		t.Errorf("read %d bytes from a seekable stream, want at most %d (the header's read-ahead and the range)", got, limit)
	}

	skipPath := "countskip://" + path
	if n := readFrom(t, skipPath, start); n != want {
		t.Fatalf("read %d records from byte %d, want %d", n, start, want)
	}
	got = bytesDelivered(skipPath)
	t.Logf("stream without Seek: %d bytes delivered", got)
	if got < size {
		t.Errorf("read %d bytes from a stream that cannot seek, want at least the whole file (%d): it must skip to the range", got, size)
	}
}

// gcsServer serves objects from fake-gcs-server behind a handler that
// records every request's range and the bytes it served.
type gcsServer struct {
	*fakestorage.Server
	mu       sync.Mutex
	requests []gcsRequest
}

type gcsRequest struct {
	path   string
	rng    string // the Range header
	served int64
}

func startGCS(t *testing.T, objects ...fakestorage.Object) *gcsServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The XML API (the client's reads) is routed by host: the server's own.
	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true, InitialObjects: objects, PublicHost: l.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	g := &gcsServer{Server: fake}
	h := fake.HTTPHandler()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		if r.Method == http.MethodGet {
			g.mu.Lock()
			g.requests = append(g.requests, gcsRequest{path: r.URL.Path, rng: r.Header.Get("Range"), served: cw.n})
			g.mu.Unlock()
		}
	}))
	ts.Listener.Close()
	ts.Listener = l
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(fake.Stop)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(ts.URL, "http://"))
	return g
}

// media returns the requests that fetched object content (ranged or not).
func (g *gcsServer) media(object string) []gcsRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gcsRequest
	for _, r := range g.requests {
		if strings.HasSuffix(r.path, "/"+object) && !strings.Contains(r.path, "/storage/v1/b/") {
			out = append(out, r)
		}
	}
	return out
}

func (g *gcsServer) reset() {
	g.mu.Lock()
	g.requests = nil
	g.mu.Unlock()
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// rangeStart parses "bytes=A-B" or "bytes=A-".
func rangeStart(t *testing.T, h string) int64 {
	t.Helper()
	if h == "" {
		return 0
	}
	a, _, _ := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	n, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		t.Fatalf("range header %q: %v", h, err)
	}
	return n
}

func TestGCS(t *testing.T) {
	_, b := bigFile(t)
	size := int64(len(b))
	small, _ := layoutFile(t, eventsSchema, "deflate", eventRecords(20000, 20100), []int{9})
	g := startGCS(t,
		fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "avroio-test", Name: "data/big.avro"}, Content: b},
		fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "avroio-test", Name: "data/small.avro"}, Content: small},
		fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "avroio-test", Name: "other/x.avro"}, Content: small},
	)

	t.Run("ranged reads", func(t *testing.T) {
		g.reset()
		start := size * 3 / 4
		n := readFrom(t, "gs://avroio-test/data/big.avro", start)
		if n == 0 {
			t.Fatal("read no records")
		}
		var served int64
		reqs := g.media("data/big.avro")
		for _, r := range reqs {
			served += r.served
			if a := rangeStart(t, r.rng); a != 0 && a < start-container.SyncSize {
				t.Errorf("request for range %q starts before the sync marker preceding byte %d", r.rng, start)
			}
		}
		t.Logf("%d requests served %d bytes to read [%d, %d) of a %d-byte object: %v", len(reqs), served, start, size, size, reqs)
		if limit := 64<<10 + size - (start - container.SyncSize); served > limit {
			t.Errorf("served %d bytes, want at most %d (the header's first chunk and the range)", served, limit)
		}
		if len(reqs) < 2 {
			t.Errorf("%d requests, want one for the header and ranged ones for the data", len(reqs))
		}
	})

	t.Run("pipeline", func(t *testing.T) {
		p, s := beam.NewPipelineWithRoot()
		typed := Read(s, "gs://avroio-test/data/*.avro", reflect.TypeFor[event](), WithDesiredBundleSize(size/10), WithMinBundleSize(1000))
		passert.Equals(s, beam.ParDo(s, eventID, typed), ids(0, 20100)...)
		generic := ReadAll(s, beam.Create(s, "gs://avroio-test/data/small.avro"), RecordType)
		passert.Equals(s, beam.ParDo(s, recordID, generic), ids(20000, 20100)...)
		res := run(t, p)
		if n := counterSum(t, res, "records"); n != 20200 {
			t.Errorf("records metric = %d, want 20200", n)
		}
	})
}
