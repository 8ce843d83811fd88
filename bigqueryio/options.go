package bigqueryio

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
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

// givenOption is an option as it was given: its name, its call as text
// for messages, and the value two calls are compared by (the call's text
// unless the option says otherwise, see WithSchema).
type givenOption struct{ name, call, value string }

// note records a call of the named option with args, for the messages and
// the checks of construction. Every option calls it: an option given twice
// with different values is then refused (checkRepeats) with no rule of its
// own. Two calls differ when their text does: an argument that holds
// pointers should be given as text (see WithSchema), so that equal values
// read the same.
func (c *readConfig) note(name string, args ...any) {
	parts := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			parts[i] = strconv.Quote(a)
		case time.Time:
			parts[i] = a.UTC().Format(time.RFC3339Nano)
		default:
			parts[i] = fmt.Sprint(a)
		}
	}
	call := name + "(" + strings.Join(parts, ", ") + ")"
	c.given = append(c.given, givenOption{name, call, call})
}

// rawArg is an argument of note shown as it is, not quoted.
type rawArg string

// checkRepeats refuses an option given twice with different values, naming
// both calls: the later would silently replace the earlier. The same call
// repeated, value for value, is accepted (it changes nothing). The options
// named in own have rules of their own for repeats, checked before.
func checkRepeats(given []givenOption, own ...string) error {
	first := map[string]givenOption{}
	for _, g := range given {
		if slices.Contains(own, g.name) {
			continue
		}
		if f, ok := first[g.name]; !ok {
			first[g.name] = g
		} else if f.value != g.value {
			return fmt.Errorf("%s and %s are both given: give %s once", f.call, g.call, g.name)
		}
	}
	return nil
}

// applyOptions applies opts to c in order; a nil option is refused, naming
// transform ("bigqueryio.Read") and its position, instead of panicking.
func applyOptions[C, O any](transform string, c *C, opts []O, apply func(O, *C)) error {
	for i, o := range opts {
		if isNilOption(o) {
			return fmt.Errorf("%s: option %d of %d is nil (a nil %v)", transform, i+1, len(opts), reflect.TypeFor[O]())
		}
		apply(o, c)
	}
	return nil
}

// isNilOption reports a nil option: a nil interface or function, or a zero
// CommonOption or QueryWriteOption.
func isNilOption(o any) bool {
	switch o := o.(type) {
	case nil:
		return true
	case CommonOption:
		return o.read == nil || o.write == nil
	case QueryWriteOption:
		return o.query == nil || o.write == nil
	}
	v := reflect.ValueOf(o)
	return v.Kind() == reflect.Func && v.IsNil()
}

// calls lists the calls of the named option, in order.
func (c *readConfig) calls(name string) []string {
	var out []string
	for _, g := range c.given {
		if g.name == name {
			out = append(out, g.call)
		}
	}
	return out
}

// ReadOption configures Read (and NewStreamCheck). The options of Read
// alone return a ReadOption (WithSnapshotTime); those of Read and Query, a
// SessionOption. A QueryOption is not a ReadOption: given to Read, it does
// not compile.
type ReadOption interface{ applyRead(*readConfig) }

// QueryOption configures Query. The options of Query alone return a
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

// CommonOption configures Read, Query and Write alike: the connection to
// the Storage APIs (WithEndpoint, WithInsecure), the clients' options and
// quota project (WithClientOptions, WithQuotaProject), retries
// (WithRetries) and the metrics namespace (WithMetricsNamespace). It is a SessionOption and
// a WriteOption.
type CommonOption struct {
	read  func(*readConfig)
	write func(*writeConfig)
}

func (o CommonOption) applyRead(c *readConfig)   { o.read(c) }
func (o CommonOption) applyQuery(c *readConfig)  { o.read(c) }
func (o CommonOption) applyWrite(c *writeConfig) { o.write(c) }

// QueryWriteOption configures Query and Write: the BigQuery REST API's
// endpoint (WithRESTEndpoint). It is a QueryOption and a WriteOption.
type QueryWriteOption struct {
	query func(*readConfig)
	write func(*writeConfig)
}

func (o QueryWriteOption) applyQuery(c *readConfig)  { o.query(c) }
func (o QueryWriteOption) applyWrite(c *writeConfig) { o.write(c) }

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

