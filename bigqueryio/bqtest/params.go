package bqtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// QueryParameter is a parameter of a query job as the job received it
// (jobs.insert's configuration.query.queryParameters).
type QueryParameter struct {
	// Name is the parameter's name, "" for a positional one.
	Name string
	// Type is its type as SQL writes it: INT64, STRING, ARRAY<DATE>,
	// STRUCT<a INT64, b STRING>, RANGE<DATE>.
	Type string
	// Value is its parameterValue as the request's JSON carried it
	// (compacted): {"value":"3"}, {"value":null} for NULL,
	// {"arrayValues":[...]}, {"structValues":{...}}.
	Value json.RawMessage
}

// Scalar returns the value of a scalar parameter as the request carried it
// (a number or a timestamp as text, bytes in base64), and false for NULL
// or a parameter that is not a scalar.
func (p QueryParameter) Scalar() (string, bool) {
	var v struct {
		Value *string `json:"value"`
	}
	if json.Unmarshal(p.Value, &v) != nil || v.Value == nil {
		return "", false
	}
	return *v.Value, true
}

// Param returns the named parameter of the job, and false if it has none of
// that name (compared ignoring case, as the service does).
func (j QueryJob) Param(name string) (QueryParameter, bool) {
	for _, p := range j.Parameters {
		if strings.EqualFold(p.Name, name) {
			return p, true
		}
	}
	return QueryParameter{}, false
}

// rawParams is the part of a jobs.insert body that holds the parameters,
// kept as JSON: the client's NULL (an explicit "value": null) does not
// survive decoding into the API's Go types.
type rawParams struct {
	Configuration struct {
		Query struct {
			ParameterMode   string `json:"parameterMode"`
			QueryParameters []struct {
				Name           string          `json:"name"`
				ParameterType  json.RawMessage `json:"parameterType"`
				ParameterValue json.RawMessage `json:"parameterValue"`
			} `json:"queryParameters"`
		} `json:"query"`
	} `json:"configuration"`
}

type paramTypeJSON struct {
	Type             string         `json:"type"`
	ArrayType        *paramTypeJSON `json:"arrayType"`
	RangeElementType *paramTypeJSON `json:"rangeElementType"`
	StructTypes      []struct {
		Name string         `json:"name"`
		Type *paramTypeJSON `json:"type"`
	} `json:"structTypes"`
}

func (t *paramTypeJSON) String() string {
	switch {
	case t == nil:
		return "?"
	case t.Type == "ARRAY":
		return "ARRAY<" + t.ArrayType.String() + ">"
	case t.Type == "RANGE":
		return "RANGE<" + t.RangeElementType.String() + ">"
	case t.Type == "STRUCT":
		parts := make([]string, len(t.StructTypes))
		for i, f := range t.StructTypes {
			parts[i] = strings.TrimSpace(f.Name + " " + f.Type.String())
		}
		return "STRUCT<" + strings.Join(parts, ", ") + ">"
	}
	return t.Type
}

// parseParams reads the parameters of a jobs.insert body and the mode they
// are in: NAMED when all have names, POSITIONAL when none has, "" without
// parameters. A mix, or a parameterMode that says otherwise, is an error.
func parseParams(body []byte) ([]QueryParameter, string, error) {
	var raw rawParams
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, "", fmt.Errorf("bqtest: jobs.insert body: %v", err)
	}
	q := raw.Configuration.Query
	var out []QueryParameter
	named := 0
	for i, p := range q.QueryParameters {
		var t paramTypeJSON
		if err := json.Unmarshal(p.ParameterType, &t); err != nil || t.Type == "" {
			return nil, "", fmt.Errorf("query parameter %d (%q) has no parameterType", i, p.Name)
		}
		var v bytes.Buffer
		if len(p.ParameterValue) > 0 {
			if err := json.Compact(&v, p.ParameterValue); err != nil {
				return nil, "", fmt.Errorf("query parameter %d (%q): parameterValue: %v", i, p.Name, err)
			}
		}
		if p.Name != "" {
			named++
		}
		out = append(out, QueryParameter{Name: p.Name, Type: t.String(), Value: v.Bytes()})
	}
	mode := ""
	switch {
	case len(out) == 0:
	case named == len(out):
		mode = "NAMED"
	case named == 0:
		mode = "POSITIONAL"
	default:
		return nil, "", fmt.Errorf("query parameters must be all named or all positional: %d of %d have names", named, len(out))
	}
	if q.ParameterMode != "" && mode != "" && q.ParameterMode != mode {
		return nil, "", fmt.Errorf("parameterMode %s, but the parameters are %s", q.ParameterMode, mode)
	}
	return out, mode, nil
}

// checkParamRefs checks the parameters a query's text refers to against
// those it was given, as the service does: each @name needs a named
// parameter, and the ? marks must be as many as the positional ones. It
// skips string literals, quoted identifiers and comments.
func checkParamRefs(sql string, params []QueryParameter, mode string) error {
	names := map[string]bool{}
	for _, p := range params {
		names[strings.ToLower(p.Name)] = true
	}
	marks := 0
	var usedNamed bool
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			j := i + 1
			for j < len(sql) && sql[j] != c {
				if sql[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-', c == '#':
			for i < len(sql) && sql[i] != '\n' {
				i++
			}
		case c == '?':
			marks++
		case c == '@' && (i+1 >= len(sql) || sql[i+1] != '@'):
			j := i + 1
			for j < len(sql) && (sql[j] == '_' || sql[j] >= 'a' && sql[j] <= 'z' || sql[j] >= 'A' && sql[j] <= 'Z' || sql[j] >= '0' && sql[j] <= '9') {
				j++
			}
			if name := sql[i+1 : j]; name != "" {
				usedNamed = true
				if !names[strings.ToLower(name)] {
					line := strings.Count(sql[:i], "\n") + 1
					col := i - strings.LastIndexByte(sql[:i], '\n')
					return fmt.Errorf("Query parameter '%s' not found at [%d:%d]", name, line, col)
				}
			}
		case c == '@':
			i++ // @@system_variable
		}
	}
	switch {
	case usedNamed && marks > 0:
		return fmt.Errorf("the query uses both named (@) and positional (?) parameters")
	case mode == "POSITIONAL" && marks != len(params):
		return fmt.Errorf("the query has %d positional parameters (?), the job %d", marks, len(params))
	case mode == "" && marks > 0:
		return fmt.Errorf("the query has %d positional parameters (?), the job none", marks)
	}
	return nil
}
