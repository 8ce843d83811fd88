package bigqueryio

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/hamba/avro/v2"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sdfio/sdfio/sdf"
)

// Namespace is the Beam metrics namespace of Read and Query: rows (rows
// emitted), bytes (serialized rows received), streams (of the read
// sessions created), splits_accepted and splits_refused (dynamic splits of
// running stream reads), retries (ReadRows calls retried).
const Namespace = "sdfio/bigqueryio"

var (
	rowsCounter     = beam.NewCounter(Namespace, "rows")
	bytesCounter    = beam.NewCounter(Namespace, "bytes")
	streamsCounter  = beam.NewCounter(Namespace, "streams")
	acceptedCounter = beam.NewCounter(Namespace, "splits_accepted")
	refusedCounter  = beam.NewCounter(Namespace, "splits_refused")
	retriesCounter  = beam.NewCounter(Namespace, "retries")
)

func init() {
	register.DoFn3x1[context.Context, []byte, func(StreamElement), error](&sessionFn{})
	register.Emitter1[StreamElement]()
	register.DoFn4x1[context.Context, *StreamTracker, StreamElement, func(beam.X), error](&readStreamFn{})
	register.Emitter1[beam.X]()
	beam.RegisterType(reflect.TypeOf((*StreamElement)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*StreamRestriction)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*StreamTracker)(nil)))
	beam.RegisterType(reflect.TypeOf((*sessionInfo)(nil)).Elem())
}

// StreamElement is one read stream of a session, the element the stream
// reader gets.
type StreamElement struct {
	Info    sessionInfo
	Stream  string
	EstRows int64
}

// Read reads a BigQuery table through the Storage Read API into a
// PCollection of t: a struct type filled as the official client's
// RowIterator fills structs, or bigqueryio.Row (see the package doc).
// table is project.dataset.table or project:dataset.table. Read panics,
// when the pipeline is built, where TryRead returns an error: a bad table
// name, a type it cannot fill or Beam cannot encode, options that
// contradict each other or hold values that cannot work.
func Read(s beam.Scope, table string, t reflect.Type, opts ...ReadOption) beam.PCollection {
	col, err := TryRead(s, table, t, opts...)
	if err != nil {
		panic(err)
	}
	return col
}

// TryRead is Read returning the errors of construction instead of
// panicking.
func TryRead(s beam.Scope, table string, t reflect.Type, opts ...ReadOption) (beam.PCollection, error) {
	cfg, err := newConfig(table, opts)
	if err != nil {
		return beam.PCollection{}, err
	}
	if err := checkOutputType(t, cfg, "Read of "+table); err != nil {
		return beam.PCollection{}, err
	}
	s = s.Scope("bigqueryio.Read")
	imp := beam.Impulse(s)
	streams := beam.ParDo(s, &sessionFn{Cfg: cfg, Type: beam.EncodedType{T: t}}, imp)
	return readStreams(s, cfg, t, streams), nil
}

// checkOutputType refuses an output type that a read could not fill or
// Beam could not carry, and struct fields that cannot match a column.
func checkOutputType(t reflect.Type, cfg readConfig, what string) error {
	if t == nil || t.Kind() != reflect.Struct && t != typeOfRow {
		return fmt.Errorf("bigqueryio: %s needs a struct type or bigqueryio.Row, got %v", what, t)
	}
	if err := checkType(t, cfg.fieldRules()); err != nil {
		return fmt.Errorf("bigqueryio: %s: %w", what, err)
	}
	if err := checkCoder(t); err != nil {
		return fmt.Errorf("bigqueryio: %s: %w", what, err)
	}
	return nil
}

// readStreams reads the rows of a PCollection of StreamElement into values
// of t.
func readStreams(s beam.Scope, cfg readConfig, t reflect.Type, streams beam.PCollection) beam.PCollection {
	// Streams are few and small: spread them over workers, rows never go
	// through a shuffle.
	streams = beam.Reshuffle(s, streams)
	return beam.ParDo(s, &readStreamFn{Cfg: cfg, Type: beam.EncodedType{T: t}}, streams, beam.TypeDefinition{Var: beam.XType, T: t})
}

func newConfig(table string, opts []ReadOption) (readConfig, error) {
	res, err := tableResource(table)
	if err != nil {
		return readConfig{}, err
	}
	cfg := readConfig{Table: res, Format: int32(Avro)}
	if err := applyOptions(&cfg, opts); err != nil {
		return cfg, err
	}
	if cfg.Query != (queryConfig{}) || len(cfg.calls("WithQueryParameters")) > 0 {
		return cfg, fmt.Errorf("bigqueryio: the options of %s include query options (legacy SQL, query priority, location, temporary dataset, REST endpoint, query parameters), which only Query takes", table)
	}
	return cfg, nil
}

