package bqtest

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/arrow/go/v15/arrow"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Server is an in-process BigQuery Storage Read API server on a loopback gRPC
// listener. It is safe for concurrent use. Create one with NewServer and
// Close it when done.
type Server struct {
	storagepb.UnimplementedBigQueryReadServer

	cfg  config
	lis  net.Listener
	grpc *grpc.Server
	rest *httptest.Server // RESTEndpoint, started on demand

	caPEM []byte // WithTLS's certificate

	callsMu sync.Mutex
	calls   []Call // WithHeaderLog's record

	mu         sync.Mutex
	tables     map[string]*table   // by resource name projects/p/datasets/d/tables/t
	sessions   map[string]*session // by session name
	streams    map[string]*stream  // by stream name
	faults     Faults
	faultCalls int // ReadRows calls since SetFaults
	rnd        *rand.Rand
	stats      Stats
	last       *storagepb.CreateReadSessionRequest
	nextID     int
	q          queryState // the REST server's query jobs and datasets
	w          writeState // the Storage Write API's streams, faults and stats (write.go)
}

// Table is a table a test defines: its schema and rows. Row values are what
// the official client's RowIterator yields as []bigquery.Value: int64,
// float64, bool, string, []byte, *big.Rat (NUMERIC, BIGNUMERIC),
// civil.Date, civil.Time, civil.DateTime, time.Time (TIMESTAMP), string
// (GEOGRAPHY as WKT, JSON as text), []bigquery.Value for a RECORD (its fields
// in schema order) and for a repeated column (its items); nil is NULL.
type Table struct {
	Schema bigquery.Schema
	Rows   [][]bigquery.Value
	// Denied makes every CreateReadSession on the table fail with
	// PERMISSION_DENIED, as when the caller lacks bigquery.tables.getData.
	Denied bool
	// Location is the table's location, which tables.get reports ("US"
	// when empty).
	Location string
	// TimePartitioning or RangePartitioning partition the table, Clustering
	// clusters it; Description, Labels and KMSKey (the Cloud KMS key of its
	// encryption) describe it. tables.insert takes them and tables.get
	// reports them, as the service does. A partition decorator
	// (table$20261203) on a write stream's table writes into a partition
	// (see PartitionRows).
	TimePartitioning  *bigquery.TimePartitioning
	RangePartitioning *bigquery.RangePartitioning
	Clustering        *bigquery.Clustering
	Description       string
	Labels            map[string]string
	KMSKey            string
	// PrimaryKey is the table's primary key (NOT ENFORCED): CDC rows
	// appended to its _default stream are applied by it (cdc.go).
	// tables.insert takes it (tableConstraints) and tables.get reports it.
	PrimaryKey []string
	// Created is when the table was made, which tables.get reports
	// (creationTime); zero: when AddTable (or tables.insert, a copy or a
	// query job) made it. A test sets it in the past for a table that is
	// not new (a writer retries some refusals right after a table is made).
	Created time.Time
}

type table struct {
	name string
	Table
	rowBytes int64     // estimated bytes per row, for estimated_total_bytes_scanned
	expires  time.Time // set by tables.patch; not enforced
	origin   *table    // the first version of a table the Write API committed rows to (write.go)
	// parts is, for a table partitioned by ingestion time, the partition
	// of each row (rows past its end are in the partition of the table's
	// creation).
	parts []string

	cacheMu sync.Mutex
	cache   map[avroKey][]byte // WithResponseCache: Avro rows as first encoded
}

// avroKey names the Avro encoding of n consecutive table rows from first,
// projected to the columns cols (their indexes, as a string).
type avroKey struct {
	cols     string
	first, n int
}

type session struct {
	name     string
	table    *table
	format   storagepb.DataFormat
	schema   bigquery.Schema // projected
	cols     []int           // table column of each projected column
	pred     predicate       // nil: all rows
	avroJSON string
	arrow    *arrow.Schema
	arrowHdr []byte
}

type stream struct {
	name   string
	sess   *session
	lo, hi int   // the table rows [lo, hi) the stream was assigned, before filtering
	rows   []int // table rows of the stream that pass the restriction: row i is offset i
}

