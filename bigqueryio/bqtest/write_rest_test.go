package bqtest_test

import (
	"errors"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"cloud.google.com/go/civil"
)

type inner struct {
	A    string
	Tags []int64
}

// insertRow is a struct as Beam Go's bigqueryio.Write takes: its schema is
// bigquery.InferSchema's.
type insertRow struct {
	ID    int64
	Name  bigquery.NullString
	Score float64
	OK    bool
	Raw   []byte
	N     *big.Rat
	D     civil.Date
	T     civil.Time
	DT    civil.DateTime
	TS    time.Time
	Rec   inner
	Strs  []string
}

// TestWriteRESTBeamWrite makes the calls Beam Go's bigqueryio.Write makes
// (datasets.get, tables.get, tables.insert with the inferred schema when
// the table is missing, then tabledata.insertAll through the Inserter) and
// reads the rows back with the official client; then writes to the same
// table through the Storage Write API.
func TestWriteRESTBeamWrite(t *testing.T) {
	e := newWriteEnv(t)
	e.table(t, "existing", simpleSchema) // the dataset exists because it holds a table
	ds := e.bq.DatasetInProject("proj", "ds")
	if md, err := ds.Metadata(e.ctx); err != nil || md.Location != "US" {
		t.Fatalf("datasets.get of the tables' dataset: %v %v", md, err)
	}
	if _, err := e.bq.DatasetInProject("proj", "nosuch").Metadata(e.ctx); apiCode(err) != http.StatusNotFound {
		t.Fatalf("datasets.get of a missing dataset: %v", err)
	}
	tbl := ds.Table("made")
	if _, err := tbl.Metadata(e.ctx); apiCode(err) != http.StatusNotFound {
		t.Fatalf("tables.get of a missing table: %v", err)
	}
	schema, err := bigquery.InferSchema(insertRow{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Create(e.ctx, &bigquery.TableMetadata{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Create(e.ctx, &bigquery.TableMetadata{Schema: schema}); apiCode(err) != http.StatusConflict {
		t.Fatalf("second tables.insert: %v", err)
	}
	if err := e.bq.DatasetInProject("proj", "nosuch").Table("t").Create(e.ctx, &bigquery.TableMetadata{Schema: schema}); apiCode(err) != http.StatusNotFound {
		t.Fatalf("tables.insert in a missing dataset: %v", err)
	}
	md, err := tbl.Metadata(e.ctx)
	if err != nil || len(md.Schema) != len(schema) || md.Schema[10].Type != bigquery.RecordFieldType || !md.Schema[0].Required {
		t.Fatalf("tables.get of the new table: %v %v", md, err)
	}

	dt := civil.DateTime{Date: civil.Date{Year: 2024, Month: 2, Day: 29}, Time: civil.Time{Hour: 1, Minute: 2, Second: 3, Nanosecond: 456789000}}
	rows := []insertRow{
		{ID: 1, Name: bigquery.NullString{StringVal: "a", Valid: true}, Score: 2.5, OK: true, Raw: []byte{0, 1, 255},
			N: rat("-12345678901234567890.123456789"), D: dt.Date, T: dt.Time, DT: dt, TS: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
			Rec: inner{A: "x", Tags: []int64{9007199254740993, -1}}, Strs: []string{"p", "q"}},
		{ID: 2, Raw: []byte{}, N: big.NewRat(0, 1), D: civil.Date{Year: 1, Month: 1, Day: 1}, DT: civil.DateTime{Date: civil.Date{Year: 1, Month: 1, Day: 1}}, TS: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	if err := tbl.Inserter().Put(e.ctx, rows); err != nil {
		t.Fatal(err)
	}
	want := [][]bigquery.Value{
		{int64(1), "a", 2.5, true, []byte{0, 1, 255}, rows[0].N, dt.Date, dt.Time, dt, rows[0].TS,
			[]bigquery.Value{"x", []bigquery.Value{int64(9007199254740993), int64(-1)}}, []bigquery.Value{"p", "q"}},
		{int64(2), nil, 0.0, false, []byte{}, new(big.Rat), civil.Date{Year: 1, Month: 1, Day: 1}, civil.Time{}, civil.DateTime{Date: civil.Date{Year: 1, Month: 1, Day: 1}}, rows[1].TS,
			[]bigquery.Value{"", nil}, nil},
	}
	equalRows(t, "inserted rows read back", e.read(t, "made"), want)

	// A row that does not fit: nothing of the request is written, the
	// others are reported stopped.
	u := tbl.Uploader()
	badRow := func(id bigquery.Value, n *big.Rat) *bigquery.ValuesSaver {
		return &bigquery.ValuesSaver{Schema: schema, Row: []bigquery.Value{id, nil, 1.0, true, []byte{}, n, dt.Date, dt.Time, dt, rows[0].TS,
			[]bigquery.Value{"y", nil}, nil}}
	}
	bad := []*bigquery.ValuesSaver{badRow(int64(3), big.NewRat(1, 1)), badRow(nil, big.NewRat(1, 1)), badRow(int64(5), rat("1e40"))}
	err = u.Put(e.ctx, bad)
	var pme bigquery.PutMultiError
	byIndex := map[int]string{}
	if errors.As(err, &pme) {
		for _, re := range pme {
			if len(re.Errors) != 1 {
				t.Errorf("row %d: errors %v, want one", re.RowIndex, re.Errors)
			}
			byIndex[re.RowIndex] = re.Errors.Error()
		}
	}
	if len(byIndex) != 3 || !strings.Contains(byIndex[0], "stopped") || !strings.Contains(byIndex[1], "Missing required field: ID") ||
		!strings.Contains(byIndex[2], "out of range") {
		t.Fatalf("insert of bad rows: %v %v", err, byIndex)
	}
	if n := len(e.read(t, "made")); n != 2 {
		t.Fatalf("a refused insert wrote rows: %d", n)
	}
	u.SkipInvalidRows = true
	if err := u.Put(e.ctx, bad); !errors.As(err, &pme) || len(pme) != 2 {
		t.Fatalf("insert skipping invalid rows: %v", err)
	}
	if got := e.read(t, "made"); len(got) != 3 || got[2][0] != int64(3) {
		t.Fatalf("after skipping invalid rows: %v", got)
	}

	// The Storage Write API appends to the same table.
	_, dp := schemaDescriptor(t, schema)
	ms := e.stream(t, "projects/proj/datasets/ds/tables/made", managedwriter.CommittedStream, dp)
	dmd, _ := schemaDescriptor(t, schema)
	r, err := ms.AppendRows(e.ctx, [][]byte{encode(t, dmd, map[string]any{"ID": 4, "Raw": []byte{}, "Score": 1.0, "OK": false, "D": 0, "T": int64(0), "DT": packDateTime(civil.DateTime{Date: civil.Date{Year: 1970, Month: 1, Day: 1}}), "TS": int64(0), "N": decimalLE(big.NewRat(1, 1), 9), "Rec": map[string]any{"A": "z"}})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetResult(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.read(t, "made"); len(got) != 4 || got[3][0] != int64(4) {
		t.Fatalf("after the Storage Write API append: %v", got)
	}
	if st := e.srv.WriteStats(); st.TablesCreated != 1 || st.InsertAllRows != 3 || st.InsertAllRequests != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestWriteRESTCreateForStorageWrite: a table made with tables.insert in a
// dataset made with datasets.insert takes the Write API's streams at once
// and is in the dataset's location.
func TestWriteRESTCreateForStorageWrite(t *testing.T) {
	e := newWriteEnv(t)
	if err := e.bq.DatasetInProject("proj", "eu").Create(e.ctx, &bigquery.DatasetMetadata{Location: "EU"}); err != nil {
		t.Fatal(err)
	}
	limited := bigquery.Schema{{Name: "name", Type: bigquery.StringFieldType, Required: true, MaxLength: 5}, simpleSchema[1]}
	if err := e.bq.DatasetInProject("proj", "eu").Table("t").Create(e.ctx, &bigquery.TableMetadata{Schema: limited}); err != nil {
		t.Fatal(err)
	}
	if md, err := e.bq.DatasetInProject("proj", "eu").Table("t").Metadata(e.ctx); err != nil || md.Schema[0].MaxLength != 5 || md.Location != "EU" {
		t.Fatalf("tables.get: %v %v", md, err)
	}
	ws, err := e.mw.CreateWriteStream(e.ctx, &storagepb.CreateWriteStreamRequest{Parent: "projects/proj/datasets/eu/tables/t",
		WriteStream: &storagepb.WriteStream{Type: storagepb.WriteStream_PENDING}})
	if err != nil || ws.GetLocation() != "EU" {
		t.Fatalf("stream of the new table: %v %v", ws, err)
	}
	rows, err := e.srv.TableRows("proj:eu.t")
	if err != nil || len(rows) != 0 {
		t.Fatalf("rows %v %v", rows, err)
	}
	if _, err := e.srv.TableRows("proj.eu.nosuch"); err == nil {
		t.Fatal("TableRows of a missing table")
	}
}
