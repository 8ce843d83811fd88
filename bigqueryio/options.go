package bigqueryio

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
	"google.golang.org/api/option"
)

// DataFormat is the serialization a read session asks for.
type DataFormat int32

const (
	// Avro rows, decoded by this package (the default).
	Avro DataFormat = 1
	// Arrow record batches, decoded with Arrow's Go module.
	Arrow DataFormat = 2
)

// Stream counts when streams are sized by WithDesiredBundleSize, as Beam
// Java bounds them.
const (
	MinStreams = 10
	MaxStreams = 10000
)

// readConfig is the serialisable configuration of a read; it travels in the
// DoFns to the workers.
type readConfig struct {
	Table          string // projects/p/datasets/d/tables/t
	Billing        string // billing project; the table's when empty
	SelectedFields []string
	RowRestriction string
	Format         int32
	MaxStreams     int32
	BundleSize     int64
	SnapshotMicros int64 // 0: now
	Endpoint       string
	Insecure       bool
	// ClientOptions names the client options registered with
	// RegisterClientOptions (WithClientOptions); QuotaProject is
	// WithQuotaProject's project.
	ClientOptions string
	QuotaProject  string
	SplitTimeout  time.Duration
	SplitWait     time.Duration
	MaxRetries    int
	RetryBase     time.Duration
	// IgnoreUnknownFields leaves zero the struct fields that match no
	// column (WithIgnoreUnknownFields).
	IgnoreUnknownFields bool
	Query               queryConfig // Query's own settings; zero for Read
	// QueryParams is WithQueryParameters' parameters, for Query, as JSON
	// of []queryParam: Beam's coder of DoFn fields takes no recursive type.
	QueryParams string
	// Namespace is the Beam metrics namespace (WithMetricsNamespace).
	Namespace string

	// given is the options as they were given, for the checks of
	// construction (see check); it does not travel.
	given          []givenOption
	tooManyStreams bool  // WithMaxStreams beyond an int32
	paramsErr      error // WithQueryParameters could not take its parameters
}

// note records a call of the named option with args (bqcore.Note).
func (c *readConfig) note(name string, args ...any) {
	c.given = append(c.given, bqcore.Note(name, args...))
}

// calls lists the calls of the named option, in order.
func (c *readConfig) calls(name string) []string { return bqcore.Calls(c.given, name) }

// ReadOption configures Read (and NewStreamCheck). The options of Read
// alone return a ReadOption (WithSnapshotTime); those of Read and Query, a
// SessionOption. A QueryOption is not a ReadOption: given to Read, it does
// not compile.
type ReadOption interface{ applyRead(*readConfig) }

// QueryOption configures a query: bqquery.Query, in package
// github.com/sdfio/sdfio/bigqueryio/bqquery, which takes this package's
// options (where these docs say Query, they mean it). The options of Query
// alone return a
// QueryOption (WithLegacySQL, WithQueryPriority, WithQueryLocation,
// WithQueryTempDataset, WithQueryParameters, WithRESTEndpoint); those of
// Read and Query, a SessionOption. A ReadOption is not a QueryOption: given
// to Query, it does not compile.
type QueryOption interface{ applyQuery(*readConfig) }

// SessionOption configures what Read and Query share: the read session
// (columns, rows, format, streams), its stream reads (splits, retries),
// the connection to the Storage Read API and the metrics. It is both a
// ReadOption and a QueryOption.
type SessionOption interface {
	ReadOption
	QueryOption
}

// sessionOption is an option of Read and Query.
type sessionOption func(*readConfig)

func (o sessionOption) applyRead(c *readConfig)  { o(c) }
func (o sessionOption) applyQuery(c *readConfig) { o(c) }

// readOnlyOption is an option of Read alone.
type readOnlyOption func(*readConfig)

func (o readOnlyOption) applyRead(c *readConfig) { o(c) }

// queryOnlyOption is an option of Query alone.
type queryOnlyOption func(*readConfig)

func (o queryOnlyOption) applyQuery(c *readConfig) { o(c) }

