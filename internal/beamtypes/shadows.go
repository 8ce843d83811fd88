package beamtypes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"time"

	"cloud.google.com/go/civil"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/coder"
)

// Rat is math/big.Rat's shadow (Avro's decimal, BigQuery's NUMERIC and
// BIGNUMERIC): a row of one string, its exact text "num/den". big.Rat,
// *big.Rat and slices and maps of them (nil stays nil, through Beam's
// pointer, slice and map handling) keep their values between stages.
type Rat big.Rat

// Date is civil.Date's shadow (BigQuery's DATE, and DATETIME through
// civil.DateTime): a row of its three numbers.
type Date civil.Date

// Time is time.Time's shadow, exact for every time (Avro's dates and
// timestamps reach far beyond the years 0-9999 of Beam's own coder of
// time.Time, its RFC 3339 text, which also drops a zone offset's
// seconds): a row of one bytes field, holding that same text, byte for
// byte what Beam writes, when the text keeps the time exactly (years
// 0-9999, an offset of whole minutes under a day), and otherwise a zero
// byte (which no RFC 3339 text starts with) and three varints: seconds
// since 1970, nanoseconds, the zone's offset in seconds (Go's binary
// marshalling of a time loses negative offsets of seconds). The zone's name is kept by neither: a time comes back in
// UTC, in time.Local when its offset is Local's then, or in a zone of its
// offset.
type Time time.Time

func init() {
	Replace(reflect.TypeFor[big.Rat](), encodeRat, decodeRat)
	Replace(reflect.TypeFor[civil.Date](), encodeDate, decodeDate)
	Replace(reflect.TypeFor[time.Time](), encodeTime, decodeTime)
}

func encodeRat(r Rat, w io.Writer) error {
	if err := coder.WriteSimpleRowHeader(1, w); err != nil {
		return fmt.Errorf("encoding a big.Rat: %w", err)
	}
	return coder.EncodeStringUTF8((*big.Rat)(&r).RatString(), w)
}

func decodeRat(rd io.Reader) (Rat, error) {
	if err := coder.ReadSimpleRowHeader(1, rd); err != nil {
		return Rat{}, fmt.Errorf("decoding a big.Rat: %w", err)
	}
	s, err := coder.DecodeStringUTF8(rd)
	if err != nil {
		return Rat{}, fmt.Errorf("decoding a big.Rat: %w", err)
	}
	var r big.Rat
	if _, ok := r.SetString(s); !ok {
		return Rat{}, fmt.Errorf("decoding a big.Rat: bad text %q", s)
	}
	return Rat(r), nil
}

func encodeDate(d Date, w io.Writer) error {
	if err := coder.WriteSimpleRowHeader(3, w); err != nil {
		return fmt.Errorf("encoding a civil.Date: %w", err)
	}
	for _, n := range []int64{int64(d.Year), int64(d.Month), int64(d.Day)} {
		if err := coder.EncodeVarInt(n, w); err != nil {
			return fmt.Errorf("encoding a civil.Date: %w", err)
		}
	}
	return nil
}

func decodeDate(rd io.Reader) (Date, error) {
	if err := coder.ReadSimpleRowHeader(3, rd); err != nil {
		return Date{}, fmt.Errorf("decoding a civil.Date: %w", err)
	}
	var p [3]int64
	for i := range p {
		n, err := coder.DecodeVarInt(rd)
		if err != nil {
			return Date{}, fmt.Errorf("decoding a civil.Date: %w", err)
		}
		p[i] = n
	}
	return Date{Year: int(p[0]), Month: time.Month(p[1]), Day: int(p[2])}, nil
}

// textExact reports whether RFC 3339 text keeps t exactly.
func textExact(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off%60 == 0 && off > -24*3600 && off < 24*3600
}

func encodeTime(v Time, w io.Writer) error {
	t := time.Time(v)
	if err := coder.WriteSimpleRowHeader(1, w); err != nil {
		return fmt.Errorf("encoding a time.Time: %w", err)
	}
	var data []byte
	var err error
	if textExact(t) {
		data, err = t.MarshalText() // what Beam's own coder writes
	} else {
		_, off := t.Zone()
		data = binary.AppendVarint([]byte{0}, t.Unix())
		data = binary.AppendVarint(data, int64(t.Nanosecond()))
		data = binary.AppendVarint(data, int64(off))
	}
	if err != nil {
		return fmt.Errorf("encoding the time.Time %v: %w", t, err)
	}
	return coder.EncodeBytes(data, w)
}

func decodeTime(r io.Reader) (Time, error) {
	if err := coder.ReadSimpleRowHeader(1, r); err != nil {
		return Time{}, fmt.Errorf("decoding a time.Time: %w", err)
	}
	data, err := coder.DecodeBytes(r)
	if err != nil {
		return Time{}, fmt.Errorf("decoding a time.Time: %w", err)
	}
	var t time.Time
	if len(data) > 0 && data[0] == 0 {
		t, err = timeOf(data[1:])
	} else {
		err = t.UnmarshalText(data)
	}
	if err != nil {
		return Time{}, fmt.Errorf("decoding a time.Time from %x: %w", data, err)
	}
	return Time(t), nil
}

// timeOf decodes the three varints of a time text cannot hold: seconds
// since 1970, nanoseconds and the zone's offset in seconds.
func timeOf(b []byte) (time.Time, error) {
	var n [3]int64
	for i := range n {
		v, k := binary.Varint(b)
		if k <= 0 {
			return time.Time{}, errors.New("truncated")
		}
		n[i], b = v, b[k:]
	}
	if len(b) != 0 || n[1] < 0 || n[1] > 999999999 || n[2] <= -1<<31 || n[2] >= 1<<31 {
		return time.Time{}, errors.New("malformed")
	}
	t := time.Unix(n[0], n[1])
	switch _, local := t.Zone(); {
	case n[2] == 0:
		return t.UTC(), nil
	case int64(local) == n[2]:
		return t, nil
	}
	return t.In(time.FixedZone("", int(n[2]))), nil
}
