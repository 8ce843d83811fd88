package avroio

// The dead-letter output of the reads (ReadWithBadFiles, the watch's): a
// corrupt block costs that block, a file whose schema does not fit costs
// the file, every record is read once or covered by a BadFile, and the
// rest of the job goes on.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/internal/workertest"
	"github.com/sdfio/sdfio/offsetsource"
	"github.com/sdfio/sdfio/sdf"
)

func init() {
	register.Function1x1[BadFile, string](badFileKey)
}

// badFileKey is what the tests compare of a BadFile: the file's base
// name, the offset, the range lost, the records read of its first block,
// and whether the error starts with its cause (the file and the byte).
func badFileKey(b BadFile) string {
	causeFirst := strings.HasPrefix(b.Error, "avro container "+b.Input+" at byte ")
	return fmt.Sprintf("%s offset=%d lost=[%d,%d) read=%d causeFirst=%v", filepath.Base(b.Input), b.Offset, b.Start, b.End, b.RecordsRead, causeFirst)
}

// badFile is the test's layout of a file with a bad part: the records
// (events from ID First, Count of them, in blocks of 10) and where the
// bad part is.
type badFile struct {
	path        string
	first, n    int
	offs        []int64 // block offset of each record
	size        int64
	wantRead    []int64 // the IDs a read with a dead letter returns
	wantBadKeys []string
}

// corruptChecksum writes events [first, first+50) in blocks of 10 with
// snappy and flips a byte in the middle of the third block's data: its
// CRC fails. The read loses that block (IDs first+20..first+29) and goes
// on at the fourth.
func corruptChecksum(t *testing.T, dir, name string, first int) badFile {
	t.Helper()
	path, offs := writeLayoutFile(t, dir, name, "snappy", eventRecords(first, first+50), []int{10})
	b := readBytes(t, path)
	b2, b3 := offs[20], offs[30]
	b[(b2+b3)/2] ^= 0xff
	writeBytes(t, path, b)
	f := badFile{path: path, first: first, n: 50, offs: offs, size: int64(len(b))}
	f.wantRead = idsOf(first, first+20, first+30, first+50)
	f.wantBadKeys = []string{fmt.Sprintf("%s offset=%d lost=[%d,%d) read=0 causeFirst=true", name, b2, b2, b3)}
	return f
}

// corruptRecord writes events [first, first+50) in blocks of 10 with the
// null codec and makes the name of record 34 (the fifth of the fourth
// block) a negative length: the read returns the block's first four
// records, loses the rest of the block, and goes on at the fifth.
func corruptRecord(t *testing.T, dir, name string, first int) badFile {
	t.Helper()
	path, offs := writeLayoutFile(t, dir, name, "null", eventRecords(first, first+50), []int{10})
	b := readBytes(t, path)
	enc, err := avro.Marshal(avro.MustParse(eventsSchema), eventRecord(first+34))
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, enc)
	if at < 0 || bytes.Index(b[at+1:], enc) >= 0 {
		t.Fatalf("record %d is not found once in %s", first+34, path)
	}
	nameLen := at + len(appendLong(nil, int64(first+34)))
	if want := appendLong(nil, int64(len(eventRecord(first+34).Name))); !bytes.Equal(b[nameLen:nameLen+len(want)], want) {
		t.Fatalf("the name's length is not at byte %d", nameLen)
	}
	b[nameLen] = 0x7f // zigzag -64
	writeBytes(t, path, b)
	f := badFile{path: path, first: first, n: 50, offs: offs, size: int64(len(b))}
	f.wantRead = idsOf(first, first+34, first+40, first+50)
	f.wantBadKeys = []string{fmt.Sprintf("%s offset=%d lost=[%d,%d) read=4 causeFirst=true", name, offs[30], offs[30], offs[40])}
	return f
}

