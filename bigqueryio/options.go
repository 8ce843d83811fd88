package bigqueryio

import (
	"fmt"
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
	Query          queryConfig // Query's own settings; zero for Read
}

// ReadOption configures Read.
type ReadOption func(*readConfig)

// WithSelectedFields reads only these columns (top-level names, or
// record.field paths as the service allows), in table order.
func WithSelectedFields(fields ...string) ReadOption {
	return func(c *readConfig) { c.SelectedFields = append(c.SelectedFields, fields...) }
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
// service choose).
func WithMaxStreams(n int) ReadOption {
	return func(c *readConfig) { c.MaxStreams, c.BundleSize = int32(n), 0 }
}

// WithDesiredBundleSize sizes the session as Beam Java does: table bytes
// (the service's estimate of the bytes the session scans) / bytes streams,
// between MinStreams and MaxStreams.
func WithDesiredBundleSize(bytes int64) ReadOption {
	return func(c *readConfig) { c.BundleSize, c.MaxStreams = bytes, 0 }
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
func WithSplitTimeout(d time.Duration) ReadOption { return func(c *readConfig) { c.SplitTimeout = d } }

// WithRetries sets how many times in a row a ReadRows failing with a
// transient error is retried (default 10), backing off from base (default
// 100 ms) doubling up to 10 s.
func WithRetries(n int, base time.Duration) ReadOption {
	return func(c *readConfig) { c.MaxRetries, c.RetryBase = n, base }
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
