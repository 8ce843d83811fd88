package bqwrite_test

// The README's streaming snippet, run against an in-process bqtest server
// while a goroutine drops Avro files into the watched directory.

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/avroio"
	"github.com/sdfio/sdfio/avroio/container"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

// Line is a record of the example's Avro files and a row of its table.
type Line struct {
	N    int64  `avro:"n" bigquery:"n"`
	Text string `avro:"text" bigquery:"text"`
}

func init() { bqwrite.RegisterType(reflect.TypeFor[Line]()) }

// dropFiles writes files Avro files of perFile lines into dir, one every
// 200 ms, each under a temporary name renamed into place.
func dropFiles(dir string, files, perFile int) error {
	for f := 0; f < files; f++ {
		var buf bytes.Buffer
		w, err := container.NewWriter(&buf, `{"type":"record","name":"Line","fields":[{"name":"n","type":"long"},{"name":"text","type":"string"}]}`, container.WriterOptions{})
		if err != nil {
			return err
		}
		for i := 0; i < perFile; i++ {
			if err := w.Append(Line{N: int64(f*perFile + i), Text: fmt.Sprintf("line %d of file %d", i, f)}); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		tmp := filepath.Join(dir, fmt.Sprintf(".f%d.tmp", f))
		if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("f%d.avro", f))); err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// Stream a directory of Avro files into BigQuery, exactly once, against
// bqtest: the files appear while the pipeline runs.
func Example_streamingWatch() {
	srv, _ := bqtest.NewServer()
	defer srv.Close()
	srv.AddDataset("p", "d", "")
	dir, _ := os.MkdirTemp("", "example-watch-")
	defer os.RemoveAll(dir)
	go dropFiles(dir, 4, 25)

	p, s := beam.NewPipelineWithRoot()
	lines := avroio.WatchForNewFiles(s, filepath.Join(dir, "*.avro"), reflect.TypeFor[Line](),
		100*time.Millisecond, avroio.AfterNoNewFilesFor(time.Second)) // unbounded: ends 1 s after the last new file
	res := bqwrite.Write(s, "p.d.lines", lines, // unbounded: exactly once (WithAtLeastOnce: the _default stream)
		bqwrite.WithTriggeringFrequency(500*time.Millisecond), // the longest a row waits to be appended
		bqwrite.WithNumStreams(2),                             // shards per table, a write stream each
		bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithRESTEndpoint(srv.RESTEndpoint()), bqwrite.WithInsecure())
	_ = res // res.Results: what each flush made visible; res.FailedRows: rows refused
	if _, err := beam.Run(context.Background(), "prism", p); err != nil {
		log.Fatal(err)
	}
	rows, _ := srv.TableRows("p.d.lines")
	fmt.Println(len(rows), "rows in p.d.lines")
	// Output: 100 rows in p.d.lines
}
