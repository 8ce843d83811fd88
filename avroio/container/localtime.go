package container

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
)

// Local timestamps
//
// hamba/avro v2 decodes local-timestamp-millis and local-timestamp-micros
// into a time.Time in time.Local, shifted by the local zone's offset at
// that instant: the result depends on the worker's TZ, and a wall clock
// inside a daylight-saving gap (02:30 on 2024-03-10 in New York) comes back
// an hour off. Typed reads here decode them instead as zone-free wall
// clocks, the rule avroio's generic Records follow: a time.Time in UTC
// whose UTC fields are the wall clock, the same on every worker.
//
// They do so by handing hamba/avro a copy of the schema in which every
// local-timestamp-millis/micros is relabelled timestamp-millis/micros (the
// encoding, a long, is the same): the writer schema, and the reader schema
// before it is resolved against the writer's, so both sides of the
// resolution agree. Only decoding sees the copy; Header, WriterSchema and
// Schema report the file's schemas, and a decoder made for NewReaderWith
// gets them as they are.
//
// Two consequences. In generic values (map[string]any, any), a union's
// local-timestamp branch is a bare time.Time, as a timestamp branch is,
// where hamba/avro alone wraps the union's value in a one-key map
// {"long.local-timestamp-millis": v}, having no Go type registered for
// that name. And a union holding
// both timestamp-millis and local-timestamp-millis (or both -micros) would
// hold one branch twice: a typed read of such a schema is an ErrSchema
// error naming the field; generic records that keep the branch (avroio's
// Record, through NewReaderWith) read it.

// localRelabel maps each local logical type to the one it is decoded as.
var localRelabel = map[string]string{
	string(avro.LocalTimestampMillis): string(avro.TimestampMillis),
	string(avro.LocalTimestampMicros): string(avro.TimestampMicros),
}

// RelabelLocalTimestamps returns the schema JSON text with every
// local-timestamp-millis/micros relabelled timestamp-millis/micros, and
// whether it changed anything: the schema by which hamba/avro reads and
// writes Go structs with zone-free local timestamps (see the package
// documentation); both encode the same long. Only positions that hold a
// schema are rewritten, never defaults or other properties. It fails when
// a union would then hold the same branch twice (a union of a timestamp
// and a local timestamp of one unit, which a struct cannot tell apart),
// naming the field by its path from the top record: fields joined by dots,
// "[]" for an array's items, "{}" for a map's values. avroio.Write encodes
// structs by it.
func RelabelLocalTimestamps(text string) (string, bool, error) {
	if !strings.Contains(text, "local-timestamp-") {
		return text, false, nil
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber() // defaults stay exactly as written
	var v any
	if err := d.Decode(&v); err != nil {
		return "", false, fmt.Errorf("parsing the schema's JSON: %w", err)
	}
	rl := relabeller{}
	if err := rl.schema(v, ""); err != nil {
		return "", false, err
	}
	if !rl.changed {
		return text, false, nil
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", false, fmt.Errorf("encoding the relabelled schema: %w", err)
	}
	return strings.TrimSpace(b.String()), true, nil
}

type relabeller struct{ changed bool }

// schema relabels the JSON schema v in place; path names it.
func (rl *relabeller) schema(v any, path string) error {
	switch s := v.(type) {
	case []any: // a union
		for _, b := range s {
			if err := rl.schema(b, path); err != nil {
				return err
			}
		}
		seen := map[string]bool{}
		for _, b := range s {
			name := branchKey(b)
			if name == "" {
				continue
			}
			if seen[name] {
				lt := strings.TrimPrefix(name, "long.")
				return fmt.Errorf("%s: the union holds both %s and local-%s, which a Go struct cannot tell apart (both are a time.Time); read or write it as avroio.Record values, which keep the branch", fieldName(path), lt, lt)
			}
			seen[name] = true
		}
	case map[string]any:
		switch t := s["type"].(type) {
		case string:
			switch t {
			case "record", "error":
				fields, _ := s["fields"].([]any)
				for _, f := range fields {
					fm, ok := f.(map[string]any)
					if !ok {
						continue
					}
					name, _ := fm["name"].(string)
					if err := rl.schema(fm["type"], joinPath(path, name)); err != nil {
						return err
					}
				}
			case "array":
				return rl.schema(s["items"], path+"[]")
			case "map":
				return rl.schema(s["values"], path+"{}")
			case "long":
				if lt, ok := s["logicalType"].(string); ok {
					if to, ok := localRelabel[lt]; ok {
						s["logicalType"] = to
						rl.changed = true
					}
				}
			}
		default: // {"type": <a schema>}
			return rl.schema(s["type"], path)
		}
	}
	return nil
}

// branchKey is the name hamba/avro gives a union branch of a long with a
// timestamp logical type, and "" for any other branch: the only branches
// relabelling can make equal.
func branchKey(v any) string {
	m, ok := v.(map[string]any)
	if !ok || m["type"] != "long" {
		return ""
	}
	lt, _ := m["logicalType"].(string)
	if lt != string(avro.TimestampMillis) && lt != string(avro.TimestampMicros) {
		return ""
	}
	return "long." + lt
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func fieldName(path string) string {
	if path == "" {
		return "the top-level schema"
	}
	return fmt.Sprintf("field %q", path)
}

// decodingSchema parses the relabelled copy of a schema's JSON text, or
// returns s itself (and changed false) when it has no local timestamps.
func decodingSchema(s avro.Schema, text string) (_ avro.Schema, changed bool, _ error) {
	rel, changed, err := RelabelLocalTimestamps(text)
	if err != nil {
		return nil, false, err
	}
	if !changed {
		return s, false, nil
	}
	d, err := avro.ParseWithCache(rel, "", &avro.SchemaCache{})
	if err != nil {
		return nil, false, fmt.Errorf("parsing the schema with local timestamps relabelled: %w", err)
	}
	return d, true, nil
}

// Relabelled reader schemas, by the schema (avroio hands every range of a
// read the same parsed reader schema). Bounded: cleared when full.
var (
	readerRelabelMu sync.Mutex
	readerRelabel   = map[avro.Schema]relabelled{}
)

const maxReaderRelabels = 64

type relabelled struct {
	schema  avro.Schema
	changed bool
	err     error
}

// decodingReaderSchema is decodingSchema for a reader schema.
func decodingReaderSchema(s avro.Schema) (avro.Schema, bool, error) {
	text := func() (string, error) {
		b, err := json.Marshal(s)
		if err != nil {
			return "", fmt.Errorf("encoding the reader schema: %w", err)
		}
		return string(b), nil
	}
	if reflect.ValueOf(s).Kind() != reflect.Pointer {
		// Not hamba/avro's: not comparable for sure, so not cached.
		t, err := text()
		if err != nil {
			return nil, false, err
		}
		return decodingSchema(s, t)
	}
	readerRelabelMu.Lock()
	r, ok := readerRelabel[s]
	readerRelabelMu.Unlock()
	if ok {
		return r.schema, r.changed, r.err
	}
	t, err := text()
	if err != nil {
		return nil, false, err
	}
	r.schema, r.changed, r.err = decodingSchema(s, t)
	readerRelabelMu.Lock()
	if len(readerRelabel) >= maxReaderRelabels {
		clear(readerRelabel)
	}
	readerRelabel[s] = r
	readerRelabelMu.Unlock()
	return r.schema, r.changed, r.err
}