// newReadConfig is the configuration of a Read of table (the resource
// name) with opts, checked; transform names it in errors.
func newReadConfig(transform, table string, opts []ReadOption) (readConfig, error) {
	cfg := readConfig{Table: table, Format: int32(Avro), Namespace: Namespace, SplitWait: DefaultSplitWait}
	if err := applyOptions(transform, &cfg, opts, ReadOption.applyRead); err != nil {
		return readConfig{}, err
	}
	return cfg, cfg.check(transform)
}

// newQueryConfig is the configuration of a query with opts, checked;
// transform (bqquery.Query) names it in errors.
func newQueryConfig(transform string, opts []QueryOption) (readConfig, error) {
	cfg := readConfig{Format: int32(Avro), Namespace: Namespace, SplitWait: DefaultSplitWait}
	if err := applyOptions(transform, &cfg, opts, QueryOption.applyQuery); err != nil {
		return readConfig{}, err
	}
	return cfg, cfg.check(transform)
}

// last is the last call of the named option.
func (c *readConfig) last(name string) string {
	calls := c.calls(name)
	return calls[len(calls)-1]
}

// check refuses, when the pipeline is built, options that contradict each
// other or hold values that cannot work, naming transform and the options.
func (c *readConfig) check(transform string) error {
	if err := c.checkOptions(); err != nil {
		return fmt.Errorf("%s: %w", transform, err)
	}
	return nil
}

func (c *readConfig) checkOptions() error {
	if sel := c.calls("WithSelectedFields"); len(sel) > 1 {
		return fmt.Errorf("WithSelectedFields is given %d times, %s: give every column in one", len(sel), strings.Join(sel, " and "))
	} else if len(sel) == 1 {
		if len(c.SelectedFields) == 0 {
			return errors.New("WithSelectedFields() names no field: leave it out to read every column")
		}
		seen := map[string]bool{}
		for _, f := range c.SelectedFields {
			switch k := strings.ToLower(f); {
			case strings.TrimSpace(f) == "":
				return fmt.Errorf("%s names an empty field", sel[0])
			case seen[k]:
				return fmt.Errorf("%s names %s twice", sel[0], f)
			default:
				seen[k] = true
			}
		}
	}
	if qp := c.calls("WithQueryParameters"); len(qp) > 1 {
		return fmt.Errorf("WithQueryParameters is given %d times, %s: give every parameter in one", len(qp), strings.Join(qp, " and "))
	}
	if c.paramsErr != nil {
		return fmt.Errorf("WithQueryParameters: %w", c.paramsErr)
	}
	if err := checkRepeats(c.given, "WithSelectedFields", "WithQueryParameters"); err != nil {
		return err
	}
	if err := checkClientOptions(c.ClientOptions, c.QuotaProject, func(n string) bool { return len(c.calls(n)) > 0 }, c.last); err != nil {
		return err
	}
	ms, bs := c.calls("WithMaxStreams"), c.calls("WithDesiredBundleSize")
	switch {
	case len(ms) > 0 && len(bs) > 0:
		return fmt.Errorf("%s and %s both size the read session: give one", ms[0], bs[0])
	case c.tooManyStreams:
		return fmt.Errorf("%s: more streams than the API can ask for", ms[len(ms)-1])
	case c.MaxStreams < 0:
		return fmt.Errorf("%s: a negative stream count", ms[len(ms)-1])
	case c.BundleSize < 0:
		return fmt.Errorf("%s: a negative bundle size", bs[len(bs)-1])
	case c.MaxRetries < 0 || c.RetryBase < 0:
		return fmt.Errorf("%s: a negative retry count or backoff", c.last("WithRetries"))
	case c.SplitTimeout < 0:
		return fmt.Errorf("%s: a negative timeout", c.last("WithSplitTimeout"))
	case c.SplitWait < 0:
		return fmt.Errorf("%s: a negative wait", c.last("WithSplitWait"))
	case c.Format != int32(Avro) && c.Format != int32(Arrow):
		return fmt.Errorf("%s: data format %d is neither Avro nor Arrow", c.last("WithDataFormat"), c.Format)
	case c.Namespace == "":
		return fmt.Errorf("%s: an empty metrics namespace", c.last("WithMetricsNamespace"))
	case c.Billing != "" && !validProject(c.Billing):
		return fmt.Errorf("%s: not a project id", c.last("WithBillingProject"))
	}
	return nil
}

