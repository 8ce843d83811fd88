package bqtest

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"
)

// A predicate is a compiled row restriction. It evaluates SQL's three-valued
// logic: a comparison with NULL is unknown, and a row passes only when the
// restriction is true.
type predicate func(row []bigquery.Value) tri

type tri int8

const (
	unknown tri = iota
	falseT
	trueT
)

func (t tri) not() tri {
	switch t {
	case trueT:
		return falseT
	case falseT:
		return trueT
	}
	return unknown
}

// compileRestriction parses the subset of row restrictions bqtest serves:
// comparisons (=, !=, <>, <, <=, >, >=) and [NOT] IN (...) between a
// top-level column and literals (integers, floats, 'strings', TRUE, FALSE),
// col IS [NOT] NULL, AND, OR, NOT and parentheses. Keywords are
// case-insensitive; column names are matched case-insensitively as BigQuery
// does.
func compileRestriction(src string, schema bigquery.Schema) (predicate, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, schema: schema}
	pred, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q at position %d", p.toks[p.pos].text, p.toks[p.pos].at)
	}
	return pred, nil
}

type tokKind int

const (
	tIdent tokKind = iota
	tNumber
	tString
	tOp
	tPunct
)

type token struct {
	kind tokKind
	text string
	at   int
}

func lex(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '(' || c == ')' || c == ',':
			toks = append(toks, token{tPunct, string(c), i})
			i++
		case strings.ContainsRune("=!<>", c):
			j := i + 1
			if j < len(s) && (s[j] == '=' || (c == '<' && s[j] == '>')) {
				j++
			}
			op := s[i:j]
			if op == "!" {
				return nil, fmt.Errorf("unexpected '!' at position %d", i)
			}
			toks = append(toks, token{tOp, op, i})
			i = j
		case c == '\'' || c == '"':
			j := i + 1
			var b strings.Builder
			for ; j < len(s) && rune(s[j]) != c; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string starting at position %d", i)
			}
			toks = append(toks, token{tString, b.String(), i})
			i = j + 1
		case c == '-' || c == '.' || unicode.IsDigit(c):
			j := i + 1
			for j < len(s) && (unicode.IsDigit(rune(s[j])) || strings.ContainsRune(".eE", rune(s[j])) || ((s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E'))) {
				j++
			}
			toks = append(toks, token{tNumber, s[i:j], i})
			i = j
		case c == '_' || unicode.IsLetter(c) || c == '`':
			if c == '`' {
				j := strings.IndexByte(s[i+1:], '`')
				if j < 0 {
					return nil, fmt.Errorf("unterminated quoted name at position %d", i)
				}
				toks = append(toks, token{tIdent, s[i+1 : i+1+j], i})
				i += j + 2
				continue
			}
			j := i + 1
			for j < len(s) && (s[j] == '_' || unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j]))) {
				j++
			}
			toks = append(toks, token{tIdent, s[i:j], i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at position %d", c, i)
		}
	}
	return toks, nil
}

type parser struct {
	toks   []token
	pos    int
	schema bigquery.Schema
}

func (p *parser) peekKeyword(kw string) bool {
	return p.pos < len(p.toks) && p.toks[p.pos].kind == tIdent && strings.EqualFold(p.toks[p.pos].text, kw)
}

// acceptKeyword reports whether the next token is the keyword kw, and
// passes it if so.
func (p *parser) acceptKeyword(kw string) bool {
	if !p.peekKeyword(kw) {
		return false
	}
	p.pos++
	return true
}

func (p *parser) peekPunct(s string) bool {
	return p.pos < len(p.toks) && p.toks[p.pos].kind == tPunct && p.toks[p.pos].text == s
}

func (p *parser) errorf(format string, args ...any) error {
	at := "the end"
	if p.pos < len(p.toks) {
		at = fmt.Sprintf("%q at position %d", p.toks[p.pos].text, p.toks[p.pos].at)
	}
	return fmt.Errorf(format+" (at %s)", append(args, at)...)
}

func (p *parser) or() (predicate, error) { return p.connective("OR", p.and, trueT) }

func (p *parser) and() (predicate, error) { return p.connective("AND", p.not, falseT) }

