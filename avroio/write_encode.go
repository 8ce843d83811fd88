package avroio

// The encoding of a write's elements: Records by the package's own
// encoder, other types by hamba/avro.

import (
	"fmt"
	"reflect"

	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/container"
)

// recordEncoder encodes Records by the writer schema with the package's
// own encoder (see generic_encode.go), so that unions keep the branch a Record
// names; other elements are encoded by hamba/avro.
type recordEncoder struct {
	root *node
	buf  []byte
}

func newRecordEncoder(schema string) (*recordEncoder, error) {
	n, err := compileSchema(parsedSchema(schema))
	if err != nil {
		return nil, err
	}
	return &recordEncoder{root: n}, nil
}

// encode returns the datum of r; the slice is reused by the next call.
func (e *recordEncoder) encode(r Record) ([]byte, error) {
	b, err := appendDatum(e.buf[:0], e.root, map[string]any(r))
	if err != nil {
		return nil, err
	}
	e.buf = b
	return b, nil
}

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
// (container.RelabelLocalTimestamps, which also refuses a union of a
// timestamp and a local timestamp of one unit, naming the field); the
// files' headers keep the schema as the user gave it; container.Writer's
// Append, which the runner-sharded path uses, encodes by the same copy.
// Records are encoded by this package's own encoder (generic_encode.go), which
// keeps the rule itself.

// elementEncoder encodes the elements of a write: Records by the
// package's own encoder, anything else by hamba/avro, by the writer schema
// or, when it has local timestamps, by writeConfig.StructSchema.
type elementEncoder struct {
	rec *recordEncoder
	// schema and enc encode other elements for the NumShards path, by
	// writeConfig.StructSchema when the writer schema has local timestamps
	// (container.Writer.Append encodes them on the runner-sharded path).
	schema avro.Schema
	name   string // the writer schema's full name, for errors
	enc    *avro.Writer
	// checks are what each Go type of element needs checked before
	// hamba/avro encodes it (fit.go), made at its first element.
	checks map[reflect.Type]*valueCheck
	// user is the writer schema as given (local timestamps not
	// relabelled), by which the stand-ins of Go types holding civil dates
	// and times are made (civil.go): convs, by Go type, nil for a type
	// without one.
	user  avro.Schema
	convs map[reflect.Type]*civilConv
}

func newElementEncoder(cfg writeConfig) (*elementEncoder, error) {
	rec, err := newRecordEncoder(cfg.Schema)
	if err != nil {
		return nil, err
	}
	e := &elementEncoder{rec: rec, schema: parsedSchema(cfg.Schema), enc: avro.NewWriter(nil, 512), checks: map[reflect.Type]*valueCheck{}, convs: map[reflect.Type]*civilConv{}}
	e.user = e.schema
	e.name = schemaFullName(e.schema)
	if cfg.StructSchema != "" {
		e.schema = parsedSchema(cfg.StructSchema)
	}
	return e, nil
}

// encode returns the datum of elem; the slice is reused by the next call.
func (e *elementEncoder) encode(elem any) ([]byte, error) {
	if r, ok := elem.(Record); ok {
		d, err := e.rec.encode(r)
		if err != nil {
			return nil, fmt.Errorf("encoding an avroio.Record by schema %s: %w", e.name, err)
		}
		return d, nil
	}
	elem, err := e.standIn(elem)
	if err != nil {
		return nil, err
	}
	if err := e.checkValue(elem); err != nil {
		return nil, err
	}
	e.enc.Reset(nil)
	e.enc.Error = nil
	e.enc.WriteVal(e.schema, elem)
	if err := e.enc.Error; err != nil {
		e.enc.Error = nil
		return nil, fmt.Errorf("encoding a %T by schema %s: %w", elem, e.name, err)
	}
	return e.enc.Buffer(), nil
}

// standIn is elem, or, when its Go type holds civil dates or times that
// the schema has as dates, times or local timestamps, its stand-in
// (civil.go).
func (e *elementEncoder) standIn(elem any) (any, error) {
	if elem == nil {
		return nil, nil
	}
	t := reflect.TypeOf(elem)
	c, ok := e.convs[t]
	if !ok {
		var err error
		if c, err = civilStandIn(t, e.user); err != nil {
			return nil, fmt.Errorf("encoding a %T by schema %s: %w", elem, e.name, err)
		}
		e.convs[t] = c
	}
	if c == nil {
		return elem, nil
	}
	v, err := c.convertWrite(elem)
	if err != nil {
		return nil, fmt.Errorf("encoding a %T by schema %s: %w", elem, e.name, err)
	}
	return v, nil
}

// checkValue refuses an element that hamba/avro would encode changed: a
// value out of the range of its Avro type (fit.go).
func (e *elementEncoder) checkValue(elem any) error {
	if elem == nil {
		return nil // hamba/avro refuses it
	}
	t := reflect.TypeOf(elem)
	c, ok := e.checks[t]
	if !ok {
		var err error
		if c, err = fitTypes(t, e.schema, fitWrite); err != nil {
			return fmt.Errorf("encoding a %T by schema %s: %w", elem, e.name, err)
		}
		e.checks[t] = c
	}
	if c == nil {
		return nil
	}
	if err := c.check(reflect.ValueOf(elem), ""); err != nil {
		return fmt.Errorf("encoding a %T by schema %s: %w", elem, e.name, err)
	}
	return nil
}

// append adds elem to w.
func (e *elementEncoder) append(w *container.Writer, elem any) error {
	if _, ok := elem.(Record); !ok {
		elem, err := e.standIn(elem)
		if err != nil {
			return fmt.Errorf("record %d: %w", w.Records(), err)
		}
		if err := e.checkValue(elem); err != nil {
			return fmt.Errorf("record %d: %w", w.Records(), err)
		}
		// Straight into the block; Append encodes local timestamps by
		// the relabelled schema itself.
		return w.Append(elem)
	}
	d, err := e.encode(elem)
	if err != nil {
		return fmt.Errorf("record %d: %w", w.Records(), err)
	}
	return w.AppendEncoded(d)
}

// openEncoder makes the record encoder of the write's DoFns, its error
// naming the write.
func openEncoder(cfg writeConfig) (*elementEncoder, error) {
	enc, err := newElementEncoder(cfg)
	if err != nil {
		return nil, fmt.Errorf("avroio.Write to %s: %w", cfg.Prefix, err)
	}
	return enc, nil
}
