package bqtest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter/adapt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The service's limits.
const (
	// maxAppendRequest is the most bytes one AppendRowsRequest may have.
	maxAppendRequest = 10 << 20
	// maxGRPCMessage is the most bytes the gRPC server receives in one
	// message: above maxAppendRequest, so that a request over the service's
	// limit is answered as the service answers it, not cut off by gRPC.
	maxGRPCMessage = 32 << 20
)

// writeService implements storagepb.BigQueryWriteServer for a Server, on
// the same listener and the same tables as its read service.
type writeService struct {
	storagepb.UnimplementedBigQueryWriteServer
	s *Server
}

// writeState is the Write API's state, under Server.mu.
type writeState struct {
	streams     map[string]*wstream      // application-created streams, by name
	schemas     map[string]*writerSchema // compiled writer schemas, by serialized descriptor
	faults      WriteFaults
	appendCalls int // AppendRows requests since SetWriteFaults
	hookCalls   int // AppendRows requests given to WriteFaults.OnAppend
	commitCalls int // BatchCommitWriteStreams calls since SetWriteFaults
	finalCalls  int // FinalizeWriteStream calls since SetWriteFaults
	flushCalls  int // FlushRows calls since SetWriteFaults
	createCalls int // CreateWriteStream calls since SetWriteFaults
	stats       WriteStats
	attempts    map[AppendAt]int     // AppendRows requests by stream and offset
	cdc         map[*table]*cdcState // CDC's keys, by table lineage (cdc.go)
	openConns   int                  // AppendRows RPCs open
	seq         int
}

// AppendAt is a stream and an offset an append named.
type AppendAt struct {
	Stream string
	Offset int64
}

// wstream is an application-created write stream.
type wstream struct {
	name    string
	typ     storagepb.WriteStream_Type
	table   string // resource name of its table
	part    string // the partition its table's decorator named, "" for none
	origin  *table // the table's first version when the stream was made
	seq     int    // creation order
	created time.Time

	finalized bool
	committed time.Time // PENDING: when committed; COMMITTED: created

	n       int64              // rows appended: the stream's end offset
	flushed int64              // BUFFERED: rows [0, flushed) are in the table
	rows    [][]bigquery.Value // rows appended and not yet in the table
}