// misfitFile writes a file whose schema (watchEventSchema: id, name) does
// not fit the event type, which wants score, tags, note and kind: the
// whole file is lost, from its first byte, the error at the header's end.
func misfitFile(t *testing.T, dir, name string) badFile {
	t.Helper()
	path, err := writeWatchFile(dir, name, 7, 12)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(readBytes(t, path)))
	hdr := blockOffsets(t, path)[0] // the header ends where the first block starts
	return badFile{path: path, size: size, wantBadKeys: []string{fmt.Sprintf("%s offset=%d lost=[0,%d) read=0 causeFirst=true", name, hdr, size)}}
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// idsOf is the IDs of the ranges [from, to) given as pairs.
func idsOf(ranges ...int) []int64 {
	var out []int64
	for i := 0; i < len(ranges); i += 2 {
		for id := ranges[i]; id < ranges[i+1]; id++ {
			out = append(out, int64(id))
		}
	}
	return out
}

// readWithDeadLetter reads the file of f as one range with the dead
// letter, directly (no pipeline), and returns the IDs read and the bad
// ranges.
func readWithDeadLetter(t *testing.T, f badFile) ([]int64, []BadFile) {
	t.Helper()
	src := newSource(t, f.path, reflect.TypeFor[event]())
	rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: f.size})
	var got []int64
	var bad []BadFile
	err := offsetsource.ReadRestrictionWithBadInput(context.Background(), offsetsource.Source[beam.X](src), rt,
		func(x beam.X) { got = append(got, x.(event).ID) }, func(b BadFile) { bad = append(bad, b) })
	if err != nil {
		t.Fatalf("reading %s with a dead letter: %v", f.path, err)
	}
	if !rt.IsDone() {
		t.Errorf("the tracker is not done after the read: %v", rt)
	}
	return got, bad
}

// checkCovered checks that every record of f is read once or covered by
// one of bad, never both, and none twice.
func checkCovered(t *testing.T, f badFile, got []int64, bad []BadFile) {
	t.Helper()
	read := map[int64]int{}
	for _, id := range got {
		read[id]++
	}
	nth := 0
	for i := 0; i < f.n; i++ {
		id := int64(f.first + i)
		if i > 0 && f.offs[i] != f.offs[i-1] {
			nth = 0
		}
		covered := 0
		for _, b := range bad {
			if f.offs[i] >= b.Start && f.offs[i] < b.End && !(f.offs[i] == b.Start && int64(nth) < b.RecordsRead) {
				covered++
			}
		}
		if read[id]+covered != 1 {
			t.Errorf("record %d (block at %d, #%d in it): read %d times, covered by %d bad ranges; want exactly one of them once", id, f.offs[i], nth, read[id], covered)
		}
		nth++
	}
}

// TestBadFilesReader reads each kind of bad file directly, as one range:
// the records before the bad part once, the bad part in one BadFile naming
// the file, the offset and the range, the records after it once.
func TestBadFilesReader(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []badFile{
		corruptChecksum(t, dir, "checksum.avro", 0),
		corruptRecord(t, dir, "record.avro", 100),
		misfitFile(t, dir, "misfit.avro"),
	} {
		t.Run(filepath.Base(f.path), func(t *testing.T) {
			got, bad := readWithDeadLetter(t, f)
			if !reflect.DeepEqual(got, f.wantRead) && !(len(got) == 0 && len(f.wantRead) == 0) {
				t.Errorf("read IDs %v, want %v", got, f.wantRead)
			}
			var keys []string
			for _, b := range bad {
				keys = append(keys, badFileKey(b))
				if b.Input != f.path {
					t.Errorf("BadFile names %q, want %q", b.Input, f.path)
				}
				t.Logf("%v", b)
			}
			if !reflect.DeepEqual(keys, f.wantBadKeys) {
				t.Errorf("bad files\n%q\nwant\n%q", keys, f.wantBadKeys)
			}
			if f.n > 0 {
				checkCovered(t, f, got, bad)
			}
		})
	}
}

