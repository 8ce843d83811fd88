package bqwrite

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
	"google.golang.org/api/option"
)

// WriteOption configures Write. An option of bigqueryio's Read or Query
// is not a WriteOption: given to Write, it does not compile. The options
// of the connection (WithEndpoint, WithInsecure, WithRESTEndpoint,
// WithClientOptions, WithQuotaProject), WithRetries and
// WithMetricsNamespace have the same names and meaning as bigqueryio's.
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
	// WRITE_TRUNCATE then puts in the table's place (see docs/BIGQUERY.md,
	// "Replacing a table").
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

// note records a call of the named option with args (bqcore.Note): an
// option given twice with different values is then refused.
func (c *writeConfig) note(name string, args ...any) {
	c.given = append(c.given, bqcore.Note(name, args...))
}

// calls lists the calls of the named option, in order.
func (c *writeConfig) calls(name string) []string { return bqcore.Calls(c.given, name) }

// newWriteConfig is the configuration of a Write of table (a table spec,
// or "" with WithTableFunc) with opts, checked.
func newWriteConfig(table string, opts []WriteOption) (writeConfig, error) {
	cfg := writeConfig{Namespace: Namespace, MaxRetries: 10, RetryBase: 100 * time.Millisecond, MaxBatchSize: maxAppendBytes,
		Frequency: DefaultTriggeringFrequency, StreamMaxRows: DefaultStreamMaxRows, StreamMaxBytes: DefaultStreamMaxBytes,
		Idle: DefaultStreamIdle}
	if err := applyOptions("bqwrite.Write", &cfg, opts, WriteOption.applyWrite); err != nil {
		return writeConfig{}, err
	}
	if err := cfg.checkOptions(table); err != nil {
		return writeConfig{}, fmt.Errorf("bqwrite.Write: %w", err)
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
// anyway: it writes it exactly once (see docs/BIGQUERY.md, "Streaming"):
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
// for idle (default DefaultStreamIdle, measured in event time: see
// docs/BIGQUERY.md, "Streaming"); the shard's next rows go to a new stream. A shard that
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
// rows twice (Beam Java's STORAGE_API_AT_LEAST_ONCE). How many, and the
// connections it shares: docs/BIGQUERY.md, "At least once".
func WithAtLeastOnce() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithAtLeastOnce"); c.AtLeastOnce = true })
}

// WithFailOnRowErrors fails the write when the service refuses a row (a
// REQUIRED column missing, a value out of range) instead of sending it to
// WriteResult.FailedRows (docs/BIGQUERY.md, "Errors").
func WithFailOnRowErrors() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithFailOnRowErrors"); c.FailOnErrors = true })
}

// WithCreateDisposition says what to do with a table that does not exist:
// CreateIfNeeded (the default) or CreateNever.
func WithCreateDisposition(d CreateDisposition) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithCreateDisposition", int(d)); c.Create = d })
}

// WithWriteDisposition says what to do with a table that has rows:
// WriteAppend (the default), WriteEmpty or WriteTruncate (how it stages
// and copies the rows: docs/BIGQUERY.md, "Replacing a table").
func WithWriteDisposition(d WriteDisposition) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithWriteDisposition", int(d)); c.Disposition = d })
}

// WithSchema is the schema CreateIfNeeded creates a table with, instead of
// the one inferred from the element type, and the one rows of
// bqwrite.Row are encoded by (else the table's, read when the write
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
		c.given[len(c.given)-1].Value = c.Schema // two schemas of as many fields differ
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

// WithMaxAppendBytes caps the encoded rows of one append request (default
// and at most 9 MB, under the service's 10 MB limit of a request). Without
// it an append is sent once it holds 1 MiB of rows, so that the service
// works on one while the next is encoded; with it, once it holds n bytes.
// Either way the first append of a stream is sent at 64 KiB (or n, if
// smaller), and a row larger than that is sent alone.
func WithMaxAppendBytes(n int) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithMaxAppendBytes", n); c.MaxBatchSize = n })
}

// Namespace is the default Beam metrics namespace of Write
// (WithMetricsNamespace sets another); it is bigqueryio's too.
const Namespace = "sdfio/bigqueryio"

// WithEndpoint sends the Storage Write API calls to host:port instead of
// Google's endpoint: a regional or private endpoint, or a test server such
// as bqtest's (with WithInsecure).
func WithEndpoint(hostport string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithEndpoint", hostport); c.Endpoint = hostport })
}

// WithRESTEndpoint sends the BigQuery REST API calls of Write (table
// metadata, CreateIfNeeded, schema updates, WriteTruncate's staging table
// and copy job) to url instead of Google's endpoint: a test server's, such
// as bqtest's RESTEndpoint (with WithInsecure, which drops credentials
// there too).
func WithRESTEndpoint(url string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithRESTEndpoint", url); c.REST = url })
}

// WithInsecure talks to the endpoints without TLS and without credentials,
// as a local test server needs. Never use it against Google.
func WithInsecure() WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithInsecure"); c.Insecure = true })
}

// WithClientOptions makes the Storage Write clients and the BigQuery REST
// client of Write use the client options registered under name with
// RegisterClientOptions: credentials, a quota project, a user agent, extra
// headers or gRPC interceptors. The name, not the values, travels to the
// workers, each of which makes the options itself from what its own init
// functions registered (see bigqueryio.WithClientOptions for why, and for
// option.WithGRPCConn and option.WithHTTPClient, which one of the two
// transports refuses).
func WithClientOptions(name string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithClientOptions", name); c.ClientOptions = name })
}

// WithQuotaProject bills Write's API calls' quota to project: the clients
// send it as the x-goog-user-project header (option.WithQuotaProject) on
// the Storage Write and REST calls alike. An empty or malformed project id
// is refused when the pipeline is built. Not under WithInsecure, which
// drops credentials.
func WithQuotaProject(project string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithQuotaProject", project); c.QuotaProject = project })
}

// WithRetries sets how many times in a row an append, a finalize or a
// commit failing with a transient error is retried (default 10), backing
// off from base (default 100 ms; 0 retries at once) doubling up to 10 s,
// each wait drawn at random up to its bound (internal/retry's backoff;
// docs/BIGQUERY.md, "Retries", lists the calls and the codes).
func WithRetries(n int, base time.Duration) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithRetries", n, base); c.MaxRetries, c.RetryBase = n, base })
}

// WithMetricsNamespace puts Write's Beam metrics in namespace ns instead
// of Namespace, the default.
func WithMetricsNamespace(ns string) WriteOption {
	return writeOnlyOption(func(c *writeConfig) { c.note("WithMetricsNamespace", ns); c.Namespace = ns })
}