// WriteFaults are failures the Write API server injects. The zero value
// injects none.
type WriteFaults struct {
	// AppendUnavailableShare is the share of AppendRows requests that fail
	// with UNAVAILABLE; AppendUnavailableCalls makes the first this many
	// requests after SetWriteFaults fail for certain, before the share
	// applies.
	AppendUnavailableShare float64
	AppendUnavailableCalls int
	// AfterWrite makes those failures come after the request's rows were
	// written (appended to the stream, visible in the table for a
	// COMMITTED or _default stream), as when the service's answer is lost:
	// a retry with the same offset is then answered ALREADY_EXISTS, a
	// retry without one writes the rows again. By default a failure comes
	// before anything is written.
	AfterWrite bool
	// InBand answers those failures in the response's error field and
	// keeps the connection open. By default the server ends the AppendRows
	// RPC with UNAVAILABLE, as when a connection is dropped, so every
	// request the client had in flight on it is unanswered.
	InBand bool
	// CloseAfterRequests ends every AppendRows RPC (with status OK: the
	// client reads io.EOF) once it has answered this many requests (0:
	// never). Requests received after the last answer are not processed.
	CloseAfterRequests int
	// AppendErrorCode, when not OK, answers every AppendRows request after
	// the first AppendErrorAfter (since SetWriteFaults) with this code in
	// the response's error field and AppendErrorMessage (and the stream's
	// name) as its message, writing none of its rows: a permanent error
	// such as INVALID_ARGUMENT or PERMISSION_DENIED, which a client must
	// not send again.
	AppendErrorCode    codes.Code
	AppendErrorMessage string
	AppendErrorAfter   int
	// OnAppend, when set, is called with each AppendRows request's number
	// (1 for the first since SetWriteFaults) before the server looks at the
	// request; it may block. A non-nil error ends the RPC with that error,
	// the request neither counted nor written (as when a connection drops
	// before the request reaches the service).
	OnAppend func(call int) error
	// RefuseRow, when set, is called with each row of an append that
	// would be written (decoded as TableRows returns rows) and its table's
	// resource name: a message refuses the row, in row_errors
	// (FIELDS_ERROR) with that message, as the service refuses a row that
	// breaks the table's schema, and nothing of the request is written;
	// "" takes it.
	RefuseRow func(table string, row []bigquery.Value) string
	// RowErrorsFirst answers an append whose rows are refused with its
	// row_errors even when its offset is not the stream's end (by default
	// the offset is judged first: ALREADY_EXISTS or OUT_OF_RANGE). The
	// service does not document which it judges first; a writer must
	// hold under both.
	RowErrorsFirst bool

	// CommitDelay is slept in each BatchCommitWriteStreams call before it
	// acts (or until the caller's deadline).
	CommitDelay time.Duration
	// CommitUnavailableShare is the share of BatchCommitWriteStreams calls
	// that fail with UNAVAILABLE; CommitUnavailableCalls makes the first
	// this many fail for certain. Nothing is committed by them unless
	// CommitAfterApply is set: then the commit is applied and the answer
	// is lost, so a retry gets STREAM_ALREADY_COMMITTED for its streams.
	CommitUnavailableShare float64
	CommitUnavailableCalls int
	CommitAfterApply       bool
	// OnCommit, when set, is called in each BatchCommitWriteStreams call
	// with the call's context (grpc/peer.FromContext names the client)
	// and its number (1 for the first since SetWriteFaults): with applied
	// false when the call arrives, before CommitDelay and before it acts,
	// and, once it has committed its streams, again with applied true,
	// before it answers. It may block, holding the call (a test can then
	// stop the client between the commit and its answer). A call whose
	// caller has gone (its context done) when the first call returns
	// commits nothing.
	OnCommit func(ctx context.Context, call int, applied bool)

	// FinalizeErrorCode, when not OK, fails the first FinalizeErrorCalls
	// FinalizeWriteStream calls since SetWriteFaults with this code
	// (UNAVAILABLE, INTERNAL, ...), the stream left as it was unless
	// FinalizeAfterApply is set: then the stream is finalized and the
	// answer is lost.
	FinalizeErrorCode  codes.Code
	FinalizeErrorCalls int
	FinalizeAfterApply bool
	// FinalizeAgainRefused answers a FinalizeWriteStream of a stream that
	// is already finalized INVALID_ARGUMENT with STREAM_FINALIZED, as an
	// append to it is answered, instead of its row count again.
	FinalizeAgainRefused bool

	// FlushErrorCode, when not OK, fails the first FlushErrorCalls
	// FlushRows calls since SetWriteFaults with this code (UNAVAILABLE,
	// RESOURCE_EXHAUSTED, ...), nothing flushed unless FlushAfterApply is
	// set: then the rows are flushed and the answer is lost, so a retry is
	// answered ALREADY_EXISTS.
	FlushErrorCode  codes.Code
	FlushErrorCalls int
	FlushAfterApply bool

	// CreateErrorCode, when not OK, fails the first CreateErrorCalls
	// CreateWriteStream calls since SetWriteFaults with this code, no
	// stream made unless CreateAfterApply is set: then the stream is made
	// (and never named to the caller) and the answer is lost.
	CreateErrorCode  codes.Code
	CreateErrorCalls int
	CreateAfterApply bool

	// CreatedAgo makes tables.insert report (tables.get's creationTime) a
	// table it makes as made this long ago: a writer that waits out a new
	// table's NOT_FOUND and PERMISSION_DENIED answers for a while (as
	// bigqueryio's does) then takes them for permanent at once.
	CreatedAgo time.Duration

	// CopyJobError, when not empty, fails every copy job (jobs.insert with
	// configuration.copy) with this message: the job ends DONE with it as
	// its error result, and its destination is left as it was.
	CopyJobError string
}

