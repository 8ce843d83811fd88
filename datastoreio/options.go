package datastoreio

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// ReadOption configures Read and Plan. The options of reads alone
// (WithNamespace, WithNumQuerySplits, WithKeysPerSplit,
// WithSubRangesPerSplit, WithSnapshot, WithReadTime, WithVersionRetention,
// WithLatestData) return a ReadOption;
// those of reads and writes alike, an Option. A WriteOption is not a
// ReadOption: given to Read, it does not compile.
type ReadOption interface{ applyRead(*readConfig) }

// WriteOption configures Write, DeleteEntity and DeleteKey. The options of
// writes alone (WithRampupThrottlingDisabled, WithHintNumWorkers,
// WithAllocateIDs, WithCommitRetries) return a WriteOption; those of reads
// and writes alike, an Option. A ReadOption is not a WriteOption: given to
// Write, it does not compile.
type WriteOption interface{ applyWrite(*writeConfig) }

// Option configures what reads and writes share: the database, the
// registered client options and the metrics namespace. It is both a
// ReadOption and a WriteOption.
type Option func(*commonConfig)

func (o Option) applyRead(c *readConfig)   { o(&c.commonConfig) }
func (o Option) applyWrite(c *writeConfig) { o(&c.commonConfig) }

// readOnlyOption is an option of Read and Plan alone.
type readOnlyOption func(*readConfig)

func (o readOnlyOption) applyRead(c *readConfig) { o(c) }

// writeOnlyOption is an option of Write, DeleteEntity and DeleteKey alone.
type writeOnlyOption func(*writeConfig)

func (o writeOnlyOption) applyWrite(c *writeConfig) { o(c) }

// commonConfig is what reads and writes share, and the options as they
// were given, for the checks of construction.
type commonConfig struct {
	database      string
	clientOptions string
	metrics       string // Beam metrics namespace

	given []givenOption
}

// givenOption is an option as it was given: its name, and its call as text
// for messages.
type givenOption struct{ name, call string }

// note records the call of option name with args, for messages.
func (c *commonConfig) note(name string, args ...any) {
	parts := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			parts[i] = strconv.Quote(a)
		case time.Time:
			parts[i] = a.Format(time.RFC3339Nano)
		default:
			parts[i] = fmt.Sprint(a)
		}
	}
	c.given = append(c.given, givenOption{name, name + "(" + strings.Join(parts, ", ") + ")"})
}

// last is the last call of option name ("" when it was not given).
func (c *commonConfig) last(name string) string {
	for i := len(c.given) - 1; i >= 0; i-- {
		if c.given[i].name == name {
			return c.given[i].call
		}
	}
	return ""
}

// checkCommon refuses an option given twice with different values (the
// later would silently override the earlier), and the shared options'
// values that cannot work.
func (c *commonConfig) checkCommon() error {
	first := map[string]string{}
	for _, g := range c.given {
		if f, ok := first[g.name]; !ok {
			first[g.name] = g.call
		} else if f != g.call {
			return fmt.Errorf("%s and %s are both given: give %s once", f, g.call, g.name)
		}
	}
	if c.metrics == "" {
		return fmt.Errorf("%s: an empty metrics namespace", c.last("WithMetricsNamespace"))
	}
	return nil
}

// readConfig is the configuration of a Read or a Plan.
type readConfig struct {
	commonConfig
	namespace    string
	numSplits    int
	keysPerSplit int
	subRanges    int
	readTime     time.Time
	snapshot     bool          // WithSnapshot: one read time fixed when the read starts
	retention    time.Duration // how long the database keeps old versions
	latest       bool
}

// newReadConfig applies opts over the defaults and checks them; transform
// ("datastoreio.Read") names the transform in errors.
func newReadConfig(transform string, opts []ReadOption) (readConfig, error) {
	c := readConfig{
		commonConfig: commonConfig{metrics: Namespace},
		keysPerSplit: DefaultKeysPerSplit, subRanges: DefaultSubRangesPerSplit,
		retention: DefaultVersionRetention,
	}
	err := applyOptions(transform, "ReadOption", &c, opts, ReadOption.applyRead, (*readConfig).check)
	return c, err
}

