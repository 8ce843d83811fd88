package avroio

import (
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"time"

	"github.com/hamba/avro/v2"
)

// Unions of Records: which branch a value writes, and the names of
// branches in messages.

// branchOf finds the branch of union n that v is a value of, and the value
// to encode by it: nil is the null branch; a one-key map naming a wrapped
// branch is that branch (any branch, when no branch is a bare record or
// map); otherwise the one unwrapped branch of v's Go type.
func (n *node) branchOf(v any) (int, any, error) {
	if v == nil {
		if n.nullIdx < 0 {
			return 0, nil, fmt.Errorf("nil for a union without null (%s)", n.unionNames())
		}
		return n.nullIdx, nil, nil
	}
	if m, ok := asMap(v); ok && len(m) == 1 {
		bareMap := false
		for i, b := range n.branches {
			if !n.wrap[i] && b.goType == "map[string]any" {
				bareMap = true
			}
		}
		for k, inner := range m {
			for i, b := range n.branches {
				if b.name == k && (n.wrap[i] || !bareMap) {
					return i, inner, nil
				}
			}
		}
	}
	gt := goTypeOf(v)
	for i, b := range n.branches {
		if !n.wrap[i] && b.goType == gt {
			return i, v, nil
		}
	}
	// Numbers of another Go type: the first numeric branch that takes them.
	if _, ok := asInt64(v); ok {
		for i, b := range n.branches {
			if !n.wrap[i] && (b.kind == kLong || b.kind == kInt || b.kind == kDouble || b.kind == kFloat) {
				return i, v, nil
			}
		}
	}
	for i, b := range n.branches {
		if n.wrap[i] && b.goType == gt {
			return 0, nil, fmt.Errorf("a %T in union %s is ambiguous: give it as map[string]any{%q: value}", v, n.unionNames(), b.name)
		}
	}
	return 0, nil, fmt.Errorf("a %T is none of the branches of union %s", v, n.unionNames())
}

func (n *node) unionNames() string {
	s := "["
	for i, b := range n.branches {
		if i > 0 {
			s += ", "
		}
		s += b.name
	}
	return s + "]"
}

// goTypeOf names v's Go type as node.goType does.
func goTypeOf(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case int:
		return "int"
	case int64:
		return "int64"
	case float32:
		return "float32"
	case float64:
		return "float64"
	case string:
		return "string"
	case []byte:
		return "[]byte"
	case time.Time:
		return "time.Time"
	case time.Duration:
		return "time.Duration"
	case *big.Rat:
		return "*big.Rat"
	case avro.LogicalDuration:
		return "avro.LogicalDuration"
	case []any:
		return "[]any"
	case map[string]any, Record:
		return "map[string]any"
	}
	if t := reflect.TypeOf(v); t.Kind() == reflect.Array && t.Elem().Kind() == reflect.Uint8 {
		return "[" + strconv.Itoa(t.Len()) + "]byte"
	}
	return reflect.TypeOf(v).String()
}
