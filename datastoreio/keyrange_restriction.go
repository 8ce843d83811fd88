package datastoreio

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/sdfio/sdfio/sdf"
)

// Range is one initial split of a read, as the read's first step computes it
// when the pipeline runs: the key range [Lo, Hi) of the query, cut into
// sub-ranges at the keys Bounds. It is the element of the reading SDF, whose
// restriction is an sdf.OffsetRange over sub-range indices [0, SubRanges()).
// Keys are in encoded form (Key.Encode); "" is an open bound.
type Range struct {
	Project   string
	Database  string `json:",omitempty"`
	Namespace string `json:",omitempty"`
	// Query is the query, GQL already parsed.
	Query Query
	// ReadTimeMicros is the snapshot read, in Unix microseconds; 0 reads the
	// latest data.
	ReadTimeMicros int64 `json:",omitempty"`
	// Retention is how long the database keeps old versions
	// (WithVersionRetention; 0 is DefaultVersionRetention), and
	// SnapshotOption the option call that made the read a snapshot read:
	// a snapshot read stops, naming it, before its snapshot expires.
	Retention      time.Duration `json:",omitempty"`
	SnapshotOption string        `json:",omitempty"`
	Lo, Hi         string
	Bounds         []string `json:",omitempty"`
	// KeyOrder is the order (KeyOrder.String) Bounds are sorted in and
	// every entity read is checked against its sub-range in: the server's
	// own, found when the read was planned ("" is UTF-8).
	KeyOrder string `json:",omitempty"`
	// Index and Of number the range among the read's initial splits, for
	// messages.
	Index, Of int
	// ClientOptions names registered client options (WithClientOptions).
	ClientOptions string `json:",omitempty"`
	// MetricsNamespace is the namespace of the read's Beam metrics
	// (WithMetricsNamespace); "" is Namespace.
	MetricsNamespace string `json:",omitempty"`
}

func encodeRange(r Range) ([]byte, error) { return json.Marshal(r) }

func decodeRange(b []byte) (Range, error) {
	var r Range
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("datastoreio: decoding a Range: %w", err)
	}
	return r, nil
}

// SubRanges is the number of sub-ranges: the positions of the restriction.
func (r Range) SubRanges() int64 { return int64(len(r.Bounds)) + 1 }

// Restriction is the whole restriction of r.
func (r Range) Restriction() sdf.OffsetRange { return sdf.OffsetRange{Start: 0, End: r.SubRanges()} }

// ReadTime is the snapshot r reads (zero: the latest data).
func (r Range) ReadTime() time.Time {
	if r.ReadTimeMicros == 0 {
		return time.Time{}
	}
	return time.UnixMicro(r.ReadTimeMicros).UTC()
}

// subRange returns the key bounds of sub-range i.
func (r Range) subRange(i int64) (lo, hi *datastore.Key, err error) {
	los, his := r.Lo, r.Hi
	if i > 0 {
		los = r.Bounds[i-1]
	}
	if i < int64(len(r.Bounds)) {
		his = r.Bounds[i]
	}
	if lo, err = decodeKey(los); err != nil {
		return nil, nil, err
	}
	if hi, err = decodeKey(his); err != nil {
		return nil, nil, err
	}
	return lo, hi, nil
}

func (r Range) where(i int64) string {
	lo, hi, _ := r.subRange(i)
	return fmt.Sprintf("project %s database %q namespace %q %s, sub-range %d [%s, %s) of split %d/%d",
		r.Project, r.Database, r.Namespace, r.Query.describe(), i, keyString(lo, "-inf"), keyString(hi, "+inf"), r.Index+1, r.Of)
}

// KeyRangeTracker is the restriction tracker of the reading SDF: the
// module's sdf.Tracker over a Range's sub-range indices (see the package
// doc, "Splitting"), which logs, at INFO, every split it accepts, so that
// a runner's rebalancing shows in the worker's log.
type KeyRangeTracker struct {
	*sdf.Tracker
}

// NewKeyRangeTracker tracks rest, a range of sub-range indices.
func NewKeyRangeTracker(rest sdf.OffsetRange) *KeyRangeTracker {
	return &KeyRangeTracker{sdf.NewTracker(rest)}
}

// TrySplit is sdf.Tracker's TrySplit, logging an accepted split.
func (t *KeyRangeTracker) TrySplit(f float64) (primary, residual any, err error) {
	primary, residual, err = t.Tracker.TrySplit(f)
	if err == nil && residual != nil {
		log.Infof(context.Background(), "datastoreio: split accepted at fraction %.3g of the rest: primary sub-ranges %v, residual %v", f, primary, residual)
	}
	return primary, residual, err
}