func (c *readConfig) check() error {
	if err := c.checkCommon(); err != nil {
		return err
	}
	switch {
	case c.numSplits < 0:
		return fmt.Errorf("%s: a negative split count (0 chooses it from the statistics)", c.last("WithNumQuerySplits"))
	case c.keysPerSplit < 1:
		return fmt.Errorf("%s: at least 1 key per split", c.last("WithKeysPerSplit"))
	case c.subRanges < 1:
		return fmt.Errorf("%s: at least 1 sub-range per split", c.last("WithSubRangesPerSplit"))
	case c.latest && c.snapshotOption() != "":
		return fmt.Errorf("%s and %s exclude each other: a read reads one snapshot or the latest data", c.snapshotOption(), c.last("WithLatestData"))
	case c.snapshot && c.last("WithReadTime") != "":
		return fmt.Errorf("%s and %s exclude each other: the snapshot is the read's start or the time given", c.last("WithSnapshot"), c.last("WithReadTime"))
	case c.last("WithReadTime") != "" && c.readTime.IsZero():
		return errors.New("WithReadTime(time.Time{}): a zero time (give WithSnapshot() to read a snapshot of the read's start)")
	case c.last("WithVersionRetention") != "" && c.snapshotOption() == "":
		return fmt.Errorf("%s applies to snapshot reads only: give WithSnapshot() or WithReadTime (the default reads the latest data, which never expires)", c.last("WithVersionRetention"))
	case c.retention < time.Minute:
		return fmt.Errorf("%s: a retention under a minute (Datastore keeps old versions an hour, seven days with point-in-time recovery)", c.last("WithVersionRetention"))
	case c.retention > DefaultVersionRetention && !c.readTime.IsZero() && !c.readTime.Equal(c.readTime.Truncate(time.Minute)):
		return fmt.Errorf("%s with %s: versions older than an hour are kept at whole minutes only, so the read would fail after an hour: give a whole minute", c.last("WithReadTime"), c.last("WithVersionRetention"))
	}
	return nil
}

// snapshotOption is the call of the option that makes the read a snapshot
// read (WithSnapshot or WithReadTime), "" for a read of the latest data.
func (c *readConfig) snapshotOption() string {
	if s := c.last("WithSnapshot"); s != "" {
		return s
	}
	return c.last("WithReadTime")
}

// writeConfig is the configuration of a Write, DeleteEntity or DeleteKey.
type writeConfig struct {
	commonConfig
	noThrottle     bool
	hintWorkers    int
	allocate       bool
	maxRetries     int
	initialBackoff time.Duration
}

// newWriteConfig applies opts over the defaults and checks them for the
// transform op names.
func newWriteConfig(op string, opts []WriteOption) (writeConfig, error) {
	transform := opAPI[op]
	c := writeConfig{
		commonConfig: commonConfig{metrics: Namespace},
		maxRetries:   DefaultMaxCommitRetries, initialBackoff: DefaultInitialBackoff,
	}
	check := func(c *writeConfig) error { return c.check(op) }
	err := applyOptions(transform, "WriteOption", &c, opts, WriteOption.applyWrite, check)
	return c, err
}

func (c *writeConfig) check(op string) error {
	if err := c.checkCommon(); err != nil {
		return err
	}
	switch {
	case c.maxRetries < 0:
		return fmt.Errorf("%s: a negative retry count", c.last("WithCommitRetries"))
	case c.initialBackoff < 0:
		return fmt.Errorf("%s: a negative backoff", c.last("WithCommitRetries"))
	case c.hintWorkers < 0:
		return fmt.Errorf("%s: a negative worker count", c.last("WithHintNumWorkers"))
	case c.allocate && op != opUpsert:
		return fmt.Errorf("%s applies to Write only: deletes need complete keys", c.last("WithAllocateIDs"))
	}
	return nil
}

