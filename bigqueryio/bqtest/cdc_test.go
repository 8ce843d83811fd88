package bqtest_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

var cdcSchema = bigquery.Schema{
	{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
	{Name: "name", Type: bigquery.StringFieldType},
}

// cdcMessage is a writer schema of cdcSchema with CDC's pseudo-columns.
func cdcMessage(t *testing.T) (protoreflect.MessageDescriptor, *descriptorpb.DescriptorProto) {
	const I, S = descriptorpb.FieldDescriptorProto_TYPE_INT64, descriptorpb.FieldDescriptorProto_TYPE_STRING
	return message(t, "cdc", field("id", 1, I), field("name", 2, S), field("_CHANGE_TYPE", 3, S), field("_CHANGE_SEQUENCE_NUMBER", 4, S))
}

// cdcRow is a change: typ UPSERT or DELETE, seq "" for none.
func cdcRow(t *testing.T, md protoreflect.MessageDescriptor, id int, name, typ, seq string) []byte {
	set := map[string]any{"id": id, "_CHANGE_TYPE": typ}
	if name != "" {
		set["name"] = name
	}
	if seq != "" {
		set["_CHANGE_SEQUENCE_NUMBER"] = seq
	}
	return encode(t, md, set)
}

// rowsText is a table's rows as sorted "id=name" text.
func rowsText(rows [][]bigquery.Value) string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprintf("%v=%v", r[0], r[1])
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestCDCAppliesByKey appends CDC changes to the _default stream of a
// table with a primary key, each append answered before the next: they
// are applied by key, a lower sequence number than the key's last ignored
// (a delete's included), an equal one applied over the earlier, changes
// without one in the order they come, sections compared left to right as
// numbers. The official client reads back the applied state.
func TestCDCAppliesByKey(t *testing.T) {
	e := newWriteEnv(t)
	if err := e.srv.AddTable("proj.ds.cdc", bqtest.Table{Schema: cdcSchema, PrimaryKey: []string{"id"},
		Rows: [][]bigquery.Value{{int64(1), "a"}, {int64(2), "b"}, {int64(6), "six"}}}); err != nil {
		t.Fatal(err)
	}
	md, dp := cdcMessage(t)
	ms := e.stream(t, "projects/proj/datasets/ds/tables/cdc", managedwriter.DefaultStream, dp)
	steps := [][][]byte{
		{cdcRow(t, md, 1, "a2", "UPSERT", "5")},
		{cdcRow(t, md, 1, "old", "UPSERT", "4")},   // below 5: ignored
		{cdcRow(t, md, 1, "eq", "UPSERT", "5")},    // equal: the later wins
		{cdcRow(t, md, 2, "", "DELETE", "A")},      // 10
		{cdcRow(t, md, 2, "stale", "UPSERT", "9")}, // below the delete's: ignored
		{cdcRow(t, md, 3, "new", "UPSERT", ""), cdcRow(t, md, 3, "newer", "upsert", "")},
		{cdcRow(t, md, 4, "x", "UPSERT", "FFF/ABC")},
		{cdcRow(t, md, 4, "y", "UPSERT", "ABC")},       // 2748 < 4095/2748
		{cdcRow(t, md, 4, "z", "UPSERT", "fff/abc/0")}, // a longer number past its prefix
		{cdcRow(t, md, 5, "late", "UPSERT", "2"), cdcRow(t, md, 5, "early", "UPSERT", "1")},
		{cdcRow(t, md, 6, "", "DELETE", "")},
		{cdcRow(t, md, 7, "gone", "UPSERT", "1"), cdcRow(t, md, 7, "", "DELETE", "2"), cdcRow(t, md, 7, "back", "UPSERT", "3")},
	}
	for i, rows := range steps {
		r, err := ms.AppendRows(e.ctx, rows)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetResult(e.ctx); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	const want = "1=eq 3=newer 4=z 5=late 7=back"
	got, err := e.srv.TableRows("proj.ds.cdc")
	if err != nil {
		t.Fatal(err)
	}
	if rowsText(got) != want {
		t.Errorf("table %s, want %s", rowsText(got), want)
	}
	if back := rowsText(e.read(t, "cdc")); back != want {
		t.Errorf("read back %s, want %s", back, want)
	}
	md2, err := e.bq.DatasetInProject("proj", "ds").Table("cdc").Metadata(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md2.NumRows != 5 {
		t.Errorf("tables.get numRows %d, want 5", md2.NumRows)
	}
}

// TestCDCRefused: CDC rows on a table without a primary key, or on a
// stream other than _default, are refused with nothing written; a change
// type or sequence number the service does not take is a row error, and
// then none of the request's rows is applied.
func TestCDCRefused(t *testing.T) {
	e := newWriteEnv(t)
	md, dp := cdcMessage(t)
	res := e.table(t, "nokey", cdcSchema)
	ms := e.stream(t, res, managedwriter.DefaultStream, dp)
	r, err := ms.AppendRows(e.ctx, [][]byte{cdcRow(t, md, 1, "a", "UPSERT", "1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetResult(e.ctx); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "no primary key") {
		t.Errorf("CDC on a table without a primary key: %v", err)
	}

	if err := e.srv.AddTable("proj.ds.keyed", bqtest.Table{Schema: cdcSchema, PrimaryKey: []string{"id"}}); err != nil {
		t.Fatal(err)
	}
	keyed := "projects/proj/datasets/ds/tables/keyed"
	pending := e.stream(t, keyed, managedwriter.PendingStream, dp)
	r, err = pending.AppendRows(e.ctx, [][]byte{cdcRow(t, md, 1, "a", "UPSERT", "1")}, managedwriter.WithOffset(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetResult(e.ctx); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "only accepted on the _default stream") {
		t.Errorf("CDC on a PENDING stream: %v", err)
	}

	def := e.stream(t, keyed, managedwriter.DefaultStream, dp)
	rows := [][]byte{
		cdcRow(t, md, 1, "ok", "UPSERT", "1"),
		cdcRow(t, md, 2, "x", "MERGE", ""),
		cdcRow(t, md, 3, "x", "UPSERT", "G1"),
		cdcRow(t, md, 4, "x", "UPSERT", "1/2/3/4/5"),
		cdcRow(t, md, 5, "x", "UPSERT", "11111111111111111"),
		encode(t, md, map[string]any{"id": 6}), // no _CHANGE_TYPE
	}
	r, err = def.AppendRows(e.ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := r.FullResponse(e.ctx)
	if err == nil {
		t.Fatal("bad changes were applied")
	}
	want := map[int64]string{1: "Invalid _CHANGE_TYPE", 2: "Invalid _CHANGE_SEQUENCE_NUMBER", 3: "Invalid _CHANGE_SEQUENCE_NUMBER",
		4: "Invalid _CHANGE_SEQUENCE_NUMBER", 5: "no _CHANGE_TYPE"}
	if len(resp.GetRowErrors()) != len(want) {
		t.Fatalf("row errors %v", resp.GetRowErrors())
	}
	for _, re := range resp.GetRowErrors() {
		if re.GetCode() != storagepb.RowError_FIELDS_ERROR || !strings.Contains(re.GetMessage(), want[re.GetIndex()]) {
			t.Errorf("row %d: %q, want %q", re.GetIndex(), re.GetMessage(), want[re.GetIndex()])
		}
	}
	for _, name := range []string{"proj.ds.nokey", "proj.ds.keyed"} {
		if got, _ := e.srv.TableRows(name); len(got) != 0 {
			t.Errorf("%s: %d rows written", name, len(got))
		}
	}
}

// TestCDCPrimaryKeyREST: tables.insert takes a primary key and tables.get
// reports it; a key the service refuses is refused.
func TestCDCPrimaryKeyREST(t *testing.T) {
	e := newWriteEnv(t)
	e.srv.AddDataset("proj", "ds", "")
	schema := append(bigquery.Schema{{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}}},
		{Name: "tags", Type: bigquery.StringFieldType, Repeated: true}}, cdcSchema...)
	ds := e.bq.DatasetInProject("proj", "ds")
	pk := func(cols ...string) *bigquery.TableMetadata {
		return &bigquery.TableMetadata{Schema: schema, TableConstraints: &bigquery.TableConstraints{PrimaryKey: &bigquery.PrimaryKey{Columns: cols}}}
	}
	if err := ds.Table("made").Create(e.ctx, pk("id", "name")); err != nil {
		t.Fatal(err)
	}
	md, err := ds.Table("made").Metadata(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := md.TableConstraints; c == nil || c.PrimaryKey == nil || strings.Join(c.PrimaryKey.Columns, ",") != "id,name" {
		t.Errorf("tables.get constraints %+v", c)
	}
	for cols, msg := range map[string]string{"nope": "not a column", "rec": "RECORD", "tags": "REPEATED", "id,id": "twice"} {
		err := ds.Table("bad").Create(e.ctx, pk(strings.Split(cols, ",")...))
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("primary key %s: %v, want %q", cols, err, msg)
		}
	}
}