// TestBadFilesReaderSplit reads the corrupt files in ranges cut at every
// block (and in the middle of the bad block): whatever the ranges, every
// record is read once or covered once.
func TestBadFilesReaderSplit(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []badFile{corruptChecksum(t, dir, "checksum.avro", 0), corruptRecord(t, dir, "record.avro", 100)} {
		t.Run(filepath.Base(f.path), func(t *testing.T) {
			src := offsetsource.Source[beam.X](newSource(t, f.path, reflect.TypeFor[event]()))
			cuts := []int64{0}
			for i := 10; i < f.n; i += 10 {
				cuts = append(cuts, f.offs[i], f.offs[i]+7)
			}
			cuts = append(cuts, f.size)
			sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
			var got []int64
			var bad []BadFile
			for i := 0; i+1 < len(cuts); i++ {
				rt := sdf.NewTracker(sdf.OffsetRange{Start: cuts[i], End: cuts[i+1]})
				err := offsetsource.ReadRestrictionWithBadInput(context.Background(), src.Subrange(cuts[i], cuts[i+1]), rt,
					func(x beam.X) { got = append(got, x.(event).ID) }, func(b BadFile) { bad = append(bad, b) })
				if err != nil {
					t.Fatalf("range [%d, %d): %v", cuts[i], cuts[i+1], err)
				}
			}
			if len(bad) == 0 {
				t.Fatal("no bad range reported")
			}
			checkCovered(t, f, got, bad)
		})
	}
}

// TestBadFilesReaderIOErrorFails: an error of the filesystem is not the
// file's fault: the read with a dead letter fails, as Read does, for the
// runner to retry it, rather than report the file bad.
func TestBadFilesReaderIOErrorFails(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeLayoutFile(t, dir, "gone.avro", "null", eventRecords(0, 10), []int{5})
	src := newSource(t, path, reflect.TypeFor[event]())
	f := format{}
	if _, bad := f.BadInput(fmt.Errorf("wrapped: %w", io.ErrClosedPipe)); bad {
		t.Error("a plain I/O error is taken for bad input")
	}
	if _, bad := f.BadInput(context.Canceled); bad {
		t.Error("a cancelled context is taken for bad input")
	}
	// A file that is gone when its range is read is bad input (the watch
	// may list a file that is deleted before it is read).
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	rt := sdf.NewTracker(sdf.OffsetRange{Start: 0, End: src.File.Size})
	var bad []BadFile
	err := offsetsource.ReadRestrictionWithBadInput(context.Background(), offsetsource.Source[beam.X](src), rt, func(beam.X) {}, func(b BadFile) { bad = append(bad, b) })
	if err != nil || len(bad) != 1 || bad[0].Start != 0 || bad[0].End != src.File.Size || !strings.Contains(bad[0].Error, path) {
		t.Errorf("read of a file that is gone: err %v, bad %v; want one BadFile covering [0, %d) naming it", err, bad, src.File.Size)
	}
}

// TestReadWithBadFilesPipeline reads, on Prism, a directory of good files
// and bad ones of each kind: the good records once, a BadFile for each bad
// part, the job succeeds. Read, without the dead letter, fails on the same
// files (the default for batch), naming the file and the byte first.
func TestReadWithBadFilesPipeline(t *testing.T) {
	dir := t.TempDir()
	writeLayoutFile(t, dir, "good-a.avro", "snappy", eventRecords(1000, 1030), []int{10})
	writeLayoutFile(t, dir, "good-b.avro", "deflate", eventRecords(2000, 2017), []int{4})
	files := []badFile{
		corruptChecksum(t, dir, "checksum.avro", 0),
		corruptRecord(t, dir, "record.avro", 100),
		misfitFile(t, dir, "misfit.avro"),
	}
	want := append(idsOf(1000, 1030, 2000, 2017), append(files[0].wantRead, files[1].wantRead...)...)
	var wantBad []any
	for _, f := range files {
		for _, k := range f.wantBadKeys {
			wantBad = append(wantBad, k)
		}
	}

	p, s := beam.NewPipelineWithRoot()
	recs, bad := ReadWithBadFiles(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[event]())
	passert.Equals(s, beam.ParDo(s, eventID, recs), anySlice(want)...)
	passert.Equals(s, beam.ParDo(s, badFileKey, bad), wantBad...)
	res := run(t, p)
	if n := counterSum(t, res, "bad_inputs"); n != int64(len(wantBad)) {
		t.Errorf("bad_inputs = %d, want %d", n, len(wantBad))
	}

	// Generic records too.
	p, s = beam.NewPipelineWithRoot()
	grecs, gbad := ReadWithBadFiles(s, files[0].path, RecordType)
	passert.Equals(s, beam.ParDo(s, recordID, grecs), anySlice(files[0].wantRead)...)
	passert.Equals(s, beam.ParDo(s, badFileKey, gbad), files[0].wantBadKeys[0])
	run(t, p)

	// The default: a bad file fails the read.
	p, s = beam.NewPipelineWithRoot()
	Read(s, files[0].path, reflect.TypeFor[event]())
	err := workertest.RunFailing(t, p)
	if err == nil {
		t.Fatal("Read of a corrupt file succeeded")
	}
	if !strings.Contains(err.Error(), "avro container "+files[0].path+" at byte ") {
		t.Errorf("the error does not name the file and the byte: %v", err)
	}
}

