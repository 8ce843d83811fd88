package bigqueryio

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// DataFormat is the serialization a read session asks for.
type DataFormat int32

const (
	// Avro rows, decoded with hamba/avro (the default).
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
	SplitTimeout   time.Duration
	MaxRetries     int
	RetryBase      time.Duration
	// IgnoreUnknownFields leaves zero the struct fields that match no
	// column (WithIgnoreUnknownFields).
	IgnoreUnknownFields bool
	Query               queryConfig // Query's own settings; zero for Read
	// QueryParams is WithQueryParameters' parameters, for Query, as JSON
	// of []queryParam: Beam's coder of DoFn fields takes no recursive type.
	QueryParams string

	// given is the options as they were given, for the checks of
	// construction (see check); it does not travel.
	given          []givenOption
	tooManyStreams bool  // WithMaxStreams beyond an int32
	paramsErr      error // WithQueryParameters could not take its parameters
}

// givenOption is an option as it was given: its name, and its call as
// text for messages.
type givenOption struct{ name, call string }

func (c *readConfig) note(name string, args ...any) {
	parts := make([]string, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			parts[i] = strconv.Quote(s)
		} else {
			parts[i] = fmt.Sprint(a)
		}
	}
	c.given = append(c.given, givenOption{name, name + "(" + strings.Join(parts, ", ") + ")"})
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

// ReadOption configures Read (and Query).
type ReadOption func(*readConfig)

// applyOptions applies opts to cfg and checks the result (see check).
func applyOptions(cfg *readConfig, opts []ReadOption) error {
	for _, o := range opts {
		o(cfg)
	}
	return cfg.check()
}

