package bqtest

import (
	"errors"
	"fmt"
	"io"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// appendConn is the state of one AppendRows RPC: the stream and writer
// schema its last requests named, which later requests may omit.
type appendConn struct {
	stream   string // write stream, as the requests name it
	table    string // its table's resource name
	schema   *writerSchema
	answered int
}

// rowErrorsMessage is the service's message for a request refused for its
// rows.
const rowErrorsMessage = "Errors found while processing rows. Please refer to the row_errors field for details. The list may not be complete because of the size limitations."

// AppendRows implements storagepb.BigQueryWriteServer. Requests are
// answered in order, one response each. Errors about one request (offsets,
// rows, a finalized stream, a schema that does not fit the table) come in
// the response's error field and the connection stays open, as with the
// service; only a first request that names no stream ends the RPC.
func (w *writeService) AppendRows(srv storagepb.BigQueryWrite_AppendRowsServer) error {
	s := w.s
	s.mu.Lock()
	s.w.stats.AppendConnections++
	s.w.openConns++
	s.w.stats.AppendConnsPeak = max(s.w.stats.AppendConnsPeak, s.w.openConns)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.w.openConns--
		s.mu.Unlock()
	}()
	conn := &appendConn{}
	for {
		req, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp, end := s.appendRequest(conn, req)
		if end != nil {
			return end
		}
		if err := srv.Send(resp); err != nil {
			return err
		}
		conn.answered++
		s.mu.Lock()
		closeNow := s.w.faults.CloseAfterRequests > 0 && conn.answered >= s.w.faults.CloseAfterRequests
		if closeNow {
			s.w.stats.InjectedCloses++
		}
		s.mu.Unlock()
		if closeNow {
			return nil
		}
	}
}