// Faults are failures the server injects. The zero value injects none.
type Faults struct {
	// UnavailableAfterRows makes a ReadRows call fail with UNAVAILABLE once
	// it has sent this many rows (0: never). UnavailableShare is the share
	// of ReadRows calls that fail so (0 with UnavailableCalls 0 counts as
	// 1: every call).
	UnavailableAfterRows int
	UnavailableShare     float64
	// UnavailableCalls makes the first this many ReadRows calls after
	// SetFaults fail so for certain, before UnavailableShare applies.
	UnavailableCalls int
	// ResponseDelay is slept before each ReadRows response.
	ResponseDelay time.Duration
	// SplitDelay is slept in each SplitReadStream call before it answers
	// (or until the caller's deadline).
	SplitDelay time.Duration
	// SplitRefuseShare is the share of SplitReadStream calls refused at
	// random, with the empty response of a stream that cannot be split.
	SplitRefuseShare float64
	// RowCount makes the row counts of ReadRows responses disagree with
	// their payloads, or carry them as an old server would (RowCountExact,
	// the zero value, sends what the service sends).
	RowCount RowCountFault
	// TrailingBytes is appended to the serialized rows of every ReadRows
	// response (the row counts unchanged): bytes that are not a row.
	TrailingBytes []byte
}

// RowCountFault is how a ReadRows response states its number of rows.
type RowCountFault int

const (
	// RowCountExact sets row_count to the rows of the payload, as the
	// service does.
	RowCountExact RowCountFault = iota
	// RowCountOneLess sets row_count one less than the rows of the payload.
	RowCountOneLess
	// RowCountOneMore sets row_count one more than the rows of the payload.
	RowCountOneMore
	// RowCountZero sets no count at all on responses that hold rows.
	RowCountZero
	// RowCountDeprecatedOnly leaves row_count 0 and sets the deprecated
	// count inside the rows (AvroRows.row_count, ArrowRecordBatch.row_count)
	// exactly, as servers did before row_count existed.
	RowCountDeprecatedOnly
	// RowCountBoth sets both counts exactly.
	RowCountBoth
	// RowCountBothDisagree sets row_count exactly and the deprecated count
	// one more.
	RowCountBothDisagree
)

// counts returns the row_count and the deprecated inner count a response
// of n rows carries under f.
func (f RowCountFault) counts(n int64) (rowCount, deprecated int64) {
	switch f {
	case RowCountOneLess:
		return n - 1, 0
	case RowCountOneMore:
		return n + 1, 0
	case RowCountZero:
		return 0, 0
	case RowCountDeprecatedOnly:
		return 0, n
	case RowCountBoth:
		return n, n
	case RowCountBothDisagree:
		return n, n + 1
	}
	return n, 0
}

// Stats counts what the server did.
type Stats struct {
	Sessions         int   // read sessions created
	Streams          int   // streams handed out in sessions
	ReadRowsCalls    int   // ReadRows calls
	RowsSent         int64 // rows sent by ReadRows
	InjectedFailures int   // ReadRows calls failed by Faults
	SplitCalls       int   // SplitReadStream calls
	SplitsAccepted   int   // splits that returned a primary and a remainder
	SplitsRefused    int   // splits that returned the empty response
	CachedResponses  int   // ReadRows responses whose rows WithResponseCache served
}

type config struct {
	blockRows      int
	responseRows   int
	defaultStreams int
	seed           int64
	cache          bool
	dateTimeSQL    bool
	headers        []string // WithHeaderLog's, canonical
	tls            bool     // WithTLS
}

// Option configures a Server.
type Option func(*config)

// WithBlockRows sets the server's storage unit: streams are assigned and
// split at multiples of n table rows (default 64). A stream of fewer than
// two blocks cannot be split, as with the real service.
func WithBlockRows(n int) Option { return func(c *config) { c.blockRows = max(n, 1) } }

// WithResponseRows sets the most rows in one ReadRows response (default 256).
func WithResponseRows(n int) Option { return func(c *config) { c.responseRows = max(n, 1) } }