// newQueryConfig is the configuration of a Query with opts, checked.
func newQueryConfig(opts []QueryOption) (readConfig, error) {
	cfg := readConfig{Format: int32(Avro), Namespace: Namespace, SplitWait: DefaultSplitWait}
	if err := applyOptions("bigqueryio.Query", &cfg, opts, QueryOption.applyQuery); err != nil {
		return readConfig{}, err
	}
	return cfg, cfg.check("bigqueryio.Query")
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
	return fieldRules{ignoreUnknown: c.IgnoreUnknownFields, selected: c.SelectedFields}
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
// fields that cancel each other by the embedding rules (see the package
// doc). Without it such a field fails the read: when the pipeline is built
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

// WithEndpoint sends the Storage Read API calls (of Read and Query) or the
// Storage Write API calls (of Write) to host:port instead of Google's
// endpoint: a regional or private endpoint, or a test server such as
// bqtest's (with WithInsecure).
func WithEndpoint(hostport string) CommonOption {
	return CommonOption{
		read:  func(c *readConfig) { c.note("WithEndpoint", hostport); c.Endpoint = hostport },
		write: func(c *writeConfig) { c.note("WithEndpoint", hostport); c.Endpoint = hostport },
	}
}

// WithInsecure talks to the endpoint without TLS and without credentials,
// as a local test server needs. Never use it against Google.
func WithInsecure() CommonOption {
	return CommonOption{
		read:  func(c *readConfig) { c.note("WithInsecure"); c.Insecure = true },
		write: func(c *writeConfig) { c.note("WithInsecure"); c.Insecure = true },
	}
}

// WithClientOptions makes every client of the transform use the client
// options registered under name with RegisterClientOptions: the Storage
// Read client (Read, Query), the Storage Write clients (Write) and the
// BigQuery REST client (Query, Write) alike. That is how credentials (a
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
// refused by the other's client (the gRPC and REST clients of Query and
// Write fail to start): give a transform whose clients are of both
// transports neither of these.
func WithClientOptions(name string) CommonOption {
	return CommonOption{
		read:  func(c *readConfig) { c.note("WithClientOptions", name); c.ClientOptions = name },
		write: func(c *writeConfig) { c.note("WithClientOptions", name); c.ClientOptions = name },
	}
}

// WithQuotaProject bills the transform's API calls' quota to project: the
// clients send it as the x-goog-user-project header (option.WithQuotaProject)
// on the Storage Read, Storage Write and REST calls alike. It is Beam Go's
// bigqueryio.WithQuotaProject, here also for Write. It differs from
// WithBillingProject, which names the project a read session or a query
// job runs in. The project travels to the workers as text; an empty or
// malformed project id is refused when the pipeline is built. Google's
// gRPC clients send it with a call's credentials, so not under
// WithInsecure, which drops them.
func WithQuotaProject(project string) CommonOption {
	return CommonOption{
		read:  func(c *readConfig) { c.note("WithQuotaProject", project); c.QuotaProject = project },
		write: func(c *writeConfig) { c.note("WithQuotaProject", project); c.QuotaProject = project },
	}
}

// registered is the process's client options of RegisterClientOptions, by
// name.
var registered struct {
	sync.Mutex
	m map[string]func() []option.ClientOption
}

// RegisterClientOptions registers, under name, a function returning client
// options for the transforms given WithClientOptions(name) (see there):
// credentials, a quota project, headers, interceptors. Call it in an init
// function, so that every worker process registers it too. f is called
// each time one of those transforms makes a client, on the worker that
// makes it; it may return fresh values each time. Registering a name
// again replaces its function.
// RegisterClientOptions panics on an empty name or a nil f.
func RegisterClientOptions(name string, f func() []option.ClientOption) {
	if name == "" || f == nil {
		panic("bigqueryio.RegisterClientOptions: an empty name or a nil function")
	}
	registered.Lock()
	defer registered.Unlock()
	if registered.m == nil {
		registered.m = map[string]func() []option.ClientOption{}
	}
	registered.m[name] = f
}

// registeredOptions are the options registered as name in this process
// (none for "").
func registeredOptions(name string) ([]option.ClientOption, error) {
	if name == "" {
		return nil, nil
	}
	registered.Lock()
	f := registered.m[name]
	registered.Unlock()
	if f == nil {
		return nil, fmt.Errorf("bigqueryio: WithClientOptions(%q): no client options are registered under that name in this process (call RegisterClientOptions in an init function, so that every worker registers them too)", name)
	}
	return f(), nil
}

// checkClientOptions checks WithClientOptions' name and WithQuotaProject's
// project when the pipeline is built; last names the option's last call.
func checkClientOptions(name, quota string, given func(string) bool, last func(string) string) error {
	if given("WithClientOptions") {
		if name == "" {
			return fmt.Errorf("%s: an empty name", last("WithClientOptions"))
		}
		registered.Lock()
		f := registered.m[name]
		registered.Unlock()
		if f == nil {
			return fmt.Errorf("%s: no client options are registered under that name in this process: call RegisterClientOptions in an init function", last("WithClientOptions"))
		}
	}
	if given("WithQuotaProject") && !validProject(quota) {
		return fmt.Errorf("%s: not a project id", last("WithQuotaProject"))
	}
	return nil
}

// connOptions are the client options of a connection to endpoint (the
// service's when ""), without TLS and credentials when insecure, with the
// quota project and the options registered as named last.
func connOptions(endpoint string, insecureConn, grpcConn bool, quota, named string) ([]option.ClientOption, error) {
	var opts []option.ClientOption
	if endpoint != "" {
		opts = append(opts, option.WithEndpoint(endpoint))
	}
	if insecureConn {
		opts = append(opts, option.WithoutAuthentication())
		if grpcConn {
			opts = append(opts, option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
		}
	}
	if quota != "" {
		opts = append(opts, option.WithQuotaProject(quota))
	}
	extra, err := registeredOptions(named)
	if err != nil {
		return nil, err
	}
	return append(opts, extra...), nil
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
// (default DefaultSplitWait; 0 never waits; see the package doc). Beam Go
// answers splits on the worker's control loop, so every bundle of the
// worker may wait this long; a wait at least the split timeout makes every
// split wait for its RPCs, as splits did before.
func WithSplitWait(d time.Duration) SessionOption {
	return sessionOption(func(c *readConfig) { c.note("WithSplitWait", d); c.SplitWait = d })
}

// WithRetries sets how many times in a row a ReadRows (of Read and Query)
// or an append, a finalize or a commit (of Write) failing with a transient
// error is retried (default 10), backing off from base (default 100 ms;
// 0 retries at once for a write) doubling up to 10 s, each wait drawn at
// random up to its bound (internal/retry's backoff; the package doc's
// Retries lists the calls and the codes).
func WithRetries(n int, base time.Duration) CommonOption {
	return CommonOption{
		read:  func(c *readConfig) { c.note("WithRetries", n, base); c.MaxRetries, c.RetryBase = n, base },
		write: func(c *writeConfig) { c.note("WithRetries", n, base); c.MaxRetries, c.RetryBase = n, base },
	}
}

// WithMetricsNamespace puts the transform's Beam metrics in namespace ns
// instead of Namespace, the default (say, to tell two reads of a pipeline
// apart).
func WithMetricsNamespace(ns string) CommonOption {
	return CommonOption{
		read:  func(c *readConfig) { c.note("WithMetricsNamespace", ns); c.Namespace = ns },
		write: func(c *writeConfig) { c.note("WithMetricsNamespace", ns); c.Namespace = ns },
	}
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

// tableResource turns project.dataset.table or project:dataset.table into
// projects/p/datasets/d/tables/t. The project may be domain-scoped
// (example.com:project), as in example.com:project:dataset.table or
// example.com:project.dataset.table.
func tableResource(name string) (string, error) {
	proj, ds, tbl, err := splitTableSpec(name)
	if err != nil {
		return "", fmt.Errorf("bigqueryio: %w", err)
	}
	return fmt.Sprintf("projects/%s/datasets/%s/tables/%s", proj, ds, tbl), nil
}

// splitTableSpec splits a table spec into its project, dataset and table. A
// dataset or table id has no '.', ':' or '/'; so the table is what follows
// the last '.', the dataset what follows the last ':' or '.' before it, and
// the project the rest: a plain id, or a domain-scoped one (domain:id, the
// domain alone holding dots).
func splitTableSpec(name string) (project, dataset, table string, err error) {
	bad := func() (string, string, string, error) {
		return "", "", "", fmt.Errorf("table %q: want project.dataset.table or project:dataset.table (the project may be domain-scoped, example.com:project)", name)
	}
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return bad()
	}
	rest, table := name[:i], name[i+1:]
	j := strings.LastIndexAny(rest, ".:")
	if j < 0 {
		return bad()
	}
	project, dataset = rest[:j], rest[j+1:]
	if !validProject(project) || dataset == "" || table == "" || strings.ContainsAny(dataset, "/") || strings.ContainsAny(table, ":/") {
		return bad()
	}
	return project, dataset, table, nil
}

// validProject accepts a project id (no '.', ':' or '/') or a domain-scoped
// one, domain:id, the domain holding no ':' or '/'.
func validProject(p string) bool {
	domain, id, scoped := strings.Cut(p, ":")
	if !scoped {
		id = domain
	} else if domain == "" || strings.ContainsAny(domain, "/") {
		return false
	}
	return id != "" && !strings.ContainsAny(id, ".:/")
}

// WriteOption configures Write. The options of Write alone return a
// WriteOption (WithAtLeastOnce, WithCreateDisposition, ...); those it
// shares with Read and Query a CommonOption, with Query a
// QueryWriteOption. A ReadOption or QueryOption of the read side alone is
// not a WriteOption: given to Write, it does not compile.
type WriteOption interface{ applyWrite(*writeConfig) }

// writeOnlyOption is an option of Write alone.
type writeOnlyOption func(*writeConfig)

func (o writeOnlyOption) applyWrite(c *writeConfig) { o(c) }

// CreateDisposition says what Write does with a table that does not
// exist.
type CreateDisposition int

const (
	// CreateIfNeeded creates a missing table with the schema of
	// WithSchema, or else the one bigquery.InferSchema infers from the
	// element type (the default).
	CreateIfNeeded CreateDisposition = iota
	// CreateNever fails the write when the table does not exist.
	CreateNever
)

// WriteDisposition says what Write does with a table that has rows.
type WriteDisposition int

const (
	// WriteAppend appends to the rows there are (the default).
	WriteAppend WriteDisposition = iota
	// WriteEmpty fails the write when the table has rows before it.
	WriteEmpty
	// WriteTruncate replaces the table's rows with the write's, at once:
	// the rows are committed to a staging table, which a copy job in
	// WRITE_TRUNCATE then puts in the table's place (see the package doc).
	WriteTruncate
)

// writeConfig is the serialisable configuration of a write; it travels in
// the DoFns to the workers.
type writeConfig struct {
	Table    string // projects/p/datasets/d/tables/t; "" with WithTableFunc
	Endpoint string
	REST     string // the BigQuery REST API's endpoint; "": Google's
	Insecure bool
	// ClientOptions and QuotaProject are WithClientOptions' name and
	// WithQuotaProject's project.
	ClientOptions string
	QuotaProject  string
	Namespace     string
	AtLeastOnce   bool
	FailOnErrors  bool // WithFailOnRowErrors
	Create        CreateDisposition
	Disposition   WriteDisposition
	// Schema is WithSchema's schema as the JSON of its fields (Beam's
	// coder of DoFn fields takes no recursive type); "" for none.
	Schema       string
	MaxRetries   int
	RetryBase    time.Duration
	MaxBatchSize int // encoded bytes of one append, at most
	SendBytes    int // encoded bytes at which a batch is sent (write_append.go)
	// Spec is how CreateIfNeeded makes a table (WithTimePartitioning, ...;
	// write_table.go).
	Spec TableSpec
	// IgnoreUnknown drops a Row's keys the table lacks
	// (WithIgnoreUnknownValues).
	IgnoreUnknown bool
	// AllowAddition and AllowRelaxation are WithSchemaUpdateOptions'.
	AllowAddition, AllowRelaxation bool
	// NumStreams, Frequency, StreamMaxRows, StreamMaxBytes and Idle are
	// the exactly-once write of unbounded input's (WithNumStreams,
	// WithTriggeringFrequency, WithStreamRotation,
	// WithStreamRotationBytes; write_stream.go).
	NumStreams     int
	Frequency      time.Duration
	StreamMaxRows  int64
	StreamMaxBytes int64
	Idle           time.Duration
	// Unordered is WithUnorderedChanges': CDC changes without a sequence
	// number are written (write_cdc.go).
	Unordered bool
	// Settle is how long after a table is made its NOT_FOUND and
	// PERMISSION_DENIED answers are waited out (write_errors.go); 0:
	// DefaultTableSettle. Tests shorten it.
	Settle time.Duration

	given   []givenOption
	tableFn any // WithTableFunc's function, checked against the element type
	// mutationFn is WithRowMutation's function (write_cdc.go).
	mutationFn any
	specFn     any    // WithTableSpecFunc's function
	badUpdate  string // a schema update option WithSchemaUpdateOptions does not know
	schemaOK   error  // WithSchema could not take its schema
}

func (c *writeConfig) note(name string, args ...any) {
	r := readConfig{}
	r.note(name, args...)
	c.given = append(c.given, r.given...)
}

func (c *writeConfig) calls(name string) []string {
	r := readConfig{given: c.given}
	return r.calls(name)
}

// newWriteConfig is the configuration of a Write of table (a table spec,
// or "" with WithTableFunc) with opts, checked.
func newWriteConfig(table string, opts []WriteOption) (writeConfig, error) {
	cfg := writeConfig{Namespace: Namespace, MaxRetries: 10, RetryBase: 100 * time.Millisecond, MaxBatchSize: maxAppendBytes,
		Frequency: DefaultTriggeringFrequency, StreamMaxRows: DefaultStreamMaxRows, StreamMaxBytes: DefaultStreamMaxBytes,
		Idle: DefaultStreamIdle}
	if err := applyOptions("bigqueryio.Write", &cfg, opts, WriteOption.applyWrite); err != nil {
		return writeConfig{}, err
	}
	if err := cfg.checkOptions(table); err != nil {
		return writeConfig{}, fmt.Errorf("bigqueryio.Write: %w", err)
	}
	cfg.SendBytes = min(sendBytes, cfg.MaxBatchSize)
	if len(cfg.calls("WithMaxAppendBytes")) > 0 {
		cfg.SendBytes = cfg.MaxBatchSize
	}
	return cfg, nil
}

func (c *writeConfig) checkOptions(table string) error {
	if err := checkRepeats(c.given); err != nil {
		return err
	}
	switch {
	case table == "" && c.tableFn == nil:
		return errors.New("no table: give a table spec (project.dataset.table) or WithTableFunc")
	case table != "" && c.tableFn != nil:
		return fmt.Errorf("table %q and WithTableFunc both name the destination: give the table \"\" with WithTableFunc", table)
	case table != "":
		res, err := tableResource(table)
		if err != nil {
			return err
		}
		c.Table = res
		if _, part := splitDecorator(table); part != "" {
			if err := c.Spec.checkDecorator(table, part); err != nil {
				return err
			}
		}
	}
	last := func(name string) string { calls := c.calls(name); return calls[len(calls)-1] }
	if err := checkClientOptions(c.ClientOptions, c.QuotaProject, func(n string) bool { return len(c.calls(n)) > 0 }, last); err != nil {
		return err
	}
	if err := c.checkSpecFunc(); err != nil {
		return err
	}
	if err := c.checkSchemaUpdates(); err != nil {
		return err
	}
	if c.Create == CreateNever && (c.Spec.given() || c.specFn != nil) {
		return fmt.Errorf("%s: the table's spec (%s) only applies to a table CreateIfNeeded creates", last("WithCreateDisposition"), c.specCalls())
	}
	switch {
	case c.Namespace == "":
		return fmt.Errorf("%s: an empty metrics namespace", last("WithMetricsNamespace"))
	case c.MaxRetries < 0 || c.RetryBase < 0:
		return fmt.Errorf("%s: a negative retry count or backoff", last("WithRetries"))
	case c.schemaOK != nil:
		return fmt.Errorf("%s: %w", last("WithSchema"), c.schemaOK)
	case c.Create != CreateIfNeeded && c.Create != CreateNever:
		return fmt.Errorf("%s: not a create disposition", last("WithCreateDisposition"))
	case c.Disposition != WriteAppend && c.Disposition != WriteEmpty && c.Disposition != WriteTruncate:
		return fmt.Errorf("%s: not a write disposition", last("WithWriteDisposition"))
	case c.AtLeastOnce && c.Disposition == WriteTruncate:
		return fmt.Errorf("%s cannot be given with WithAtLeastOnce: the table is replaced by a copy job once every row is committed to a staging table, which needs the commit", last("WithWriteDisposition"))
	case c.Disposition == WriteTruncate && strings.Contains(table, "$"):
		return fmt.Errorf("%s replaces a whole table, not the partition %q names", last("WithWriteDisposition"), table)
	case c.AtLeastOnce && c.Disposition == WriteEmpty:
		// Checked per bundle, rows of the bundles before would make the
		// table non-empty: only a commit at the end keeps it empty.
		return fmt.Errorf("%s cannot be given with WithAtLeastOnce: rows appended to _default are visible at once, so the check of a later bundle would find them", last("WithWriteDisposition"))
	case c.MaxBatchSize <= 0 || c.MaxBatchSize > maxAppendBytes:
		return fmt.Errorf("%s: an append holds 1 byte to %d bytes", last("WithMaxAppendBytes"), maxAppendBytes)
	}
	return c.checkStreaming(last)
}

// checkStreaming checks the options of the exactly-once write of
// unbounded input.
func (c *writeConfig) checkStreaming(last func(string) string) error {
	for _, name := range []string{"WithExactlyOnceStreaming", "WithNumStreams", "WithTriggeringFrequency", "WithStreamRotation", "WithStreamRotationBytes"} {
		if c.AtLeastOnce && len(c.calls(name)) > 0 {
			return fmt.Errorf("%s cannot be given with WithAtLeastOnce: it shapes the exactly-once write of unbounded input, and WithAtLeastOnce appends every row to the _default stream", last(name))
		}
	}
	switch {
	case len(c.calls("WithNumStreams")) > 0 && c.NumStreams <= 0:
		return fmt.Errorf("%s: a table needs at least one stream", last("WithNumStreams"))
	case c.Frequency <= 0:
		return fmt.Errorf("%s: the frequency must be positive", last("WithTriggeringFrequency"))
	case c.StreamMaxRows <= 0 || c.Idle <= 0:
		return fmt.Errorf("%s: the rows and the idle time must be positive", last("WithStreamRotation"))
	case c.StreamMaxBytes <= 0:
		return fmt.Errorf("%s: the bytes must be positive", last("WithStreamRotationBytes"))
	}
	return nil
}

// WithExactlyOnceStreaming says what Write does with unbounded input
// anyway: it writes it exactly once (see the package doc, "Streaming"):
// rows keyed by table and shard, batched, each batch appended at its
// shard's next offset of a BUFFERED stream by a stateful step, and made
// visible by FlushRows after a shuffle. It is refused with WithAtLeastOnce;
// bounded input is written as without it (PENDING streams committed at the
// end).
func WithExactlyOnceStreaming() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithExactlyOnceStreaming") })
}

// WithNumStreams is the number of shards of each table in the exactly-once
// write of unbounded input, each appending to a write stream of its own.
// More shards append in parallel; each costs a connection and a stream.
// Without it the shards follow throughput: each worker process gives a
// table shards of its own, one per AutoStreamBytesPerSecond of the table's
// rows it handles (at most MaxAutoStreams), so a table's streams grow with
// its rate and with the workers. It does not apply to bounded input
// (ignored), nor with WithAtLeastOnce (refused).
func WithNumStreams(n int) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithNumStreams", n); c.NumStreams = n })
}

// WithTriggeringFrequency bounds how long a row of unbounded input waits
// in its shard's batch before it is appended (default
// DefaultTriggeringFrequency); it is made visible by the flush that
// follows, so a row is visible about a frequency after it came (at most
// about twice). It does not apply to bounded input (ignored), nor with
// WithAtLeastOnce (refused).
func WithTriggeringFrequency(d time.Duration) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithTriggeringFrequency", d); c.Frequency = d })
}

