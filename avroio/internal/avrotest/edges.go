package avrotest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// EdgesPy writes a container file whose header carries the schema of
// argv[1] (logical types and all) and whose records python3-avro encodes
// by that schema with its logical types removed, so that every number is
// written as the raw int or long given, whatever a logical type's Python
// class could hold (datetime stops at year 9999). argv[2] is the output,
// argv[3] a JSON list of records: numbers as they are, bytes and fixed
// values as hex strings (the fields named in argv[4], a JSON list).
const EdgesPy = `
import sys, json, re
import avro.schema, avro.datafile, avro.io

text = open(sys.argv[1]).read()
schema = avro.schema.parse(text)
plain = avro.schema.parse(re.sub(r',\s*"logicalType"\s*:\s*"[^"]*"', '', text))
records = json.loads(open(sys.argv[3]).read())
hexed = set(json.loads(sys.argv[4]))
w = avro.datafile.DataFileWriter(open(sys.argv[2], "wb"), avro.io.DatumWriter(), schema, codec="deflate")
w.datum_writer.writers_schema = plain
for r in records:
    w.append({k: (bytes.fromhex(v) if k in hexed else v) for k, v in r.items()})
w.close()
`

// logicalAttr matches what EdgesPy removes from a schema.
var logicalAttr = regexp.MustCompile(`,\s*"logicalType"\s*:\s*"[^"]*"`)

// WriteRawLogical writes records (field name to value: int64 numbers, or
// []byte for bytes and fixed fields) with Debian's python3-avro to
// dir/name: the header has schema, the data the raw numbers and bytes
// (see EdgesPy). schema must put each "logicalType" after the "type" of
// its object, as `{"type":"int","logicalType":"date"}`.
func WriteRawLogical(dir, name, schema string, records []map[string]any) (string, error) {
	if !logicalAttr.MatchString(schema) {
		return "", fmt.Errorf("schema has no logical types to strip")
	}
	hexed := map[string]bool{}
	out := make([]map[string]any, len(records))
	for i, r := range records {
		out[i] = map[string]any{}
		for k, v := range r {
			if b, ok := v.([]byte); ok {
				hexed[k] = true
				out[i][k] = fmt.Sprintf("%x", b)
			} else {
				out[i][k] = v
			}
		}
	}
	var names []string
	for k := range hexed {
		names = append(names, k)
	}
	recs, err := json.Marshal(out)
	if err != nil {
		return "", err
	}
	hj, _ := json.Marshal(names)
	if names == nil {
		hj = []byte("[]")
	}
	sp, rp, pp := filepath.Join(dir, name+".avsc"), filepath.Join(dir, name+".json"), filepath.Join(dir, "edges.py")
	for p, b := range map[string][]byte{sp: []byte(schema), rp: recs, pp: []byte(EdgesPy)} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, name)
	return path, Run(DebianPython, pp, sp, path, rp, string(hj))
}