// WithDefaultStreams sets the number of streams of a session when the
// request leaves max_stream_count at 0 (default 4). A session never has
// more streams than blocks, and an empty table gives a session without
// streams.
func WithDefaultStreams(n int) Option { return func(c *config) { c.defaultStreams = max(n, 1) } }

// WithResponseCache makes the server encode the Avro rows of a response
// once and send the same bytes each time the same table rows are read with
// the same columns and no row restriction, whichever session or stream
// reads them. It is for benchmarks, where the server shares the machine
// with the reader it serves: a read then costs the server little more than
// gRPC's send. Rows changed in a table's Rows after AddTable may be served
// as they were.
func WithResponseCache() Option { return func(c *config) { c.cache = true } }

// WithAvroDateTimeSQLType annotates DATETIME columns in the Avro schema of
// a session as BigQuery's Avro exports do, {"type":"string","sqlType":"DATETIME"},
// instead of the Storage Read API's {"type":"string","logicalType":"datetime"}
// (GEOGRAPHY and JSON carry an sqlType either way): a reader must read
// both alike.
func WithAvroDateTimeSQLType() Option { return func(c *config) { c.dateTimeSQL = true } }

// WithSeed seeds the random choices of fault injection (default 1).
func WithSeed(seed int64) Option { return func(c *config) { c.seed = seed } }

// NewServer starts a server on 127.0.0.1 on a free port.
func NewServer(opts ...Option) (*Server, error) {
	cfg := config{blockRows: 64, responseRows: 256, defaultStreams: 4, seed: 1}
	for _, o := range opts {
		o(&cfg)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bqtest: listen: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		lis:      lis,
		tables:   map[string]*table{},
		sessions: map[string]*session{},
		streams:  map[string]*stream{},
		rnd:      rand.New(rand.NewSource(cfg.seed)),
	}
	gopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(maxGRPCMessage),
		grpc.ChainUnaryInterceptor(s.unaryHeaders), grpc.ChainStreamInterceptor(s.streamHeaders)}
	if cfg.tls {
		cert, caPEM, err := selfSigned()
		if err != nil {
			lis.Close()
			return nil, err
		}
		s.caPEM = caPEM
		gopts = append(gopts, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	}
	s.grpc = grpc.NewServer(gopts...)
	storagepb.RegisterBigQueryReadServer(s.grpc, s)
	storagepb.RegisterBigQueryWriteServer(s.grpc, &writeService{s: s})
	go s.grpc.Serve(lis)
	return s, nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// ClientOptions are the options that point Google's clients (the Storage
// Read client of cloud.google.com/go/bigquery/storage/apiv1, and sdfio's
// bigqueryio) at this server: its endpoint, no TLS, no credentials.
func (s *Server) ClientOptions() []option.ClientOption { return Endpoint(s.Addr()) }

// Close stops the server, ending the calls in flight.
func (s *Server) Close() {
	s.grpc.Stop()
	s.mu.Lock()
	rest := s.rest
	s.mu.Unlock()
	if rest != nil {
		rest.Close()
	}
}

// SetFaults replaces the faults the server injects from now on.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	s.faults, s.faultCalls = f, 0
	s.mu.Unlock()
}

// Stats returns what the server did so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// LastSessionRequest returns the last CreateReadSession request the server
// received (nil if none), so tests can check what a reader asked for.
func (s *Server) LastSessionRequest() *storagepb.CreateReadSessionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// TableResource turns project.dataset.table, project:dataset.table or
// projects/p/datasets/d/tables/t into the resource name the API uses. The
// project may be domain-scoped: example.com:project:dataset.table.
func TableResource(name string) (string, error) {
	if strings.HasPrefix(name, "projects/") {
		p := strings.Split(name, "/")
		if len(p) == 6 && p[2] == "datasets" && p[4] == "tables" && p[1] != "" && p[3] != "" && p[5] != "" {
			return name, nil
		}
		return "", fmt.Errorf("bqtest: table %q: want projects/P/datasets/D/tables/T", name)
	}
	bad := fmt.Errorf("bqtest: table %q: want project.dataset.table or project:dataset.table (the project may be domain-scoped, example.com:project)", name)
	// The table follows the last '.', the dataset the last ':' or '.'
	// before it; the project is an id or domain:id.
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", bad
	}
	rest, tbl := name[:i], name[i+1:]
	j := strings.LastIndexAny(rest, ".:")
	if j < 0 {
		return "", bad
	}
	proj, ds := rest[:j], rest[j+1:]
	domain, id, scoped := strings.Cut(proj, ":")
	if !scoped {
		id = domain
	}
	if id == "" || strings.ContainsAny(id, ".:/") || (scoped && (domain == "" || strings.Contains(domain, "/"))) ||
		ds == "" || tbl == "" || strings.Contains(ds, "/") || strings.ContainsAny(tbl, ":/") {
		return "", bad
	}
	return fmt.Sprintf("projects/%s/datasets/%s/tables/%s", proj, ds, tbl), nil
}

