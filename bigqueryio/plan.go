package bigqueryio

import (
	"fmt"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/hamba/avro/v2"
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
		s, err := avro.ParseWithCache(info.Avro, "", &avro.SchemaCache{})
		if err != nil {
			return nil, nil, fmt.Errorf("session %s: its Avro schema: %w", info.Session, err)
		}
		schema, err := schemaFromAvro(s)
		if err != nil {
			return nil, nil, fmt.Errorf("session %s: %w", info.Session, err)
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
