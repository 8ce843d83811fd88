package bqwrite

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/descriptorpb"
)

// protoJSON is an encoded row as JSON, as protojson shows it (the fields'
// JSON names, INT64 as a string, BYTES in base64, unset fields left out),
// decoded by hand against the writer schema desc, or the row's bytes in
// base64 if it cannot be decoded: malformed, a REQUIRED field missing, a
// string not UTF-8, or a field of a type no writer schema has.
func protoJSON(desc *descriptorpb.DescriptorProto, row []byte) string {
	nested := make(map[string]*descriptorpb.DescriptorProto, len(desc.GetNestedType()))
	for _, n := range desc.GetNestedType() {
		nested[n.GetName()] = n
	}
	if b, ok := appendMessageJSON(nil, desc, nested, row); ok {
		return string(b)
	}
	return base64.StdEncoding.EncodeToString(row)
}

// fieldValues are the values of one field of a message, in wire order.
type fieldValues struct {
	vals []uint64 // varint and fixed64 fields
	msgs [][]byte // string, bytes and message fields
}

// appendMessageJSON appends the message m of type d as a JSON object.
func appendMessageJSON(out []byte, d *descriptorpb.DescriptorProto, nested map[string]*descriptorpb.DescriptorProto, m []byte) ([]byte, bool) {
	fields := d.GetField()
	vals := make([]fieldValues, len(fields))
	for len(m) > 0 {
		num, wt, n := protowire.ConsumeTag(m)
		if n < 0 {
			return out, false
		}
		m = m[n:]
		i := fieldIndex(fields, num)
		if i < 0 {
			if n = protowire.ConsumeFieldValue(num, wt, m); n < 0 {
				return out, false
			}
			m = m[n:]
			continue
		}
		f, v := fields[i], &vals[i]
		want, ok := wireType(f.GetType())
		if !ok {
			return out, false
		}
		repeated := f.GetLabel() == descriptorpb.FieldDescriptorProto_LABEL_REPEATED
		switch {
		case wt == want && want == protowire.BytesType:
			b, n := protowire.ConsumeBytes(m)
			if n < 0 {
				return out, false
			}
			m = m[n:]
			if repeated || f.GetType() == descriptorpb.FieldDescriptorProto_TYPE_MESSAGE {
				v.msgs = append(v.msgs, b) // a singular message's parts are merged
			} else {
				v.msgs = append(v.msgs[:0], b) // the last value of a singular field
			}
		case wt == want:
			x, n := consumeScalar(m, wt)
			if n < 0 {
				return out, false
			}
			m = m[n:]
			if !repeated {
				v.vals = v.vals[:0]
			}
			v.vals = append(v.vals, x)
		case wt == protowire.BytesType && repeated: // packed
			b, n := protowire.ConsumeBytes(m)
			if n < 0 {
				return out, false
			}
			m = m[n:]
			for len(b) > 0 {
				x, n := consumeScalar(b, want)
				if n < 0 {
					return out, false
				}
				b = b[n:]
				v.vals = append(v.vals, x)
			}
		default: // another wire type: an unknown field, which JSON leaves out
			if n = protowire.ConsumeFieldValue(num, wt, m); n < 0 {
				return out, false
			}
			m = m[n:]
		}
	}
	out = append(out, '{')
	first := true
	for i, f := range fields {
		v := &vals[i]
		count := len(v.vals) + len(v.msgs)
		if count == 0 {
			if f.GetLabel() == descriptorpb.FieldDescriptorProto_LABEL_REQUIRED {
				return out, false
			}
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = append(out, jsonName(f.GetName())...) // ASCII letters, digits, underscores
		out = append(out, '"', ':')
		repeated := f.GetLabel() == descriptorpb.FieldDescriptorProto_LABEL_REPEATED
		if repeated {
			out = append(out, '[')
		}
		var ok bool
		switch f.GetType() {
		case descriptorpb.FieldDescriptorProto_TYPE_MESSAGE:
			name := f.GetTypeName()
			if k := strings.LastIndexByte(name, '.'); k >= 0 {
				name = name[k+1:]
			}
			sub, found := nested[name]
			if !found {
				return out, false
			}
			if !repeated { // one message, of all its parts
				var whole []byte
				for _, p := range v.msgs {
					whole = append(whole, p...)
				}
				v.msgs = [][]byte{whole}
			}
			for k, p := range v.msgs {
				if k > 0 {
					out = append(out, ',')
				}
				if out, ok = appendMessageJSON(out, sub, nested, p); !ok {
					return out, false
				}
			}
		case descriptorpb.FieldDescriptorProto_TYPE_STRING:
			for k, p := range v.msgs {
				if k > 0 {
					out = append(out, ',')
				}
				if out, ok = appendJSONString(out, p); !ok {
					return out, false
				}
			}
		case descriptorpb.FieldDescriptorProto_TYPE_BYTES:
			for k, p := range v.msgs {
				if k > 0 {
					out = append(out, ',')
				}
				out = append(out, '"')
				out = base64.StdEncoding.AppendEncode(out, p)
				out = append(out, '"')
			}
		default:
			for k, x := range v.vals {
				if k > 0 {
					out = append(out, ',')
				}
				out = appendScalarJSON(out, f.GetType(), x)
			}
		}
		if repeated {
			out = append(out, ']')
		}
	}
	return append(out, '}'), true
}

func fieldIndex(fields []*descriptorpb.FieldDescriptorProto, num protowire.Number) int {
	for i, f := range fields {
		if protowire.Number(f.GetNumber()) == num {
			return i
		}
	}
	return -1
}

// wireType is the wire type of the fields of type t a writer schema has.
func wireType(t descriptorpb.FieldDescriptorProto_Type) (protowire.Type, bool) {
	switch t {
	case descriptorpb.FieldDescriptorProto_TYPE_INT64, descriptorpb.FieldDescriptorProto_TYPE_INT32,
		descriptorpb.FieldDescriptorProto_TYPE_BOOL:
		return protowire.VarintType, true
	case descriptorpb.FieldDescriptorProto_TYPE_DOUBLE:
		return protowire.Fixed64Type, true
	case descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_BYTES,
		descriptorpb.FieldDescriptorProto_TYPE_MESSAGE:
		return protowire.BytesType, true
	}
	return 0, false
}

func consumeScalar(b []byte, wt protowire.Type) (uint64, int) {
	if wt == protowire.Fixed64Type {
		return protowire.ConsumeFixed64(b)
	}
	return protowire.ConsumeVarint(b)
}

// appendScalarJSON appends a varint or fixed64 value x of type t.
func appendScalarJSON(out []byte, t descriptorpb.FieldDescriptorProto_Type, x uint64) []byte {
	switch t {
	case descriptorpb.FieldDescriptorProto_TYPE_INT64:
		out = append(out, '"')
		out = strconv.AppendInt(out, int64(x), 10)
		return append(out, '"')
	case descriptorpb.FieldDescriptorProto_TYPE_INT32:
		return strconv.AppendInt(out, int64(int32(x)), 10)
	case descriptorpb.FieldDescriptorProto_TYPE_BOOL:
		return strconv.AppendBool(out, x != 0)
	}
	f := math.Float64frombits(x) // DOUBLE
	switch {
	case math.IsNaN(f):
		return append(out, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(out, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(out, `"-Infinity"`...)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	start := len(out)
	out = strconv.AppendFloat(out, f, format, -1, 64)
	if format == 'e' { // e-07, not e-07's zero: e-7
		if s := out[start:]; len(s) >= 4 && s[len(s)-4] == 'e' && s[len(s)-3] == '-' && s[len(s)-2] == '0' {
			out[len(out)-2] = out[len(out)-1]
			out = out[:len(out)-1]
		}
	}
	return out
}

// appendJSONString appends s as a JSON string, escaping ", \ and the
// control characters; false if s is not UTF-8.
func appendJSONString(out, s []byte) ([]byte, bool) {
	out = append(out, '"')
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		switch {
		case r == utf8.RuneError && n == 1:
			return out, false
		case r == '"' || r == '\\':
			out = append(out, '\\', byte(r))
		case r < ' ':
			switch r {
			case '\b':
				out = append(out, '\\', 'b')
			case '\f':
				out = append(out, '\\', 'f')
			case '\n':
				out = append(out, '\\', 'n')
			case '\r':
				out = append(out, '\\', 'r')
			case '\t':
				out = append(out, '\\', 't')
			default:
				const hex = "0123456789abcdef"
				out = append(out, '\\', 'u', '0', '0', hex[r>>4], hex[r&15])
			}
		default:
			out = append(out, s[:n]...)
		}
		s = s[n:]
	}
	return append(out, '"'), true
}

// jsonName is a field's JSON name: its name without underscores, with
// the lower-case letters after them upper-cased.
func jsonName(name string) string {
	b := make([]byte, 0, len(name))
	under := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' {
			under = true
			continue
		}
		if under && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		under = false
		b = append(b, c)
	}
	return string(b)
}