// AddTable defines (or replaces) a table. name is project.dataset.table,
// project:dataset.table or projects/p/datasets/d/tables/t. The rows are
// checked against the schema.
func (s *Server) AddTable(name string, t Table) error {
	res, err := TableResource(name)
	if err != nil {
		return err
	}
	tb, err := newTable(res, t)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.tables[res] = tb
	s.mu.Unlock()
	return nil
}

// newTable checks t and makes the server's table res of it.
func newTable(res string, t Table) (*table, error) {
	if len(t.Schema) == 0 {
		return nil, fmt.Errorf("bqtest: table %s has no columns", res)
	}
	if _, err := avroSchemaJSON(t.Schema, false); err != nil {
		return nil, err
	}
	if err := checkTableMeta(&t); err != nil {
		return nil, fmt.Errorf("bqtest: table %s: %w", res, err)
	}
	var enc avroEncoder
	for i, row := range t.Rows {
		if err := checkRow(t.Schema, row, nil); err != nil {
			return nil, fmt.Errorf("bqtest: table %s row %d: %w", res, i, err)
		}
		if i < 100 {
			enc.row(t.Schema, row)
		}
	}
	rowBytes := int64(0)
	if n := min(len(t.Rows), 100); n > 0 {
		rowBytes = int64(len(enc.buf)/n) + 1
	}
	if t.Created.IsZero() {
		t.Created = time.Now()
	}
	tb := &table{name: res, Table: t, rowBytes: rowBytes}
	if t.ingestionTime() {
		now := t.nowPartition()
		for range t.Rows {
			tb.parts = append(tb.parts, now)
		}
	}
	return tb, nil
}

func (s *Server) newID(prefix string) string {
	s.nextID++
	return fmt.Sprintf("%s%d", prefix, s.nextID)
}

