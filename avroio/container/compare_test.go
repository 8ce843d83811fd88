package container

import (
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"sort"
	"time"

	"github.com/hamba/avro/v2"
)

// matchAvrocat checks that ours (a value hamba/avro decoded generically by
// schema s) equals theirs (what avrocat printed for it, parsed as JSON with
// json.Number). avrocat prints Avro's JSON encoding with two quirks of Avro
// C: bytes and fixed are C strings (cut at the first NUL, one code point per
// byte), and union branches of named types carry the short name. Logical
// types print as their underlying values.
func matchAvrocat(s avro.Schema, ours, theirs any, path string) error {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s (ours %T %v, avrocat %v)", path, fmt.Sprintf(format, args...), ours, ours, theirs)
	}
	logical := ""
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		logical = string(ls.Logical().Type())
	}
	num := func() (json.Number, error) {
		n, ok := theirs.(json.Number)
		if !ok {
			return "", bad("avrocat did not print a number")
		}
		return n, nil
	}
	switch s.Type() {
	case avro.Null:
		if ours != nil || theirs != nil {
			return bad("want null")
		}
	case avro.Boolean:
		if b, ok := ours.(bool); !ok || theirs != b {
			return bad("booleans differ")
		}
	case avro.Int, avro.Long:
		n, err := num()
		if err != nil {
			return err
		}
		want, err := n.Int64()
		if err != nil {
			return bad("avrocat printed %v", n)
		}
		var got int64
		switch v := ours.(type) {
		case int:
			got = int64(v)
		case int32:
			got = int64(v)
		case int64:
			got = v
		case time.Time:
			switch logical {
			case "date":
				got = v.Unix() / 86400
			case "timestamp-millis", "local-timestamp-millis":
				got = v.UnixMilli()
			case "timestamp-micros", "local-timestamp-micros":
				got = v.UnixMicro()
			default:
				return bad("time for logical type %q", logical)
			}
		case time.Duration:
			switch logical {
			case "time-millis":
				got = v.Milliseconds()
			case "time-micros":
				got = v.Microseconds()
			default:
				return bad("duration for logical type %q", logical)
			}
		default:
			return bad("unexpected Go type")
		}
		if got != want {
			return bad("numbers differ: %d != %d", got, want)
		}
	case avro.Float, avro.Double:
		n, err := num()
		if err != nil {
			return err
		}
		want, err := n.Float64()
		if err != nil {
			return bad("avrocat printed %v", n)
		}
		var got float64
		switch v := ours.(type) {
		case float32:
			got = float64(v)
		case float64:
			got = v
		default:
			return bad("unexpected Go type")
		}
		if got != want {
			return bad("floats differ")
		}
	case avro.String, avro.Enum:
		if str, ok := ours.(string); !ok || theirs != str {
			return bad("strings differ")
		}
	case avro.Bytes, avro.Fixed:
		var b []byte
		switch v := ours.(type) {
		case []byte:
			b = v
		case *big.Rat:
			scale := 0
			if d, ok := s.(avro.LogicalTypeSchema).Logical().(*avro.DecimalLogicalSchema); ok {
				scale = d.Scale()
			}
			size := -1
			if f, ok := s.(*avro.FixedSchema); ok {
				size = f.Size()
			}
			var err error
			if b, err = decimalBytes(v, scale, size); err != nil {
				return bad("%v", err)
			}
		default:
			rv := reflect.ValueOf(ours)
			if rv.Kind() != reflect.Array || rv.Type().Elem().Kind() != reflect.Uint8 {
				return bad("unexpected Go type")
			}
			b = make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
		}
		if cString(b) != theirs {
			return bad("bytes differ: %q", cString(b))
		}
	case avro.Array:
		a, ok1 := ours.([]any)
		t, ok2 := theirs.([]any)
		if !ok1 || !ok2 || len(a) != len(t) {
			return bad("arrays differ")
		}
		items := s.(*avro.ArraySchema).Items()
		for i := range a {
			if err := matchAvrocat(items, a[i], t[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case avro.Map:
		m, ok1 := ours.(map[string]any)
		t, ok2 := theirs.(map[string]any)
		if !ok1 || !ok2 || len(m) != len(t) {
			return bad("maps differ")
		}
		vals := s.(*avro.MapSchema).Values()
		for _, k := range sortedKeys(m) {
			if err := matchAvrocat(vals, m[k], t[k], path+"."+k); err != nil {
				return err
			}
		}
	case avro.Record, avro.Error:
		m, ok1 := ours.(map[string]any)
		t, ok2 := theirs.(map[string]any)
		fields := s.(*avro.RecordSchema).Fields()
		if !ok1 || !ok2 || len(m) != len(fields) || len(t) != len(fields) {
			return bad("records differ")
		}
		for _, f := range fields {
			if err := matchAvrocat(f.Type(), m[f.Name()], t[f.Name()], path+"."+f.Name()); err != nil {
				return err
			}
		}
	case avro.Union:
		u := s.(*avro.UnionSchema)
		if theirs == nil {
			if ours != nil || !hasNull(u) {
				return bad("want null")
			}
			return nil
		}
		t, ok := theirs.(map[string]any)
		if !ok || len(t) != 1 {
			return bad("avrocat union is not a one-key object")
		}
		var key string
		for k := range t {
			key = k
		}
		branch := unionBranch(u, key)
		if branch == nil {
			return bad("no branch %q", key)
		}
		val := ours
		if !(u.Nullable() && len(u.Types()) == 2) {
			// hamba wraps the value of a non-nullable union in a map keyed
			// by the branch's full name.
			m, ok := ours.(map[string]any)
			if !ok || len(m) != 1 {
				return bad("our union is not a one-key map")
			}
			var ok2 bool
			if val, ok2 = m[branchName(branch, true)]; !ok2 {
				return bad("our union branch differs from %q", branchName(branch, true))
			}
		}
		return matchAvrocat(branch, val, t[key], path+"|"+key)
	default:
		return bad("unhandled schema type %s", s.Type())
	}
	return nil
}

func hasNull(u *avro.UnionSchema) bool {
	for _, b := range u.Types() {
		if b.Type() == avro.Null {
			return true
		}
	}
	return false
}

func unionBranch(u *avro.UnionSchema, key string) avro.Schema {
	for _, b := range u.Types() {
		if branchName(b, true) == key || branchName(b, false) == key {
			return b
		}
	}
	return nil
}

func branchName(s avro.Schema, full bool) string {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if n, ok := s.(avro.NamedSchema); ok {
		if full {
			return n.FullName()
		}
		return n.Name()
	}
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil && full {
		return string(s.Type()) + "." + string(ls.Logical().Type())
	}
	return string(s.Type())
}

// cString renders bytes the way avrocat does: up to the first NUL, each byte
// one code point.
func cString(b []byte) string {
	r := make([]rune, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		r = append(r, rune(c))
	}
	return string(r)
}

// decimalBytes encodes the unscaled value of r as python-avro does for bytes
// decimals: two's complement in ceil((bitlen(|x|)+1)/8) bytes. Fixed
// decimals sign-extend to size bytes.
func decimalBytes(r *big.Rat, scale, size int) ([]byte, error) {
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
	if !x.IsInt() {
		return nil, fmt.Errorf("decimal %v has more than %d digits of scale", r, scale)
	}
	v := x.Num()
	n := (new(big.Int).Abs(v).BitLen() + 1 + 7) / 8
	if size >= 0 {
		n = size
	}
	mod := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
	u := new(big.Int).Set(v)
	if u.Sign() < 0 {
		u.Add(u, mod)
	}
	b := u.Bytes()
	out := make([]byte, n)
	copy(out[n-len(b):], b)
	if v.Sign() < 0 {
		for i := 0; i < n-len(b); i++ {
			out[i] = 0xff
		}
	}
	return out, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
