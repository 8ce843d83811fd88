package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/api/iterator"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// Struct types with embedded structs, as a user writes them.
type (
	EBase struct {
		ID   int64
		Name string
	}
	ebase struct {
		ID   int64
		Name string
	}
	EOther struct {
		ID    int64
		Extra string
	}
	ETag struct {
		XID   int64 `bigquery:"ID"`
		Extra string
	}
	EScore float64
	EMid   struct {
		EBase
		Extra string
	}

	EEmbedded struct {
		EBase
		Amount float64
	} // Base's fields are Order's
	ETagged struct {
		EBase  `bigquery:"base"`
		Amount float64
	} // a tag name: one RECORD field
	EPointer struct {
		*EBase
		Amount float64
	} // allocated when filled
	EUnexported struct {
		ebase
		Amount float64
	} // its exported fields are visible
	EShadowed struct {
		EBase
		Name   string
		Amount float64
	} // the outer Name wins
	ETagWins struct {
		EBase
		ETag
	} // ETag.XID is tagged ID: it wins over EBase.ID
	ENonStruct struct {
		EScore
		EBase
	} // a field named EScore
	EDeep struct {
		EMid
		Amount float64
	} // two levels down
	EConflict struct {
		EBase
		EOther
		Amount float64
	} // ID twice at one depth: neither
	ENestedEmbed struct {
		ID   int64
		Base struct{ EBase } `bigquery:"base"`
	}
)