// CreateReadSession implements storagepb.BigQueryReadServer.
func (s *Server) CreateReadSession(ctx context.Context, req *storagepb.CreateReadSessionRequest) (*storagepb.ReadSession, error) {
	rs := req.GetReadSession()
	parent := req.GetParent()
	if !strings.HasPrefix(parent, "projects/") || strings.Count(parent, "/") != 1 || len(parent) == len("projects/") {
		return nil, status.Errorf(codes.InvalidArgument, "Invalid parent %q: want projects/{project_id}", parent)
	}
	if rs == nil {
		return nil, status.Error(codes.InvalidArgument, "read_session is required")
	}
	if req.GetMaxStreamCount() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "max_stream_count %d is negative", req.GetMaxStreamCount())
	}
	format := rs.GetDataFormat()
	if format != storagepb.DataFormat_AVRO && format != storagepb.DataFormat_ARROW {
		return nil, status.Errorf(codes.InvalidArgument, "data_format %v is not supported: use AVRO or ARROW", format)
	}
	s.mu.Lock()
	s.last = req
	t := s.tables[rs.GetTable()]
	s.mu.Unlock()
	if t == nil {
		return nil, status.Errorf(codes.NotFound, "Not found: Table %s", rs.GetTable())
	}
	if t.Denied {
		return nil, status.Errorf(codes.PermissionDenied, "Access Denied: Table %s: Permission bigquery.tables.getData denied on table %s (or it may not exist).", rs.GetTable(), rs.GetTable())
	}
	if st := rs.GetTableModifiers().GetSnapshotTime(); st != nil && st.AsTime().After(time.Now().Add(time.Minute)) {
		return nil, status.Errorf(codes.InvalidArgument, "snapshot_time %v is in the future", st.AsTime())
	}

	sess := &session{table: t, format: format}
	opts := rs.GetReadOptions()
	if sel := opts.GetSelectedFields(); len(sel) > 0 {
		want := map[string]bool{}
		for _, f := range sel {
			found := false
			for _, c := range t.Schema {
				if strings.EqualFold(c.Name, f) {
					want[strings.ToLower(c.Name)], found = true, true
				}
			}
			if !found {
				return nil, status.Errorf(codes.InvalidArgument, "request failed: the following selected fields do not exist in the table schema: %s", f)
			}
		}
		for i, c := range t.Schema {
			if want[strings.ToLower(c.Name)] {
				sess.schema = append(sess.schema, c)
				sess.cols = append(sess.cols, i)
			}
		}
	} else {
		sess.schema = t.Schema
		for i := range t.Schema {
			sess.cols = append(sess.cols, i)
		}
	}
	if r := strings.TrimSpace(opts.GetRowRestriction()); r != "" {
		pred, err := compileRestriction(r, t.Schema)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "request failed: row restriction %q: %v", r, err)
		}
		sess.pred = pred
	}
	out := &storagepb.ReadSession{
		Table:          rs.GetTable(),
		DataFormat:     format,
		ReadOptions:    opts,
		TableModifiers: rs.GetTableModifiers(),
		ExpireTime:     timestamppb.New(time.Now().Add(6 * time.Hour)),
	}
	var err error
	if format == storagepb.DataFormat_AVRO {
		if sess.avroJSON, err = avroSchemaJSON(sess.schema, s.cfg.dateTimeSQL); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		out.Schema = &storagepb.ReadSession_AvroSchema{AvroSchema: &storagepb.AvroSchema{Schema: sess.avroJSON}}
	} else {
		if sess.arrow, err = arrowSchema(sess.schema); err == nil {
			sess.arrowHdr, err = arrowSchemaBytes(sess.arrow)
		}
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		out.Schema = &storagepb.ReadSession_ArrowSchema{ArrowSchema: &storagepb.ArrowSchema{SerializedSchema: sess.arrowHdr}}
	}

	n := len(t.Rows)
	blocks := (n + s.cfg.blockRows - 1) / s.cfg.blockRows
	count := int(req.GetMaxStreamCount())
	if count == 0 {
		count = s.cfg.defaultStreams
	}
	count = min(count, blocks)

	s.mu.Lock()
	defer s.mu.Unlock()
	sess.name = fmt.Sprintf("%s/locations/us/sessions/%s", parent, s.newID("s"))
	out.Name = sess.name
	s.sessions[sess.name] = sess
	for i := 0; i < count; i++ {
		lo := (blocks * i / count) * s.cfg.blockRows
		hi := min((blocks*(i+1)/count)*s.cfg.blockRows, n)
		st := s.newStreamLocked(sess, lo, hi)
		out.Streams = append(out.Streams, &storagepb.ReadStream{Name: st.name})
	}
	out.EstimatedRowCount = int64(n)
	out.EstimatedTotalBytesScanned = int64(n) * t.rowBytes
	s.stats.Sessions++
	s.stats.Streams += count
	return out, nil
}

func (s *Server) newStreamLocked(sess *session, lo, hi int) *stream {
	st := &stream{name: sess.name + "/streams/" + s.newID("r"), sess: sess, lo: lo, hi: hi}
	for i := lo; i < hi; i++ {
		if sess.pred == nil || sess.pred(sess.table.Rows[i]) == trueT {
			st.rows = append(st.rows, i)
		}
	}
	s.streams[st.name] = st
	return st
}