// isNil reports a nil option, or an option function that is nil.
// applyOptions applies opts to c in order (a nil option is an error of
// its own, kind naming its type) and checks the result; transform
// ("datastoreio.Read") names the transform in errors.
func applyOptions[C, O any](transform, kind string, c *C, opts []O, apply func(O, *C), check func(*C) error) error {
	for _, o := range opts {
		if isNil(o) {
			return fmt.Errorf("%s: a nil %s", transform, kind)
		}
		apply(o, c)
	}
	if err := check(c); err != nil {
		return fmt.Errorf("%s: %w", transform, err)
	}
	return nil
}

func isNil(o any) bool {
	if o == nil {
		return true
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Func && v.IsNil()
}

// WithDatabase reads from, or writes to, the named database (the project's
// default database when empty or not given).
func WithDatabase(id string) Option {
	return func(c *commonConfig) { c.note("WithDatabase", id); c.database = id }
}

// WithClientOptions makes the clients of a read or a write use the client
// options registered under name with RegisterClientOptions (credentials,
// an endpoint, gRPC interceptors).
func WithClientOptions(name string) Option {
	return func(c *commonConfig) { c.note("WithClientOptions", name); c.clientOptions = name }
}

// WithMetricsNamespace puts the Beam metrics of a read or a write in
// namespace ns instead of Namespace, the default (say, to tell two reads
// of a pipeline apart). An empty ns is refused.
func WithMetricsNamespace(ns string) Option {
	return func(c *commonConfig) { c.note("WithMetricsNamespace", ns); c.metrics = ns }
}

// WithNamespace reads from namespace ns (the default namespace when
// empty). A write's namespace is that of each entity's key.
func WithNamespace(ns string) ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithNamespace", ns); c.namespace = ns })
}

// WithNumQuerySplits sets the number of initial splits of a read, with the
// rules of Beam Java's withNumQuerySplits: 0 (the default) chooses at run
// time from the statistics (entity bytes of the kind / 64 MiB, within [12,
// 50000], 12 without statistics); n above MaxQuerySplits is capped; a query
// with a limit, offset, sort order, inequality filter or distinct-on is
// read unsplit; when the server has fewer scatter keys than needed, fewer
// splits are made. A negative n is refused.
func WithNumQuerySplits(n int) ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithNumQuerySplits", n); c.numSplits = n })
}

// WithKeysPerSplit sets how many scatter keys a read samples per requested
// split (DefaultKeysPerSplit, Java's oversampling): (n-1)*keys for n
// splits, keys-1 for one. Every keys/subRanges-th sampled key (every one
// when keys <= subRanges, see WithSubRangesPerSplit) becomes a sub-range
// boundary. At least 1.
func WithKeysPerSplit(n int) ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithKeysPerSplit", n); c.keysPerSplit = n })
}

// WithSubRangesPerSplit sets how many sub-ranges a split of a read is cut
// into when the server returns all the scatter keys asked for
// (DefaultSubRangesPerSplit): how finely the runner can split a running
// read. Each sub-range is one query (paged), so more sub-ranges cost more
// queries. When the kind has fewer scatter keys than asked, the sub-ranges
// keep their size (keys per split / sub-ranges per split scatter keys
// each) and there are fewer of them. At least 1.
func WithSubRangesPerSplit(n int) ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithSubRangesPerSplit", n); c.subRanges = n })
}

// DefaultVersionRetention is how long Firestore in Datastore mode keeps old
// versions of entities, and so how long a snapshot stays readable, unless
// point-in-time recovery is on (seven days; see WithVersionRetention).
const DefaultVersionRetention = time.Hour

// SnapshotMargin is how long before its snapshot expires a snapshot read
// stops sending queries: a query of a snapshot older than the retention
// less this margin is not sent, and the read fails naming the options that
// fix it, rather than the service refusing it (or a page of it) later.
const SnapshotMargin = time.Minute

