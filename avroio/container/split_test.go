package container

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hamba/avro/v2"
)

type blockSpan struct {
	off, size, records int64
	first              int // index of the block's first record in the file
}

// blocksOf lists the blocks of path with the BlockReader, checking that they
// tile the file: each starts where the previous one's sync marker ended.
func blocksOf(t testing.TB, path string) (*Header, []blockSpan, int64) {
	t.Helper()
	br, err := Open(path, FileOpener(path), 0, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	var spans []blockSpan
	next, first := br.Header().Size, 0
	for {
		b, err := br.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if b.Offset != next {
			t.Fatalf("block at %d, previous block ended at %d", b.Offset, next)
		}
		spans = append(spans, blockSpan{b.Offset, b.Size, b.Records, first})
		next, first = b.Offset+b.Size, first+int(b.Records)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if next != st.Size() {
		t.Fatalf("blocks end at %d, file has %d bytes", next, st.Size())
	}
	return br.Header(), spans, st.Size()
}

// TestReadFromAnyOffset: a reader started at offset o yields exactly the
// records of the blocks whose first byte is at or after o, in order, the
// first of them a split point at its block's offset — from every block
// boundary, the bytes around each boundary and its sync marker, the header's
// edges, the end of the file and beyond, and random offsets, through each
// kind of Opener.
func TestReadFromAnyOffset(t *testing.T) {
	ps := peerFiles(t)
	for fi, key := range ps.order {
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, uint64(fi)))
			path := ps.files[key]
			h, spans, size := blocksOf(t, path)
			offsets := []int64{0, 1, 4, h.Size - SyncSize - 1, h.Size - SyncSize, h.Size - 1, h.Size, h.Size + 1, h.Size + SyncSize,
				size - SyncSize - 1, size - SyncSize, size - 1, size, size + 100}
			// Every kind of start around the first and last blocks; around
			// the others two kinds each, in turn, so that every kind is met
			// at many blocks without reading from seven starts per block.
			for k, s := range spans {
				around := []int64{s.off - SyncSize - 1, s.off - SyncSize, s.off - SyncSize + 1, s.off - 1, s.off, s.off + 1, s.off + SyncSize}
				if k < 3 || k >= len(spans)-2 {
					offsets = append(offsets, around...)
				} else {
					offsets = append(offsets, around[k%7], around[(k+3)%7])
				}
			}
			for range 12 {
				offsets = append(offsets, rng.Int64N(size))
			}
			var opts Options
			if strings.HasPrefix(key, "c-") {
				opts.ReaderSchema = avro.MustParse(allSchema)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			openers := []Opener{
				FileOpener(path),
				ReaderAtOpener(f, size),
				DiscardOpener(func() (io.ReadCloser, error) { return os.Open(path) }),
			}
			// Where a block starts, and so which starts find it, is the
			// framing's, not the codec's: the null-codec files (python's
			// blocks and Avro C's) are read from every start; the files of
			// the other codecs (whose blocks the split-contract tests of
			// avroio also read from every split, per codec) from the
			// file's edges and a third of the other starts, a sixth for
			// the slow decoders (bzip2 decodes at ~10 MB/s).
			every := 1
			switch {
			case strings.HasSuffix(key, "bzip2"), strings.HasSuffix(key, "xz"), strings.HasSuffix(key, "lzma"):
				every = 6
			case !strings.HasSuffix(key, "-null"):
				every = 3
			}
			for n, o := range offsets {
				if n >= 14 && n%every != 0 {
					continue
				}
				// The first block starting at or after o.
				want := -1
				for k, s := range spans {
					if s.off >= o {
						want = k
						break
					}
				}
				r, err := OpenReader[allRec](key, openers[n%len(openers)], o, opts)
				if err != nil {
					t.Fatalf("open at %d: %v", o, err)
				}
				// Every 32nd start reads to the end of the file (a clean
				// EOF after every later block); the others stop after a
				// few blocks, which is what tells starts apart.
				toEnd := n%32 == 0 || want < 0
				stopAt := peerRecords
				if !toEnd && want+3 < len(spans) {
					stopAt = spans[want+3].first
				}
				i, k := 0, want
				for ; ; i++ {
					if want >= 0 && spans[want].first+i == stopAt {
						break
					}
					rec, off, sp, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatalf("from %d, record %d: %v", o, i, err)
					}
					if want < 0 {
						t.Fatalf("from %d: got a record, want none (no block starts at or after it)", o)
					}
					idx := spans[want].first + i
					if !equalAll(rec, expectedPeer(idx)) {
						t.Fatalf("from %d: record %d is not record %d of the file", o, i, idx)
					}
					if k < len(spans)-1 && idx >= spans[k+1].first {
						k++
					}
					if off != spans[k].off || sp != (idx == spans[k].first) {
						t.Fatalf("from %d: record %d at (%d, split point %v), want (%d, %v)", o, idx, off, sp, spans[k].off, idx == spans[k].first)
					}
				}
				wantN := 0
				if want >= 0 {
					wantN = stopAt - spans[want].first
				}
				if i != wantN {
					t.Fatalf("from %d: %d records, want %d", o, i, wantN)
				}
				r.Close()
			}
		})
	}
}