// ReadRows implements storagepb.BigQueryReadServer.
func (s *Server) ReadRows(req *storagepb.ReadRowsRequest, srv storagepb.BigQueryRead_ReadRowsServer) error {
	ctx := srv.Context()
	s.mu.Lock()
	st := s.streams[req.GetReadStream()]
	s.stats.ReadRowsCalls++
	f := s.faults
	failAfter := -1
	if f.UnavailableAfterRows > 0 {
		switch {
		case s.faultCalls < f.UnavailableCalls, f.UnavailableShare <= 0 && f.UnavailableCalls == 0, s.rnd.Float64() < f.UnavailableShare:
			failAfter = f.UnavailableAfterRows
		}
		s.faultCalls++
	}
	deleted := st != nil && !sameTable(s.tables[st.sess.table.name], st.sess.table)
	s.mu.Unlock()
	if st == nil {
		return status.Errorf(codes.NotFound, "Not found: stream %s", req.GetReadStream())
	}
	if deleted {
		return status.Errorf(codes.NotFound, "Not found: Table %s of stream %s was deleted or replaced", st.sess.table.name, st.name)
	}
	off := req.GetOffset()
	if off < 0 {
		return status.Errorf(codes.InvalidArgument, "offset %d is negative", off)
	}
	if off > int64(len(st.rows)) {
		return status.Errorf(codes.FailedPrecondition, "offset %d is beyond the end of stream %s, which has %d rows", off, st.name, len(st.rows))
	}
	sess := st.sess
	span := float64(st.hi - st.lo)
	sent := 0
	first := true
	sizeHint := 0
	for i := int(off); i < len(st.rows); {
		n := min(s.cfg.responseRows, len(st.rows)-i)
		if failAfter >= 0 {
			if sent >= failAfter {
				s.mu.Lock()
				s.stats.InjectedFailures++
				s.mu.Unlock()
				return status.Errorf(codes.Unavailable, "bqtest: injected failure after %d rows of stream %s (offset %d)", sent, st.name, i)
			}
			n = min(n, failAfter-sent)
		}
		if f.ResponseDelay > 0 {
			select {
			case <-time.After(f.ResponseDelay):
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		rowCount, deprecated := f.RowCount.counts(int64(n))
		resp := &storagepb.ReadRowsResponse{
			RowCount: rowCount,
			Stats: &storagepb.StreamStats{Progress: &storagepb.StreamStats_Progress{
				AtResponseStart: float64(st.rows[i]-st.lo) / span,
				AtResponseEnd:   float64(st.rows[i+n-1]+1-st.lo) / span,
			}},
		}
		if sess.format == storagepb.DataFormat_AVRO {
			// Encoded from the table's rows as they are, in a buffer sized
			// by the last response: the server shares the reader's CPU in
			// tests and benchmarks, so it should cost little.
			buf := s.avroRows(sess, st.rows[i:i+n], sizeHint)
			sizeHint = len(buf) + len(buf)/8
			if len(f.TrailingBytes) > 0 {
				buf = append(buf[:len(buf):len(buf)], f.TrailingBytes...) // never into the cache's bytes
			}
			resp.Rows = &storagepb.ReadRowsResponse_AvroRows{AvroRows: &storagepb.AvroRows{SerializedBinaryRows: buf, RowCount: deprecated}}
			resp.UncompressedByteSize = proto.Int64(int64(len(buf)))
			if first {
				resp.Schema = &storagepb.ReadRowsResponse_AvroSchema{AvroSchema: &storagepb.AvroSchema{Schema: sess.avroJSON}}
			}
		} else {
			rows := make([][]bigquery.Value, n)
			for k := range rows {
				full := sess.table.Rows[st.rows[i+k]]
				row := make([]bigquery.Value, len(sess.cols))
				for c, col := range sess.cols {
					row[c] = full[col]
				}
				rows[k] = row
			}
			b, err := arrowBatch(sess.arrow, sess.schema, sess.arrowHdr, rows)
			if err != nil {
				return status.Errorf(codes.Internal, "bqtest: encoding Arrow: %v", err)
			}
			b = append(b, f.TrailingBytes...)
			resp.Rows = &storagepb.ReadRowsResponse_ArrowRecordBatch{ArrowRecordBatch: &storagepb.ArrowRecordBatch{SerializedRecordBatch: b, RowCount: deprecated}}
			resp.UncompressedByteSize = proto.Int64(int64(len(b)))
			if first {
				resp.Schema = &storagepb.ReadRowsResponse_ArrowSchema{ArrowSchema: &storagepb.ArrowSchema{SerializedSchema: sess.arrowHdr}}
			}
		}
		first = false
		if err := srv.Send(resp); err != nil {
			return err
		}
		s.mu.Lock()
		s.stats.RowsSent += int64(n)
		s.mu.Unlock()
		i += n
		sent += n
	}
	return nil
}

// avroRows is the Avro encoding of the table rows rows, projected to the
// session's columns; with WithResponseCache, from the table's cache when the
// session has no row restriction (its rows are then consecutive).
func (s *Server) avroRows(sess *session, rows []int, sizeHint int) []byte {
	encode := func() []byte {
		enc := avroEncoder{buf: make([]byte, 0, sizeHint)}
		for _, r := range rows {
			enc.projected(sess.schema, sess.table.Rows[r], sess.cols)
		}
		return enc.buf
	}
	if !s.cfg.cache || sess.pred != nil {
		return encode()
	}
	t := sess.table
	key := avroKey{cols: fmt.Sprint(sess.cols), first: rows[0], n: len(rows)}
	t.cacheMu.Lock()
	b, ok := t.cache[key]
	t.cacheMu.Unlock()
	if ok {
		s.mu.Lock()
		s.stats.CachedResponses++
		s.mu.Unlock()
		return b
	}
	b = encode()
	t.cacheMu.Lock()
	if t.cache == nil {
		t.cache = map[avroKey][]byte{}
	}
	t.cache[key] = b
	t.cacheMu.Unlock()
	return b
}

// SplitReadStream implements storagepb.BigQueryReadServer with the service's
// semantics: the split point is the block boundary nearest to fraction of
// the original stream's rows before filtering; primary[0, j) is
// original[0, j) and remainder[0, m) is original[j, n); the original stays
// readable in full. A split that would leave either side empty (a stream of
// fewer than two blocks, a fraction near 0 or 1) returns the empty response.
func (s *Server) SplitReadStream(ctx context.Context, req *storagepb.SplitReadStreamRequest) (*storagepb.SplitReadStreamResponse, error) {
	s.mu.Lock()
	st := s.streams[req.GetName()]
	s.stats.SplitCalls++
	f := s.faults
	refuse := f.SplitRefuseShare > 0 && s.rnd.Float64() < f.SplitRefuseShare
	s.mu.Unlock()
	if st == nil {
		return nil, status.Errorf(codes.NotFound, "Not found: stream %s", req.GetName())
	}
	frac := req.GetFraction()
	if math.IsNaN(frac) || frac <= 0 || frac >= 1 {
		return nil, status.Errorf(codes.InvalidArgument, "fraction %v is not in (0, 1)", frac)
	}
	if f.SplitDelay > 0 {
		select {
		case <-time.After(f.SplitDelay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	b := s.cfg.blockRows
	// Floor, forgiving the rounding of fractions a client computed.
	pos := st.lo + int(math.Floor(frac*float64(st.hi-st.lo)+1e-9))
	pos = int(math.Round(float64(pos)/float64(b))) * b
	s.mu.Lock()
	defer s.mu.Unlock()
	if refuse || pos <= st.lo || pos >= st.hi {
		s.stats.SplitsRefused++
		return &storagepb.SplitReadStreamResponse{}, nil
	}
	p := s.newStreamLocked(st.sess, st.lo, pos)
	r := s.newStreamLocked(st.sess, pos, st.hi)
	s.stats.SplitsAccepted++
	return &storagepb.SplitReadStreamResponse{
		PrimaryStream:   &storagepb.ReadStream{Name: p.name},
		RemainderStream: &storagepb.ReadStream{Name: r.name},
	}, nil
}

// StreamRows returns the number of rows a stream holds after filtering, or
// -1 for an unknown stream.
func (s *Server) StreamRows(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[name]; st != nil {
		return len(st.rows)
	}
	return -1
}

// Endpoint returns the client options that reach a bqtest server at addr
// (its Addr) from any process on the machine.
func Endpoint(addr string) []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(addr),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}