// fieldRules are the rules of the read for the fields of its struct type.
func (c readConfig) fieldRules() fieldRules {
	return fieldRules{IgnoreUnknown: c.IgnoreUnknownFields, Selected: c.SelectedFields}
}

// WithSelectedFields reads only these columns (top-level names, or
// record.field paths as the service allows), in table order. Give it once,
// with every column: given twice, the read is refused when the pipeline is
// built.
func WithSelectedFields(fields ...string) SessionOption {
	return sessionOption(func(c *readConfig) {
		c.note("WithSelectedFields", anys(fields)...)
		c.SelectedFields = append([]string(nil), fields...)
	})
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// WithIgnoreUnknownFields leaves zero, with no error, the fields of the
// struct type that match no column of the read session (a column the
// table does not have, or one WithSelectedFields did not select), and the
// fields that cancel each other by the embedding rules (see
// docs/BIGQUERY.md, "Output"). Without it such a field fails the read: when the pipeline is built
// if WithSelectedFields shows the column cannot be there, else when the
// read session is created.
func WithIgnoreUnknownFields() SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithIgnoreUnknownFields"); c.IgnoreUnknownFields = true })
}

// WithRowRestriction filters rows on the server with a SQL boolean
// expression ("id > 5 AND name IS NOT NULL").
func WithRowRestriction(sql string) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithRowRestriction", sql); c.RowRestriction = sql })
}

// WithDataFormat chooses the wire format: Avro (default) or Arrow.
func WithDataFormat(f DataFormat) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithDataFormat", int32(f)); c.Format = int32(f) })
}

// WithBillingProject bills the read session to project instead of the
// table's project. Query requires it (see Query).
func WithBillingProject(project string) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithBillingProject", project); c.Billing = project })
}

// WithMaxStreams asks for at most n streams (0, the default, lets the
// service choose; at most MaxStreams). It cannot be given with
// WithDesiredBundleSize.
func WithMaxStreams(n int) SessionOption {
	return sessionOption(func(c *readConfig) {
		c.note("WithMaxStreams", n)
		// Kept out of int32's range checks: int32(n) of a count beyond it
		// could wrap to any value, a negative one to a positive.
		c.MaxStreams, c.tooManyStreams = int32(min(max(n, -1), math.MaxInt32)), n > math.MaxInt32
	})
}

// WithDesiredBundleSize sizes the session as Beam Java does: table bytes
// (the service's estimate of the bytes the session scans) / bytes streams,
// between MinStreams and MaxStreams. It cannot be given with
// WithMaxStreams.
func WithDesiredBundleSize(bytes int64) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithDesiredBundleSize", bytes); c.BundleSize = bytes })
}

// WithSnapshotTime reads the table as of t. It is Read's alone: a Query's
// result table is new (use FOR SYSTEM_TIME AS OF in its SQL).
func WithSnapshotTime(t time.Time) ReadOption {
	return readOnlyOption(func(c *readConfig) { c.note("WithSnapshotTime", t); c.SnapshotMicros = t.UnixMicro() })
}

// WithEndpoint sends the Storage Read API calls of Read and Query to
// host:port instead of Google's endpoint: a regional or private endpoint, or a test server such as
// bqtest's (with WithInsecure).
func WithEndpoint(hostport string) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithEndpoint", hostport); c.Endpoint = hostport })
}

// WithInsecure talks to the endpoint without TLS and without credentials,
// as a local test server needs. Never use it against Google.
func WithInsecure() SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithInsecure"); c.Insecure = true })
}