// rangeLog is an io.ReaderAt that records the byte ranges read through it.
type rangeLog struct {
	f      io.ReaderAt
	mu     sync.Mutex
	ranges [][2]int64
}

func (l *rangeLog) ReadAt(p []byte, off int64) (int, error) {
	n, err := l.f.ReadAt(p, off)
	l.mu.Lock()
	l.ranges = append(l.ranges, [2]int64{off, off + int64(n)})
	l.mu.Unlock()
	return n, err
}

// TestStartDeepReadsNoBytesBefore: a reader that starts deep in a file reads
// the header (and the header stream's read-ahead) and then only from the
// sync marker before its start; BytesRead agrees with what was read.
func TestStartDeepReadsNoBytesBefore(t *testing.T) {
	ps := peerFiles(t)
	for _, key := range []string{"py-null", "c-snappy"} {
		path := ps.files[key]
		_, spans, size := blocksOf(t, path)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, k := range []int{len(spans) / 2, len(spans) - 3} {
			start := spans[k].off - 5 // inside the block before, so the reader searches
			if start-SyncSize <= streamBufSize {
				t.Fatalf("%s: file too small for this test", key)
			}
			log := &rangeLog{f: f}
			r, err := OpenReader[map[string]any](key, ReaderAtOpener(log, size), start, Options{})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for {
				_, off, sp, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 && (off != spans[k].off || !sp) {
					t.Fatalf("%s from %d: first record at %d (split point %v), want block at %d", key, start, off, sp, spans[k].off)
				}
				n++
			}
			var total int64
			for _, rg := range log.ranges {
				if rg[1] > streamBufSize && rg[0] < start-SyncSize {
					t.Errorf("%s from %d: read bytes [%d, %d) before %d", key, start, rg[0], rg[1], start-SyncSize)
				}
				total += rg[1] - rg[0]
			}
			if got := r.BytesRead(); got != total {
				t.Errorf("%s: BytesRead %d, the ReaderAt served %d", key, got, total)
			}
			if limit := int64(streamBufSize) + size - (start - SyncSize); total > limit {
				t.Errorf("%s from %d: read %d bytes, want at most %d", key, start, total, limit)
			}
			r.Close()
			t.Logf("%s from %d of %d: %d records, %d bytes read", key, start, size, n, total)
		}
	}
}

// TestNewBlockReaderAtPosition drives the low-level constructor: a stream
// already positioned somewhere before start-16.
func TestNewBlockReaderAtPosition(t *testing.T) {
	ps := peerFiles(t)
	path := ps.files["py-deflate"]
	h, spans, size := blocksOf(t, path)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	k := 10
	for _, pos := range []int64{h.Size, spans[k].off - SyncSize - 100, spans[k].off - SyncSize} {
		start := spans[k].off
		if pos == h.Size {
			start = 0
		}
		br, err := NewBlockReader(path, h, io.NewSectionReader(f, pos, size-pos), pos, start, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := br.Next()
		if err != nil {
			t.Fatal(err)
		}
		want := spans[k].off
		if start == 0 {
			want = spans[0].off
		}
		if b.Offset != want {
			t.Fatalf("pos %d start %d: first block at %d, want %d", pos, start, b.Offset, want)
		}
	}
	// A stream past the search position is refused.
	if _, err := NewBlockReader(path, h, io.NewSectionReader(f, spans[k].off, size), spans[k].off, spans[k].off, Limits{}); err == nil {
		t.Fatal("NewBlockReader accepted a stream past start-16")
	}
	// Opener failures name the file.
	_, err = Open("nowhere.avro", func(int64) (io.ReadCloser, error) { return nil, errors.New("boom") }, 0, Limits{})
	if err == nil || !strings.Contains(err.Error(), "nowhere.avro") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("open failure: %v", err)
	}
}