// embedTable defines p.d.emb for the embedded structs.
func embedTable(t *testing.T, srv *bqtest.Server) {
	t.Helper()
	err := srv.AddTable("p.d.emb", bqtest.Table{Schema: bigquery.Schema{
		{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "name", Type: bigquery.StringFieldType},
		{Name: "amount", Type: bigquery.FloatFieldType}, {Name: "extra", Type: bigquery.StringFieldType},
		{Name: "escore", Type: bigquery.FloatFieldType},
		{Name: "base", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "id", Type: bigquery.IntegerFieldType}, {Name: "name", Type: bigquery.StringFieldType}}},
	}, Rows: [][]bigquery.Value{
		{int64(7), "n", 2.5, "x", 9.5, []bigquery.Value{int64(8), "m"}},
		{int64(-1), "", 0.0, "y", -1.0, []bigquery.Value{int64(0), "b"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// officialRows reads p.d.emb with the official client's RowIterator into
// new values of typ (new(typ), or made by alloc).
func officialRows(t *testing.T, srv *bqtest.Server, typ reflect.Type, alloc func() any) []any {
	t.Helper()
	ctx := context.Background()
	c, err := bigquery.NewClient(ctx, "p", srv.RESTClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.EnableStorageReadClient(ctx, srv.ClientOptions()...); err != nil {
		t.Fatal(err)
	}
	it := c.DatasetInProject("p", "d").Table("emb").Read(ctx)
	var out []any
	for {
		dst := reflect.New(typ).Interface()
		if alloc != nil {
			dst = alloc()
		}
		err := it.Next(dst)
		if errors.Is(err, iterator.Done) {
			return out
		}
		if err != nil {
			t.Fatalf("%v: the official client: %v", typ, err)
		}
		out = append(out, reflect.ValueOf(dst).Elem().Interface())
	}
}

// TestEmbeddedStructs fills structs with embedded structs (by value, by
// pointer, unexported, tagged, shadowed, two levels down, a non-struct
// type) exactly as the official client's RowIterator fills them from the
// same table, in Avro and Arrow. (Before: the embedded fields stayed zero.)
func TestEmbeddedStructs(t *testing.T) {
	srv := newTestServer(t)
	embedTable(t, srv)
	for _, tc := range []struct {
		v     any
		alloc func() any // the client panics on a nil embedded pointer: give it one
		opts  []ReadOption
	}{
		{v: EEmbedded{}}, {v: ETagged{}}, {v: EUnexported{}}, {v: EShadowed{}}, {v: ETagWins{}}, {v: ENonStruct{}}, {v: EDeep{}}, {v: ENestedEmbed{}},
		{v: EPointer{}, alloc: func() any { return &EPointer{EBase: &EBase{}} }},
		{v: EConflict{}, opts: []ReadOption{WithIgnoreUnknownFields()}},
	} {
		typ := reflect.TypeOf(tc.v)
		want := officialRows(t, srv, typ, tc.alloc)
		for _, format := range []DataFormat{Avro, Arrow} {
			got, err := readTable(t, "p.d.emb", typ, 0, serverOpts(srv, append([]ReadOption{WithMaxStreams(1), WithDataFormat(format)}, tc.opts...)...)...)
			if err != nil {
				t.Errorf("%v, format %d: %v", typ, format, err)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%v, format %d:\n got %s\nwant %s (the official client)", typ, format, show(got), show(want))
			}
		}
	}
	if got, err := readTable(t, "p.d.emb", reflect.TypeOf(EEmbedded{}), 0, serverOpts(srv, WithMaxStreams(1))...); err != nil || got[0].(EEmbedded).ID != 7 || got[0].(EEmbedded).Name != "n" {
		t.Errorf("EEmbedded: %v, %v", got, err)
	}
}

func show(vs []any) string {
	var b strings.Builder
	for _, v := range vs {
		if p, ok := v.(EPointer); ok && p.EBase != nil {
			fmt.Fprintf(&b, "{EBase:&%+v Amount:%v} ", *p.EBase, p.Amount)
			continue
		}
		fmt.Fprintf(&b, "%+v ", v)
	}
	return b.String()
}

// TestFieldsOf checks the field rules themselves: names, order, depth,
// tags, cancellation.
func TestFieldsOf(t *testing.T) {
	names := func(v any) string {
		l := fieldsOf(reflect.TypeOf(v))
		var parts []string
		for _, f := range l.Fields {
			parts = append(parts, f.Name+"="+f.GoPath)
		}
		for n, ps := range l.Ambiguous {
			parts = append(parts, n+"?"+strings.Join(ps, "|"))
		}
		return strings.Join(parts, " ")
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{EEmbedded{}, "ID=EBase.ID Name=EBase.Name Amount=Amount"},
		{ETagged{}, "base=EBase Amount=Amount"},
		{EPointer{}, "ID=EBase.ID Name=EBase.Name Amount=Amount"},
		{EUnexported{}, "ID=ebase.ID Name=ebase.Name Amount=Amount"},
		{EShadowed{}, "ID=EBase.ID Name=Name Amount=Amount"},
		{ETagWins{}, "Name=EBase.Name ID=ETag.XID Extra=ETag.Extra"},
		{ENonStruct{}, "EScore=EScore ID=EBase.ID Name=EBase.Name"},
		{EDeep{}, "ID=EMid.EBase.ID Name=EMid.EBase.Name Extra=EMid.Extra Amount=Amount"},
		{EConflict{}, "Name=EBase.Name Extra=EOther.Extra Amount=Amount ID?EBase.ID|EOther.ID"},
		{struct {
			A int64 `bigquery:"-"`
			b int64
			B int64 `bigquery:"bee,nullable"`
		}{}, "bee=B"},
	} {
		if got := names(tc.v); got != tc.want {
			t.Errorf("%T:\n got %s\nwant %s", tc.v, got, tc.want)
		}
	}
	// A column goes to the field of its exact name, else to the first
	// that matches ignoring case.
	l := fieldsOf(reflect.TypeOf(struct {
		Id  int64
		ID  int64
		XId int64 `bigquery:"id"`
	}{}))
	for col, want := range map[string]string{"id": "XId", "ID": "ID", "Id": "Id", "iD": "Id", "x": ""} {
		got := ""
		if k := l.Match(col); k >= 0 {
			got = l.Fields[k].GoPath
		}
		if got != want {
			t.Errorf("column %s goes into %q, want %q", col, got, want)
		}
	}
}

// TestUnknownFields: a struct field that matches no column fails the read
// once the session's schema is known, naming the field, its column name
// and the session's columns (and, with selected fields, that an unselected
// column is not in the session), at the top and in a RECORD; with
// WithIgnoreUnknownFields it stays zero. When the pipeline is built, a
// field whose column WithSelectedFields does not select, fields that
// cancel each other, and a field behind an unexported embedded pointer are
// refused. (Before: all read, the fields silently zero.)
func TestUnknownFields(t *testing.T) {
	srv := newTestServer(t)
	numbersTable(t, srv, 10)
	embedTable(t, srv)
	type misspelled struct {
		ID    int64
		Score float64 `bigquery:"scor"`
	}
	type selected struct {
		ID    int64
		Name  bigquery.NullString
		Score float64
		Rank  int64
	}
	type nested struct {
		ID   int64
		Base struct {
			ID   int64
			Nmae string
		}
	}
	for _, tc := range []struct {
		table string
		v     any
		opts  []ReadOption
		want  []string
	}{
		{"p.d.nums", misspelled{}, nil, []string{"field Score (column scor) of bigqueryio.misspelled matches no column of the session, whose columns are id, name, score",
			"WithIgnoreUnknownFields()", "table projects/p/datasets/d/tables/nums, session projects/p/"}},
		{"p.d.nums", selected{}, []ReadOption{WithSelectedFields("id", "name")},
			[]string{"fields Score (column Score), Rank (column Rank)", "whose columns are id, name", "the read selects only id, name with WithSelectedFields: a column of the table that is not selected is not in the session"}},
		{"p.d.emb", nested{}, nil, []string{"field Base.Nmae (column Nmae)", "no column of RECORD column base, whose columns are id, name"}},
		{"p.d.emb", EConflict{}, nil, []string{"fields EBase.ID and EOther.ID of bigqueryio.EConflict are all named ID at the same depth"}},
	} {
		for _, format := range []DataFormat{Avro, Arrow} {
			_, err := readTable(t, tc.table, reflect.TypeOf(tc.v), 0, serverOpts(srv, append([]ReadOption{WithMaxStreams(1), WithDataFormat(format)}, tc.opts...)...)...)
			if err == nil {
				t.Errorf("%T: read with no error", tc.v)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%T: the error does not say %q: %v", tc.v, w, err)
				}
			}
			// The session DoFn refuses it too, before any stream is read.
			cfg, _ := newConfig("bigqueryio.Read", tc.table, serverOpts(srv, append([]ReadOption{WithDataFormat(format)}, tc.opts...)...))
			emitted := 0
			if err := emitSession(context.Background(), cfg, reflect.TypeOf(tc.v), func(StreamElement) { emitted++ }); err == nil || emitted > 0 {
				t.Errorf("%T: the session emitted %d streams, error %v", tc.v, emitted, err)
			}
			got, err := readTable(t, tc.table, reflect.TypeOf(tc.v), 0, serverOpts(srv, append([]ReadOption{WithMaxStreams(1), WithDataFormat(format), WithIgnoreUnknownFields()}, tc.opts...)...)...)
			if err != nil || len(got) == 0 {
				t.Errorf("%T with WithIgnoreUnknownFields: %d rows, %v", tc.v, len(got), err)
			}
		}
	}
	if got, _ := readTable(t, "p.d.nums", reflect.TypeOf(misspelled{}), 0, serverOpts(srv, WithMaxStreams(1), WithIgnoreUnknownFields())...); got[3].(misspelled) != (misspelled{ID: 3}) {
		t.Errorf("ignored field: %+v", got[3])
	}

	// When the pipeline is built.
	type unexportedPtr struct {
		*ebase
		Amount float64
	}
	_, s := beam.NewPipelineWithRoot()
	for _, tc := range []struct {
		v    any
		opts []ReadOption
		want string
	}{
		{struct{ ID, Name, Score int64 }{}, []ReadOption{WithSelectedFields("id", "NAME")}, "field Score (column Score) of struct { ID int64; Name int64; Score int64 } matches none of the selected fields (WithSelectedFields id, NAME)"},
		{misspelled{}, []ReadOption{WithSelectedFields("id", "score")}, "field Score (column scor)"},
		{nested{}, []ReadOption{WithSelectedFields("id", "base.id")}, ""}, // base.id selects base: its fields are checked when the session is known
		{EConflict{}, nil, "fields EBase.ID and EOther.ID"},
		{EConflict{}, []ReadOption{WithIgnoreUnknownFields()}, ""},
		{struct{ ID, Rank int64 }{}, []ReadOption{WithSelectedFields("id"), WithIgnoreUnknownFields()}, ""},
		{unexportedPtr{}, nil, "field ebase.ID of bigqueryio.unexportedPtr is reached through the unexported embedded pointer ebase (*bigqueryio.ebase)"},
		{unexportedPtr{}, []ReadOption{WithIgnoreUnknownFields()}, "unexported embedded pointer"},
	} {
		_, err := TryRead(s, "p.d.nums", reflect.TypeOf(tc.v), tc.opts...)
		if tc.want == "" {
			// The registration is checked last (TestUnregisteredType):
			// these local types cannot be registered, and get only that.
			if err != nil && !strings.Contains(err.Error(), "is not registered with Beam") {
				t.Errorf("TryRead(%T): %v", tc.v, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TryRead(%T): %v, want an error saying %q", tc.v, err, tc.want)
		}
	}
}