// WithStreamRotation finalizes a shard's write stream, in the exactly-once
// write of unbounded input, before an append would take it past maxRows
// rows (default DefaultStreamMaxRows), and once no row was appended to it
// for idle (default DefaultStreamIdle, measured in event time: see the
// package doc); the shard's next rows go to a new stream. A shard that
// gets no rows for idle also has the state of both stateful steps cleared
// (its next rows start afresh), and a worker closes the connection of a
// stream it has not appended to for idle (in processing time). It does
// not apply to bounded input (ignored), nor with WithAtLeastOnce
// (refused).
func WithStreamRotation(maxRows int64, idle time.Duration) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		c.note("WithStreamRotation", maxRows, idle)
		c.StreamMaxRows, c.Idle = maxRows, idle
	})
}

// WithStreamRotationBytes finalizes a shard's write stream, in the
// exactly-once write of unbounded input, before an append would take it
// past maxBytes bytes of encoded rows (default DefaultStreamMaxBytes), as
// WithStreamRotation does by rows: the shard's next rows go to a new
// stream. A batch larger than maxBytes still goes whole into a stream of
// its own. It does not apply to bounded input (ignored), nor with
// WithAtLeastOnce (refused).
func WithStreamRotationBytes(maxBytes int64) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		c.note("WithStreamRotationBytes", maxBytes)
		c.StreamMaxBytes = maxBytes
	})
}

