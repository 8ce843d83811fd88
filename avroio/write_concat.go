package avroio

// WithNumShards(1) without destinations: the bundles write a file each, as
// with runner sharding, and the finalize step joins them into the one
// file. Grouping every record onto one shard instead (the GroupByKey of
// the other fixed shardings) made Prism (v2.78) and the SDK hold the whole
// write several times over: 533 MB for 200,000 records that take 9 MB
// written.

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"

	"github.com/sdfio/sdfio/avroio/container"
)

// concatShard reports whether the write's one file is joined from the
// bundles' files by the finalize step.
func (c writeConfig) concatShard() bool {
	return c.NumShards == 1 && !c.Dynamic && !c.Windowed
}

// joinedFile names, in the temporary directory, the file the finalize step
// of WithNumShards(1) joins the bundles' files into.
const joinedFile = "joined"

// joinFiles joins the temporary files sources (the bundles' files, in
// order) into one temporary file and removes them, returning its path and
// its size less theirs (the headers it saved, for bytes_written). Blocks
// are copied as they are when the files share the write's sync marker and
// codec (they do: writeConfig.Sync); otherwise they are decompressed and
// written again. A finalize step retried after it joined the files and
// removed some finds the joined file whole, or already renamed (which
// commitMoves recognises).
func joinFiles(ctx context.Context, fs filesystem.Interface, cfg writeConfig, sources []string, results []fileResult) (string, int64, error) {
	path := cfg.TempDir + joinedFile
	size := map[string]int64{} // a result delivered twice is one
	for _, r := range results {
		if r.Err == "" && r.Temp != "" {
			size[r.Temp] = r.Bytes
		}
	}
	var srcBytes int64
	for _, src := range sources {
		srcBytes += size[src]
	}
	for _, src := range sources {
		if _, err := fs.Size(ctx, src); err != nil {
			return path, 0, nil // joined before
		}
	}
	w, err := fs.OpenWrite(ctx, path)
	if err != nil {
		return "", 0, fmt.Errorf("avroio.Write: creating temporary file %s: %w", path, err)
	}
	cwc := &byteCounter{w: w}
	fail := func(err error) (string, int64, error) {
		w.Close()
		if rm, ok := fs.(filesystem.Remover); ok {
			rm.Remove(ctx, path)
		}
		return "", 0, fmt.Errorf("avroio.Write to %s: joining the bundles' files into %s: %w", cfg.Prefix, path, err)
	}
	cw, err := container.NewWriter(cwc, cfg.Schema, cfg.writerOptions())
	if err != nil {
		return fail(err)
	}
	for _, src := range sources {
		if err := appendFile(ctx, fs, cfg, cw, cwc, src); err != nil {
			cw.Close()
			return fail(err)
		}
	}
	if err := cw.Close(); err != nil {
		return fail(err)
	}
	if err := w.Close(); err != nil {
		return fail(err)
	}
	if rm, ok := fs.(filesystem.Remover); ok {
		for _, src := range sources {
			rm.Remove(ctx, src) // what is left, commitMoves removes
		}
	}
	return path, cwc.n - srcBytes, nil
}

// appendFile adds the blocks of the container file src to cw, whose
// underlying writer is out.
func appendFile(ctx context.Context, fs filesystem.Interface, cfg writeConfig, cw *container.Writer, out io.Writer, src string) error {
	r, err := fs.OpenRead(ctx, src)
	if err != nil {
		return err
	}
	h, err := container.ReadHeader(src, r, container.Limits{})
	r.Close()
	if err != nil {
		return err
	}
	open := func(off int64) (io.ReadCloser, error) {
		r, err := fs.OpenRead(ctx, src)
		if err != nil {
			return nil, err
		}
		if _, err := io.CopyN(io.Discard, r, off); err != nil {
			r.Close()
			return nil, fmt.Errorf("%s: skipping to byte %d: %w", src, off, err)
		}
		return r, nil
	}
	if h.Sync == cw.Sync() && h.Codec == cw.Codec() && h.Schema == cfg.Schema {
		// The blocks as they are, sync markers included.
		if err := cw.Flush(); err != nil {
			return err
		}
		r, err := open(h.Size)
		if err != nil {
			return err
		}
		defer r.Close()
		if _, err := io.Copy(out, r); err != nil {
			return fmt.Errorf("copying %s: %w", src, err)
		}
		return nil
	}
	lim := container.Limits{MaxAlloc: max(cfg.MaxBlockSize, container.DefaultMaxAlloc)}
	br, err := container.Open(src, open, 0, lim)
	if err != nil {
		return err
	}
	defer br.Close()
	for {
		blk, err := br.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := cw.AppendBlock(blk.Records, blk.Data); err != nil {
			return err
		}
	}
}

// byteCounter counts the bytes written through it.
type byteCounter struct {
	w io.Writer
	n int64
}

func (c *byteCounter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
