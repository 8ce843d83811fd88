package bigqueryio

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
)

// stringTyped are the columns sent as strings in Avro.
var stringTypedSchema = bigquery.Schema{
	{Name: "id", Type: bigquery.IntegerFieldType, Required: true},
	{Name: "dt", Type: bigquery.DateTimeFieldType, Required: true},
	{Name: "ndt", Type: bigquery.DateTimeFieldType},
	{Name: "g", Type: bigquery.GeographyFieldType},
	{Name: "j", Type: bigquery.JSONFieldType},
	{Name: "dts", Type: bigquery.DateTimeFieldType, Repeated: true},
	{Name: "rec", Type: bigquery.RecordFieldType, Schema: bigquery.Schema{{Name: "when", Type: bigquery.DateTimeFieldType}}},
}

type stringTyped struct {
	ID  int64
	Dt  civil.DateTime
	NDt bigquery.NullDateTime
	G   bigquery.NullGeography
	J   bigquery.NullJSON
	Dts []civil.DateTime
	Rec *struct{ When bigquery.NullDateTime }
}

func dt(y int, mo, d, h, mi, s, ns int) civil.DateTime {
	return civil.DateTime{Date: civil.Date{Year: y, Month: time.Month(mo), Day: d}, Time: civil.Time{Hour: h, Minute: mi, Second: s, Nanosecond: ns}}
}

// TestAvroStringAnnotations: DATETIME, GEOGRAPHY and JSON columns give the
// same Go values in structs and in Rows whether the session is Arrow or
// Avro, and in Avro whether DATETIME is marked logicalType "datetime" (the
// Storage Read API) or sqlType "DATETIME" (BigQuery's Avro exports).
// (Before: with sqlType, a civil.DateTime field failed with "column dt of
// type STRING", and Rows held strings.)
func TestAvroStringAnnotations(t *testing.T) {
	rows := [][]bigquery.Value{
		{int64(0), dt(2024, 2, 29, 23, 59, 58, 123456000), dt(1, 1, 1, 0, 0, 0, 0), "POINT(1 2)", `{"a":[1]}`,
			[]bigquery.Value{dt(9999, 12, 31, 23, 59, 59, 999999000)}, []bigquery.Value{dt(1969, 12, 31, 1, 2, 3, 4000)}},
		{int64(1), dt(2000, 1, 2, 3, 4, 5, 0), nil, nil, nil, []bigquery.Value{}, nil},
	}
	logical := newTestServer(t)
	sqlType := newTestServer(t, bqtest.WithAvroDateTimeSQLType())
	for _, srv := range []*bqtest.Server{logical, sqlType} {
		if err := srv.AddTable("p.d.st", bqtest.Table{Schema: stringTypedSchema, Rows: rows}); err != nil {
			t.Fatal(err)
		}
	}
	type variant struct {
		name   string
		srv    *bqtest.Server
		format DataFormat
	}
	variants := []variant{{"arrow", logical, Arrow}, {"avro logicalType", logical, Avro}, {"avro sqlType", sqlType, Avro}}
	var wantStructs, wantRows []any
	for _, v := range variants {
		opts := serverOpts(v.srv, WithMaxStreams(1), WithDataFormat(v.format))
		structs, err := readTable(t, "p.d.st", reflect.TypeOf(stringTyped{}), 0, opts...)
		if err != nil {
			t.Errorf("%s: structs: %v", v.name, err)
			continue
		}
		rs, err := readTable(t, "p.d.st", typeOfRow, 0, opts...)
		if err != nil {
			t.Errorf("%s: rows: %v", v.name, err)
			continue
		}
		if wantStructs == nil {
			wantStructs, wantRows = structs, rs
			if s := structs[0].(stringTyped); s.Dt != rows[0][1] || s.NDt.DateTime != rows[0][2] || !s.NDt.Valid || s.Rec.When.DateTime != dt(1969, 12, 31, 1, 2, 3, 4000) ||
				len(s.Dts) != 1 || s.J.JSONVal != `{"a":[1]}` {
				t.Errorf("%s: row 0 %+v", v.name, s)
			}
			if r := rs[0].(Row); r["dt"] != rows[0][1] || r["g"] != "POINT(1 2)" {
				t.Errorf("%s: row 0 %v", v.name, r)
			}
			continue
		}
		if !reflect.DeepEqual(structs, wantStructs) {
			t.Errorf("%s: structs %+v, arrow gave %+v", v.name, structs, wantStructs)
		}
		if !reflect.DeepEqual(rs, wantRows) {
			t.Errorf("%s: rows %v, arrow gave %v", v.name, rs, wantRows)
		}
	}
	// An error about a column names its BigQuery type, not the Avro string
	// that carries it.
	_, err := readTable(t, "p.d.st", reflect.TypeOf(struct {
		ID int64
		Dt int64
	}{}), 0, serverOpts(sqlType, WithMaxStreams(1))...)
	if err == nil || !strings.Contains(err.Error(), "column dt of type DATETIME") {
		t.Errorf("DATETIME into int64: %v", err)
	}
}

// TestAvroStringTypes: the annotations that name a string column's
// BigQuery type, on the type or on the field, in any case; two that
// disagree are an error naming the column.
func TestAvroStringTypes(t *testing.T) {
	for typ, want := range map[string]bigquery.FieldType{
		`"string"`: bigquery.StringFieldType,
		`{"type":"string","logicalType":"datetime"}`:                           bigquery.DateTimeFieldType,
		`{"type":"string","sqlType":"DATETIME"}`:                               bigquery.DateTimeFieldType,
		`{"type":"string","sqlType":"datetime"}`:                               bigquery.DateTimeFieldType,
		`{"type":"string","sqlType":"GEOGRAPHY"}`:                              bigquery.GeographyFieldType,
		`{"type":"string","logicalType":"geography"}`:                          bigquery.GeographyFieldType,
		`{"type":"string","sqlType":"JSON"}`:                                   bigquery.JSONFieldType,
		`{"type":"string","sqlType":"STRING"}`:                                 bigquery.StringFieldType,
		`{"type":"string","logicalType":"datetime","sqlType":"DATETIME"}`:      bigquery.DateTimeFieldType,
		`["null",{"type":"string","sqlType":"DATETIME"}]`:                      bigquery.DateTimeFieldType,
		`{"type":"array","items":{"type":"string","sqlType":"DATETIME"}}`:      bigquery.DateTimeFieldType,
		`"string","sqlType":"DATETIME"`:                                        bigquery.DateTimeFieldType, // on the field
		`{"type":"string","sqlType":"GEOGRAPHY"},"logicalType":"datetime"`:     "",                         // disagree
		`{"type":"string","logicalType":"json","sqlType":"GEOGRAPHY"}`:         "",
		`["null",{"type":"string","logicalType":"datetime","sqlType":"JSON"}]`: "",
	} {
		s, err := avro.ParseWithCache(`{"type":"record","name":"__root__","fields":[{"name":"c","type":`+typ+`}]}`, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		schema, err := schemaFromAvro(s)
		if want == "" {
			if err == nil || !strings.Contains(err.Error(), "column c") {
				t.Errorf("%s: %v, %v: want an error naming the column", typ, schema, err)
			}
			continue
		}
		if err != nil || schema[0].Type != want {
			t.Errorf("%s: %v, %v: want %s", typ, schema, err, want)
		}
	}
}
