package avroio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
)

// Local timestamps (Avro's local-timestamp-millis and -micros) are wall
// clocks with no zone. This package has one rule for them, for structs and
// Records, on reads and writes (see "Local timestamps" in the package
// documentation): the wall clock is the UTC fields of a time.Time. A
// local-timestamp-millis of value v is the time.Time time.UnixMilli(v).UTC(),
// and a time.Time t is written as t.UnixMilli(), exactly as a
// timestamp-millis is. The binary encodings of a local timestamp and of a
// timestamp of the same unit are the same long, so the rule is what
// hamba/avro does for timestamps.
//
// hamba/avro (v2.31) encodes a struct's local timestamp as the wall clock
// of t.Local(), which depends on the time zone of the worker. So Write
// encodes structs by a copy of the writer schema in which every
// local-timestamp-* is relabelled as the timestamp-* of its unit
// (relabelLocalTimestamps); the files' headers keep the schema as the user
// gave it. Records are encoded by this package's own encoder (generic.go),
// which keeps the rule itself.

// timestampFor maps each local-timestamp logical type to the timestamp of
// the same unit, whose encoding is the same.
var timestampFor = map[string]string{
	string(avro.LocalTimestampMillis): string(avro.TimestampMillis),
	string(avro.LocalTimestampMicros): string(avro.TimestampMicros),
}

// relabelLocalTimestamps returns the schema JSON with every long of logical
// type local-timestamp-millis/micros relabelled as timestamp-millis/micros,
// and whether it had any. Everything else (names, defaults, aliases,
// properties) is kept; only positions that hold a schema are rewritten,
// never default values. The result encodes the same bytes for every value
// hamba/avro encodes, except that times are encoded by their UTC fields.
func relabelLocalTimestamps(schema string) (string, bool, error) {
	d := json.NewDecoder(strings.NewReader(schema))
	d.UseNumber() // defaults keep their exact text
	var v any
	if err := d.Decode(&v); err != nil {
		return "", false, fmt.Errorf("parsing the schema's JSON: %w", err)
	}
	if !relabelSchema(v) {
		return schema, false, nil
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", false, fmt.Errorf("encoding the relabelled schema: %w", err)
	}
	return strings.TrimSpace(b.String()), true, nil
}

// relabelSchema rewrites the local timestamps of the schema v (decoded
// JSON) in place and reports whether it found any.
func relabelSchema(v any) bool {
	switch x := v.(type) {
	case []any: // a union
		changed := false
		for _, b := range x {
			changed = relabelSchema(b) || changed
		}
		return changed
	case map[string]any:
		switch t := x["type"].(type) {
		case string:
			switch t {
			case "record", "error":
				fields, _ := x["fields"].([]any)
				changed := false
				for _, f := range fields {
					if fm, ok := f.(map[string]any); ok {
						changed = relabelSchema(fm["type"]) || changed
					}
				}
				return changed
			case "array":
				return relabelSchema(x["items"])
			case "map":
				return relabelSchema(x["values"])
			case "long":
				if lt, ok := x["logicalType"].(string); ok && timestampFor[lt] != "" {
					x["logicalType"] = timestampFor[lt]
					return true
				}
			}
		case map[string]any, []any: // {"type": {...}}
			return relabelSchema(t)
		}
	}
	return false
}

// checkTimestampUnions refuses, for structs, a union that holds both a
// timestamp and a local timestamp of the same unit: both are a time.Time in
// a struct, so neither hamba/avro nor the relabelled schema (where the two
// branches would be one) can tell which branch a value takes. Records name
// the branch ({"long.local-timestamp-millis": t}) and write such unions.
func checkTimestampUnions(s avro.Schema) error {
	seen := map[string]bool{}
	var walk func(s avro.Schema, path string) error
	walk = func(s avro.Schema, path string) error {
		switch x := s.(type) {
		case *avro.RefSchema:
			return walk(x.Schema(), path)
		case *avro.RecordSchema:
			if seen[x.FullName()] {
				return nil
			}
			seen[x.FullName()] = true
			for _, f := range x.Fields() {
				p := path + "." + f.Name()
				if path == "" {
					p = x.FullName() + "." + f.Name()
				}
				if err := walk(f.Type(), p); err != nil {
					return err
				}
			}
		case *avro.ArraySchema:
			return walk(x.Items(), path+"[]")
		case *avro.MapSchema:
			return walk(x.Values(), path+"[key]")
		case *avro.UnionSchema:
			has := map[avro.LogicalType]bool{}
			for _, b := range x.Types() {
				if ls, ok := b.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
					has[ls.Logical().Type()] = true
				}
			}
			for local, plain := range map[avro.LogicalType]avro.LogicalType{
				avro.LocalTimestampMillis: avro.TimestampMillis,
				avro.LocalTimestampMicros: avro.TimestampMicros,
			} {
				if has[local] && has[plain] {
					return fmt.Errorf("field %s holds a union of %s and %s, which a Go struct cannot tell apart (both are a time.Time); write avroio.Record values, which name the branch ({%q: t})",
						path, plain, local, "long."+string(local))
				}
			}
			for _, b := range x.Types() {
				if err := walk(b, path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(s, "")
}
