package bigqueryio

import (
	"context"
	"errors"
	"io"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/civil"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

var allTypesSchema = bigquery.Schema{
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

var allTypesRows = [][]bigquery.Value{
	{int64(-3), big.NewRat(-12345, 1000), big.NewRat(1, 4), civil.Date{Year: 2024, Month: 2, Day: 29},
		civil.Time{Hour: 23, Minute: 59, Second: 58, Nanosecond: 123456000},
		civil.DateTime{Date: civil.Date{Year: 1969, Month: 12, Day: 31}, Time: civil.Time{Hour: 1, Nanosecond: 1000}},
		time.Date(2020, 5, 6, 7, 8, 9, 10000, time.UTC), "POINT(1 2)", `{"a":1}`, []byte{0, 1, 255}, true, 2.5, "héllo",
		[]bigquery.Value{"x", []bigquery.Value{int64(1), int64(2)}}, []bigquery.Value{[]bigquery.Value{1.5}, []bigquery.Value{-2.5}}},
	{int64(7), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, []bigquery.Value{}},
}

type allTypes struct {
	I   int8
	N   *big.Rat
	BN  *big.Rat `bigquery:"bn"`
	D   bigquery.NullDate
	Tm  bigquery.NullTime `bigquery:"TM"`
	Dt  bigquery.NullDateTime
	Ts  bigquery.NullTimestamp
	G   bigquery.NullGeography
	J   bigquery.NullJSON
	B   []byte
	OK  bigquery.NullBool
	F   bigquery.NullFloat64
	S   bigquery.NullString
	Rec *struct {
		A    bigquery.NullString
		Tags []int64
	}
	RS      []struct{ X float64 }
	Ignored string `bigquery:"-"`
}

// readSessionRows reads every stream of a fresh session with our decoders.
func readSessionRows(t *testing.T, srv *bqtest.Server, table string, format storagepb.DataFormat) (bigquery.Schema, [][]bigquery.Value) {
	t.Helper()
	ctx := context.Background()
	c, err := bqstorage.NewBigQueryReadClient(ctx, srv.ClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, _ := bqtest.TableResource(table)
	s, err := c.CreateReadSession(ctx, &storagepb.CreateReadSessionRequest{Parent: "projects/p",
		ReadSession: &storagepb.ReadSession{Table: res, DataFormat: format}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := sessionInfoOf(s)
	if err != nil {
		t.Fatal(err)
	}
	schema, dec, err := info.decoder()
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]bigquery.Value
	for _, st := range s.GetStreams() {
		rc, err := c.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: st.GetName()})
		if err != nil {
			t.Fatal(err)
		}
		for {
			resp, err := rc.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := dec.decode(payloadOf(resp), resp.GetRowCount(), func(r []bigquery.Value) error {
				rows = append(rows, append([]bigquery.Value(nil), r...))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return schema, rows
}

func TestDecodeAllTypes(t *testing.T) {
	srv, err := bqtest.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.AddTable("p.d.types", bqtest.Table{Schema: allTypesSchema, Rows: allTypesRows}); err != nil {
		t.Fatal(err)
	}
	for _, format := range []storagepb.DataFormat{storagepb.DataFormat_AVRO, storagepb.DataFormat_ARROW} {
		t.Run(format.String(), func(t *testing.T) {
			schema, rows := readSessionRows(t, srv, "p.d.types", format)
			if len(schema) != len(allTypesSchema) {
				t.Fatalf("schema %v", schema)
			}
			for i, f := range schema {
				w := allTypesSchema[i]
				if f.Name != w.Name || f.Type != w.Type || f.Repeated != w.Repeated || f.Required != w.Required {
					t.Errorf("column %d: %+v, want %+v", i, f, w)
				}
			}
			if len(rows) != len(allTypesRows) {
				t.Fatalf("%d rows", len(rows))
			}
			for i := range rows {
				for c := range rows[i] {
					if !sameValue(rows[i][c], allTypesRows[i][c]) {
						t.Errorf("row %d column %s: %#v, want %#v", i, schema[c].Name, rows[i][c], allTypesRows[i][c])
					}
				}
			}
			l, err := newLoader(reflect.TypeOf(allTypes{}), schema, fieldRules{})
			if err != nil {
				t.Fatal(err)
			}
			var v allTypes
			if err := l.load(reflect.ValueOf(&v).Elem(), rows[0]); err != nil {
				t.Fatal(err)
			}
			if v.I != -3 || v.N.Cmp(big.NewRat(-12345, 1000)) != 0 || !v.Ts.Valid || !v.Ts.Timestamp.Equal(allTypesRows[0][6].(time.Time)) ||
				v.Dt.DateTime != allTypesRows[0][5] || v.Tm.Time != allTypesRows[0][4] || v.G.GeographyVal != "POINT(1 2)" ||
				v.Rec == nil || v.Rec.A.StringVal != "x" || !reflect.DeepEqual(v.Rec.Tags, []int64{1, 2}) || len(v.RS) != 2 || v.RS[1].X != -2.5 {
				t.Errorf("loaded %+v", v)
			}
			var z allTypes
			if err := l.load(reflect.ValueOf(&z).Elem(), rows[1]); err != nil {
				t.Fatal(err)
			}
			if z.I != 7 || z.N != nil || z.Rec != nil || z.D.Valid || z.RS != nil {
				t.Errorf("loaded nulls %+v", z)
			}
			type strict struct{ N int64 }
			sl, err := newLoader(reflect.TypeOf(strict{}), bigquery.Schema{{Name: "n", Type: bigquery.IntegerFieldType}}, fieldRules{})
			if err != nil {
				t.Fatal(err)
			}
			if err := sl.load(reflect.ValueOf(&strict{}).Elem(), []bigquery.Value{nil}); err == nil || !strings.Contains(err.Error(), "NULL") {
				t.Errorf("NULL into int64: %v", err)
			}
			if _, err := newLoader(reflect.TypeOf(struct{ I string }{}), schema, fieldRules{}); err == nil {
				t.Error("INTEGER into string was accepted")
			}
		})
	}
}

func sameValue(a, b bigquery.Value) bool {
	switch x := a.(type) {
	case *big.Rat:
		y, ok := b.(*big.Rat)
		return ok && x.Cmp(y) == 0
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case []bigquery.Value:
		y, ok := b.([]bigquery.Value)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func TestAvroSchemaParses(t *testing.T) {
	// hamba must accept the service's schema, with its datetime logical type
	// and sqlType properties.
	_, err := avro.Parse(`{"type":"record","name":"__root__","fields":[{"name":"dt","type":["null",{"type":"string","logicalType":"datetime"}]},{"name":"g","type":["null",{"type":"string","sqlType":"GEOGRAPHY"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
}
