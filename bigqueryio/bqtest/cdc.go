package bqtest

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	bq "google.golang.org/api/bigquery/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// CDC (change data capture): rows appended to a table's _default stream
// with the pseudo-column _CHANGE_TYPE (UPSERT or DELETE) and optionally
// _CHANGE_SEQUENCE_NUMBER are changes to the row with the same primary
// key, applied as they are written; see the package doc.

// maxPrimaryKey is the most columns of a primary key.
const maxPrimaryKey = 16

// cdcFields are the pseudo-columns a writer schema declares.
type cdcFields struct {
	typ, seq protoreflect.FieldDescriptor // seq may be nil
}

// takeChangeField takes fd as a pseudo-column of p (a table's top-level
// plan) if it is one, and reports whether it was.
func (p *rowPlan) takeChangeField(fd protoreflect.FieldDescriptor) (bool, error) {
	col := columnName(fd)
	isType, isSeq := strings.EqualFold(col, "_CHANGE_TYPE"), strings.EqualFold(col, "_CHANGE_SEQUENCE_NUMBER")
	if !isType && !isSeq {
		return false, nil
	}
	if fd.Kind() != protoreflect.StringKind || fd.Cardinality() == protoreflect.Repeated {
		return true, fmt.Errorf("The pseudo-column %s must be a proto string field, not %v %v.", col, fd.Cardinality(), fd.Kind())
	}
	if p.cdc == nil {
		p.cdc = &cdcFields{}
	}
	if isType {
		p.cdc.typ = fd
	} else {
		p.cdc.seq = fd
	}
	return true, nil
}

// change is one row's CDC pseudo-columns.
type change struct {
	del bool
	seq []uint64 // nil: no sequence number
}

// decodeRows decodes serialized rows as decode does and, for a writer
// schema with CDC's pseudo-columns, each row's change (nil otherwise).
func (p *rowPlan) decodeRows(rows [][]byte) ([][]bigquery.Value, []change, []*storagepb.RowError) {
	if p.cdc == nil {
		decoded, errs := p.decode(rows)
		return decoded, nil, errs
	}
	decoded, errs := p.decode(rows)
	changes := make([]change, len(rows))
	msg := dynamicpb.NewMessage(p.md)
	for i, b := range rows {
		err := proto.Unmarshal(b, msg)
		if err == nil {
			changes[i], err = p.cdc.change(msg)
		}
		if err != nil {
			errs = append(errs, &storagepb.RowError{Index: int64(i), Code: storagepb.RowError_FIELDS_ERROR, Message: err.Error()})
		}
	}
	if errs != nil {
		return nil, nil, errs
	}
	return decoded, changes, nil
}

// change reads a row's pseudo-columns.
func (c *cdcFields) change(m *dynamicpb.Message) (change, error) {
	if c.typ == nil || !m.Has(c.typ) {
		return change{}, fmt.Errorf("The row has no _CHANGE_TYPE: a row of a CDC write is an UPSERT or a DELETE.")
	}
	var ch change
	switch t := m.Get(c.typ).String(); strings.ToUpper(t) {
	case "UPSERT":
	case "DELETE":
		ch.del = true
	default:
		return change{}, fmt.Errorf("Invalid _CHANGE_TYPE %q: want UPSERT or DELETE.", t)
	}
	if c.seq != nil && m.Has(c.seq) {
		s := m.Get(c.seq).String()
		seq, ok := parseSequence(s)
		if !ok {
			return change{}, fmt.Errorf("Invalid _CHANGE_SEQUENCE_NUMBER %q: want 1 to 4 sections of 1 to 16 hexadecimal digits separated by '/'.", s)
		}
		ch.seq = seq
	}
	return ch, nil
}

// parseSequence parses a _CHANGE_SEQUENCE_NUMBER: 1 to 4 sections of 1 to
// 16 hexadecimal digits, separated by '/'.
func parseSequence(s string) ([]uint64, bool) {
	parts := strings.Split(s, "/")
	if len(parts) > 4 {
		return nil, false
	}
	out := make([]uint64, len(parts))
	for i, p := range parts {
		if len(p) == 0 || len(p) > 16 || strings.HasPrefix(p, "+") {
			return nil, false
		}
		v, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

// compareSequence compares sequence numbers section by section, left to
// right, as unsigned numbers; a number that is a prefix of the other is
// the smaller.
func compareSequence(a, b []uint64) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		switch {
		case a[i] < b[i]:
			return -1
		case a[i] > b[i]:
			return 1
		}
	}
	return len(a) - len(b)
}

// checkCDC returns the status the service refuses CDC rows with on stream
// name of table t (ws nil for its _default stream), or nil.
func checkCDC(t *table, ws *wstream, name string) *status.Status {
	switch {
	case ws != nil:
		return status.New(codes.InvalidArgument, fmt.Sprintf("CDC rows (_CHANGE_TYPE) are only accepted on the _default stream, not on the %v stream %s. Entity: %s", ws.typ, name, name))
	case len(t.PrimaryKey) == 0:
		return status.New(codes.InvalidArgument, fmt.Sprintf("The table %s has no primary key: CDC rows (_CHANGE_TYPE) need a table with a PRIMARY KEY. Entity: %s", t.name, name))
	case t.ingestionTime():
		return status.New(codes.Unimplemented, fmt.Sprintf("bqtest does not apply CDC rows to a table partitioned by ingestion time (%s). Entity: %s", t.name, name))
	}
	return nil
}

