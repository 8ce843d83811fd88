package datastoreio

import (
	"fmt"
	"time"
)

// Option configures Read, Plan, Write, DeleteEntity and DeleteKey: one
// type for reads and writes. Database and WithClientOptions apply to both;
// the other options to one side only, and giving one to the other side is
// an error at pipeline construction (Read and Write panic, Plan returns
// it), naming the option and where it applies.
type Option struct {
	name string
	on   side
	set  func(*options)
}

// WriteOption is Option; Write, DeleteEntity and DeleteKey had an option
// type of their own.
//
// Deprecated: use Option.
type WriteOption = Option

// side says where an option applies.
type side uint8

const (
	readSide side = 1 << iota
	writeSide
	bothSides = readSide | writeSide
)

func (s side) String() string {
	switch s {
	case readSide:
		return "Read and Plan"
	case writeSide:
		return "Write, DeleteEntity and DeleteKey"
	}
	return "reads and writes"
}

// options holds every option; each side reads its own.
type options struct {
	// Both sides.
	database      string
	clientOptions string

	// Read.
	namespace    string
	numSplits    int
	keysPerSplit int
	subRanges    int
	readTime     time.Time
	latest       bool

	// Write, DeleteEntity and DeleteKey.
	noThrottle     bool
	hintWorkers    int
	allocate       bool
	maxRetries     int
	initialBackoff time.Duration
}

// collect applies opts for op (say "datastoreio.Read") on side s, over the
// defaults.
func collect(op string, s side, opts []Option) (options, error) {
	o := options{
		keysPerSplit: DefaultKeysPerSplit, subRanges: DefaultSubRangesPerSplit,
		maxRetries: DefaultMaxCommitRetries, initialBackoff: DefaultInitialBackoff,
	}
	for _, opt := range opts {
		if opt.set == nil {
			return o, fmt.Errorf("%s: a zero datastoreio.Option", op)
		}
		if opt.on&s == 0 {
			return o, fmt.Errorf("%s: option %s applies to %v only", op, opt.name, opt.on)
		}
		opt.set(&o)
	}
	return o, nil
}

// Database reads from, or writes to, the named database (the project's
// default database when empty or not given).
func Database(id string) Option {
	return Option{fmt.Sprintf("Database(%q)", id), bothSides, func(o *options) { o.database = id }}
}

// WithClientOptions makes the clients of a read or a write use the client
// options registered under name with RegisterClientOptions (credentials,
// an endpoint, gRPC interceptors).
func WithClientOptions(name string) Option {
	return Option{fmt.Sprintf("WithClientOptions(%q)", name), bothSides, func(o *options) { o.clientOptions = name }}
}

// WriteDatabase is Database.
//
// Deprecated: use Database, which applies to reads and writes.
func WriteDatabase(id string) Option { return Database(id) }

// WriteClientOptions is WithClientOptions.
//
// Deprecated: use WithClientOptions, which applies to reads and writes.
func WriteClientOptions(name string) Option { return WithClientOptions(name) }

// WithNamespace reads from namespace ns (the default namespace when
// empty). A write's namespace is that of each entity's key.
func WithNamespace(ns string) Option {
	return Option{fmt.Sprintf("WithNamespace(%q)", ns), readSide, func(o *options) { o.namespace = ns }}
}

// NumQuerySplits sets the number of initial splits of a read, with the
// rules of Beam Java's withNumQuerySplits: n <= 0 (the default) chooses at
// run time from the statistics (entity bytes of the kind / 64 MiB, within
// [12, 50000], 12 without statistics); n above MaxQuerySplits is capped; a
// query with a limit, offset, sort order, inequality filter or distinct-on
// is read unsplit; when the server has fewer scatter keys than needed,
// fewer splits are made.
func NumQuerySplits(n int) Option {
	return Option{fmt.Sprintf("NumQuerySplits(%d)", n), readSide, func(o *options) { o.numSplits = n }}
}

// KeysPerSplit sets how many scatter keys a read samples per requested
// split (DefaultKeysPerSplit, Java's oversampling): (n-1)*KeysPerSplit for
// n splits, KeysPerSplit-1 for one. Every KeysPerSplit/SubRangesPerSplit-th
// sampled key (every one when KeysPerSplit <= SubRangesPerSplit) becomes a
// sub-range boundary.
func KeysPerSplit(n int) Option {
	return Option{fmt.Sprintf("KeysPerSplit(%d)", n), readSide, func(o *options) { o.keysPerSplit = n }}
}

// SubRangesPerSplit sets how many sub-ranges a split of a read is cut into
// when the server returns all the scatter keys asked for
// (DefaultSubRangesPerSplit): how finely the runner can split a running
// read. Each sub-range is one query (paged), so more sub-ranges cost more
// queries. When the kind has fewer scatter keys than asked, the sub-ranges
// keep their size (KeysPerSplit/SubRangesPerSplit scatter keys each) and
// there are fewer of them.
func SubRangesPerSplit(n int) Option {
	return Option{fmt.Sprintf("SubRangesPerSplit(%d)", n), readSide, func(o *options) { o.subRanges = n }}
}

// ReadTime reads the database as it was at t (a snapshot read). The server
// must keep versions that old: Firestore in Datastore mode keeps an hour,
// seven days with point-in-time recovery (whole minutes only).
func ReadTime(t time.Time) Option {
	return Option{fmt.Sprintf("ReadTime(%v)", t), readSide, func(o *options) { o.readTime = t }}
}

// LatestData turns a read's default snapshot off: each request reads the
// latest data, so ranges read at different times may see different
// versions.
func LatestData() Option {
	return Option{"LatestData()", readSide, func(o *options) { o.latest = true }}
}

// DisableRampupThrottling turns off the ramp-up throttling of a write
// (Java's withRampupThrottlingDisabled). Without it a new kind or a new key
// range can take more load than the service spreads at first; use it for
// small writes, emulators, or databases already warm. The adaptive
// throttling on refused commits stays on.
func DisableRampupThrottling() Option {
	return Option{"DisableRampupThrottling()", writeSide, func(o *options) { o.noThrottle = true }}
}

// HintNumWorkers sets the number of worker processes a write's ramp-up
// budget is shared by (Java's withHintNumWorkers). Each process writes at
// most 1/n of the budget. Ignored when ramp-up throttling is disabled.
func HintNumWorkers(n int) Option {
	return Option{fmt.Sprintf("HintNumWorkers(%d)", n), writeSide, func(o *options) { o.hintWorkers = n }}
}

// AllocateIDs makes Write accept incomplete keys: before a batch is
// committed, ids are allocated for its incomplete keys with one
// AllocateIds call, so that a retried commit writes the same entities.
// Without it an incomplete key is an error. Deletes always need complete
// keys.
func AllocateIDs() Option {
	return Option{"AllocateIDs()", writeSide, func(o *options) { o.allocate = true }}
}

// CommitRetries sets how many times a commit failing with a transient
// error is retried (DefaultMaxCommitRetries) and the first backoff
// (DefaultInitialBackoff); later backoffs grow 1.5 times each, up to two
// minutes, with ±50% jitter.
func CommitRetries(maxRetries int, initialBackoff time.Duration) Option {
	return Option{fmt.Sprintf("CommitRetries(%d, %v)", maxRetries, initialBackoff), writeSide,
		func(o *options) { o.maxRetries, o.initialBackoff = maxRetries, initialBackoff }}
}