// counter is the named counter of the write's metrics namespace.
func (c writeConfig) counter(name string) beam.Counter { return beam.NewCounter(c.Namespace, name) }

// clientOptions are the options of the Storage Write clients.
func (c writeConfig) clientOptions() ([]option.ClientOption, error) {
	return connOptions(c.Endpoint, c.Insecure, true, c.QuotaProject, c.ClientOptions)
}

// restOptions are the options of the REST client.
func (c writeConfig) restOptions() ([]option.ClientOption, error) {
	return connOptions(c.REST, c.Insecure, false, c.QuotaProject, c.ClientOptions)
}

// WithAtLeastOnce appends to each table's _default stream instead of
// PENDING streams committed at the end: rows are visible as they are
// appended, nothing is committed, and a retried append or bundle may write
// rows twice (Beam Java's STORAGE_API_AT_LEAST_ONCE).
func WithAtLeastOnce() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithAtLeastOnce"); c.AtLeastOnce = true })
}

// WithFailOnRowErrors fails the write when the service refuses a row (a
// REQUIRED column missing, a value out of range) instead of sending it to
// WriteResult.FailedRows.
func WithFailOnRowErrors() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithFailOnRowErrors"); c.FailOnErrors = true })
}

// WithCreateDisposition says what to do with a table that does not exist:
// CreateIfNeeded (the default) or CreateNever.
func WithCreateDisposition(d CreateDisposition) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithCreateDisposition", int(d)); c.Create = d })
}

