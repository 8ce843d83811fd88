package container

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// The peak-memory test reads each file in a child process of the test
// binary and measures the child's peak resident set (VmHWM, reset through
// /proc/self/clear_refs just before the read) above its resident set at
// that moment: what the read itself made the process take, GC garbage
// included, which allocation counters do not show.
const (
	bombFileEnv  = "SDFIO_BOMB_FILE"
	bombLimitEnv = "SDFIO_BOMB_LIMIT"
)

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

// bombChild is the child's side: read the file, print the peak.
func bombChild(t *testing.T, path string, limit int64) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
	base := procStatusKB("VmRSS")
	// Blocks only: decoding the records would add their garbage, which is
	// the collector's pacing and not the framing's.
	n, err := readBlocks(path, FileOpener(path), Limits{MaxAlloc: limit})
	peak := procStatusKB("VmHWM")
	fmt.Printf("BOMB peak_above_base_kb=%d records=%d err=%v\n", peak-base, n, err)
}

// bombRecord is the size of the records of the test's blocks: Avro bytes
// values of zeros, bombRecord bytes each, length included.
const bombRecord = 1 << 20

var bombPrefix = appendLong(nil, bombRecord-3) // 3 bytes

// zeros returns n records (n MiB) of zeros.
func zeros(n int) []byte {
	b := make([]byte, n*bombRecord)
	for i := 0; i < n; i++ {
		copy(b[i*bombRecord:], bombPrefix)
	}
	return b
}

func bzip2Of(t *testing.T, n int) []byte {
	t.Helper()
	script := fmt.Sprintf("import bz2,sys; r=bytes.fromhex(sys.argv[2]); r+=bytes(%d-len(r)); sys.stdout.buffer.write(bz2.compress(r*int(sys.argv[1]), 9))", bombRecord)
	cmd := exec.Command("/usr/bin/python3", "-c", script, strconv.Itoa(n), fmt.Sprintf("%x", bombPrefix))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bzip2 with Debian's python3 (make deps): %v", err)
	}
	return out
}

func zstdStreamOf(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(2<<20))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(data); i += 1 << 20 {
		w.Write(data[i:min(i+1<<20, len(data))])
	}
	w.Close()
	return buf.Bytes()
}

// xzOf is the xz stream (CRC64 check, 8 MiB dictionary) of n records,
// from Debian's python3 (quick where Go's xz writer is slow under -race).
func xzOf(t *testing.T, n int) []byte {
	t.Helper()
	script := fmt.Sprintf("import lzma,sys; r=bytes.fromhex(sys.argv[2]); r+=bytes(%d-len(r)); sys.stdout.buffer.write(lzma.compress(r*int(sys.argv[1]), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64))", bombRecord)
	out, err := exec.Command("/usr/bin/python3", "-c", script, strconv.Itoa(n), fmt.Sprintf("%x", bombPrefix)).Output()
	if err != nil {
		t.Fatalf("xz with Debian's python3 (make deps): %v", err)
	}
	return out
}

type bomb struct {
	name   string
	codec  string
	stored func() []byte
	refuse bool
	// extra is the decoder memory the data makes the codec take beside
	// the output: the zstandard window and the LZMA dictionary (the
	// writer's choice, bounded by MaxAlloc: 2 and 8 MiB here), and
	// bzip2's decoder tables (4 MB per pass; a refused block takes one).
	extra int64
}

// bombs are blocks of records that decompress to just over limit
// (refuse) or just under it, for every codec.
func bombs(t *testing.T, limit int) (over, under int, _ []bomb) {
	over, under = limit/bombRecord+1, limit/bombRecord-1 // records
	return over, under, []bomb{
		{name: "null under", codec: "null", stored: func() []byte { return zeros(under) }, refuse: false},
		{name: "deflate over", codec: "deflate", stored: func() []byte { return compress(t, "deflate", zeros(over)) }, refuse: true},
		{name: "deflate under", codec: "deflate", stored: func() []byte { return compress(t, "deflate", zeros(under)) }, refuse: false},
		{name: "snappy over", codec: "snappy", stored: func() []byte { return compress(t, "snappy", zeros(over)) }, refuse: true},
		{name: "snappy under", codec: "snappy", stored: func() []byte { return compress(t, "snappy", zeros(under)) }, refuse: false},
		{extra: 2 * mib, name: "zstandard over", codec: "zstandard", stored: func() []byte { return zstdStreamOf(t, zeros(over)) }, refuse: true},
		{extra: 2 * mib, name: "zstandard under", codec: "zstandard", stored: func() []byte { return zstdStreamOf(t, zeros(under)) }, refuse: false},
		{extra: 4 * mib, name: "bzip2 over", codec: "bzip2", stored: func() []byte { return bzip2Of(t, over) }, refuse: true},
		{extra: 8 * mib, name: "bzip2 under", codec: "bzip2", stored: func() []byte { return bzip2Of(t, under) }, refuse: false},
		{extra: 8 * mib, name: "xz over", codec: "xz", stored: func() []byte { return xzOf(t, over) }, refuse: true},
		{extra: 8 * mib, name: "xz under", codec: "xz", stored: func() []byte { return xzOf(t, under) }, refuse: false},
	}
}

