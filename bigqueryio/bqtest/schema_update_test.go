package bqtest_test

import (
	"net/http"
	"testing"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
)

// TestSchemaUpdate: tables.patch through the official client's Update adds
// NULLABLE columns at the end and relaxes REQUIRED to NULLABLE; rows
// already there, and rows of a PENDING stream appended before the patch
// and committed after it, read NULL in the new column; a writer schema
// with the new column is taken after the patch. Removing or retyping a
// column, adding a REQUIRED one or tightening a mode is HTTP 400.
func TestSchemaUpdate(t *testing.T) {
	e := newWriteEnv(t)
	res := e.table(t, "grow", simpleSchema)
	md, dp := schemaDescriptor(t, simpleSchema)
	if r, err := e.stream(t, res, managedwriter.DefaultStream, dp).AppendRows(e.ctx, simpleRows(t, md, 0, 2)); err != nil {
		t.Fatal(err)
	} else if _, err := r.GetResult(e.ctx); err != nil {
		t.Fatal(err)
	}
	pending := pendingStream(t, e, res, md, dp, 2, 1, true)
	tbl := e.bq.DatasetInProject("proj", "ds").Table("grow")
	meta, err := tbl.Metadata(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	grown := bigquery.Schema{
		{Name: "name", Type: bigquery.StringFieldType}, // relaxed
		{Name: "value", Type: bigquery.IntegerFieldType},
		{Name: "note", Type: bigquery.StringFieldType}, // added
	}
	if _, err := tbl.Update(e.ctx, bigquery.TableMetadataToUpdate{Schema: grown}, meta.ETag); err != nil {
		t.Fatal(err)
	}
	if meta, err = tbl.Metadata(e.ctx); err != nil || len(meta.Schema) != 3 || meta.Schema[0].Required {
		t.Fatalf("schema after the patch: %v %v", meta.Schema, err)
	}
	if resp, err := e.mw.BatchCommitWriteStreams(e.ctx, &storagepb.BatchCommitWriteStreamsRequest{Parent: res, WriteStreams: []string{pending.StreamName()}}); err != nil || len(resp.GetStreamErrors()) > 0 {
		t.Fatalf("commit: %v %v", resp, err)
	}
	md3, dp3 := schemaDescriptor(t, grown)
	ms := e.stream(t, res, managedwriter.DefaultStream, dp3)
	if r, err := ms.AppendRows(e.ctx, [][]byte{encode(t, md3, map[string]any{"value": 9, "note": "new"})}); err != nil {
		t.Fatal(err)
	} else if _, err := r.GetResult(e.ctx); err != nil {
		t.Fatal(err)
	}
	rows := e.read(t, "grow")
	want := [][]bigquery.Value{{"r0", int64(0), nil}, {"r1", int64(1), nil}, {"r2", int64(2), nil}, {nil, int64(9), "new"}}
	equalRows(t, "grow", rows, want)
	for name, bad := range map[string]bigquery.Schema{
		"a column removed":  grown[:2],
		"a type changed":    {grown[0], {Name: "value", Type: bigquery.StringFieldType}, grown[2]},
		"a REQUIRED added":  append(append(bigquery.Schema{}, grown...), &bigquery.FieldSchema{Name: "must", Type: bigquery.IntegerFieldType, Required: true}),
		"a mode tightened":  {grown[0], {Name: "value", Type: bigquery.IntegerFieldType, Required: true}, grown[2]},
		"a column in place": {grown[0], {Name: "other", Type: bigquery.IntegerFieldType}, grown[2]},
	} {
		if _, err := tbl.Update(e.ctx, bigquery.TableMetadataToUpdate{Schema: bad}, ""); apiCode(err) != http.StatusBadRequest {
			t.Errorf("%s: %v, want HTTP 400", name, err)
		}
	}
}
