package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
)

// Parsing schemas, and what compiling them costs.
//
// hamba/avro takes any text that its JSON parser refuses for the name of a
// type, and so reports a schema nested too deep for that parser, or one
// that is not JSON at all, as an "unknown type" quoting the whole text (a
// line of 639 KB for 10,000 nested records). ParseSchema checks the JSON
// first, names what is wrong with it, and cuts every error to a few
// hundred bytes.

// MaxSchemaJSONDepth is how deeply a schema's JSON may nest arrays and
// objects: the limit of json-iterator, which hamba/avro parses it with.
const MaxSchemaJSONDepth = 10000

// maxErrorText bounds the text of a schema error.
const maxErrorText = 400

// cutError is an error whose text is cut to maxErrorText; it unwraps to
// the whole error.
type cutError struct {
	msg string
	err error
}

func (e *cutError) Error() string { return e.msg }
func (e *cutError) Unwrap() error { return e.err }

// cutErr cuts err's text, keeping its start and end.
func cutErr(err error) error {
	msg := err.Error()
	if len(msg) <= maxErrorText {
		return err
	}
	head, tail := msg[:maxErrorText/2], msg[len(msg)-maxErrorText/4:]
	return &cutError{msg: fmt.Sprintf("%s … (%d bytes cut) … %s", head, len(msg)-len(head)-len(tail), tail), err: err}
}

// ParseSchema parses an Avro schema's JSON text with a schema cache of its
// own (so that its named types neither leak into nor clash with another
// schema's). A text that is not JSON, or that nests deeper than
// MaxSchemaJSONDepth, is refused saying so; errors never quote more than
// a few hundred bytes of the schema.
func ParseSchema(text string) (avro.Schema, error) {
	if err := checkSchemaJSON(text); err != nil {
		return nil, err
	}
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, cutErr(err)
	}
	return s, nil
}

// checkSchemaJSON refuses text that is not JSON, or nests too deeply for
// hamba/avro's JSON parser. A bare string that is not JSON ("long"
// without quotes) is left to hamba/avro, which reads it as a type name.
func checkSchemaJSON(text string) error {
	depth, deepest, inString, escaped := 0, 0, false, false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	if deepest > MaxSchemaJSONDepth {
		return fmt.Errorf("the schema's JSON nests objects and arrays %d levels deep; hamba/avro's JSON parser reads at most %d", deepest, MaxSchemaJSONDepth)
	}
	trimmed := strings.TrimSpace(text)
	if trimmed == "" || trimmed[0] != '{' && trimmed[0] != '[' && trimmed[0] != '"' {
		return nil // a bare name, for hamba/avro to resolve or refuse
	}
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("the schema is not valid JSON: %v, at byte %d", se, se.Offset)
		}
		return cutErr(fmt.Errorf("the schema is not valid JSON: %w", err))
	}
	return nil
}

// CheckCompileCost is the error of a schema s that hamba/avro would spend
// more than MaxCompileCost times limit bytes compiling (CompileCost), or
// nil.
func CheckCompileCost(s avro.Schema, what string, limit int64) error {
	return checkCompileCost(s, what, limit)
}

// CompileCost estimates the bytes hamba/avro allocates to compile s for
// decoding or encoding Go values by it (its Fingerprint of every record,
// which concatenates the schema's text piece by piece, in time and memory
// that grow with the square of a record's fields or a union's branches: a
// union of 10,000 branches costs gigabytes). Reads of Go types (not of
// avroio's Records), reads with a reader schema and Writes of structs
// refuse a schema whose cost exceeds MaxCompileCost of their MaxAlloc.
func CompileCost(s avro.Schema) int64 {
	type sc struct{ s, c int64 } // the text's length, the bytes allocated making it
	memo := map[avro.Schema]sc{}
	var total int64
	var walk func(s avro.Schema) sc
	list := func(items []sc, overhead int64) sc {
		var r sc
		var prefix int64
		for _, it := range items {
			prefix = satAdd(prefix, it.s+1)
			r.c = satAdd(satAdd(r.c, it.c), prefix)
		}
		r.s = satAdd(prefix, overhead)
		r.c = satAdd(r.c, r.s)
		return r
	}
	walk = func(s avro.Schema) sc {
		if r, ok := memo[s]; ok {
			return r
		}
		var r sc
		switch t := s.(type) {
		case *avro.RefSchema:
			r = sc{s: int64(len(t.Schema().(avro.NamedSchema).FullName())) + 2}
			r.c = r.s
		case *avro.RecordSchema:
			var fields []sc
			for _, f := range t.Fields() {
				ft := walk(f.Type())
				fs := satAdd(ft.s, int64(len(f.Name()))+20)
				fields = append(fields, sc{s: fs, c: satAdd(ft.c, fs)})
			}
			r = list(fields, int64(len(t.FullName()))+40)
			total = satAdd(total, r.c) // every record is fingerprinted
		case *avro.UnionSchema:
			var branches []sc
			for _, b := range t.Types() {
				branches = append(branches, walk(b))
			}
			r = list(branches, 2)
		case *avro.EnumSchema:
			var syms []sc
			for _, y := range t.Symbols() {
				syms = append(syms, sc{s: int64(len(y)) + 2})
			}
			r = list(syms, int64(len(t.FullName()))+40)
		case *avro.ArraySchema:
			it := walk(t.Items())
			r = sc{s: satAdd(it.s, 30)}
			r.c = satAdd(it.c, r.s)
		case *avro.MapSchema:
			v := walk(t.Values())
			r = sc{s: satAdd(v.s, 30)}
			r.c = satAdd(v.c, r.s)
		case *avro.FixedSchema:
			r = sc{s: int64(len(t.FullName())) + 80}
			r.c = r.s
		default:
			r = sc{s: 80, c: 80}
		}
		memo[s] = r
		return r
	}
	root := walk(s)
	if _, ok := s.(*avro.RecordSchema); !ok {
		total = satAdd(total, root.c)
	}
	return total
}

// MaxCompileCost is how many times its MaxAlloc a read or a Write lets
// hamba/avro spend compiling a schema (CompileCost): 16, 1 GiB at the
// default MaxAlloc, about a second and a half of one core.
const MaxCompileCost = 16

// checkCompileCost refuses s when compiling it through hamba/avro would
// cost more than MaxCompileCost times limit.
func checkCompileCost(s avro.Schema, what string, limit int64) error {
	if c := CompileCost(s); c > satMul(MaxCompileCost, limit) {
		return fmt.Errorf("compiling the %s through hamba/avro would allocate about %d bytes (its records' fields and unions' branches cost the square of their number), over %d times the %d-byte limit (Limits.MaxAlloc; avroio.WithMaxAlloc); read the file as avroio Records, which are not compiled through hamba/avro, or raise the limit", what, c, MaxCompileCost, limit)
	}
	return nil
}