// WithSnapshot makes a read one consistent snapshot of the database: one
// read time is fixed when the read starts (the server's time, to the
// microsecond; to the minute with a WithVersionRetention over an hour) and
// every query of every range, split and retry reads at it. The service
// keeps old versions for DefaultVersionRetention (an hour) unless
// point-in-time recovery is on (then give WithVersionRetention), so the
// read must end within that time: a range that would query a snapshot
// older than the retention less SnapshotMargin fails, naming the options.
// Without WithSnapshot or WithReadTime a read reads the latest data, as
// Beam Java's DatastoreIO does. It cannot be given with WithReadTime or
// WithLatestData.
func WithSnapshot() ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithSnapshot"); c.snapshot = true })
}

// WithReadTime reads the database as it was at t (a snapshot read, see
// WithSnapshot). The service must keep versions that old for as long as
// the read runs: an hour (DefaultVersionRetention), seven days with
// point-in-time recovery (WithVersionRetention; whole minutes only). A t
// already older than the retention less SnapshotMargin fails the read when
// it starts. It cannot be given with WithSnapshot or WithLatestData.
func WithReadTime(t time.Time) ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithReadTime", t); c.readTime = t })
}

// WithVersionRetention tells a snapshot read (WithSnapshot, WithReadTime)
// how long the database keeps old versions: DefaultVersionRetention (an
// hour) unless point-in-time recovery is on, which keeps seven days (give
// 7*24*time.Hour; the snapshot is then taken at a whole minute, as the
// service requires of versions older than an hour). A snapshot read stops
// SnapshotMargin before its snapshot is that old, with an error naming the
// options. It is refused on a read of the latest data and below a minute.
func WithVersionRetention(d time.Duration) ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithVersionRetention", d); c.retention = d })
}

// WithLatestData makes each request of a read read the latest data, so
// ranges read at different times may see different versions; it is the
// default (as in Beam Java's DatastoreIO), and the option says so
// explicitly. It cannot be given with WithSnapshot or WithReadTime.
func WithLatestData() ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithLatestData"); c.latest = true })
}

// WithRampupThrottlingDisabled turns off the ramp-up throttling of a write
// (Java's withRampupThrottlingDisabled). Without it a new kind or a new key
// range can take more load than the service spreads at first; use it for
// small writes, emulators, or databases already warm. The adaptive
// throttling on refused commits stays on.
func WithRampupThrottlingDisabled() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithRampupThrottlingDisabled"); c.noThrottle = true })
}

// WithHintNumWorkers sets the number of worker processes a write's ramp-up
// budget is shared by (Java's withHintNumWorkers). Each process writes at
// most 1/n of the budget. Ignored when ramp-up throttling is disabled. 0,
// the default, estimates it (see the package doc); a negative n is
// refused.
func WithHintNumWorkers(n int) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithHintNumWorkers", n); c.hintWorkers = n })
}

// WithAllocateIDs makes Write accept incomplete keys: before a batch is
// committed, ids are allocated for its incomplete keys with one
// AllocateIds call, so that a retried commit writes the same entities.
// Without it an incomplete key is an error. Deletes need complete keys:
// DeleteEntity and DeleteKey refuse it when the pipeline is built.
func WithAllocateIDs() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithAllocateIDs"); c.allocate = true })
}

// WithCommitRetries sets how many times a commit failing with a transient
// error is retried (DefaultMaxCommitRetries) and the first backoff
// (DefaultInitialBackoff); later backoffs grow 1.5 times each, up to two
// minutes, each wait drawn at random up to its bound (internal/retry's
// backoff; 0 retries at once). Negative values are refused.
func WithCommitRetries(maxRetries int, initialBackoff time.Duration) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		c.note("WithCommitRetries", maxRetries, initialBackoff)
		c.maxRetries, c.initialBackoff = maxRetries, initialBackoff
	})
}
