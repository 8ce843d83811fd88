package avroio

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

type embBase struct {
	ID int64 `avro:"id"`
}

type embScore struct {
	Score float64 `avro:"score"`
}

// embTagged embeds a struct with a tag, which hamba/avro ignores: the
// embedded fields are flattened all the same.
type embTagged struct {
	embBase `avro:"base"`
	*embScore
	Name string `avro:"name"`
}

// embShadow has an outer field that shadows an embedded one of the same
// Avro name: hamba/avro fills the outer one only.
type embShadow struct {
	embBase
	Other int64 `avro:"id"`
}

// TestStructFieldsEmbedding: read and write see the same fields, by
// hamba/avro's rule, and hamba/avro encodes and decodes exactly those.
func TestStructFieldsEmbedding(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"E","fields":[{"name":"id","type":"long"},{"name":"score","type":"double"},{"name":"name","type":"string"}]}`)
	var names []string
	for _, f := range structFields(reflect.TypeFor[embTagged]()) {
		names = append(names, f.name+"="+f.path)
	}
	if got := strings.Join(names, " "); got != "name=Name id=embBase.ID score=embScore.Score" {
		t.Errorf("fields of embTagged: %s", got)
	}
	if err := checkFields(reflect.TypeFor[embTagged](), s); err != nil {
		t.Errorf("read check of embedded tagged and pointer structs: %v", err)
	}
	if err := checkWritable(reflect.TypeFor[embTagged](), s); err != nil {
		t.Errorf("write check of embedded tagged and pointer structs: %v", err)
	}
	in := embTagged{embBase: embBase{ID: 7}, embScore: &embScore{Score: 1.5}, Name: "n"}
	b, err := avro.Marshal(s, in)
	if err != nil {
		t.Fatalf("hamba/avro encoding what the checks accept: %v", err)
	}
	var out embTagged
	if err := avro.Unmarshal(s, b, &out); err != nil || out.ID != 7 || out.embScore == nil || out.Score != 1.5 || out.Name != "n" {
		t.Errorf("hamba/avro round trip: %+v %v", out, err)
	}

	var shadow []string
	for _, f := range structFields(reflect.TypeFor[embShadow]()) {
		shadow = append(shadow, f.name+"="+f.path)
	}
	if got := strings.Join(shadow, " "); got != "id=Other" {
		t.Errorf("fields of embShadow: %s", got)
	}
	missing := avro.MustParse(`{"type":"record","name":"M","fields":[{"name":"id","type":"long"},{"name":"extra","type":"long"}]}`)
	if err := checkWritable(reflect.TypeFor[embTagged](), missing); err == nil || !strings.Contains(err.Error(), `no field for field "extra"`) {
		t.Errorf("write check of a missing field: %v", err)
	}
	nested := avro.MustParse(`{"type":"record","name":"O","fields":[{"name":"id","type":"long"},
		{"name":"inner","type":["null",{"type":"record","name":"I","fields":[{"name":"a","type":"long"},{"name":"b","type":"long"}]}]},
		{"name":"others","type":{"type":"array","items":"I"}}]}`)
	if err := checkWritable(reflect.TypeFor[nestedOuter](), nested); err != nil {
		t.Errorf("write check of nested records: %v", err)
	}
}

// hintUntagged's UserID names Avro field "UserID" by its Go name.
type hintUntagged struct {
	UserID int64
	Score  float64 `avro:"Score_pct"`
}

// hintTagged's tag differs from the Avro field's name in case only.
type hintTagged struct {
	UserID int64   `avro:"user_id"`
	Score  float64 `avro:"score_PCT"`
}

// hintNoMatch's field is like none of the record's.
type hintNoMatch struct {
	Zzz int64
}

// TestFieldHintNamesARealField: the error for a Go field that names no
// Avro field suggests a tag with a field the record really has (the one
// equal but for case and underscores, else the first), never a literal
// `avro:"name"`, which reads like advice to use a field called name.
func TestFieldHintNamesARealField(t *testing.T) {
	s := avro.MustParse(`{"type":"record","name":"H","namespace":"ns","fields":[{"name":"user_id","type":"long"},{"name":"Score_pct","type":"double"}]}`)
	for _, tc := range []struct {
		typ  reflect.Type
		want string
	}{
		{reflect.TypeFor[hintUntagged](), "field UserID of Go type avroio.hintUntagged is Avro field \"UserID\" by its Go name, as it has no `avro` tag, but Avro record ns.H has no such field (its fields: user_id, Score_pct); tag the Go field with the Avro field it holds, as in `avro:\"user_id\"`, or with `avro:\"-\"` to leave it out"},
		{reflect.TypeFor[hintTagged](), "field Score of Go type avroio.hintTagged is Avro field \"score_PCT\" by its `avro` tag, but Avro record ns.H has no such field (its fields: user_id, Score_pct); tag the Go field with the Avro field it holds, as in `avro:\"Score_pct\"`"},
		{reflect.TypeFor[hintNoMatch](), "as in `avro:\"user_id\"`"},
	} {
		err := checkFields(tc.typ, s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v\nwant it to say %s", tc.typ, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "`avro:\"name\"`") {
			t.Errorf("%v: the hint is a literal avro:\"name\": %v", tc.typ, err)
		}
	}
}