// WriteStats counts what the Write API server (and tabledata.insertAll)
// did.
type WriteStats struct {
	StreamsCreated    int   // CreateWriteStream calls that made a stream
	StreamsFinalized  int   // streams finalized (the first FinalizeWriteStream of each)
	StreamsCommitted  int   // PENDING streams committed
	Commits           int   // BatchCommitWriteStreams calls that committed
	CommitErrors      int   // BatchCommitWriteStreams calls answered with stream_errors
	Flushes           int   // FlushRows calls that moved a BUFFERED stream's flushed offset
	AppendConnections int   // AppendRows RPCs
	AppendConnsPeak   int   // AppendRows RPCs open at once, at most
	Appends           int   // AppendRows requests received
	AppendsWritten    int   // AppendRows requests whose rows were written
	AppendErrors      int   // requests answered with an error in the response (injected ones excluded)
	RowsAppended      int64 // rows written by AppendRows, to a stream or (COMMITTED, _default) a table
	BytesAppended     int64 // the serialized rows' bytes of those AppendRows requests
	RowErrors         int   // rows refused in row_errors
	InjectedFailures  int   // AppendRows requests failed by WriteFaults
	InjectedCloses    int   // AppendRows RPCs ended by WriteFaults.CloseAfterRequests
	InjectedCommit    int   // BatchCommitWriteStreams calls failed by WriteFaults
	InjectedFinalize  int   // FinalizeWriteStream calls failed by WriteFaults
	InjectedFlush     int   // FlushRows calls failed by WriteFaults
	InjectedCreate    int   // CreateWriteStream calls failed by WriteFaults
	InsertAllRequests int   // tabledata.insertAll calls
	InsertAllRows     int64 // rows tabledata.insertAll wrote
	TablesCreated     int   // tables.insert calls that made a table
	CopyJobs          int   // copy jobs that wrote their destination
}

// WriteStream describes an application-created write stream, for tests.
type WriteStream struct {
	Name      string
	Table     string // resource name projects/p/datasets/d/tables/t
	Type      storagepb.WriteStream_Type
	Rows      int64 // rows appended
	Visible   int64 // rows of it in the table: committed, flushed, or all of a COMMITTED stream
	Finalized bool
	Committed bool // a PENDING stream was committed (a COMMITTED stream always is)
}

// SetWriteFaults replaces the faults the Write API server injects from now
// on.
func (s *Server) SetWriteFaults(f WriteFaults) {
	s.mu.Lock()
	s.w.faults, s.w.appendCalls, s.w.hookCalls, s.w.commitCalls, s.w.finalCalls = f, 0, 0, 0, 0
	s.w.flushCalls, s.w.createCalls = 0, 0
	s.mu.Unlock()
}

// AppendAttempts returns how many AppendRows requests named each stream
// and offset (requests without an offset are not counted).
func (s *Server) AppendAttempts() map[AppendAt]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[AppendAt]int, len(s.w.attempts))
	for k, v := range s.w.attempts {
		m[k] = v
	}
	return m
}

// WriteStats returns what the Write API server did so far.
func (s *Server) WriteStats() WriteStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.stats
}

// TableRows returns the rows of a table that readers see: the rows it was
// defined with and those committed to it since (by the Write API or
// tabledata.insertAll), in the order they became visible. Rows appended to
// streams and not yet committed or flushed are not among them. The rows
// are the server's: do not modify them.
func (s *Server) TableRows(name string) ([][]bigquery.Value, error) {
	t, err := s.tableNamed(name)
	if err != nil {
		return nil, err
	}
	return t.Rows[:len(t.Rows):len(t.Rows)], nil
}

