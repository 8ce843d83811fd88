package bigqueryio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"cloud.google.com/go/bigquery"
	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/ipc"
)

// The Arrow IPC stream of a read session
// (https://arrow.apache.org/docs/format/Columnar.html#ipc-streaming-format):
// its schema message (ReadSession.arrow_schema.serialized_schema), then
// the record batch messages of each ReadRows response
// (ArrowRecordBatch.serialized_record_batch). Both are read by arrow/ipc,
// as the official client reads them (cloud.google.com/go/bigquery's
// arrow.go): per response, one ipc.Reader over the schema message followed
// by the response's bytes, whose memory comes from the decoder's arena.
// So every Arrow type ipc knows is read; which of them become which
// BigQuery values is schema.go's and decode.go's business. What ipc lacks
// (checks of hostile lengths and shapes, and a panic made an error) is
// arrow_ipc.go's.

// arrowSchemaMessage is the one schema message of a session's serialized
// schema b (an end-of-stream marker after it dropped), once its framing
// and shape are checked.
func arrowSchemaMessage(b []byte) ([]byte, error) {
	next, eos, err := arrowFrame(b, 0)
	if err != nil {
		return nil, err
	}
	if eos {
		return nil, fmt.Errorf("the IPC stream ends before its schema message")
	}
	off := 4 // arrowFrame checked the lengths
	if binary.LittleEndian.Uint32(b) == 0xFFFFFFFF {
		off = 8
	}
	meta := b[off : off+int(binary.LittleEndian.Uint32(b[off-4:]))]
	if err := checkArrowSchemaShape(meta); err != nil {
		return nil, err
	}
	if next < len(b) {
		if after, eos, err := arrowFrame(b, next); err != nil || !eos || after != len(b) {
			if err == nil {
				err = fmt.Errorf("%d bytes after the schema message", len(b)-next)
			}
			return nil, err
		}
	}
	return b[:next], nil
}

// parseArrowSchema decodes the IPC schema message of a read session.
func parseArrowSchema(b []byte) (s *arrow.Schema, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("the session's Arrow schema: arrow/ipc panicked: %v", p)
		}
	}()
	m, err := arrowSchemaMessage(b)
	if err != nil {
		return nil, fmt.Errorf("the session's Arrow schema: %w", err)
	}
	r, err := ipc.NewReader(bytes.NewReader(m))
	if err != nil {
		return nil, fmt.Errorf("the session's Arrow schema: %w", err)
	}
	defer r.Release()
	return r.Schema(), nil
}

// arrowBatches reads the IPC record batches of payload, of the session's
// schema message header (checked once per s), calling fn for each with
// the count of the rows of the batches before it; each must have the
// schema's columns. It returns the count of all their rows, by the
// batches' own lengths. fn's batch is valid only during the call (its
// buffers are in s's arena, reused by the next call). A panic in ipc, or
// in fn over the batch's arrays, is an error naming the row of the
// response it happened after; the read loop adds the stream and offset.
func arrowBatches(s *arrowScratch, header, payload []byte, schema bigquery.Schema, fn func(rec arrow.Record, before int64) error) (got int64, err error) {
	if s.schema == nil || string(s.header) != string(header) {
		m, err := arrowSchemaMessage(header)
		if err != nil {
			return 0, fmt.Errorf("Arrow record batch: the session's schema: %w", err)
		}
		s.schema, s.header = m, header
	}
	if err := checkArrowFraming(payload); err != nil {
		return 0, fmt.Errorf("Arrow record batch: %w", err)
	}
	s.mem.reset()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Arrow record batch after row %d of the response: arrow/ipc panicked: %v", got, p)
		}
	}()
	var hr, pr bytes.Reader
	hr.Reset(s.schema)
	pr.Reset(payload)
	r, err := ipc.NewReader(io.MultiReader(&hr, &pr), ipc.WithAllocator(&s.mem))
	if err != nil {
		return 0, fmt.Errorf("Arrow record batch: the session's schema: %w", err)
	}
	defer r.Release()
	if n := r.Schema().NumFields(); n != len(schema) {
		return 0, fmt.Errorf("Arrow record batch: the session's Arrow schema has %d fields, its table schema %d", n, len(schema))
	}
	for r.Next() {
		rec := r.Record()
		if err := arrowRows(rec.NumRows(), got, payload); err != nil {
			return got, err
		}
		for c, col := range rec.Columns() {
			if err := validateArrowArray(col.Data()); err != nil {
				return got, fmt.Errorf("Arrow record batch after row %d of the response, column %s: %w", got, schema[c].Name, err)
			}
		}
		if err := fn(rec, got); err != nil {
			return got, err
		}
		got += rec.NumRows()
	}
	if err := r.Err(); err != nil {
		return got, fmt.Errorf("Arrow record batch after row %d of the response: %w", got, err)
	}
	if n := pr.Len(); n > 0 {
		return got, fmt.Errorf("%d bytes after the Arrow record batches of the response", n)
	}
	return got, nil
}