// check refuses, when the pipeline is built, options that contradict each
// other or hold values that cannot work, naming the options.
func (c *readConfig) check() error {
	if sel := c.calls("WithSelectedFields"); len(sel) > 1 {
		return fmt.Errorf("bigqueryio: WithSelectedFields is given %d times, %s: give every column in one", len(sel), strings.Join(sel, " and "))
	} else if len(sel) == 1 {
		if len(c.SelectedFields) == 0 {
			return errors.New("bigqueryio: WithSelectedFields() names no field: leave it out to read every column")
		}
		seen := map[string]bool{}
		for _, f := range c.SelectedFields {
			switch k := strings.ToLower(f); {
			case strings.TrimSpace(f) == "":
				return fmt.Errorf("bigqueryio: %s names an empty field", sel[0])
			case seen[k]:
				return fmt.Errorf("bigqueryio: %s names %s twice", sel[0], f)
			default:
				seen[k] = true
			}
		}
	}
	if qp := c.calls("WithQueryParameters"); len(qp) > 1 {
		return fmt.Errorf("bigqueryio: WithQueryParameters is given %d times, %s: give every parameter in one", len(qp), strings.Join(qp, " and "))
	}
	if c.paramsErr != nil {
		return fmt.Errorf("bigqueryio: WithQueryParameters: %w", c.paramsErr)
	}
	ms, bs := c.calls("WithMaxStreams"), c.calls("WithDesiredBundleSize")
	switch {
	case len(ms) > 0 && len(bs) > 0:
		return fmt.Errorf("bigqueryio: %s and %s both size the read session: give one", ms[0], bs[0])
	case c.tooManyStreams:
		return fmt.Errorf("bigqueryio: %s: more streams than the API can ask for", ms[len(ms)-1])
	case c.MaxStreams < 0:
		return fmt.Errorf("bigqueryio: %s: a negative stream count", ms[len(ms)-1])
	case c.BundleSize < 0:
		return fmt.Errorf("bigqueryio: %s: a negative bundle size", bs[len(bs)-1])
	case c.MaxRetries < 0 || c.RetryBase < 0:
		r := c.calls("WithRetries")
		return fmt.Errorf("bigqueryio: %s: a negative retry count or backoff", r[len(r)-1])
	case c.SplitTimeout < 0:
		r := c.calls("WithSplitTimeout")
		return fmt.Errorf("bigqueryio: %s: a negative timeout", r[len(r)-1])
	case c.Format != int32(Avro) && c.Format != int32(Arrow):
		return fmt.Errorf("bigqueryio: data format %d is neither Avro nor Arrow", c.Format)
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
func WithSelectedFields(fields ...string) ReadOption {
	return func(c *readConfig) {
		c.note("WithSelectedFields", anys(fields)...)
		c.SelectedFields = append([]string(nil), fields...)
	}
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
func WithIgnoreUnknownFields() ReadOption {
	return func(c *readConfig) { c.note("WithIgnoreUnknownFields"); c.IgnoreUnknownFields = true }
}

// WithRowRestriction filters rows on the server with a SQL boolean
// expression ("id > 5 AND name IS NOT NULL").
func WithRowRestriction(sql string) ReadOption {
	return func(c *readConfig) { c.RowRestriction = sql }
}

// WithDataFormat chooses the wire format: Avro (default) or Arrow.
func WithDataFormat(f DataFormat) ReadOption { return func(c *readConfig) { c.Format = int32(f) } }

// WithBillingProject bills the read session to project instead of the
// table's project.
func WithBillingProject(project string) ReadOption {
	return func(c *readConfig) { c.Billing = project }
}

// WithMaxStreams asks for at most n streams (0, the default, lets the
// service choose; at most MaxStreams). It cannot be given with
// WithDesiredBundleSize.
func WithMaxStreams(n int) ReadOption {
	return func(c *readConfig) {
		c.note("WithMaxStreams", n)
		// Kept out of int32's range checks: int32(n) of a count beyond it
		// could wrap to any value, a negative one to a positive.
		c.MaxStreams, c.tooManyStreams = int32(min(max(n, -1), math.MaxInt32)), n > math.MaxInt32
	}
}

// WithDesiredBundleSize sizes the session as Beam Java does: table bytes
// (the service's estimate of the bytes the session scans) / bytes streams,
// between MinStreams and MaxStreams. It cannot be given with
// WithMaxStreams.
func WithDesiredBundleSize(bytes int64) ReadOption {
	return func(c *readConfig) { c.note("WithDesiredBundleSize", bytes); c.BundleSize = bytes }
}

// WithSnapshotTime reads the table as of t.
func WithSnapshotTime(t time.Time) ReadOption {
	return func(c *readConfig) { c.SnapshotMicros = t.UnixMicro() }
}

// WithEndpoint sends the Storage Read API calls to host:port instead of
// Google's endpoint: a regional or private endpoint, or a test server such as
// bqtest's (with WithInsecure).
func WithEndpoint(hostport string) ReadOption { return func(c *readConfig) { c.Endpoint = hostport } }

// WithInsecure talks to the endpoint without TLS and without credentials,
// as a local test server needs. Never use it against Google.
func WithInsecure() ReadOption { return func(c *readConfig) { c.Insecure = true } }

// WithSplitTimeout bounds a dynamic split's RPCs (default
// sdf.DefaultSplitTimeout); the reader waits at most this long for one.
func WithSplitTimeout(d time.Duration) ReadOption {
	return func(c *readConfig) { c.note("WithSplitTimeout", d); c.SplitTimeout = d }
}

// WithRetries sets how many times in a row a ReadRows failing with a
// transient error is retried (default 10), backing off from base (default
// 100 ms) doubling up to 10 s.
func WithRetries(n int, base time.Duration) ReadOption {
	return func(c *readConfig) { c.note("WithRetries", n, base); c.MaxRetries, c.RetryBase = n, base }
}

func (c readConfig) clientOptions() []option.ClientOption {
	var opts []option.ClientOption
	if c.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(c.Endpoint))
	}
	if c.Insecure {
		opts = append(opts, option.WithoutAuthentication(),
			option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	}
	return opts
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