// appendRequest answers one request, or returns the status that ends the
// RPC. A fault WriteFaults injects strikes where the rows would be
// written: a request the server refuses anyway is refused as usual.
func (s *Server) appendRequest(conn *appendConn, req *storagepb.AppendRowsRequest) (*storagepb.AppendRowsResponse, error) {
	s.mu.Lock()
	f := s.w.faults
	s.w.hookCalls++
	hookCall := s.w.hookCalls
	s.mu.Unlock()
	if f.OnAppend != nil {
		if err := f.OnAppend(hookCall); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	s.w.stats.Appends++
	if off := req.GetOffset(); off != nil {
		stream := req.GetWriteStream()
		if stream == "" {
			stream = conn.stream
		}
		if s.w.attempts == nil {
			s.w.attempts = map[AppendAt]int{}
		}
		s.w.attempts[AppendAt{stream, off.GetValue()}]++
	}
	fail := s.injectLocked(&s.w.appendCalls, f.AppendUnavailableCalls, f.AppendUnavailableShare)
	permanent := f.AppendErrorCode != codes.OK && s.w.appendCalls > f.AppendErrorAfter
	if permanent {
		s.w.stats.InjectedFailures++
	}
	s.mu.Unlock()
	if permanent {
		stream := req.GetWriteStream()
		if stream == "" {
			stream = conn.stream
		}
		if stream == "" {
			return nil, status.Error(codes.InvalidArgument, "write_stream must be set in the first AppendRowsRequest of a connection")
		}
		conn.stream = stream
		return errorResponse(stream, status.New(f.AppendErrorCode, f.AppendErrorMessage+" Entity: "+stream)), nil
	}
	resp, outcome, end := s.append(conn, req, fail && !f.AfterWrite)
	if end != nil {
		return nil, end
	}
	if outcome == refused {
		s.mu.Lock()
		s.w.stats.AppendErrors++
		s.mu.Unlock()
		return resp, nil
	}
	if outcome == written && !fail {
		return resp, nil
	}
	s.mu.Lock()
	s.w.stats.InjectedFailures++
	s.mu.Unlock()
	st := status.New(codes.Unavailable, "bqtest: injected AppendRows failure. Entity: "+resp.GetWriteStream())
	if f.InBand {
		return errorResponse(resp.GetWriteStream(), st), nil
	}
	return nil, st.Err()
}

// The outcomes of an append.
const (
	refused = iota // answered with an error
	written        // the rows were written
	dropped        // not written, for a fault injected before the write
)

func errorResponse(stream string, st *status.Status) *storagepb.AppendRowsResponse {
	return &storagepb.AppendRowsResponse{Response: &storagepb.AppendRowsResponse_Error{Error: st.Proto()}, WriteStream: stream}
}

// append processes one request: it returns the response and the outcome,
// or the status that ends the RPC. With drop, a request that would be
// written is not (its response is then the one it would have had).
func (s *Server) append(conn *appendConn, req *storagepb.AppendRowsRequest, drop bool) (*storagepb.AppendRowsResponse, int, error) {
	name := req.GetWriteStream()
	if name == "" {
		if conn.stream == "" {
			return nil, refused, status.Error(codes.InvalidArgument, "write_stream must be set in the first AppendRowsRequest of a connection")
		}
		name = conn.stream
	}
	fail := func(c codes.Code, msg string) (*storagepb.AppendRowsResponse, int, error) {
		return errorResponse(name, status.New(c, msg+" Entity: "+name)), refused, nil
	}
	failStatus := func(st *status.Status) (*storagepb.AppendRowsResponse, int, error) {
		return errorResponse(name, st), refused, nil
	}

	// Resolve the stream and its table.
	res := defaultStreamTable(name)
	s.mu.Lock()
	var ws *wstream
	var err error
	if res == "" {
		if ws, err = s.streamLocked(name); err == nil {
			res = ws.table
		}
	}
	var t *table
	part := ""
	if err == nil {
		t, err = s.writeTableLocked(res)
		if ws != nil {
			part = ws.part
		} else {
			res, part = splitDecorator(res)
		}
	}
	s.mu.Unlock()
	if err != nil {
		return failStatus(status.Convert(err))
	}

	// The writer schema: the request's, or the connection's for the same
	// table.
	rows := req.GetProtoRows()
	if rows == nil {
		if req.GetArrowRows() != nil {
			return fail(codes.InvalidArgument, "bqtest serves proto rows only, not Arrow rows.")
		}
		return fail(codes.InvalidArgument, "The request has no rows (proto_rows is not set).")
	}
	if d := rows.GetWriterSchema().GetProtoDescriptor(); d != nil {
		ws, err := s.writerSchemaFor(d)
		if err != nil {
			conn.schema = nil
			return fail(codes.InvalidArgument, fmt.Sprintf("Invalid proto schema: %v.", err))
		}
		conn.schema = ws
	} else if conn.schema == nil || (conn.table != "" && conn.table != res) {
		return fail(codes.InvalidArgument, "The writer schema (proto_rows.writer_schema) must be given in the first request of a connection and when the destination table changes.")
	}
	conn.stream, conn.table = name, res

	if n := proto.Size(req); n > maxAppendRequest {
		return fail(codes.InvalidArgument, fmt.Sprintf("AppendRows request too large: %d limit %d", n, maxAppendRequest))
	}
	if len(rows.GetRows().GetSerializedRows()) == 0 {
		return fail(codes.InvalidArgument, "The request has no rows.")
	}
	for col, mvi := range req.GetMissingValueInterpretations() {
		if mvi == storagepb.AppendRowsRequest_DEFAULT_VALUE {
			return fail(codes.InvalidArgument, fmt.Sprintf("bqtest does not serve missing_value_interpretations DEFAULT_VALUE (column %s).", col))
		}
	}
	if req.GetDefaultMissingValueInterpretation() == storagepb.AppendRowsRequest_DEFAULT_VALUE {
		return fail(codes.InvalidArgument, "bqtest does not serve default_missing_value_interpretation DEFAULT_VALUE.")
	}
	plan, st := conn.schema.plan(t, name)
	if st != nil {
		return failStatus(st)
	}
	if plan.cdc != nil {
		if st := checkCDC(t, ws, name); st != nil {
			return failStatus(st)
		}
	}

	// Decode and check the rows outside the lock.
	decoded, changes, rowErrs := plan.decodeRows(rows.GetRows().GetSerializedRows())
	if rowErrs == nil && part != "" {
		rowErrs = outsidePartition(&t.Table, decoded, part)
	}
	s.mu.Lock()
	refuse, rowErrsFirst := s.w.faults.RefuseRow, s.w.faults.RowErrorsFirst
	s.mu.Unlock()
	if rowErrs == nil && refuse != nil {
		rowErrs = refuseChosen(res, decoded, refuse)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	rowErrors := func() (*storagepb.AppendRowsResponse, int, error) {
		s.w.stats.RowErrors += len(rowErrs)
		resp := errorResponse(name, status.New(codes.InvalidArgument, rowErrorsMessage+" Entity: "+name))
		resp.RowErrors = rowErrs
		return resp, refused, nil
	}
	if len(rowErrs) > 0 && rowErrsFirst {
		return rowErrors()
	}
	cur := s.tables[res]
	if !sameTable(cur, t) {
		return fail(codes.NotFound, "Not found: Table "+res+" was deleted or replaced.")
	}
	off := req.GetOffset()
	if ws == nil {
		if off != nil {
			return fail(codes.InvalidArgument, "Offset is not allowed on the _default stream.")
		}
	} else {
		if ws.finalized || (ws.typ == storagepb.WriteStream_PENDING && !ws.committed.IsZero()) {
			return failStatus(storageStatus(codes.InvalidArgument, storagepb.StorageError_STREAM_FINALIZED, name, "Stream has been finalized. Entity: "+name))
		}
		if off != nil && off.GetValue() < ws.n {
			msg := fmt.Sprintf("The offset is within stream, expected offset %d, received %d. Entity: %s", ws.n, off.GetValue(), name)
			return failStatus(storageStatus(codes.AlreadyExists, storagepb.StorageError_OFFSET_ALREADY_EXISTS, name, msg))
		}
		if off != nil && off.GetValue() > ws.n {
			msg := fmt.Sprintf("The offset is beyond stream, expected offset %d, received %d. Entity: %s", ws.n, off.GetValue(), name)
			return failStatus(storageStatus(codes.OutOfRange, storagepb.StorageError_OFFSET_OUT_OF_RANGE, name, msg))
		}
	}
	if len(rowErrs) > 0 {
		return rowErrors()
	}
	resp := &storagepb.AppendRowsResponse{WriteStream: name}
	if drop {
		return resp, dropped, nil
	}
	result := &storagepb.AppendRowsResponse_AppendResult{}
	resp.Response = &storagepb.AppendRowsResponse_AppendResult_{AppendResult: result}
	if changes != nil {
		s.applyChangesLocked(cur, decoded, changes)
	} else if ws == nil || ws.typ == storagepb.WriteStream_COMMITTED {
		s.appendTableLocked(cur, decoded, part)
	} else {
		ws.rows = append(ws.rows, decoded...)
	}
	if ws != nil {
		result.Offset = wrapperspb.Int64(ws.n)
		ws.n += int64(len(decoded))
	}
	s.w.stats.AppendsWritten++
	s.w.stats.RowsAppended += int64(len(decoded))
	for _, b := range rows.GetRows().GetSerializedRows() {
		s.w.stats.BytesAppended += int64(len(b))
	}
	return resp, written, nil
}

// outsidePartition refuses, in row_errors, the rows of a write into the
// partition part of a table partitioned by a column that do not belong to
// it: the service requires the decorator to match the data.
func outsidePartition(t *Table, rows [][]bigquery.Value, part string) []*storagepb.RowError {
	if t.ingestionTime() {
		return nil
	}
	var errs []*storagepb.RowError
	for i, row := range rows {
		if got := t.partitionOf(row, ""); got != part {
			errs = append(errs, &storagepb.RowError{Index: int64(i), Code: storagepb.RowError_FIELDS_ERROR,
				Message: fmt.Sprintf("The row belongs to partition %s, not to partition %s that the stream writes to.", got, part)})
		}
	}
	return errs
}

// refuseChosen refuses, in row_errors, the rows of table res that
// WriteFaults.RefuseRow refuses.
func refuseChosen(res string, rows [][]bigquery.Value, refuse func(string, []bigquery.Value) string) []*storagepb.RowError {
	var errs []*storagepb.RowError
	for i, row := range rows {
		if msg := refuse(res, row); msg != "" {
			errs = append(errs, &storagepb.RowError{Index: int64(i), Code: storagepb.RowError_FIELDS_ERROR, Message: msg})
		}
	}
	return errs
}
