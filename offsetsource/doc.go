// Package offsetsource is Beam Java's OffsetBasedSource for Go: implement a
// small Source and its Reader, and Read turns them into a splittable DoFn
// that Beam runners split into initial bundles and rebalance dynamically,
// under the split contract of package sdf.
//
//	func init() { offsetsource.Register[Reading, BlockFile]() }
//
//	func main() {
//		beam.Init()
//		p, s := beam.NewPipelineWithRoot()
//		readings := offsetsource.Read(s, BlockFile{Path: "/data/readings.blk"},
//			offsetsource.WithDesiredBundleSize(16<<20)) // PCollection<Reading>
//		debug.Print(s, readings)
//		if err := beamx.Run(context.Background(), p); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Read, ReadAll and ReadAllWithBadInput take ReadOptions (WithDesiredBundleSize,
// WithBundleCount, WithOutputType, WithMetricsNamespace,
// WithSourceCounters); WithMetricsNamespace("") panics when the pipeline is
// built, naming the transform. examples/blockfile holds a complete source.
// Files on Beam filesystems are package filesource's: it matches patterns,
// opens files at any offset and checks that they did not change.
//
// # What a source provides
//
// A Source is a range of offsets (byte offsets in a file, usually) over some
// input, plus what Beam needs to cut it up: how to narrow it to a sub-range,
// the input's real end (computed lazily, e.g. the file's size), how many bytes
// an offset stands for, the smallest bundle worth making, and an estimate of
// its size. A Reader opened on a (sub-)source returns records in offset
// order, each with its offset and whether it is a split point: a record that a
// reader opened at some earlier offset would return first. In a file of
// fixed-width records every record is a split point; in a file of blocks
// (Avro, say) only the first record of a block is, and the block's other
// records carry the block's offset. A Reader opened at offset A must start
// at the first split point at or after A, so that the ranges [A, S) and
// [S, B) together read exactly the records of [A, B).
//
// # The DoFn
//
// Read and ReadAll apply one generic splittable DoFn to sources:
//
//   - CreateInitialRestriction is the source's range, its end clamped to
//     MaxEndOffset (an End of sdf.Unbounded becomes MaxEndOffset);
//   - SplitRestriction cuts it into initial bundles of WithDesiredBundleSize bytes
//     (64 MiB by default), at least MinBundleSize offsets each, with
//     sdf.SplitIntoBundles, and never more than MaxInitialBundles of them
//     (larger bundles instead);
//   - neither fails: Beam Go runs them fused after whatever produced the
//     sources, where an error becomes a panic of that transform's emitter.
//     A range that cannot be resolved (MaxEndOffset failed, an invalid
//     range) travels as the marker [start, sdf.Unbounded), and
//     ProcessElement resolves it again and returns the error;
//   - RestrictionSize is the range's size in bytes;
//   - CreateTracker returns an *sdf.Tracker, which handles the runner's
//     dynamic splits (TrySplit) and progress reports while the read runs;
//   - ProcessElement opens a Reader on Subrange(start, end) of the
//     restriction and claims every record with TryClaimRecord(offset,
//     splitPoint), stopping at the first refusal (a split point at or past
//     the end, which a dynamic split may have moved); at io.EOF it marks the
//     tracker done. A Reader that implements BlockReader tells the tracker
//     each block's size and record count, so that progress moves inside
//     blocks. The Reader is always closed. Errors say which source and which
//     offset.
//
// The DoFn counts, in the Beam metrics namespace "sdfio/offsetsource"
// (or the one WithMetricsNamespace names): records, bytes_read (see
// ByteCounter), splits_accepted and splits_refused (dynamic splits, from the
// tracker's SplitStats).
//
// # Bad input
//
// ReadAllWithBadInput is ReadAll with a dead-letter output: a Source that
// implements BadInputSource says which errors of its readers are bad
// input (a corrupt block) rather than a failure to read (I/O); those become
// BadInput elements, naming the input, the offset and the records lost
// (those whose split point lies in [Start, End), but for the first
// RecordsRead of the block at Start), and the read goes on: after an error
// of Next with an offset, from a reader opened just past it; else the
// rest of the range is lost. Every record is read once or covered by one
// BadInput, whatever the splits. Other errors fail the read, as in ReadAll.
// Errors put the cause first, then the read's context in parentheses.
//
// # Records of a type known at run time
//
// A source whose record type comes from a reflect.Type (a Read(s, pattern,
// t) transform, say) implements Source[beam.X] and returns values of that
// type in the beam.X records; the WithOutputType(t) option binds beam.X to t in
// the read's ParDo, so the output PCollection has element type t.
//
// ReadRestriction is the ProcessElement loop on its own, for tests
// (offsetsource/sourcetest's Subject hands it to sdf/sdftest, which checks
// a source against the split contract) and for transforms that hold their
// own tracker.
//
// # Registration
//
// Sources are PCollection elements, so a Source type must be a struct whose
// state lives in exported fields Beam can encode. Register[T, S] registers the
// DoFn for records T and sources S, its emitter and both types; call it from
// an init function, so that every worker binary knows them.
//
// # Example
//
// A file of newline-terminated records of Width bytes, every record a split
// point:
//
//	type Lines struct {
//		Path       string
//		Width      int64
//		Start, End int64
//	}
//
//	func init() { offsetsource.Register[string, Lines]() }
//
//	func (l Lines) Range() sdf.OffsetRange { return sdf.OffsetRange{Start: l.Start, End: l.End} }
//	func (l Lines) Subrange(start, end int64) offsetsource.Source[string] {
//		l.Start, l.End = start, end
//		return l
//	}
//	func (l Lines) MaxEndOffset(context.Context) (int64, error) {
//		fi, err := os.Stat(l.Path)
//		if err != nil {
//			return 0, err
//		}
//		return fi.Size(), nil
//	}
//	func (l Lines) BytesPerOffset() int64 { return 1 }
//	func (l Lines) MinBundleSize() int64  { return l.Width }
//	func (l Lines) EstimatedSizeBytes(ctx context.Context) (int64, error) {
//		end, err := l.MaxEndOffset(ctx)
//		return min(end, l.End) - l.Start, err
//	}
//	func (l Lines) Open(context.Context) (offsetsource.Reader[string], error) {
//		f, err := os.Open(l.Path)
//		if err != nil {
//			return nil, err
//		}
//		pos := (l.Start + l.Width - 1) / l.Width * l.Width // next record boundary
//		if _, err := f.Seek(pos, io.SeekStart); err != nil {
//			f.Close()
//			return nil, err
//		}
//		return &linesReader{f: f, r: bufio.NewReader(f), pos: pos, buf: make([]byte, l.Width)}, nil
//	}
//
//	type linesReader struct {
//		f   *os.File
//		r   *bufio.Reader
//		pos int64
//		buf []byte
//	}
//
//	func (r *linesReader) Next() (string, int64, bool, error) {
//		if _, err := io.ReadFull(r.r, r.buf); err != nil {
//			if err == io.ErrUnexpectedEOF {
//				err = fmt.Errorf("truncated record at offset %d", r.pos)
//			}
//			return "", 0, false, err // io.EOF at the end of the file
//		}
//		off := r.pos
//		r.pos += int64(len(r.buf))
//		return string(r.buf[:len(r.buf)-1]), off, true, nil
//	}
//
//	func (r *linesReader) Close() error { return r.f.Close() }
//
// and in the pipeline:
//
//	lines := offsetsource.Read(s, Lines{Path: path, Width: 12, End: sdf.Unbounded})
//
// The tests of this package hold that source (FixedSource) and a block
// source (BlockSource) whose readers find the next block by scanning for a
// sync marker, both checked with sdftest's exhaustive and concurrent split
// checks.
package offsetsource