// WithClientOptions makes every client of the transform use the client
// options registered under name with RegisterClientOptions: the Storage
// Read client (Read, Query) and the BigQuery REST client (Query) alike,
// as bqwrite.WithClientOptions does for Write's clients. That is how credentials (a
// credentials file or JSON, a token source, impersonation through
// google.golang.org/api/impersonate), a quota project, a user agent,
// extra headers or gRPC interceptors reach the clients.
//
// The option takes a name, not the option.ClientOption values: the
// transform's configuration travels to the workers as exported fields of
// its DoFns, encoded when the pipeline is built and decoded by each worker
// process, and an option.ClientOption is an interface whose values are of
// unexported types of Google's API module (some hold functions, token
// sources, connections) that no coder encodes; credentials would not
// belong in the pipeline's description anyway. Each worker process therefore makes the
// options itself, by the name, from what its own init functions
// registered. The name must be registered in the process that builds the
// pipeline (else the transform is refused when it is built), and in every
// worker, where a name not registered fails the bundle naming it: register
// it in an init function, which a worker, running the same binary, runs
// too (TestClientOptionsSeparateWorker and TestClientOptionsNotOnWorker
// show both).
//
// The registered options are applied after the transform's own
// (WithEndpoint, WithInsecure, WithRESTEndpoint, WithQuotaProject), so
// they win where both set the same thing. Every client gets them all: an
// option of one transport (option.WithGRPCDialOption) is ignored by the
// other's client, but option.WithGRPCConn and option.WithHTTPClient are
// refused by the other's client (the gRPC and REST clients of Query, or
// of bqwrite's Write, fail to start): give a transform whose clients are
// of both transports neither of these.
func WithClientOptions(name string) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithClientOptions", name); c.ClientOptions = name })
}

// WithQuotaProject bills the transform's API calls' quota to project: the
// clients send it as the x-goog-user-project header (option.WithQuotaProject)
// on the Storage Read and REST calls alike. It is Beam Go's
// bigqueryio.WithQuotaProject (bqwrite.WithQuotaProject for Write). It
// differs from
// WithBillingProject, which names the project a read session or a query
// job runs in. The project travels to the workers as text; an empty or
// malformed project id is refused when the pipeline is built. Google's
// gRPC clients send it with a call's credentials, so not under
// WithInsecure, which drops them.
func WithQuotaProject(project string) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithQuotaProject", project); c.QuotaProject = project })
}

// WithSplitTimeout bounds a dynamic split's RPCs (default
// sdf.DefaultSplitTimeout), which run in the background: a split they
// have not prepared by then is dropped.
func WithSplitTimeout(d time.Duration) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithSplitTimeout", d); c.SplitTimeout = d })
}

// DefaultSplitWait is how long a runner's split request waits for the
// split's RPCs when WithSplitWait is not given.
const DefaultSplitWait = 10 * time.Millisecond

// WithSplitWait is how long a runner's split request waits for the split's
// RPCs (SplitReadStream, and a read of the primary) before it is refused
// and the split prepared in the background for the runner's next request
// (default DefaultSplitWait; 0 never waits; see docs/BIGQUERY.md,
// "Dynamic splits"). Beam Go
// answers splits on the worker's control loop, so every bundle of the
// worker may wait this long; a wait at least the split timeout makes every
// split wait for its RPCs, as splits did before.
func WithSplitWait(d time.Duration) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithSplitWait", d); c.SplitWait = d })
}

// WithRetries sets how many times in a row a ReadRows (of Read and Query),
// or a REST call of Query, failing with a transient error is retried
// (default 10), backing off from base (default 100 ms; for a ReadRows,
// 0 is the default too) doubling up to 10 s, each wait drawn at random
// up to its bound (internal/retry's backoff; docs/BIGQUERY.md, "Retries",
// lists the calls and the codes).
// bqwrite.WithRetries is Write's.
func WithRetries(n int, base time.Duration) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithRetries", n, base); c.MaxRetries, c.RetryBase = n, base })
}

// WithMetricsNamespace puts the transform's Beam metrics in namespace ns
// instead of Namespace, the default (say, to tell two reads of a pipeline
// apart).
func WithMetricsNamespace(ns string) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithMetricsNamespace", ns); c.Namespace = ns })
}

// counter is the named counter of the read's metrics namespace.
func (c readConfig) counter(name string) beam.Counter {
	ns := c.Namespace
	if ns == "" { // a readConfig not built by the options (tests)
		ns = Namespace
	}
	return beam.NewCounter(ns, name)
}

// clientOptions are the options of the Storage Read client.
func (c readConfig) clientOptions() ([]option.ClientOption, error) {
	return connOptions(c.Endpoint, c.Insecure, true, c.QuotaProject, c.ClientOptions)
}

func (c readConfig) parent() string {
	p := c.Billing
	if p == "" {
		p = strings.Split(c.Table, "/")[1]
	}
	return "projects/" + p
}
