package bigqueryio

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/civil"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

type response struct {
	payload []byte
	rows    int64
}

// sessionResponses reads every response of a fresh session of table.
func sessionResponses(t testing.TB, srv *bqtest.Server, table string, format storagepb.DataFormat) (sessionInfo, []response) {
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
	var out []response
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
			out = append(out, response{payloadOf(resp), resp.GetRowCount()})
		}
	}
	return info, out
}

// plainTypes has the fields the struct decoder writes directly, without
// the Null types.
type plainTypes struct {
	I  int
	F  float64
	OK bool
	S  string
	G  string
	J  string
	Ts time.Time
	D  civil.Date
}

// decodeBoth decodes every response with the struct decoder of t and with
// the []bigquery.Value decoder and the loader, and checks they agree.
func decodeBoth(t *testing.T, info sessionInfo, resps []response, typ reflect.Type) []any {
	t.Helper()
	schema, rows, err := info.decoder()
	if err != nil {
		t.Fatal(err)
	}
	sd, err := newStructDecoder(typ, schema, info.Format, info.Arrow, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := newLoader(typ, schema, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []any
	for _, r := range resps {
		if got, err = sd.decode(r.payload, r.rows, got); err != nil {
			t.Fatal(err)
		}
		if err := rows.decode(r.payload, r.rows, func(row []bigquery.Value) error {
			v := reflect.New(typ).Elem()
			if err := l.load(v, row); err != nil {
				return err
			}
			want = append(want, v.Interface())
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		if reflect.TypeOf(got[i]) != typ || !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("row %d: struct decoder %+v, loader %+v", i, got[i], want[i])
		}
	}
	return got
}

func TestStructDecoderMatchesLoader(t *testing.T) {
	srv, err := bqtest.NewServer(bqtest.WithResponseRows(2))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.AddTable("p.d.types", bqtest.Table{Schema: allTypesSchema, Rows: allTypesRows}); err != nil {
		t.Fatal(err)
	}
	plainSchema := bigquery.Schema{
		{Name: "i", Type: bigquery.IntegerFieldType, Required: true},
		{Name: "f", Type: bigquery.FloatFieldType},
		{Name: "ok", Type: bigquery.BooleanFieldType},
		{Name: "s", Type: bigquery.StringFieldType},
		{Name: "g", Type: bigquery.GeographyFieldType},
		{Name: "j", Type: bigquery.JSONFieldType},
		{Name: "ts", Type: bigquery.TimestampFieldType},
		{Name: "d", Type: bigquery.DateFieldType},
		{Name: "unused", Type: bigquery.StringFieldType},
	}
	var plainRows [][]bigquery.Value
	for i := 0; i < 5; i++ {
		plainRows = append(plainRows, []bigquery.Value{int64(i - 2), float64(i) / 3, i%2 == 0, strings.Repeat("s", i), "POINT(0 0)", `{"k":` + string(rune('0'+i)) + `}`,
			time.Date(2001+i, 2, 3, 4, 5, 6, 7000*i, time.UTC), civil.Date{Year: 1900 + i, Month: 12, Day: 31}, nil})
	}
	if err := srv.AddTable("p.d.plain", bqtest.Table{Schema: plainSchema, Rows: plainRows}); err != nil {
		t.Fatal(err)
	}
	nullRow := append([]bigquery.Value{int64(9)}, make([]bigquery.Value, len(plainSchema)-1)...)
	if err := srv.AddTable("p.d.nulls", bqtest.Table{Schema: plainSchema, Rows: append(plainRows[:1:1], nullRow)}); err != nil {
		t.Fatal(err)
	}
	for _, format := range []storagepb.DataFormat{storagepb.DataFormat_AVRO, storagepb.DataFormat_ARROW} {
		t.Run(format.String(), func(t *testing.T) {
			info, resps := sessionResponses(t, srv, "p.d.types", format)
			got := decodeBoth(t, info, resps, reflect.TypeOf(allTypes{}))
			if v := got[0].(allTypes); v.S.StringVal != "héllo" || !v.Ts.Valid || v.J.JSONVal != `{"a":1}` || v.Rec == nil {
				t.Errorf("row 0: %+v", v)
			}
			info, resps = sessionResponses(t, srv, "p.d.plain", format)
			got = decodeBoth(t, info, resps, reflect.TypeOf(plainTypes{}))
			if v := got[4].(plainTypes); v.I != 2 || v.S != "ssss" || !v.Ts.Equal(time.Date(2005, 2, 3, 4, 5, 6, 28000, time.UTC)) || v.D.Year != 1904 {
				t.Errorf("row 4: %+v", v)
			}
			// NULL into a plain field fails, naming it.
			info, resps = sessionResponses(t, srv, "p.d.nulls", format)
			schema, _, _ := info.decoder()
			sd, err := newStructDecoder(reflect.TypeOf(plainTypes{}), schema, info.Format, info.Arrow, fieldRules{})
			if err != nil {
				t.Fatal(err)
			}
			var derr error
			for _, r := range resps {
				if _, derr = sd.decode(r.payload, r.rows, nil); derr != nil {
					break
				}
			}
			if derr == nil || !strings.Contains(derr.Error(), "NULL cannot be loaded into field F of type float64") {
				t.Errorf("NULL into float64: %v", derr)
			}
		})
	}
}

func TestStructDecoderBadInput(t *testing.T) {
	schema := bigquery.Schema{{Name: "s", Type: bigquery.StringFieldType, Required: true}}
	sd, err := newStructDecoder(reflect.TypeOf(struct{ S string }{}), schema, int32(Avro), nil, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	// A hostile row count allocates nothing of its size: the rows are the
	// payload's, and the count disagrees with them.
	if _, err := sd.decode([]byte{2, 'a'}, 1<<40, nil); err == nil || !strings.Contains(err.Error(), "row count is 1099511627776, but its payload holds 1 rows") {
		t.Errorf("hostile count: %v", err)
	}
	asd, err := newStructDecoder(reflect.TypeOf(struct{ S string }{}), schema, int32(Arrow), nil, fieldRules{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asd.decode([]byte{1, 2, 3}, 1<<40, nil); err == nil || !strings.Contains(err.Error(), "Arrow record batch") {
		t.Errorf("hostile Arrow count: %v", err)
	}
	// A string longer than the payload.
	if _, err := sd.decode([]byte{20, 'a'}, 1, nil); err == nil || !strings.Contains(err.Error(), "Avro row 0 of the response") {
		t.Errorf("short string: %v", err)
	}
	// A bad union branch.
	nsd, _ := newStructDecoder(reflect.TypeOf(struct{ S bigquery.NullString }{}), bigquery.Schema{{Name: "s", Type: bigquery.StringFieldType}}, int32(Avro), nil, fieldRules{})
	if _, err := nsd.decode([]byte{6, 2, 'a'}, 1, nil); err == nil || !strings.Contains(err.Error(), "branch 3") {
		t.Errorf("bad branch: %v", err)
	}
}
