package bqwrite_test

import (
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"

	"github.com/sdfio/sdfio/bigqueryio"
	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
)

// wTypes is a row of wTypesSchema: every type Read fills.
type wTypes struct {
	I   int64                  `bigquery:"i"`
	N   *big.Rat               `bigquery:"n"`
	BN  *big.Rat               `bigquery:"bn"`
	D   bigquery.NullDate      `bigquery:"d"`
	Tm  bigquery.NullTime      `bigquery:"tm"`
	Dt  bigquery.NullDateTime  `bigquery:"dt"`
	Ts  bigquery.NullTimestamp `bigquery:"ts"`
	G   bigquery.NullGeography `bigquery:"g"`
	J   bigquery.NullJSON      `bigquery:"j"`
	B   []byte                 `bigquery:"b"`
	OK  bigquery.NullBool      `bigquery:"ok"`
	F   bigquery.NullFloat64   `bigquery:"f"`
	S   bigquery.NullString    `bigquery:"s"`
	Rec *wRec                  `bigquery:"rec"`
	RS  []wItem                `bigquery:"rs"`
}

type wRec struct {
	A    bigquery.NullString `bigquery:"a"`
	Tags []int64             `bigquery:"tags"`
}

type wItem struct {
	X float64 `bigquery:"x"`
}

var wTypesSchema = bigquery.Schema{
	{Name: "i", Type: bigquery.IntegerFieldType, Required: true},
	{Name: "n", Type: bigquery.NumericFieldType},
	{Name: "bn", Type: bigquery.BigNumericFieldType},
	{Name: "d", Type: bigquery.DateFieldType},
	{Name: "tm", Type: bigquery.TimeFieldType},
	{Name: "dt", Type: bigquery.DateTimeFieldType},
	{Name: "ts", Type: bigquery.TimestampFieldType},
	{Name: "g", Type: bigquery.GeographyFieldType},
	{Name: "j", Type: bigquery.JSONFieldType},
	{Name: "b", Type: bigquery.BytesFieldType},
	{Name: "ok", Type: bigquery.BooleanFieldType},
	{Name: "f", Type: bigquery.FloatFieldType},
	{Name: "s", Type: bigquery.StringFieldType},
	{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "a", Type: bigquery.StringFieldType}, {Name: "tags", Type: bigquery.IntegerFieldType, Repeated: true}}},
	{Name: "rs", Type: bigquery.RecordFieldType, Repeated: true, Schema: bigquery.Schema{{Name: "x", Type: bigquery.FloatFieldType}}},
}