// tableNamed is the current version of the table name (any form
// TableResource takes), for the accessors of tests.
func (s *Server) tableNamed(name string) (*table, error) {
	res, err := TableResource(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	t := s.tables[res]
	s.mu.Unlock()
	if t == nil {
		return nil, fmt.Errorf("bqtest: no table %s", res)
	}
	return t, nil
}

// WriteStreams returns the application-created write streams of a table
// (not its _default stream), in the order they were created.
func (s *Server) WriteStreams(name string) []WriteStream {
	res, err := TableResource(name)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*wstream
	for _, ws := range s.w.streams {
		if ws.table == res {
			out = append(out, ws)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	info := make([]WriteStream, len(out))
	for i, ws := range out {
		info[i] = WriteStream{Name: ws.name, Table: ws.table, Type: ws.typ, Rows: ws.n,
			Visible: ws.n - int64(len(ws.rows)), Finalized: ws.finalized, Committed: !ws.committed.IsZero()}
	}
	return info
}

// PendingStreams returns the write streams of a table that hold rows
// readers do not see, or may yet make visible: PENDING streams not
// committed (whether finalized or not, with rows or without), and BUFFERED
// streams with rows past their flushed offset.
func (s *Server) PendingStreams(name string) []WriteStream {
	var out []WriteStream
	for _, ws := range s.WriteStreams(name) {
		if (ws.Type == storagepb.WriteStream_PENDING && !ws.Committed) || ws.Visible < ws.Rows {
			out = append(out, ws)
		}
	}
	return out
}

// lineage is the first version of t. A table the Write API or
// tabledata.insertAll commits rows to is replaced by a new version holding
// them (read sessions keep reading the version they started on, as the
// service's snapshot); all versions share one lineage.
func (t *table) lineage() *table {
	if t.origin != nil {
		return t.origin
	}
	return t
}

// sameTable reports whether a and b are versions of one table, which has
// not been deleted or replaced (AddTable, a query's destination) between
// them.
func sameTable(a, b *table) bool { return a != nil && b != nil && a.lineage() == b.lineage() }

// appendTableLocked makes rows visible in the table t (the current version
// of its name) by replacing it with a version that holds them, and returns
// that version. part is the partition a decorator named ("" for none): in
// a table partitioned by ingestion time the rows land in it, or else in
// the partition of the current time.
func (s *Server) appendTableLocked(t *table, rows [][]bigquery.Value, part string) *table {
	if len(rows) == 0 {
		return t
	}
	var all [][]bigquery.Value
	var parts []string
	if t.origin == nil {
		// The first version's rows may be the caller's slice (AddTable):
		// never append into its spare capacity.
		all = make([][]bigquery.Value, len(t.Rows), len(t.Rows)+len(rows))
		copy(all, t.Rows)
		parts = append([]string(nil), t.parts...)
	} else {
		// Later versions own their rows. Readers of older versions read
		// only the rows before their length, so appending in place is safe.
		all, parts = t.Rows, t.parts
	}
	for i, r := range rows {
		if len(r) < len(t.Schema) { // written before columns were added
			rows[i] = append(append(make([]bigquery.Value, 0, len(t.Schema)), r...), make([]bigquery.Value, len(t.Schema)-len(r))...)
		}
	}
	all = append(all, rows...)
	if t.ingestionTime() {
		if part == "" {
			part = t.nowPartition()
		}
		for range rows {
			parts = append(parts, part)
		}
	}
	nt := &table{name: t.name, Table: t.Table, rowBytes: t.rowBytes, expires: t.expires, origin: t.lineage(), parts: parts}
	nt.Rows = all
	if nt.rowBytes == 0 {
		nt.rowBytes = rowBytesOf(t.Schema, rows)
	}
	s.tables[t.name] = nt
	return nt
}

// newWriteStreamLocked makes a stream of the table parent names (a
// partition of it, with a decorator: the stream is named under that, as
// its parent).
func (s *Server) newWriteStreamLocked(parent string, t *table, typ storagepb.WriteStream_Type) *wstream {
	if s.w.streams == nil {
		s.w.streams = map[string]*wstream{}
	}
	s.w.seq++
	res, part := splitDecorator(parent)
	ws := &wstream{name: parent + "/streams/" + s.newID("w"), typ: typ, table: res, part: part, origin: t.lineage(), seq: s.w.seq, created: time.Now()}
	if typ == storagepb.WriteStream_COMMITTED {
		ws.committed = ws.created
	}
	s.w.streams[ws.name] = ws
	return ws
}

// storageErr is a gRPC status error that carries a StorageError, as the
// service's errors about streams do.
func storageErr(c codes.Code, sc storagepb.StorageError_StorageErrorCode, entity, msg string) error {
	return storageStatus(c, sc, entity, msg).Err()
}

func storageStatus(c codes.Code, sc storagepb.StorageError_StorageErrorCode, entity, msg string) *status.Status {
	st := status.New(c, msg)
	if d, err := st.WithDetails(&storagepb.StorageError{Code: sc, Entity: entity, ErrorMessage: msg}); err == nil {
		return d
	}
	return st
}

// defaultStreamTable returns the table of a _default stream name
// (…/tables/t/streams/_default, or …/tables/t/_default as some clients
// write it), or "" if name is not one.
func defaultStreamTable(name string) string {
	for _, suffix := range []string{"/streams/_default", "/_default"} {
		if t, ok := strings.CutSuffix(name, suffix); ok {
			if _, err := TableResource(t); err == nil && strings.HasPrefix(t, "projects/") {
				return t
			}
		}
	}
	return ""
}

// writeTableLocked returns the table res for a Write API call, or the
// service's error. res may name a partition with a decorator
// (…/tables/t$20261203): the table must be partitioned so that it has it.
func (s *Server) writeTableLocked(res string) (*table, error) {
	if _, err := TableResource(res); err != nil || !strings.HasPrefix(res, "projects/") {
		return nil, status.Errorf(codes.InvalidArgument, "Invalid table name %q: want projects/{project}/datasets/{dataset}/tables/{table}", res)
	}
	base, part := splitDecorator(res)
	t := s.tables[base]
	if t == nil {
		return nil, storageErr(codes.NotFound, storagepb.StorageError_TABLE_NOT_FOUND, res, "Not found: Table "+res)
	}
	if t.Denied {
		return nil, status.Errorf(codes.PermissionDenied, "Permission 'TABLES_UPDATE_DATA' denied on resource '%s' (or it may not exist).", res)
	}
	if part != "" {
		if err := t.checkDecorator(base, part); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%v. Entity: %s", err, res)
		}
	}
	return t, nil
}

// streamLocked returns the application-created stream name, or the
// service's error for a stream that does not exist (or whose table was
// deleted or replaced since it was made).
func (s *Server) streamLocked(name string) (*wstream, error) {
	ws := s.w.streams[name]
	if ws == nil {
		return nil, storageErr(codes.NotFound, storagepb.StorageError_STREAM_NOT_FOUND, name, "Requested entity was not found. Entity: "+name)
	}
	if t := s.tables[ws.table]; t == nil || t.lineage() != ws.origin {
		return nil, storageErr(codes.NotFound, storagepb.StorageError_TABLE_NOT_FOUND, ws.table,
			fmt.Sprintf("Not found: Table %s of stream %s was deleted or replaced. Entity: %s", ws.table, name, name))
	}
	return ws, nil
}

func (s *Server) writeStreamProto(ws *wstream, t *table, full bool) *storagepb.WriteStream {
	out := &storagepb.WriteStream{
		Name: ws.name, Type: ws.typ, CreateTime: timestamppb.New(ws.created),
		WriteMode: storagepb.WriteStream_INSERT, Location: locationOr(t.Location),
	}
	if !ws.committed.IsZero() {
		out.CommitTime = timestamppb.New(ws.committed)
	}
	if full {
		out.TableSchema = storageSchema(t.Schema)
	}
	return out
}

func storageSchema(schema bigquery.Schema) *storagepb.TableSchema {
	ts, err := adapt.BQSchemaToStorageTableSchema(schema)
	if err != nil {
		return nil
	}
	return ts
}

// CreateWriteStream implements storagepb.BigQueryWriteServer.
func (w *writeService) CreateWriteStream(ctx context.Context, req *storagepb.CreateWriteStreamRequest) (*storagepb.WriteStream, error) {
	s := w.s
	typ := req.GetWriteStream().GetType()
	switch typ {
	case storagepb.WriteStream_COMMITTED, storagepb.WriteStream_PENDING, storagepb.WriteStream_BUFFERED:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "write_stream.type %v is not valid: want COMMITTED, PENDING or BUFFERED", typ)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.w.faults
	fail := f.CreateErrorCode != codes.OK && s.injectLocked(&s.w.createCalls, f.CreateErrorCalls, 0)
	if fail && !f.CreateAfterApply {
		s.w.stats.InjectedCreate++
		return nil, status.Errorf(f.CreateErrorCode, "bqtest: injected CreateWriteStream failure for table %s", req.GetParent())
	}
	t, err := s.writeTableLocked(req.GetParent())
	if err != nil {
		return nil, err
	}
	ws := s.newWriteStreamLocked(req.GetParent(), t, typ)
	s.w.stats.StreamsCreated++
	if fail {
		s.w.stats.InjectedCreate++
		return nil, status.Errorf(f.CreateErrorCode, "bqtest: injected CreateWriteStream failure for table %s, after it made stream %s", req.GetParent(), ws.name)
	}
	return s.writeStreamProto(ws, t, true), nil
}

// GetWriteStream implements storagepb.BigQueryWriteServer. The _default
// stream of a table is COMMITTED and, as the service reports it, has
// neither a create time nor a commit time.
func (w *writeService) GetWriteStream(ctx context.Context, req *storagepb.GetWriteStreamRequest) (*storagepb.WriteStream, error) {
	s := w.s
	full := req.GetView() == storagepb.WriteStreamView_FULL
	s.mu.Lock()
	defer s.mu.Unlock()
	if res := defaultStreamTable(req.GetName()); res != "" {
		t, err := s.writeTableLocked(res)
		if err != nil {
			return nil, err
		}
		out := &storagepb.WriteStream{Name: req.GetName(), Type: storagepb.WriteStream_COMMITTED,
			WriteMode: storagepb.WriteStream_INSERT, Location: locationOr(t.Location)}
		if full {
			out.TableSchema = storageSchema(t.Schema)
		}
		return out, nil
	}
	ws, err := s.streamLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	return s.writeStreamProto(ws, s.tables[ws.table], full), nil
}

// FinalizeWriteStream implements storagepb.BigQueryWriteServer. Finalizing
// a finalized stream again answers its row count again (or, with
// WriteFaults.FinalizeAgainRefused, STREAM_FINALIZED).
func (w *writeService) FinalizeWriteStream(ctx context.Context, req *storagepb.FinalizeWriteStreamRequest) (*storagepb.FinalizeWriteStreamResponse, error) {
	s := w.s
	name := req.GetName()
	if defaultStreamTable(name) != "" {
		return nil, storageErr(codes.InvalidArgument, storagepb.StorageError_INVALID_STREAM_TYPE, name,
			"Cannot finalize the _default stream. Entity: "+name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.w.faults
	fail := f.FinalizeErrorCode != codes.OK && s.injectLocked(&s.w.finalCalls, f.FinalizeErrorCalls, 0)
	if fail && !f.FinalizeAfterApply {
		s.w.stats.InjectedFinalize++
		return nil, status.Errorf(f.FinalizeErrorCode, "bqtest: injected FinalizeWriteStream failure of %s", name)
	}
	ws, err := s.streamLocked(name)
	if err != nil {
		return nil, err
	}
	if ws.finalized && f.FinalizeAgainRefused {
		return nil, storageErr(codes.InvalidArgument, storagepb.StorageError_STREAM_FINALIZED, name, "Stream has been finalized. Entity: "+name)
	}
	if !ws.finalized {
		ws.finalized = true
		s.w.stats.StreamsFinalized++
	}
	if fail {
		s.w.stats.InjectedFinalize++
		return nil, status.Errorf(f.FinalizeErrorCode, "bqtest: injected FinalizeWriteStream failure of %s, after it finalized the stream", name)
	}
	return &storagepb.FinalizeWriteStreamResponse{RowCount: ws.n}, nil
}

// FlushRows implements storagepb.BigQueryWriteServer: the rows of a
// BUFFERED stream up to and including offset become visible.
func (w *writeService) FlushRows(ctx context.Context, req *storagepb.FlushRowsRequest) (*storagepb.FlushRowsResponse, error) {
	s := w.s
	name := req.GetWriteStream()
	if defaultStreamTable(name) != "" {
		return nil, storageErr(codes.InvalidArgument, storagepb.StorageError_INVALID_STREAM_TYPE, name,
			"FlushRows is not supported on the _default stream, which is not BUFFERED. Entity: "+name)
	}
	if req.GetOffset() == nil {
		return nil, status.Errorf(codes.InvalidArgument, "offset is required. Entity: %s", name)
	}
	off := req.GetOffset().GetValue()
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.w.faults
	fail := f.FlushErrorCode != codes.OK && s.injectLocked(&s.w.flushCalls, f.FlushErrorCalls, 0)
	if fail && !f.FlushAfterApply {
		s.w.stats.InjectedFlush++
		return nil, status.Errorf(f.FlushErrorCode, "bqtest: injected FlushRows failure of %s", name)
	}
	ws, err := s.streamLocked(name)
	if err != nil {
		return nil, err
	}
	switch {
	case ws.typ != storagepb.WriteStream_BUFFERED:
		return nil, storageErr(codes.InvalidArgument, storagepb.StorageError_INVALID_STREAM_TYPE, name,
			fmt.Sprintf("FlushRows is only supported on BUFFERED streams; %s is %v. Entity: %s", name, ws.typ, name))
	case ws.finalized:
		return nil, storageErr(codes.InvalidArgument, storagepb.StorageError_STREAM_FINALIZED, name, "Stream has been finalized. Entity: "+name)
	case off < 0 || off >= ws.n:
		return nil, storageErr(codes.OutOfRange, storagepb.StorageError_OFFSET_OUT_OF_RANGE, name,
			fmt.Sprintf("The flush offset %d is beyond the stream, which has %d rows. Entity: %s", off, ws.n, name))
	case off+1 <= ws.flushed:
		return nil, storageErr(codes.AlreadyExists, storagepb.StorageError_OFFSET_ALREADY_EXISTS, name,
			fmt.Sprintf("The stream is already flushed to offset %d, received %d. Entity: %s", ws.flushed-1, off, name))
	}
	k := off + 1 - ws.flushed
	s.appendTableLocked(s.tables[ws.table], ws.rows[:k], ws.part)
	ws.rows = ws.rows[k:]
	ws.flushed = off + 1
	s.w.stats.Flushes++
	if fail {
		s.w.stats.InjectedFlush++
		return nil, status.Errorf(f.FlushErrorCode, "bqtest: injected FlushRows failure of %s, after it flushed to offset %d", name, off)
	}
	return &storagepb.FlushRowsResponse{Offset: off}, nil
}

// injectLocked reports whether the next call of a kind counted by calls
// fails, by the fault's certain count and share.
func (s *Server) injectLocked(calls *int, certain int, share float64) bool {
	*calls++
	return *calls <= certain || (share > 0 && s.rnd.Float64() < share)
}

// BatchCommitWriteStreams implements storagepb.BigQueryWriteServer: all
// streams of the request become visible together, or none. Each must be a
// finalized, not yet committed PENDING stream of the parent table; each
// one that is not is reported in stream_errors, and then nothing is
// committed. A stream named twice is committed once.
func (w *writeService) BatchCommitWriteStreams(ctx context.Context, req *storagepb.BatchCommitWriteStreamsRequest) (*storagepb.BatchCommitWriteStreamsResponse, error) {
	s := w.s
	s.mu.Lock()
	f := s.w.faults
	fail := s.injectLocked(&s.w.commitCalls, f.CommitUnavailableCalls, f.CommitUnavailableShare)
	call := s.w.commitCalls
	s.mu.Unlock()
	if f.OnCommit != nil {
		f.OnCommit(ctx, call, false)
		if err := ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
	}
	if f.CommitDelay > 0 {
		select {
		case <-time.After(f.CommitDelay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	injected := func() error {
		s.w.stats.InjectedCommit++
		return status.Errorf(codes.Unavailable, "bqtest: injected BatchCommitWriteStreams failure for table %s", req.GetParent())
	}
	if len(req.GetWriteStreams()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "write_streams is empty. Entity: %s", req.GetParent())
	}
	resp, applied, err := w.applyCommit(req, f, fail, injected)
	if applied && f.OnCommit != nil {
		f.OnCommit(ctx, call, true)
	}
	return resp, err
}

// applyCommit acts on a BatchCommitWriteStreams request, under Server.mu,
// and reports whether it committed the streams.
func (w *writeService) applyCommit(req *storagepb.BatchCommitWriteStreamsRequest, f WriteFaults, fail bool, injected func() error) (*storagepb.BatchCommitWriteStreamsResponse, bool, error) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if fail && !f.CommitAfterApply {
		return nil, false, injected()
	}
	t, err := s.writeTableLocked(req.GetParent())
	if err != nil {
		return nil, false, err
	}
	var streams []*wstream
	var errs []*storagepb.StorageError
	seen := map[string]bool{}
	for _, name := range req.GetWriteStreams() {
		if seen[name] {
			continue
		}
		seen[name] = true
		serr := func(c storagepb.StorageError_StorageErrorCode, msg string) {
			errs = append(errs, &storagepb.StorageError{Code: c, Entity: name, ErrorMessage: msg + " Entity: " + name})
		}
		ws := s.w.streams[name]
		switch {
		case ws == nil || ws.table != t.name:
			serr(storagepb.StorageError_STREAM_NOT_FOUND, fmt.Sprintf("Stream %s of table %s was not found.", name, req.GetParent()))
		case ws.origin != t.lineage():
			serr(storagepb.StorageError_TABLE_NOT_FOUND, fmt.Sprintf("The table of stream %s was deleted or replaced since the stream was made.", name))
		case ws.typ != storagepb.WriteStream_PENDING:
			serr(storagepb.StorageError_INVALID_STREAM_TYPE, fmt.Sprintf("Stream %s is %v; only PENDING streams are committed.", name, ws.typ))
		case !ws.committed.IsZero():
			serr(storagepb.StorageError_STREAM_ALREADY_COMMITTED, fmt.Sprintf("Stream %s is already committed.", name))
		case !ws.finalized:
			serr(storagepb.StorageError_INVALID_STREAM_STATE, fmt.Sprintf("Stream %s is not finalized.", name))
		default:
			streams = append(streams, ws)
		}
	}
	if len(errs) > 0 {
		s.w.stats.CommitErrors++
		return &storagepb.BatchCommitWriteStreamsResponse{StreamErrors: errs}, false, nil
	}
	now := time.Now()
	for _, ws := range streams {
		t = s.appendTableLocked(t, ws.rows, ws.part)
		ws.rows, ws.committed = nil, now
	}
	s.w.stats.Commits++
	s.w.stats.StreamsCommitted += len(streams)
	if fail {
		return nil, true, injected()
	}
	return &storagepb.BatchCommitWriteStreamsResponse{CommitTime: timestamppb.New(now)}, true, nil
}
