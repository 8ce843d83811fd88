package bigqueryio

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/sdf"
	"github.com/sdfio/sdfio/sdf/sdftest"
)

// numRow is a row of p.d.nums (numbersTable).
type numRow struct {
	ID    int64
	Name  bigquery.NullString
	Score bigquery.NullFloat64
}

// readTable reads every stream of a session of table into values of typ,
// each from offset start, as the stream DoFn does on a worker (the row plan,
// its decoder, readStream), without Beam.
func readTable(t *testing.T, table string, typ reflect.Type, start int64, opts ...ReadOption) ([]any, error) {
	t.Helper()
	ctx := context.Background()
	cfg, err := newConfig("bigqueryio.Read", table, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := createSession(ctx, c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := sessionInfoOf(s)
	if err != nil {
		t.Fatal(err)
	}
	fn := &readStreamFn{Cfg: cfg, Type: beam.EncodedType{T: typ}}
	if err := fn.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer fn.Teardown()
	var out []any
	for _, st := range s.GetStreams() {
		p, err := fn.rowPlanFor(info)
		if err != nil {
			return out, err
		}
		dec, err := p.decoder()
		if err != nil {
			return out, err
		}
		rt := fn.CreateTracker(StreamRestriction{Stream: st.GetName(), Start: start, End: sdf.Unbounded})
		var stats readStats
		if err := readStream(ctx, fn.client, cfg, info, rt, dec, func(v any) error { out = append(out, v); return nil }, &stats); err != nil {
			return out, err
		}
	}
	return out, nil
}

// TestRowCountDisagrees: a response whose row count disagrees with its
// payload fails the read, naming the table, the session, the stream and
// the offset, with both counts, in Avro and Arrow, into structs and into
// Rows; a count carried only in the deprecated field is read exactly; both
// counts set and different fail; bytes after the rows fail. No row is lost
// silently. (Before: a count one less gave 99 of 100 rows, a count of 0
// and the deprecated count alone gave none, all without error.)
func TestRowCountDisagrees(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(10), bqtest.WithResponseRows(100))
	numbersTable(t, srv, 100)
	for _, tc := range []struct {
		name     string
		faults   bqtest.Faults
		start    int64
		want     []string // in the error; none: the read is exact
		wantArrw []string // for Arrow, when it differs
	}{
		{name: "exact", faults: bqtest.Faults{}},
		{name: "one less", faults: bqtest.Faults{RowCount: bqtest.RowCountOneLess}, want: []string{"row count is 99, but its payload holds 100 rows", "offset 0"}},
		{name: "one less at 40", faults: bqtest.Faults{RowCount: bqtest.RowCountOneLess}, start: 40, want: []string{"row count is 59, but its payload holds 60 rows", "offset 40"}},
		{name: "one more", faults: bqtest.Faults{RowCount: bqtest.RowCountOneMore}, want: []string{"row count is 101, but its payload holds 100 rows"}},
		{name: "zero", faults: bqtest.Faults{RowCount: bqtest.RowCountZero}, want: []string{"row count is 0, but its payload holds 100 rows"}},
		{name: "deprecated only", faults: bqtest.Faults{RowCount: bqtest.RowCountDeprecatedOnly}},
		{name: "deprecated only at 40", faults: bqtest.Faults{RowCount: bqtest.RowCountDeprecatedOnly}, start: 40},
		{name: "both", faults: bqtest.Faults{RowCount: bqtest.RowCountBoth}},
		{name: "both disagree", faults: bqtest.Faults{RowCount: bqtest.RowCountBothDisagree},
			want: []string{"row_count is 100, its avro_rows.row_count (deprecated) 101"}, wantArrw: []string{"row_count is 100, its arrow_record_batch.row_count (deprecated) 101"}},
		{name: "trailing byte", faults: bqtest.Faults{TrailingBytes: []byte{0}}, want: []string{"Avro row 100 of the response", "EOF"}, wantArrw: []string{"Arrow record batch"}},
		// Eight zero bytes: two Avro rows of (0, NULL, NULL) and a third cut
		// short; in Arrow, an old-style end-of-stream marker the IPC reader
		// stops at, and 4 bytes it never reads.
		{name: "trailing bytes", faults: bqtest.Faults{TrailingBytes: make([]byte, 8)}, want: []string{"Avro row 102 of the response", "EOF"}, wantArrw: []string{"4 bytes after the Arrow record batches"}},
	} {
		srv.SetFaults(tc.faults)
		for _, format := range []DataFormat{Avro, Arrow} {
			for _, typ := range []reflect.Type{reflect.TypeOf(numRow{}), typeOfRow} {
				name := fmt.Sprintf("%s/%v/%v", tc.name, map[DataFormat]string{Avro: "avro", Arrow: "arrow"}[format], typ)
				got, err := readTable(t, "p.d.nums", typ, tc.start, serverOpts(srv, WithMaxStreams(1), WithDataFormat(format))...)
				want := tc.want
				if format == Arrow && tc.wantArrw != nil {
					want = tc.wantArrw
				}
				if len(want) == 0 {
					if err != nil {
						t.Errorf("%s: %v", name, err)
						continue
					}
					if len(got) != 100-int(tc.start) {
						t.Errorf("%s: %d rows, want %d", name, len(got), 100-tc.start)
						continue
					}
					for i, v := range got {
						id := int64(-1)
						if r, ok := v.(numRow); ok {
							id = r.ID
						} else if r, ok := v.(Row); ok {
							id = r["id"].(int64)
						}
						if id != tc.start+int64(i) {
							t.Errorf("%s: row %d has id %d", name, i, id)
							break
						}
					}
					continue
				}
				if err == nil {
					t.Errorf("%s: read %d rows and no error", name, len(got))
					continue
				}
				for _, w := range append(want, "table projects/p/datasets/d/tables/nums", "session projects/p/locations/us/sessions/", "/streams/") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: the error does not say %q: %v", name, w, err)
					}
				}
				if len(got) != 0 {
					t.Errorf("%s: %d rows emitted before the error, of a response that is wrong", name, len(got))
				}
			}
		}
	}
}

// TestSplitDeprecatedCount: with responses that carry only the deprecated
// row count, a split still reads the primary's first response to confirm
// it holds the reader's next row (a response of rows by either count),
// and every split is exact.
func TestSplitDeprecatedCount(t *testing.T) {
	srv := newTestServer(t, bqtest.WithBlockRows(1), bqtest.WithResponseRows(3))
	numbersTable(t, srv, 20)
	srv.SetFaults(bqtest.Faults{RowCount: bqtest.RowCountDeprecatedOnly})
	for _, format := range []DataFormat{Avro, Arrow} {
		s := subject(t, srv, WithDataFormat(format))
		for _, tc := range []struct {
			n       int
			f       float64
			primary int
		}{{0, 0.5, 10}, {4, 0.5, 12}, {10, 0.1, 11}} {
			res := sdftest.AssertSplitAtFraction(t, s, tc.n, tc.f, sdftest.MustSucceedAndBeConsistent)
			if res.PrimaryRecords != tc.primary {
				t.Errorf("%v: split at %v after %d rows: %+v, want a primary of %d rows", format, tc.f, tc.n, res, tc.primary)
			}
		}
	}
}