// Simple is the row type of the exactly-once tests.
type Simple struct {
	ID   int64  `bigquery:"id"`
	Name string `bigquery:"name"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeFor[wTypes]())
	bqwrite.RegisterType(reflect.TypeFor[wRec]())
	bqwrite.RegisterType(reflect.TypeFor[wItem]())
	bqwrite.RegisterType(reflect.TypeFor[Simple]())
	register.Function1x1(canonTypes)
	register.Function1x1(canonWriteRow)
	register.Function1x1(simpleID)
	register.Function1x1(simpleTable)
	register.Function1x1(failedText)
	register.Function1x1(resultText)
}

func rat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// writeTypesRows are the rows of the round trip: the extremes of NUMERIC and
// BIGNUMERIC, dates and timestamps of years 1 and 9999, NULLs, empty and
// full repeated columns, nested records.
func writeTypesRows() []wTypes {
	d := func(y int, m time.Month, day int) civil.Date { return civil.Date{Year: y, Month: m, Day: day} }
	return []wTypes{
		{I: -9223372036854775808, N: rat("99999999999999999999999999999.999999999"), BN: rat("578960446186580977117854925043439539266.34992332820282019728792003956564819967"),
			D: bigquery.NullDate{Date: d(1, 1, 1), Valid: true}, Tm: bigquery.NullTime{Time: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000}, Valid: true},
			Dt: bigquery.NullDateTime{DateTime: civil.DateTime{Date: d(9999, 12, 31), Time: civil.Time{Hour: 23, Minute: 59, Second: 59, Nanosecond: 999999000}}, Valid: true},
			Ts: bigquery.NullTimestamp{Timestamp: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), Valid: true},
			G:  bigquery.NullGeography{GeographyVal: "POINT(1 2)", Valid: true}, J: bigquery.NullJSON{JSONVal: `{"a":[1,2]}`, Valid: true},
			B: []byte{0, 1, 255}, OK: bigquery.NullBool{Bool: true, Valid: true}, F: bigquery.NullFloat64{Float64: -2.5e300, Valid: true},
			S:   bigquery.NullString{StringVal: "héllo\x00", Valid: true},
			Rec: &wRec{A: bigquery.NullString{StringVal: "x", Valid: true}, Tags: []int64{1, -2, 3}}, RS: []wItem{{1.5}, {-0.25}}},
		{I: 9223372036854775807, N: rat("-99999999999999999999999999999.999999999"), BN: rat("-578960446186580977117854925043439539266.34992332820282019728792003956564819968"),
			D:  bigquery.NullDate{Date: d(9999, 12, 31), Valid: true},
			Dt: bigquery.NullDateTime{DateTime: civil.DateTime{Date: d(1, 1, 1)}, Valid: true},
			Ts: bigquery.NullTimestamp{Timestamp: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), Valid: true},
			B:  []byte{}, OK: bigquery.NullBool{Valid: true}, F: bigquery.NullFloat64{Valid: true},
			Rec: &wRec{Tags: nil}, RS: []wItem{}},
		{I: 0, N: rat("0.000000001"), BN: rat("-0.00000000000000000000000000000000000001"),
			Ts: bigquery.NullTimestamp{Timestamp: time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC), Valid: true}},
		{I: 7}, // every other column NULL
	}
}

// canonTypes is an exact text of a wTypes (rationals as fractions).
func canonTypes(r wTypes) string {
	rs := ratText
	var b strings.Builder
	fmt.Fprintf(&b, "i=%d n=%s bn=%s d=%v tm=%v dt=%v ts=%v/%s g=%v j=%v b=%q ok=%v f=%v s=%q", r.I, rs(r.N), rs(r.BN), r.D, r.Tm, r.Dt,
		r.Ts.Valid, r.Ts.Timestamp.UTC().Format(time.RFC3339Nano), r.G, r.J, r.B, r.OK, r.F, r.S.StringVal+fmt.Sprint(r.S.Valid))
	if r.Rec != nil {
		fmt.Fprintf(&b, " rec={%v %v}", r.Rec.A, r.Rec.Tags)
	}
	fmt.Fprintf(&b, " rs=%v", r.RS)
	return b.String()
}

// ratText is x as an exact fraction, or NULL.
func ratText(x *big.Rat) string {
	if x == nil {
		return "NULL"
	}
	return x.RatString()
}

// canonWriteRow is canonTypes of a Row.
func canonWriteRow(r bqwrite.Row) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := r[k]
		if x, ok := v.(*big.Rat); ok {
			v = x.RatString()
		}
		if x, ok := v.(time.Time); ok {
			v = x.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(&b, "%s=%v ", k, v)
	}
	return b.String()
}

func simpleID(r Simple) int64 { return r.ID }

func failedText(f bqwrite.FailedRow) string { return f.Table + " " + f.Row }

func resultText(r bqwrite.TableResult) string {
	return fmt.Sprintf("%s %d rows", r.Table, r.Rows)
}

// simpleTable routes rows over three tables by ID.
func simpleTable(r Simple) string { return fmt.Sprintf("p.d.dyn%d", r.ID%3) }

func writeOpts(srv *bqtest.Server, more ...bqwrite.WriteOption) []bqwrite.WriteOption {
	return append([]bqwrite.WriteOption{bqwrite.WithEndpoint(srv.Addr()), bqwrite.WithInsecure(),
		bqwrite.WithRESTEndpoint(srv.RESTEndpoint()), bqwrite.WithRetries(8, 5*time.Millisecond)}, more...)
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// TestWriteRoundTrip writes every type Read fills, as structs into one
// table (created from WithSchema) and as Rows into another (defined, read
// by its own schema), then reads both back with Read: exact.
func TestWriteRoundTrip(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	if err := srv.AddTable("p.d.rows", bqtest.Table{Schema: wTypesSchema}); err != nil {
		t.Fatal(err)
	}
	rows := writeTypesRows()
	var want []any
	for _, r := range rows {
		want = append(want, canonTypes(r))
	}
	p, s := beam.NewPipelineWithRoot()
	col := beam.Create(s, anys(rows)...)
	res := bqwrite.Write(s, "p.d.types", col, writeOpts(srv, bqwrite.WithSchema(wTypesSchema))...)
	passert.Empty(s, res.FailedRows)
	passert.Equals(s, beam.ParDo(s, resultText, res.Results), fmt.Sprintf("p.d.types %d rows", len(rows)))
	run(t, p)
	if got, err := srv.TableRows("p.d.types"); err != nil || len(got) != len(rows) {
		t.Fatalf("table holds %d rows (%v), want %d", len(got), err, len(rows))
	}

	// Rows: read the struct table as Rows, write them to the second table.
	p, s = beam.NewPipelineWithRoot()
	generic := bigqueryio.Read(s, "p.d.types", reflect.TypeFor[bqwrite.Row](), bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
	res = bqwrite.Write(s, "p.d.rows", generic, writeOpts(srv, bqwrite.WithCreateDisposition(bqwrite.CreateNever))...)
	passert.Empty(s, res.FailedRows)
	run(t, p)

	p, s = beam.NewPipelineWithRoot()
	for _, table := range []string{"p.d.types", "p.d.rows"} {
		s := s.Scope(table)
		back := bigqueryio.Read(s, table, reflect.TypeFor[wTypes](), bigqueryio.WithEndpoint(srv.Addr()), bigqueryio.WithInsecure())
		passert.Equals(s, beam.ParDo(s, canonTypes, back), want...)
	}
	run(t, p)
}

// simpleRows are n rows of Simple.
func simpleRows(n int) []Simple {
	rows := make([]Simple, n)
	for i := range rows {
		rows[i] = Simple{ID: int64(i), Name: fmt.Sprintf("name-%d", i)}
	}
	return rows
}

// checkOnce fails unless the table holds ids 0..n-1 (but those in skip)
// exactly once each.
func checkOnce(t *testing.T, srv *bqtest.Server, table string, n int, skip func(int64) bool) {
	t.Helper()
	seen, rows := idCounts(t, srv, table)
	want := 0
	for i := 0; i < n; i++ {
		if skip != nil && skip(int64(i)) {
			if seen[int64(i)] != 0 {
				t.Errorf("%s: row %d written, want it refused", table, i)
			}
			continue
		}
		want++
		if seen[int64(i)] != 1 {
			t.Errorf("%s: row %d written %d times", table, i, seen[int64(i)])
		}
	}
	if rows != want {
		t.Errorf("%s: %d rows, want %d", table, rows, want)
	}
}

// idCounts counts the rows of table by their first column, an id, and
// all of them.
func idCounts(t *testing.T, srv *bqtest.Server, table string) (map[int64]int, int) {
	t.Helper()
	got, err := srv.TableRows(table)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, r := range got {
		seen[r[0].(int64)]++
	}
	return seen, len(got)
}

// TestWriteExactlyOnceFaults writes 3000 rows in small appends over
// several bundles while a share of the appends fail, before or after the
// service wrote them, in the response or by ending the connection: the
// table holds every row exactly once, committed in one commit per table.
func TestWriteExactlyOnceFaults(t *testing.T) {
	for _, f := range []bqtest.WriteFaults{
		{AppendUnavailableShare: 0.2},
		{AppendUnavailableShare: 0.2, AfterWrite: true},
		{AppendUnavailableShare: 0.2, AfterWrite: true, InBand: true},
		{AppendUnavailableShare: 0.1, CommitUnavailableCalls: 1, CommitAfterApply: true},
	} {
		t.Run(fmt.Sprintf("%+v", f), func(t *testing.T) {
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			srv.SetWriteFaults(f)
			const n = 3000
			p, s := beam.NewPipelineWithRoot()
			col := beam.Reshuffle(s, beam.Create(s, anys(simpleRows(n))...))
			res := bqwrite.Write(s, "p.d.once", col, writeOpts(srv, bqwrite.WithMaxAppendBytes(4000))...)
			passert.Empty(s, res.FailedRows)
			passert.Equals(s, beam.ParDo(s, resultText, res.Results), fmt.Sprintf("p.d.once %d rows", n))
			m := run(t, p)
			checkOnce(t, srv, "p.d.once", n, nil)
			st := srv.WriteStats()
			if st.InjectedFailures == 0 || st.Commits != 1 {
				t.Errorf("server %+v: want injected failures and one commit", st)
			}
			if got := counter(t, m, "append_retries"); f.AppendUnavailableShare > 0 && !f.AfterWrite && got == 0 {
				t.Errorf("append_retries %d", got)
			}
			if got := counter(t, m, "rows_appended"); got != n {
				t.Errorf("rows_appended %d, want %d", got, n)
			}
			if got := counter(t, m, "streams_committed"); got != int64(st.StreamsCommitted) || got == 0 {
				t.Errorf("streams_committed %d, server committed %d", got, st.StreamsCommitted)
			}
			if pend := srv.PendingStreams("p.d.once"); len(pend) != 0 {
				t.Errorf("streams left uncommitted: %+v", pend)
			}
		})
	}
}

// NumericRow has a NUMERIC column the service range-checks.
type NumericRow struct {
	ID int64    `bigquery:"id"`
	N  *big.Rat `bigquery:"n"`
}

func init() {
	bqwrite.RegisterType(reflect.TypeFor[NumericRow]())
	register.Function1x1(numericTable)
	register.Function1x1(saysRange)
}

func numericTable(r NumericRow) string { return "p.d.num" }

// saysRange tells a refused NUMERIC by the service's message.
func saysRange(f bqwrite.FailedRow) bool {
	return strings.Contains(strings.ToLower(f.Error), "range") || strings.Contains(strings.ToLower(f.Error), "overflow")
}

// TestWriteFailedRows: rows the service refuses (a NUMERIC out of range, a
// REQUIRED column missing) come out of FailedRows with the service's
// message, and every other row is committed once; WithFailOnRowErrors
// fails the write instead.
func TestWriteFailedRows(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	if err := srv.AddTable("p.d.req", bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "name", Type: bigquery.StringFieldType, Required: true},
	}}); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	bad := func(id int64) bool { return id%7 == 3 }
	var nums, generic []any
	var wantNum, wantReq []any
	for i := 0; i < n; i++ {
		r := NumericRow{ID: int64(i), N: big.NewRat(int64(i), 4)}
		g := bqwrite.Row{"id": int64(i), "name": "x"}
		if bad(int64(i)) {
			r.N = rat("1e30")
			delete(g, "name")
			wantNum = append(wantNum, fmt.Sprintf(`p.d.num {"ID":%d,"N":"1000000000000000000000000000000"}`, i))
			wantReq = append(wantReq, fmt.Sprintf(`p.d.req {"id":%d}`, i))
		}
		nums, generic = append(nums, r), append(generic, g)
	}
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "", beam.Reshuffle(s, beam.Create(s, nums...)), writeOpts(srv, bqwrite.WithTableFunc(numericTable), bqwrite.WithMaxAppendBytes(500))...)
	passert.Equals(s, beam.ParDo(s, failedText, res.FailedRows), wantNum...)
	passert.True(s, res.FailedRows, saysRange)
	res2 := bqwrite.Write(s.Scope("req"), "p.d.req", beam.Create(s, generic...), writeOpts(srv, bqwrite.WithCreateDisposition(bqwrite.CreateNever))...)
	passert.Equals(s, beam.ParDo(s, failedText, res2.FailedRows), wantReq...)
	m := run(t, p)
	checkOnce(t, srv, "p.d.num", n, bad)
	checkOnce(t, srv, "p.d.req", n, bad)
	if got := counter(t, m, "rows_refused"); got != int64(2*len(wantNum)) {
		t.Errorf("rows_refused %d, want %d", got, 2*len(wantNum))
	}

	p, s = beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.req2", beam.Create(s, generic[:10]...), writeOpts(srv, bqwrite.WithFailOnRowErrors(),
		bqwrite.WithSchema(bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType, Required: true}, {Name: "name", Type: bigquery.StringFieldType, Required: true}}))...)
	err := runFailing(p)
	if err == nil || !strings.Contains(err.Error(), "p.d.req2") || !strings.Contains(err.Error(), "WithFailOnRowErrors") {
		t.Fatalf("error %v: want the refused row, naming the table", err)
	}
	if rows, _ := srv.TableRows("p.d.req2"); len(rows) != 0 {
		t.Errorf("%d rows visible after a failed write", len(rows))
	}
}

// TestWriteAtLeastOnce appends to _default: every row is there, visible
// without a commit; with appends failing after the service wrote them,
// the retried rows are there twice, and no other.
func TestWriteAtLeastOnce(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const n = 2000
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "p.d.alo", beam.Reshuffle(s, beam.Create(s, anys(simpleRows(n))...)), writeOpts(srv, bqwrite.WithAtLeastOnce(), bqwrite.WithMaxAppendBytes(4000))...)
	passert.Equals(s, beam.ParDo(s, resultText, res.Results), fmt.Sprintf("p.d.alo %d rows", n))
	run(t, p)
	checkOnce(t, srv, "p.d.alo", n, nil)
	if st := srv.WriteStats(); st.StreamsCreated != 0 || st.Commits != 0 {
		t.Errorf("server %+v: want _default only, no commit", st)
	}

	srv.SetWriteFaults(bqtest.WriteFaults{AppendUnavailableShare: 0.2, AfterWrite: true, InBand: true})
	p, s = beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.alo2", beam.Create(s, anys(simpleRows(n))...), writeOpts(srv, bqwrite.WithAtLeastOnce(), bqwrite.WithMaxAppendBytes(4000))...)
	run(t, p)
	got, _ := srv.TableRows("p.d.alo2")
	seen := map[int64]int{}
	for _, r := range got {
		seen[r[0].(int64)]++
	}
	for i := 0; i < n; i++ {
		if seen[int64(i)] < 1 {
			t.Fatalf("row %d missing", i)
		}
	}
	// Each failure after the write duplicates the rows of one append (of
	// at most 4000 bytes: under 400 rows), and nothing else does.
	if st := srv.WriteStats(); st.InjectedFailures == 0 || len(got) == n || len(got)-n > 400*st.InjectedFailures {
		t.Errorf("server %+v, %d rows of %d", st, len(got), n)
	}
}

// TestWriteDynamic routes rows over three tables that CreateIfNeeded
// makes, each committed on its own.
func TestWriteDynamic(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	const n = 3000
	p, s := beam.NewPipelineWithRoot()
	res := bqwrite.Write(s, "", beam.Reshuffle(s, beam.Create(s, anys(simpleRows(n))...)), writeOpts(srv, bqwrite.WithTableFunc(simpleTable))...)
	passert.Equals(s, beam.ParDo(s, resultText, res.Results), "p.d.dyn0 1000 rows", "p.d.dyn1 1000 rows", "p.d.dyn2 1000 rows")
	run(t, p)
	for k := int64(0); k < 3; k++ {
		checkOnce(t, srv, fmt.Sprintf("p.d.dyn%d", k), n, func(id int64) bool { return id%3 != k })
	}
	if st := srv.WriteStats(); st.TablesCreated != 3 || st.Commits != 3 {
		t.Errorf("server %+v: want 3 tables made, 3 commits", st)
	}
}

// TestWriteEmpty: WriteEmpty writes to an empty table and refuses one
// with rows, writing nothing.
func TestWriteEmpty(t *testing.T) {
	srv := newServer(t)
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "name", Type: bigquery.StringFieldType}}
	if err := srv.AddTable("p.d.empty", bqtest.Table{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddTable("p.d.full", bqtest.Table{Schema: schema, Rows: [][]bigquery.Value{{int64(-1), "old"}}}); err != nil {
		t.Fatal(err)
	}
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.empty", beam.Create(s, anys(simpleRows(10))...), writeOpts(srv, bqwrite.WithWriteDisposition(bqwrite.WriteEmpty))...)
	run(t, p)
	checkOnce(t, srv, "p.d.empty", 10, nil)

	p, s = beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.full", beam.Create(s, anys(simpleRows(10))...), writeOpts(srv, bqwrite.WithWriteDisposition(bqwrite.WriteEmpty))...)
	err := runFailing(p)
	if err == nil || !strings.Contains(err.Error(), "p.d.full") || !strings.Contains(err.Error(), "WriteEmpty") {
		t.Fatalf("error %v: want WriteEmpty refusing p.d.full", err)
	}
	if rows, _ := srv.TableRows("p.d.full"); len(rows) != 1 {
		t.Errorf("%d rows in p.d.full, want the 1 it had", len(rows))
	}
}

// TestWriteConstruction: what cannot be written is refused when the
// pipeline is built, naming the field or the option.
func TestWriteConstruction(t *testing.T) {
	type unsigned struct {
		ID uint64 `bigquery:"id"`
	}
	type misfit struct {
		ID    int64  `bigquery:"id"`
		Extra string `bigquery:"extra"`
	}
	type wrong struct {
		ID string `bigquery:"id"`
	}
	type loose struct { // writable, but not registered with Beam
		ID int64 `bigquery:"id"`
	}
	schema := bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}}
	for _, tc := range []struct {
		elem any
		tbl  string
		opts []bqwrite.WriteOption
		want string
	}{
		{unsigned{}, "p.d.t", nil, "uint64"},
		{misfit{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithSchema(schema)}, "field Extra matches no column"},
		{wrong{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithSchema(schema)}, "field ID of type string cannot be written to column id of type INTEGER"},
		{bqwrite.Row{}, "p.d.t", nil, "give WithSchema, or WithCreateDisposition(CreateNever)"},
		{loose{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithSchema(schema)}, "is not registered with Beam: call bqwrite.RegisterType"},
		{Simple{}, "nodots", nil, `table "nodots"`},
		{Simple{}, "", nil, "no table"},
		{Simple{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithTableFunc(simpleTable)}, "both name the destination"},
		{Simple{}, "", []bqwrite.WriteOption{bqwrite.WithTableFunc(numericTable)}, "want a func(bqwrite_test.Simple) string"},
		{Simple{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithAtLeastOnce(), bqwrite.WithWriteDisposition(bqwrite.WriteEmpty)}, "cannot be given with WithAtLeastOnce"},
		{Simple{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithMaxAppendBytes(11 << 20)}, "WithMaxAppendBytes(11534336)"},
		{Simple{}, "p.d.t", []bqwrite.WriteOption{bqwrite.WithMetricsNamespace("")}, `WithMetricsNamespace(""): an empty metrics namespace`},
	} {
		_, s := beam.NewPipelineWithRoot()
		col := beam.Create(s, tc.elem)
		_, err := bqwrite.TryWrite(s, tc.tbl, col, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bqwrite.Write") {
			t.Errorf("%T %q: error %v, want %q", tc.elem, tc.tbl, err, tc.want)
		}
	}
}

// TestWriteMissingTable: CreateNever fails on a missing table, naming it
// and with the service's message; nothing is created.
func TestWriteMissingTable(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.missing", beam.Create(s, anys(simpleRows(3))...), writeOpts(srv, bqwrite.WithCreateDisposition(bqwrite.CreateNever))...)
	err := runFailing(p)
	if err == nil || !strings.Contains(err.Error(), "bqwrite.Write to p.d.missing: NOT_FOUND") {
		t.Fatalf("error %v: want NOT_FOUND naming p.d.missing", err)
	}
	if st := srv.WriteStats(); st.TablesCreated != 0 || st.StreamsCreated != 0 {
		t.Errorf("server %+v: want nothing made", st)
	}
}