// connective parses operands joined by the keyword kw (OR or AND) into
// their three-valued combination: decisive (TRUE for OR, FALSE for AND)
// when either operand is, its negation when both are, else unknown.
func (p *parser) connective(kw string, operand func() (predicate, error), decisive tri) (predicate, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	other := decisive.not()
	for p.acceptKeyword(kw) {
		r, err := operand()
		if err != nil {
			return nil, err
		}
		a, b := l, r
		l = func(row []bigquery.Value) tri {
			x, y := a(row), b(row)
			switch {
			case x == decisive || y == decisive:
				return decisive
			case x == other && y == other:
				return other
			}
			return unknown
		}
	}
	return l, nil
}

func (p *parser) not() (predicate, error) {
	if p.acceptKeyword("NOT") {
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return func(row []bigquery.Value) tri { return x(row).not() }, nil
	}
	return p.primary()
}

func (p *parser) primary() (predicate, error) {
	if p.peekPunct("(") {
		p.pos++
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if !p.peekPunct(")") {
			return nil, p.errorf("expected ')'")
		}
		p.pos++
		return x, nil
	}
	if p.pos >= len(p.toks) || p.toks[p.pos].kind != tIdent {
		return nil, p.errorf("expected a column name")
	}
	name := p.toks[p.pos].text
	idx := -1
	for i, f := range p.schema {
		if strings.EqualFold(f.Name, name) {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("Unrecognized name: %s", name)
	}
	f := p.schema[idx]
	if f.Repeated || f.Type == bigquery.RecordFieldType {
		return nil, fmt.Errorf("column %s is a %s and bqtest filters only on top-level scalar columns", f.Name, map[bool]string{true: "repeated field", false: "record"}[f.Repeated])
	}
	p.pos++
	switch {
	case p.acceptKeyword("IS"):
		neg := p.acceptKeyword("NOT")
		if !p.acceptKeyword("NULL") {
			return nil, p.errorf("expected NULL after IS")
		}
		return func(row []bigquery.Value) tri { return triOf((row[idx] == nil) != neg) }, nil
	case p.peekKeyword("IN"), p.peekKeyword("NOT"):
		neg := p.acceptKeyword("NOT")
		if neg && !p.peekKeyword("IN") {
			return nil, p.errorf("expected IN after NOT")
		}
		p.pos++
		if !p.peekPunct("(") {
			return nil, p.errorf("expected '(' after IN")
		}
		p.pos++
		var lits []bigquery.Value
		for {
			v, err := p.literal(f)
			if err != nil {
				return nil, err
			}
			lits = append(lits, v)
			if p.peekPunct(",") {
				p.pos++
				continue
			}
			if !p.peekPunct(")") {
				return nil, p.errorf("expected ',' or ')' in IN list")
			}
			p.pos++
			break
		}
		return func(row []bigquery.Value) tri {
			v := row[idx]
			if v == nil {
				return unknown
			}
			for _, l := range lits {
				if compare(v, l) == 0 {
					return tri(trueT).notIf(neg)
				}
			}
			return tri(falseT).notIf(neg)
		}, nil
	case p.pos < len(p.toks) && p.toks[p.pos].kind == tOp:
		op := p.toks[p.pos].text
		p.pos++
		lit, err := p.literal(f)
		if err != nil {
			return nil, err
		}
		if f.Type == bigquery.BooleanFieldType || f.Type == bigquery.BytesFieldType || f.Type == bigquery.GeographyFieldType || f.Type == bigquery.JSONFieldType {
			if op != "=" && op != "!=" && op != "<>" {
				return nil, fmt.Errorf("operator %s is not supported on %s column %s", op, f.Type, f.Name)
			}
		}
		test, err := opFunc(op)
		if err != nil {
			return nil, err
		}
		return func(row []bigquery.Value) tri {
			v := row[idx]
			if v == nil {
				return unknown
			}
			return triOf(test(compare(v, lit)))
		}, nil
	}
	return nil, p.errorf("expected a comparison, IN or IS after column %s", name)
}

// triOf is b as a tri.
func triOf(b bool) tri {
	if b {
		return trueT
	}
	return falseT
}

func (t tri) notIf(neg bool) tri {
	if neg {
		return t.not()
	}
	return t
}

func opFunc(op string) (func(c int) bool, error) {
	switch op {
	case "=":
		return func(c int) bool { return c == 0 }, nil
	case "!=", "<>":
		return func(c int) bool { return c != 0 }, nil
	case "<":
		return func(c int) bool { return c < 0 }, nil
	case "<=":
		return func(c int) bool { return c <= 0 }, nil
	case ">":
		return func(c int) bool { return c > 0 }, nil
	case ">=":
		return func(c int) bool { return c >= 0 }, nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

// literal parses the next token as a value of column f's type.
func (p *parser) literal(f *bigquery.FieldSchema) (bigquery.Value, error) {
	if p.pos >= len(p.toks) {
		return nil, p.errorf("expected a literal")
	}
	t := p.toks[p.pos]
	p.pos++
	bad := func() (bigquery.Value, error) {
		return nil, fmt.Errorf("No matching signature: %s column %s compared with %q at position %d", f.Type, f.Name, t.text, t.at)
	}
	// fromString is the value parsed from a string literal, by its parser's
	// results.
	fromString := func(v bigquery.Value, err error) (bigquery.Value, error) {
		if t.kind != tString || err != nil {
			return bad()
		}
		return v, nil
	}
	switch f.Type {
	case bigquery.IntegerFieldType:
		if t.kind != tNumber {
			return bad()
		}
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			x, ferr := strconv.ParseFloat(t.text, 64)
			if ferr != nil {
				return bad()
			}
			return x, nil
		}
		return n, nil
	case bigquery.FloatFieldType:
		if t.kind != tNumber {
			return bad()
		}
		x, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return bad()
		}
		return x, nil
	case bigquery.NumericFieldType, bigquery.BigNumericFieldType:
		r, ok := new(big.Rat).SetString(t.text)
		if !ok || (t.kind != tNumber && t.kind != tString) {
			return bad()
		}
		return r, nil
	case bigquery.BooleanFieldType:
		if t.kind == tIdent && (strings.EqualFold(t.text, "TRUE") || strings.EqualFold(t.text, "FALSE")) {
			return strings.EqualFold(t.text, "TRUE"), nil
		}
		return bad()
	case bigquery.StringFieldType, bigquery.GeographyFieldType, bigquery.JSONFieldType:
		if t.kind != tString {
			return bad()
		}
		return t.text, nil
	case bigquery.BytesFieldType:
		if t.kind != tString {
			return bad()
		}
		return []byte(t.text), nil
	case bigquery.DateFieldType:
		return fromString(civil.ParseDate(t.text))
	case bigquery.TimeFieldType:
		return fromString(civil.ParseTime(t.text))
	case bigquery.DateTimeFieldType:
		return fromString(civil.ParseDateTime(strings.Replace(t.text, " ", "T", 1)))
	case bigquery.TimestampFieldType:
		if t.kind != tString {
			return bad()
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02"} {
			if ts, err := time.Parse(layout, t.text); err == nil {
				return ts, nil
			}
		}
		return bad()
	}
	return bad()
}

// compare orders two non-NULL values of one column (the literal may be a
// float for an INTEGER column).
func compare(a, b bigquery.Value) int {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmpOrdered(x, y)
		case float64:
			return cmpOrdered(float64(x), y)
		}
	case float64:
		return cmpOrdered(x, b.(float64))
	case bool:
		if x == b.(bool) {
			return 0
		}
		if !x {
			return -1
		}
		return 1
	case string:
		return strings.Compare(x, b.(string))
	case []byte:
		return strings.Compare(string(x), string(b.([]byte)))
	case *big.Rat:
		return x.Cmp(b.(*big.Rat))
	case civil.Date:
		return x.Compare(b.(civil.Date))
	case civil.Time:
		return x.Compare(b.(civil.Time))
	case civil.DateTime:
		return x.Compare(b.(civil.DateTime))
	case time.Time:
		return x.Compare(b.(time.Time))
	}
	return 0
}

func cmpOrdered[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
