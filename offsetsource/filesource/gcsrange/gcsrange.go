// Package gcsrange makes package filesource, and so avroio, read gs://
// objects with ranged requests: a range that starts deep in an object is
// fetched from there, not from the object's first byte. Import it for its
// side effect, in place of (or beside) Beam's gcs filesystem, which it
// imports:
//
//	import _ "github.com/sdfio/sdfio/offsetsource/filesource/gcsrange"
//
// Without it, gs:// works through Beam's gcs filesystem alone (import
// github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs), whose
// streams cannot seek: a range is read from the object's start, the bytes
// before it read and discarded. Neither is linked unless imported, so that
// a program that reads no gs:// links no Cloud Storage client.
//
// Requests use the storage client as Beam's gcs filesystem makes it
// (default credentials, else unauthenticated), one per process and
// STORAGE_EMULATOR_HOST, and read an object's stored bytes
// (ReadCompressed), whose length is the size matching reported, even for
// an object with a gzip content encoding.
package gcsrange

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"cloud.google.com/go/storage"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/gcs" // listing, stat, writes
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/gcsx"

	"github.com/sdfio/sdfio/offsetsource/filesource"
)

func init() { filesource.RegisterRangeReader("gs", RangeRead) }

// The client for ranged reads, one per process and emulator address
// (STORAGE_EMULATOR_HOST, which the client honours, may change between
// tests).
var (
	clientsMu sync.Mutex
	clients   = map[string]*storage.Client{}
)

func client(ctx context.Context) (*storage.Client, error) {
	key := os.Getenv("STORAGE_EMULATOR_HOST")
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[key]; ok {
		return c, nil
	}
	ctx = context.WithoutCancel(ctx)
	// As Beam's gcs filesystem: default credentials, else unauthenticated.
	c, err := gcsx.NewClient(ctx, storage.ScopeReadOnly)
	if err != nil {
		c, err = gcsx.NewUnauthenticatedClient(ctx)
		if err != nil {
			return nil, fmt.Errorf("making a GCS client: %w", err)
		}
	}
	clients[key] = c
	return c, nil
}

// RangeRead is the filesource.RangeReadFunc of gs://: up to length bytes of
// the object at path (gs://bucket/object) from byte offset on, with
// ObjectHandle.NewRangeReader. A missing object is an error that is both
// storage.ErrObjectNotExist and fs.ErrNotExist.
func RangeRead(ctx context.Context, path string, offset, length int64) (io.ReadCloser, error) {
	bucket, object, err := gcsx.ParseObject(path)
	if err != nil {
		return nil, err
	}
	c, err := client(ctx)
	if err != nil {
		return nil, err
	}
	r, err := c.Bucket(bucket).Object(object).ReadCompressed(true).NewRangeReader(ctx, offset, length)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, fmt.Errorf("%s: %w (%w)", path, err, fs.ErrNotExist)
	}
	return r, err
}