func newClient(ctx context.Context, cfg readConfig) (*bqstorage.BigQueryReadClient, error) {
	c, err := bqstorage.NewBigQueryReadClient(ctx, cfg.clientOptions()...)
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
		if _, err := newPlan(info, t, cfg); err != nil {
			return err
		}
	}
	n := int64(len(s.GetStreams()))
	streamsCounter.Inc(ctx, n)
	est := int64(0)
	if n > 0 {
		est = (s.GetEstimatedRowCount() + n - 1) / n
	}
	for _, st := range s.GetStreams() {
		emit(StreamElement{Info: info, Stream: st.GetName(), EstRows: est})
	}
	return nil
}

// readStreamFn reads one stream: a splittable DoFn whose restriction is the
// stream and a row offset.
type readStreamFn struct {
	Cfg  readConfig
	Type beam.EncodedType

	client *bqstorage.BigQueryReadClient
	mu     sync.Mutex
	plans  map[string]*plan // by session
}

// plan is how rows of one session become values of the output type.
type plan struct {
	info   sessionInfo
	schema bigquery.Schema
	dec    *structDecoder // for a struct type; nil for Row
}

// decoder returns a new decoder of the plan, for one stream read.
func (p *plan) decoder() (batchDecoder, error) {
	if p.dec != nil {
		d := *p.dec
		d.r, d.buf = nil, nil
		if d.format == int32(Avro) {
			d.r = avro.NewReader(bytes.NewReader(nil), 0)
		}
		return &d, nil
	}
	_, rows, err := p.info.decoder()
	if err != nil {
		return nil, err
	}
	schema := p.schema
	return valuesDecoder{rows: rows, conv: func(v []bigquery.Value) (any, error) { return rowOf(schema, v), nil }}, nil
}

func (fn *readStreamFn) Setup(ctx context.Context) error {
	c, err := newClient(ctx, fn.Cfg)
	if err != nil {
		return err
	}
	fn.client = c
	fn.plans = map[string]*plan{}
	return nil
}

func (fn *readStreamFn) Teardown() error {
	if fn.client != nil {
		return fn.client.Close()
	}
	return nil
}

func (fn *readStreamFn) CreateInitialRestriction(e StreamElement) StreamRestriction {
	return StreamRestriction{Stream: e.Stream, Start: 0, End: sdf.Unbounded, EstRows: e.EstRows}
}

func (fn *readStreamFn) SplitRestriction(_ StreamElement, r StreamRestriction) []StreamRestriction {
	return []StreamRestriction{r}
}

func (fn *readStreamFn) RestrictionSize(_ StreamElement, r StreamRestriction) float64 {
	return r.size()
}

func (fn *readStreamFn) CreateTracker(r StreamRestriction) *StreamTracker {
	return NewStreamTracker(r, fn.client, fn.Cfg.SplitTimeout)
}

func (fn *readStreamFn) planFor(info sessionInfo) (*plan, error) {
	fn.mu.Lock()
	defer fn.mu.Unlock()
	if p := fn.plans[info.Session]; p != nil {
		return p, nil
	}
	p, err := newPlan(info, fn.Type.T, fn.Cfg)
	if err != nil {
		return nil, err
	}
	fn.plans[info.Session] = p
	return p, nil
}

// newPlan is how the rows of a session become values of t.
func newPlan(info sessionInfo, t reflect.Type, cfg readConfig) (*plan, error) {
	schema, _, err := info.decoder()
	if err != nil {
		return nil, fmt.Errorf("bigqueryio: table %s: %w", info.Table, err)
	}
	p := &plan{info: info, schema: schema}
	if t != typeOfRow {
		if p.dec, err = newStructDecoder(t, schema, info.Format, info.Arrow, cfg.fieldRules()); err != nil {
			return nil, fmt.Errorf("%w (table %s, session %s)", err, info.Table, info.Session)
		}
	}
	return p, nil
}

func (fn *readStreamFn) ProcessElement(ctx context.Context, rt *StreamTracker, e StreamElement, emit func(beam.X)) error {
	p, err := fn.planFor(e.Info)
	if err != nil {
		return err
	}
	dec, err := p.decoder()
	if err != nil {
		return err
	}
	// Every counter is touched first, so that the runner knows it before
	// a split's residual reports it too (Prism v2.77 keeps one of two
	// first reports of a counter it does not know yet); rows and bytes are
	// counted per response, so they move while a long stream is read.
	for _, c := range []beam.Counter{rowsCounter, bytesCounter, retriesCounter, acceptedCounter, refusedCounter} {
		c.Inc(ctx, 0)
	}
	st := readStats{report: func(rows, bytes int64) {
		rowsCounter.Inc(ctx, rows)
		bytesCounter.Inc(ctx, bytes)
	}}
	err = readStream(ctx, fn.client, fn.Cfg, e.Info, rt, dec, func(v any) error {
		emit(v)
		return nil
	}, &st)
	retriesCounter.Inc(ctx, st.retries)
	acc, ref := rt.SplitStats()
	acceptedCounter.Inc(ctx, acc)
	refusedCounter.Inc(ctx, ref)
	return err
}