// cdcState is what a table's lineage knows of the keys CDC changed: the
// sequence number each key was last changed by, deletes included.
type cdcState struct {
	last map[string]cdcKey
}

type cdcKey struct {
	seq []uint64 // nil: changed without one
}

// applyChangesLocked applies CDC changes (rows in order, each with its
// change) to t, the current version of its name, by primary key, and
// returns the new version. A change whose sequence number is below the
// one its key was last changed by is ignored; otherwise (equal, or either
// without one) it is applied, later over earlier.
func (s *Server) applyChangesLocked(t *table, rows [][]bigquery.Value, changes []change) *table {
	if s.w.cdc == nil {
		s.w.cdc = map[*table]*cdcState{}
	}
	st := s.w.cdc[t.lineage()]
	if st == nil {
		st = &cdcState{last: map[string]cdcKey{}}
		s.w.cdc[t.lineage()] = st
	}
	keyCols := make([]int, len(t.PrimaryKey))
	for i, col := range t.PrimaryKey {
		keyCols[i] = columnIndex(t.Schema, col)
	}
	all := make([][]bigquery.Value, len(t.Rows), len(t.Rows)+len(rows))
	copy(all, t.Rows)
	at := make(map[string]int, len(all))
	for i, r := range all {
		at[primaryKeyOf(r, keyCols)] = i
	}
	for i, r := range rows {
		if len(r) < len(t.Schema) { // written before columns were added
			r = append(append(make([]bigquery.Value, 0, len(t.Schema)), r...), make([]bigquery.Value, len(t.Schema)-len(r))...)
		}
		ch := changes[i]
		k := primaryKeyOf(r, keyCols)
		if prev, ok := st.last[k]; ok && ch.seq != nil && prev.seq != nil && compareSequence(ch.seq, prev.seq) < 0 {
			continue // older than what the key holds
		}
		st.last[k] = cdcKey{seq: ch.seq}
		j, there := at[k]
		switch {
		case ch.del && there:
			all[j] = nil
			delete(at, k)
		case ch.del:
		case there:
			all[j] = r
		default:
			at[k] = len(all)
			all = append(all, r)
		}
	}
	kept := all[:0]
	for _, r := range all {
		if r != nil {
			kept = append(kept, r)
		}
	}
	nt := &table{name: t.name, Table: t.Table, rowBytes: t.rowBytes, expires: t.expires, origin: t.lineage()}
	nt.Rows = kept
	if nt.rowBytes == 0 {
		nt.rowBytes = rowBytesOf(t.Schema, rows)
	}
	s.tables[t.name] = nt
	return nt
}

// rowBytesOf estimates the bytes of a row from the first (up to 100) of
// rows, at least one.
func rowBytesOf(schema bigquery.Schema, rows [][]bigquery.Value) int64 {
	n := min(len(rows), 100)
	if n == 0 {
		return 0
	}
	var enc avroEncoder
	for _, r := range rows[:n] {
		enc.row(schema, r)
	}
	return int64(len(enc.buf)/n) + 1
}

// primaryKeyOf is the text of a row's primary key values, typed.
func primaryKeyOf(r []bigquery.Value, keyCols []int) string {
	var b strings.Builder
	for _, c := range keyCols {
		v := r[c]
		if rat, ok := v.(*big.Rat); ok {
			v = rat.RatString()
		}
		fmt.Fprintf(&b, "%T:%v\x00", v, v)
	}
	return b.String()
}

// checkPrimaryKey refuses a table's primary key the service refuses.
func checkPrimaryKey(t *Table) error {
	if t.PrimaryKey == nil {
		return nil
	}
	if len(t.PrimaryKey) == 0 || len(t.PrimaryKey) > maxPrimaryKey {
		return fmt.Errorf("A primary key has 1 to %d columns, not %d", maxPrimaryKey, len(t.PrimaryKey))
	}
	seen := map[string]bool{}
	for _, col := range t.PrimaryKey {
		f := topColumn(t.Schema, col)
		switch {
		case f == nil:
			return fmt.Errorf("The primary key column %s is not a column of the table", col)
		case seen[strings.ToLower(col)]:
			return fmt.Errorf("The primary key names column %s twice", col)
		case f.Repeated || f.Type == bigquery.RecordFieldType:
			return fmt.Errorf("The primary key column %s is %s%s, which a primary key cannot hold", col, repeatedWord(f), f.Type)
		}
		seen[strings.ToLower(col)] = true
	}
	return nil
}

// primaryKeyFromREST takes a tables.insert request's primary key.
func primaryKeyFromREST(in *bq.Table, t *Table) {
	if c := in.TableConstraints; c != nil && c.PrimaryKey != nil {
		t.PrimaryKey = append([]string{}, c.PrimaryKey.Columns...)
	}
}

// restPrimaryKey adds t's primary key to a tables.get answer.
func restPrimaryKey(out map[string]any, t *Table) {
	if len(t.PrimaryKey) > 0 {
		out["tableConstraints"] = &bq.TableConstraints{PrimaryKey: &bq.TableConstraintsPrimaryKey{Columns: t.PrimaryKey}}
	}
}