// TestReadWithBadFilesConstruction: the dead letter is there whether or
// not a file is bad, and an empty match still fails at run time.
func TestReadWithBadFilesConstruction(t *testing.T) {
	dir := t.TempDir()
	writeLayoutFile(t, dir, "good.avro", "null", eventRecords(0, 5), []int{5})
	p, s := beam.NewPipelineWithRoot()
	recs, bad := ReadWithBadFiles(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[event](), WithMatchesManyFiles())
	passert.Equals(s, beam.ParDo(s, eventID, recs), ids(0, 5)...)
	passert.Empty(s, bad)
	run(t, p)

	p, s = beam.NewPipelineWithRoot()
	ReadWithBadFiles(s, filepath.Join(dir, "none-*.avro"), reflect.TypeFor[event]())
	if err := workertest.RunFailing(t, p); err == nil || !strings.Contains(err.Error(), "no file matches") {
		t.Errorf("ReadWithBadFiles of a pattern that matches nothing: %v, want it to fail saying no file matches", err)
	}
}

// TestWatchWithBadFilesPipeline watches a directory on Prism where a good
// file and a corrupt one lie before the run and a good one comes while it
// runs: the job goes on past the bad files and ends by its
// termination, every good record read once, each bad part reported.
func TestWatchWithBadFilesPipeline(t *testing.T) {
	dir := t.TempDir()
	glob := watchScheme + "://" + filepath.Join(dir, "*.avro")
	if _, err := writeWatchFile(dir, "w0.avro", 0, 9); err != nil {
		t.Fatal(err)
	}
	// A corrupt file: w1's bytes with one flipped in its second block (of
	// 7 records: IDs 1007..1013).
	staging := t.TempDir()
	cpath, err := writeWatchFile(staging, "w1.avro", 1, 30)
	if err != nil {
		t.Fatal(err)
	}
	offs := blockOffsets(t, cpath)
	b := readBytes(t, cpath)
	b[(offs[1]+offs[2])/2] ^= 0xff
	writeBytes(t, filepath.Join(dir, "w1.avro"), b)

	want := append(watchFileIDs(0, 9), watchIDRange(1000, 1007)...)
	want = append(want, watchIDRange(1014, 1030)...)
	want = append(want, watchFileIDs(2, 11)...)
	wantBad := []any{
		fmt.Sprintf("w1.avro offset=%d lost=[%d,%d) read=0 causeFirst=true", offs[1], offs[1], offs[2]),
	}

	p, s := beam.NewPipelineWithRoot()
	recs, bad := WatchForNewFilesWithBadFiles(s, glob, reflect.TypeFor[watchEvent](), 100*time.Millisecond, AfterNoNewFilesFor(2*time.Second))
	passert.Equals(s, beam.ParDo(s, watchEventID, recs), want...)
	passert.Equals(s, beam.ParDo(s, badFileKey, bad), wantBad...)

	watchListsMu.Lock()
	lists := watchLists[glob]
	watchListsMu.Unlock()
	writerErr := make(chan error, 1)
	go func() {
		writerErr <- func() error {
			if _, err := waitLists(glob, lists+2, time.Minute); err != nil {
				return err
			}
			_, err := writeWatchFile(dir, "w2.avro", 2, 11)
			return err
		}()
	}()
	res, err := watchRun(p, watchTimeout)
	if err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	if err := <-writerErr; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if n := watchCounter(t, res, "bad_inputs"); n != 1 {
		t.Errorf("bad_inputs = %d, want 1", n)
	}
	if n := watchCounter(t, res, "watch_new_files"); n != 3 {
		t.Errorf("watch_new_files = %d, want 3", n)
	}
}