// WithWriteDisposition says what to do with a table that has rows:
// WriteAppend (the default), WriteEmpty or WriteTruncate.
func WithWriteDisposition(d WriteDisposition) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithWriteDisposition", int(d)); c.Disposition = d })
}

// WithSchema is the schema CreateIfNeeded creates a table with, instead of
// the one inferred from the element type, and the one rows of
// bigqueryio.Row are encoded by (else the table's, read when the write
// starts). Struct fields must fit its columns.
func WithSchema(schema bigquery.Schema) WriteOption {
	return writeOnlyOption(func(c *writeConfig) {
		cols := make([]any, len(schema))
		for i, f := range schema {
			cols[i] = rawArg(f.Name + " " + string(f.Type))
		}
		c.note("WithSchema", cols...)
		if len(schema) == 0 {
			c.schemaOK = errors.New("an empty schema")
			return
		}
		b, err := schema.ToJSONFields()
		c.Schema, c.schemaOK = string(b), err
		c.given[len(c.given)-1].value = c.Schema // two schemas of as many fields differ
	})
}

// WithTableFunc routes each element to the table fn names (a table spec,
// project.dataset.table), each table written and committed on its own;
// Write's table is then "". fn is a func(T) string of the element type T,
// a top-level function registered with Beam (register.Function1x1(fn) in
// an init function), as Beam needs to send it to the workers; an element
// whose table spec is not valid goes to FailedRows.
func WithTableFunc(fn any) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithTableFunc", rawArg(funcName(fn))); c.tableFn = fn })
}

// funcName is the name of function fn, or its type when it has none.
func funcName(fn any) string {
	if v := reflect.ValueOf(fn); v.Kind() == reflect.Func && !v.IsNil() {
		if f := runtime.FuncForPC(v.Pointer()); f != nil {
			return f.Name()
		}
	}
	return fmt.Sprintf("%T", fn)
}

// WithMaxAppendBytes caps the encoded rows of one append request (default
// and at most 9 MB, under the service's 10 MB limit of a request). Without
// it an append is sent once it holds 1 MiB of rows, so that the service
// works on one while the next is encoded; with it, once it holds n bytes.
// Either way the first append of a stream is sent at 64 KiB (or n, if
// smaller), and a row larger than that is sent alone.
func WithMaxAppendBytes(n int) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithMaxAppendBytes", n); c.MaxBatchSize = n })
}
