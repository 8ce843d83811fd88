package bigqueryio

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// sessionInfo is what a stream's reader needs of its read session: it
// travels with every stream element, so that workers never call
// CreateReadSession.
type sessionInfo struct {
	Table   string // projects/p/datasets/d/tables/t
	Session string // the session's name
	Format  int32  // storagepb.DataFormat
	Avro    string // the Avro schema (JSON), for AVRO
	Arrow   []byte // the IPC schema message, for ARROW
}

func sessionInfoOf(s *storagepb.ReadSession) (sessionInfo, error) {
	info := sessionInfo{Table: s.GetTable(), Session: s.GetName(), Format: int32(s.GetDataFormat())}
	switch s.GetDataFormat() {
	case storagepb.DataFormat_AVRO:
		info.Avro = s.GetAvroSchema().GetSchema()
	case storagepb.DataFormat_ARROW:
		info.Arrow = s.GetArrowSchema().GetSerializedSchema()
	default:
		return info, fmt.Errorf("session %s has data format %v", s.GetName(), s.GetDataFormat())
	}
	return info, nil
}

// decoder parses the session's schema and returns it with a row decoder.
// A schema of no columns is refused: its rows would take no bytes, so a
// payload could not be counted.
func (info sessionInfo) decoder() (bigquery.Schema, rowDecoder, error) {
	schema, dec, err := info.parse()
	if err == nil && len(schema) == 0 {
		return nil, nil, fmt.Errorf("session %s: the schema has no columns", info.Session)
	}
	return schema, dec, err
}

func (info sessionInfo) parse() (bigquery.Schema, rowDecoder, error) {
	switch storagepb.DataFormat(info.Format) {
	case storagepb.DataFormat_AVRO:
		schema, err := schemaFromAvroJSON(info.Avro)
		if err != nil {
			return nil, nil, fmt.Errorf("session %s: its Avro schema: %w", info.Session, err)
		}
		return schema, newAvroDecoder(schema), nil
	case storagepb.DataFormat_ARROW:
		s, err := parseArrowSchema(info.Arrow)
		if err != nil {
			return nil, nil, fmt.Errorf("session %s: %w", info.Session, err)
		}
		schema, err := schemaFromArrow(s)
		if err != nil {
			return nil, nil, fmt.Errorf("session %s: %w", info.Session, err)
		}
		return schema, newArrowDecoder(schema, info.Arrow), nil
	}
	return nil, nil, fmt.Errorf("session %s: data format %v", info.Session, storagepb.DataFormat(info.Format))
}

// payloadOf is the serialized rows of a response.
func payloadOf(r *storagepb.ReadRowsResponse) []byte {
	if a := r.GetAvroRows(); a != nil {
		return a.GetSerializedBinaryRows()
	}
	return r.GetArrowRecordBatch().GetSerializedRecordBatch()
}

func timeOfMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// StreamElement is one read stream of a session, the element the stream
// reader gets.
type StreamElement struct {
	Info    sessionInfo
	Stream  string
	EstRows int64
}

func newClient(ctx context.Context, cfg readConfig) (*bqstorage.BigQueryReadClient, error) {
	opts, err := cfg.clientOptions()
	if err != nil {
		return nil, err
	}
	c, err := bqstorage.NewBigQueryReadClient(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("bigqueryio: creating the Storage Read client: %w", err)
	}
	return c, nil
}

// createSession creates the read session of cfg.
func createSession(ctx context.Context, c *bqstorage.BigQueryReadClient, cfg readConfig) (*storagepb.ReadSession, error) {
	req := func(streams int32) *storagepb.CreateReadSessionRequest {
		rs := &storagepb.ReadSession{
			Table:      cfg.Table,
			DataFormat: storagepb.DataFormat(cfg.Format),
			ReadOptions: &storagepb.ReadSession_TableReadOptions{
				SelectedFields: cfg.SelectedFields,
				RowRestriction: cfg.RowRestriction,
			},
		}
		if cfg.SnapshotMicros != 0 {
			rs.TableModifiers = &storagepb.ReadSession_TableModifiers{SnapshotTime: timestamppb.New(timeOfMicros(cfg.SnapshotMicros))}
		}
		return &storagepb.CreateReadSessionRequest{Parent: cfg.parent(), ReadSession: rs, MaxStreamCount: streams}
	}
	streams := cfg.MaxStreams
	if cfg.BundleSize > 0 {
		// Java sizes streams by the table's bytes; the service's estimate of
		// the bytes a session scans is that, for the columns read. A
		// session of one stream that is never read tells it.
		probe, err := c.CreateReadSession(ctx, req(1))
		if err != nil {
			return nil, fmt.Errorf("bigqueryio: creating a read session of %s: %w", cfg.Table, err)
		}
		n := probe.GetEstimatedTotalBytesScanned() / cfg.BundleSize
		streams = int32(min(max(n, MinStreams), MaxStreams))
	}
	s, err := c.CreateReadSession(ctx, req(streams))
	if err != nil {
		return nil, fmt.Errorf("bigqueryio: creating a read session of %s: %w", cfg.Table, err)
	}
	return s, nil
}

// sessionFn creates the read session when the pipeline runs and emits its
// streams.
type sessionFn struct {
	Cfg  readConfig
	Type beam.EncodedType // the read's output type
}

func (fn *sessionFn) ProcessElement(ctx context.Context, _ []byte, emit func(StreamElement)) error {
	return emitSession(ctx, fn.Cfg, fn.Type.T, emit)
}

// emitSession creates the read session of cfg and emits its streams; it
// emits nothing when it fails. With t, a struct type, it first checks that
// the session's columns fill t: a field of t that matches no column, or a
// column that cannot go into its field, fails here, before any stream is
// read, naming the field and the session's columns.
func emitSession(ctx context.Context, cfg readConfig, t reflect.Type, emit func(StreamElement)) error {
	c, err := newClient(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	s, err := createSession(ctx, c, cfg)
	if err != nil {
		return err
	}
	info, err := sessionInfoOf(s)
	if err != nil {
		return fmt.Errorf("bigqueryio: table %s: %w", cfg.Table, err)
	}
	if t != nil && t != typeOfRow {
		if _, err := newRowPlan(info, t, cfg); err != nil {
			return err
		}
	}
	n := int64(len(s.GetStreams()))
	cfg.counter("streams").Inc(ctx, n)
	log.Infof(ctx, "bigqueryio: read session %s of %s: %d streams, about %d rows, %d bytes to scan",
		s.GetName(), cfg.Table, n, s.GetEstimatedRowCount(), s.GetEstimatedTotalBytesScanned())
	est := int64(0)
	if n > 0 {
		est = (s.GetEstimatedRowCount() + n - 1) / n
	}
	for _, st := range s.GetStreams() {
		emit(StreamElement{Info: info, Stream: st.GetName(), EstRows: est})
	}
	return nil
}
