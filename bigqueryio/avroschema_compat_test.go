package bigqueryio

import (
	"encoding/json"

	"cloud.google.com/go/bigquery"
	"github.com/hamba/avro/v2"
)

// schemaFromAvro gives a schema parsed by hamba/avro (the tests' way of
// writing one) to the session's parser as the JSON hamba writes of it,
// its properties included.
func schemaFromAvro(s avro.Schema) (bigquery.Schema, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return schemaFromAvroJSON(string(b))
}
