package container

import (
	"github.com/hamba/avro/v2"

	"github.com/sdfio/sdfio/avroio/internal/avrotest"
)

// matchAvrocat checks that ours (a value hamba/avro decoded generically by
// schema s) equals theirs (what avrocat printed for it); see
// avrotest.MatchAvrocat.
func matchAvrocat(s avro.Schema, ours, theirs any, path string) error {
	return avrotest.MatchAvrocat(s, ours, theirs, path)
}