func bombFile(b bomb, stored []byte, over, under int) []byte {
	records := int64(under)
	if b.refuse {
		records = int64(over)
	}
	return appendRawBlock(headerBytes(`"bytes"`, b.codec, nil), records, stored)
}

// readBlocks reads the blocks of the file, checking their sizes, and
// returns the records they hold.
func readBlocks(name string, open Opener, lim Limits) (n int64, err error) {
	br, err := Open(name, open, 0, lim)
	if err != nil {
		return 0, err
	}
	defer br.Close()
	for {
		b, err := br.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += b.Records
		if int64(len(b.Data)) != b.Records*bombRecord {
			return n, fmt.Errorf("block of %d bytes for %d records", len(b.Data), b.Records)
		}
	}
}

// TestDecompressionBombs: a block that decompresses to more than MaxAlloc
// is refused having allocated a part of MaxAlloc (growLimit's worth), and one just under
// it allocates about its own size, for every codec (and the null codec's
// plain block): nothing grows by doubling to the limit. Allocation counts
// bound the peak from above and hold under the race detector;
// TestDecompressionPeakRSS measures the peak itself.
func TestDecompressionBombs(t *testing.T) {
	const limit = 4 << 20
	over, under, bs := bombs(t, limit)
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			if raceEnabled {
				// The race detector makes sync.Pool drop items at random,
				// so pooled buffers are allocated again.
				b.extra += limit / 2
			}
			stored := b.stored()
			file := bombFile(b, stored, over, under)
			var n int64
			var err error
			alloc := allocDuring(func() { n, err = readBlocks(b.name, bytesOpener(file), Limits{MaxAlloc: limit}) })
			t.Logf("%s: %d compressed bytes, %.1f MiB allocated (%.2fx MaxAlloc): %d records, %v", b.name, len(stored), float64(alloc)/mib, float64(alloc)/limit, n, err)
			switch {
			case b.refuse && !errors.Is(err, ErrLimit):
				t.Fatalf("a block over the limit was not refused: %v", err)
			case !b.refuse && (err != nil || n != int64(under)):
				t.Fatalf("read %d records of %d: %v", n, under, err)
			case b.refuse && alloc > limit*3/4+uint64(b.extra)+baseline:
				t.Fatalf("refusing allocated %.1f MiB, want under 3/4 of MaxAlloc", float64(alloc)/mib)
			case !b.refuse && alloc > limit*5/4+uint64(b.extra)+baseline:
				t.Fatalf("reading allocated %.1f MiB, want about one block (%d MiB)", float64(alloc)/mib, under)
			}
		})
	}
}

// TestDecompressionPeakRSS reads the files of TestDecompressionBombs at a
// 16 MiB limit in child processes and checks their peak resident set: at
// most half the limit above the base to refuse a bomb, about one block to
// read one just under the limit. Not under the race detector, whose shadow
// memory is part of the resident set.
func TestDecompressionPeakRSS(t *testing.T) {
	if path := os.Getenv(bombFileEnv); path != "" {
		limit, _ := strconv.ParseInt(os.Getenv(bombLimitEnv), 10, 64)
		bombChild(t, path, limit)
		return
	}
	if raceEnabled || testing.Short() {
		t.Skip("resident-set figures need a build without -race, and not -short")
	}
	const limit = 16 << 20
	over, under, bs := bombs(t, limit)
	dir := t.TempDir()
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			stored := b.stored()
			path := filepath.Join(dir, strings.ReplaceAll(b.name, " ", "-")+".avro")
			if err := os.WriteFile(path, bombFile(b, stored, over, under), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestDecompressionPeakRSS$", "-test.count=1")
			cmd.Env = append(os.Environ(), bombFileEnv+"="+path, bombLimitEnv+"="+strconv.Itoa(limit))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			i := bytes.Index(out, []byte("BOMB "))
			if i < 0 {
				t.Fatalf("child said %s", out)
			}
			line := string(out[i:])
			line = line[:strings.IndexByte(line, '\n')]
			var peakKB, n int64
			if _, err := fmt.Sscanf(line, "BOMB peak_above_base_kb=%d records=%d", &peakKB, &n); err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			peak := peakKB << 10
			t.Logf("%s: %d compressed bytes, peak RSS %.1f MiB above base (%.2fx MaxAlloc)", b.name, len(stored), float64(peak)/mib, float64(peak)/limit)
			switch {
			case b.refuse && !strings.Contains(line, ErrLimit.Error()):
				t.Fatalf("a block over the limit was not refused: %s", line)
			case !b.refuse && n != int64(under):
				t.Fatalf("read %d records of %d: %s", n, under, line)
			case b.refuse && peak > limit/2+b.extra+4*mib:
				t.Fatalf("refusing took %.1f MiB, want under MaxAlloc/2", float64(peak)/mib)
			case !b.refuse && peak > limit*5/4+int64(len(stored))+b.extra+4*mib:
				t.Fatalf("reading took %.1f MiB, want about one block (%d MiB) over the compressed data", float64(peak)/mib, under)
			}
		})
	}
}
