package avroio

import (
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"

	"github.com/sdfio/sdfio/internal/wire"
)

// Beam Go's schema coder, which encodes the structs of a PCollection
// between stages, writes a time.Time field as its RFC 3339 text
// (time.MarshalText, registered by package beam for time.Time). That text
// has no form for years outside 0-9999, which Avro's dates and timestamps
// reach (a date holds ±2^31 days, a timestamp-micros ±292,000 years), so
// a struct holding one failed to encode, naming neither field nor value;
// nor for zone offsets of seconds, which it drops.
//
// This package registers, in its place, a coder that keeps every
// time.Time exactly: a time the text form holds exactly (years 0-9999, an
// offset of whole minutes under a day) is encoded as that same text, byte
// for byte what Beam writes, and any other as the Record coder's form of a
// time (seconds, nanoseconds and zone offset, starting with tagTime, which
// no RFC 3339 text starts with). The zone's name is kept by neither: a
// time comes back in UTC, in time.Local when its offset is Local's then,
// or in a zone of its offset.

var timeType = reflect.TypeFor[time.Time]()

func registerTimeCoder() {
	coder.RegisterSchemaProviders(timeType, timeSchemaEnc, timeSchemaDec)
}

// textExact reports whether RFC 3339 text keeps t exactly.
func textExact(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off%60 == 0 && off > -24*3600 && off < 24*3600
}

func timeSchemaEnc(reflect.Type) (func(any, io.Writer) error, error) {
	return func(v any, w io.Writer) error {
		t := v.(time.Time)
		if err := coder.WriteSimpleRowHeader(1, w); err != nil {
			return fmt.Errorf("encoding a time.Time: %w", err)
		}
		var data []byte
		var err error
		if textExact(t) {
			data, err = t.MarshalText() // what Beam's own coder writes
		} else {
			data, err = appendValue(nil, t)
		}
		if err != nil {
			return fmt.Errorf("encoding the time.Time %v: %w", t, err)
		}
		return coder.EncodeBytes(data, w)
	}, nil
}

func timeSchemaDec(reflect.Type) (func(io.Reader) (any, error), error) {
	return func(r io.Reader) (any, error) {
		if err := coder.ReadSimpleRowHeader(1, r); err != nil {
			return nil, fmt.Errorf("decoding a time.Time: %w", err)
		}
		data, err := coder.DecodeBytes(r)
		if err != nil {
			return nil, fmt.Errorf("decoding a time.Time: %w", err)
		}
		if len(data) > 0 && data[0] == tagTime {
			d := valueDecoder{r: wire.NewReader(data), box: new(datumDecoder)}
			v, err := d.value(0)
			if err == nil {
				err = d.r.Done("time")
			}
			t, ok := v.(time.Time)
			if err != nil || !ok {
				return nil, fmt.Errorf("decoding a time.Time: bad encoding %x: %v", data, err)
			}
			return t, nil
		}
		var t time.Time
		if err := t.UnmarshalText(data); err != nil {
			return nil, fmt.Errorf("decoding a time.Time: %w", err)
		}
		return t, nil
	}, nil
}
