package bqwrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/sdfio/sdfio/internal/retry"
)

// appendWindow is how many appends of one stream may wait for their
// answers.
const appendWindow = 4

// appendFn appends the rows of a bundle to write streams of its own, one
// per destination table, created when the table's first row comes: PENDING
// streams, finalized when the bundle ends and output for the commit, or
// WithAtLeastOnce the table's _default stream.
type appendFn struct {
	Cfg        writeConfig
	Type       beam.EncodedType
	TableFn    beam.EncodedFunc
	HasTableFn bool
	SpecFn     *beam.EncodedFunc // WithTableSpecFunc's function, nil without
	Mutation   *beam.EncodedFunc // WithRowMutation's function, nil without (write_cdc.go)

	mw     *managedwriter.Client
	shared *sharedClient           // WithAtLeastOnce: the process's client mw is (write_pool.go)
	kept   map[string]*keptWriter  // WithAtLeastOnce: _default writers by table, for the DoFn's life
	tables map[string]*writeTable  // by resource name, for the DoFn's life
	dests  map[string]*destination // by resource name, for the bundle
	order  []string                // dests in the order they came
	route  reflectx.Func1x1
	spec   reflectx.Func1x1
	mutate *mutationFunc
	run    string // WriteTruncate: the run's id (truncAppendFn)
	m      writeMetrics
	// fault is the failure this bundle passes on to the commit step
	// (passOn), "" for none.
	fault string
}

// writeMetrics are the counters of a write.
type writeMetrics struct {
	rows, bytes, appends, retries, refused, committed beam.Counter
}

func newWriteMetrics(c writeConfig) writeMetrics {
	return writeMetrics{
		rows: c.counter("rows_appended"), bytes: c.counter("bytes_appended"),
		appends: c.counter("appends"), retries: c.counter("append_retries"),
		refused: c.counter("rows_refused"), committed: c.counter("streams_committed"),
	}
}

// writeTable is what a DoFn knows of a destination table: checked
// (created if needed, empty if it must be) and its rows' encoder.
type writeTable struct {
	spec    string // project.dataset.table
	enc     *rowEncoder
	streams string // the table its streams write to: its own, or WriteTruncate's staging table
	base    string // the table's resource name, without a partition decorator
	// missing is when a Row's key was last found not to be a column of the
	// table, by reading its schema again (followSchema).
	missing map[string]time.Time
}

// destination is a table's stream in the current bundle.
type destination struct {
	table    *writeTable
	res      string
	ms       *managedwriter.ManagedStream
	desc     *descriptorpb.DescriptorProto // the writer schema ms sends
	next     int64                         // the offset of the next batch
	cur      appendBatch
	inflight []*appendBatch
	// arena is where rows are encoded (the appends that hold its rows keep
	// its chunks alive until they are answered).
	arena rowArena
	// rowsHint is how many rows the next batch is expected to hold.
	rowsHint int
}

// arenaChunk is the size of the chunks rows are encoded into.
const arenaChunk = 64 << 10

// maxRowsHint bounds the rows a new batch's slices are made for.
const maxRowsHint = 1 << 16

// A batch is sent once it holds sendBytes of rows (or WithMaxAppendBytes'
// size, when given): the server decodes an append while the next is
// encoded. The first append of a stream is sent at firstAppendBytes:
// managedwriter copies every row of the first request on a connection
// (it merges the request into the one that carries the writer schema)
// and sends later ones as they are.
const (
	sendBytes        = 1 << 20
	firstAppendBytes = 64 << 10
)

// sendAt is the size at which d's current batch is sent.
func (d *destination) sendAt(cfg writeConfig) int {
	n := cfg.SendBytes
	if d.ms == nil {
		n = min(n, firstAppendBytes)
	}
	return n
}

// encode encodes x into d's arena and returns it.
func (d *destination) encode(x any) ([]byte, error) { return d.arena.encode(d.table.enc, x) }

// rowArena is where rows are encoded, one after the other: each row is a
// slice of a chunk, so a row costs no allocation of its own. A chunk is
// never written again below its length, and is dropped (not reused) when
// full: whatever holds its rows keeps it alive.
type rowArena struct{ b []byte }

// encode encodes x with enc into the arena and returns it.
func (a *rowArena) encode(enc *rowEncoder, x any) ([]byte, error) {
	if cap(a.b)-len(a.b) < arenaChunk/16 {
		a.b = make([]byte, 0, arenaChunk)
	}
	start := len(a.b)
	b, err := enc.encode(a.b, x)
	if err != nil {
		return nil, err
	}
	row := b[start:len(b):len(b)]
	if cap(b) != cap(a.b) {
		// The row outgrew the chunk: it has the grown copy to itself.
		a.b = nil
		return row, nil
	}
	a.b = b
	return row, nil
}

// appendBatch is the rows of one append.
type appendBatch struct {
	rows   [][]byte
	elems  []any // for FailedRows
	bytes  int
	offset int64
	res    *managedwriter.AppendResult
	err    error // of AppendRows itself
}

func (f *appendFn) Setup() {
	f.tables = map[string]*writeTable{}
	f.m = newWriteMetrics(f.Cfg)
	if f.HasTableFn {
		f.route = reflectx.ToFunc1x1(f.TableFn.Fn)
	}
	if f.SpecFn != nil {
		f.spec = reflectx.ToFunc1x1(f.SpecFn.Fn)
	}
	f.mutate = newMutationFunc(f.Mutation, f.Cfg.Unordered)
}

func (f *appendFn) StartBundle(ctx context.Context, emit func(string, streamDone), failed func(FailedRow)) {
	f.dests, f.order, f.fault = map[string]*destination{}, nil, ""
}

func (f *appendFn) ProcessElement(ctx context.Context, x beam.X, emit func(string, streamDone), failed func(FailedRow)) error {
	if f.fault != "" {
		return nil // the write fails in its commit step, which says why
	}
	return f.passOn(ctx, f.process(ctx, x, failed))
}

// Failures passed on. A failure of an append bundle that every attempt
// would meet alike (a row refused WithFailOnRowErrors, or a permanent
// answer of the service: a gRPC code other than UNAVAILABLE, INTERNAL,
// ABORTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, UNKNOWN and CANCELLED)
// does not fail the bundle of an exactly-once write: the bundle closes its
// streams unfinalized, skips the rest of its rows and reports the failure
// (under failedKey) to the commit steps, which then commit nothing and
// fail the write with it. A failed bundle could not tell them, and a
// runner that runs the commit step after a bundle failed (Prism v2.77 and
// v2.78 do, now and then) would commit the others' streams: a part of the
// rows visible in a failed write. Other failures (transient ones past
// WithRetries, a dropped connection, a REST call's) fail the bundle, for
// the runner to retry; WithAtLeastOnce, whose rows are visible as they are
// appended, every failure fails the bundle. NOT_FOUND and PERMISSION_DENIED
// about a table made a moment ago (the service answers so for a while
// after CreateIfNeeded) never get here as permanent: the calls that meet
// them wait them out first (settler, write_errors.go), until the table is
// DefaultTableSettle old.

// rowFault is a row's failure WithFailOnRowErrors: passed on.
type rowFault struct{ error }

func (e rowFault) Unwrap() error { return e.error }

// passOn passes err on to the commit step (see above) and returns nil, or
// returns err, which fails the bundle.
func (f *appendFn) passOn(ctx context.Context, err error) error {
	if err == nil || f.Cfg.AtLeastOnce || !permanent(ctx, err) {
		return err
	}
	f.fault = err.Error()
	f.closeStreams()
	return nil
}

// permanent reports whether err, from an append bundle, would fail every
// attempt alike (see above).
func permanent(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.As(err, new(rowFault)) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	return st.Code() != codes.Canceled && !retry.Transient(st.Err(), retry.Idempotent)
}

// process writes x to its table's stream.
func (f *appendFn) process(ctx context.Context, x beam.X, failed func(FailedRow)) error {
	res, spec := f.Cfg.Table, ""
	if f.HasTableFn {
		spec = f.route.Call1x1(x).(string)
		var err error
		if res, err = tableResource(spec); err != nil {
			return f.refuse(ctx, spec, x, fmt.Errorf("WithTableFunc: %w", err), failed)
		}
	}
	d, err := f.dest(ctx, res)
	if err != nil {
		return err
	}
	row, err := d.encode(x)
	if err != nil && d.table.enc.isRow && f.followSchema(ctx, d.table, x) {
		row, err = d.encode(x)
	}
	if err == nil && f.mutate != nil {
		row, err = f.mutate.appendChange(row, x)
	}
	if err == nil && len(row) > f.Cfg.MaxBatchSize {
		err = fmt.Errorf("the row is %d bytes encoded, over the %d bytes of an append", len(row), f.Cfg.MaxBatchSize)
	}
	if err != nil {
		return f.refuse(ctx, d.table.spec, x, err, failed)
	}
	if d.cur.bytes+len(row) > d.sendAt(f.Cfg) {
		if err := f.flush(ctx, d, failed); err != nil {
			return err
		}
	}
	if len(d.cur.rows) == cap(d.cur.rows) {
		// A new batch as large as the last one's rows say it will be, or
		// twice as large: append's growth of large slices (1.25x)
		// allocates five times the final size.
		d.cur.rows = slices.Grow(d.cur.rows, max(len(d.cur.rows), d.rowsHint, 256))
		d.cur.elems = slices.Grow(d.cur.elems, cap(d.cur.rows)-len(d.cur.elems))
	}
	d.cur.rows = append(d.cur.rows, row)
	d.cur.elems = append(d.cur.elems, x)
	d.cur.bytes += len(row)
	return nil
}

// refuse sends x to FailedRows, or fails the bundle WithFailOnRowErrors.
func (f *appendFn) refuse(ctx context.Context, table string, x any, cause error, failed func(FailedRow)) error {
	if f.Cfg.FailOnErrors {
		return rowFault{fmt.Errorf("bqwrite.Write to %s: row refused (WithFailOnRowErrors): %w", table, cause)}
	}
	f.m.refused.Inc(ctx, 1)
	failed(FailedRow{Table: table, Row: rowJSON(x), Column: errColumn(cause), Error: cause.Error()})
	return nil
}

func rowJSON(x any) string {
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprintf("%+v", x)
	}
	return string(b)
}

func (f *appendFn) FinishBundle(ctx context.Context, emit func(string, streamDone), failed func(FailedRow)) error {
	defer f.closeStreams()
	if f.fault == "" {
		if err := f.passOn(ctx, f.finish(ctx, emit, failed)); err != nil {
			return err
		}
	}
	if f.fault != "" {
		var staging []string
		for _, t := range f.tables {
			if strings.HasPrefix(t.streams, t.base+"_sdfio_tmp_") {
				staging = append(staging, t.streams)
			}
		}
		sort.Strings(staging)
		emit(failedKey, streamDone{Err: f.fault, Staging: staging})
		f.fault = ""
	}
	return nil
}

// finish finalizes the bundle's streams and outputs them.
func (f *appendFn) finish(ctx context.Context, emit func(string, streamDone), failed func(FailedRow)) error {
	for _, res := range f.order {
		d := f.dests[res]
		if err := f.flush(ctx, d, failed); err != nil {
			return err
		}
		if err := f.drain(ctx, d, failed, 0); err != nil {
			return err
		}
		if d.ms == nil {
			// Every row refused: the bundle still reports the table, which
			// it began to write (see truncateEvidence).
			if !f.Cfg.AtLeastOnce {
				emit(res, streamDone{})
			}
			continue
		}
		if f.Cfg.AtLeastOnce {
			emit(res, streamDone{Stream: d.ms.StreamName(), Rows: d.next})
			continue
		}
		n, err := finalizeStream(ctx, f.Cfg, d.table.spec, d.ms.StreamName(), d.next, d.ms.Finalize, f.mw.GetWriteStream)
		if err != nil {
			return err
		}
		emit(res, streamDone{Stream: d.ms.StreamName(), Rows: n})
	}
	return nil
}

func (f *appendFn) closeStreams() {
	for _, d := range f.dests {
		if d.ms != nil && !f.keep(d) {
			d.ms.Close()
		}
	}
	f.dests, f.order = nil, nil
}

func (f *appendFn) Teardown() {
	f.closeStreams()
	f.closeKept()
	if f.mw != nil {
		f.mw.Close()
	}
}

// dest is the destination of table res in this bundle.
func (f *appendFn) dest(ctx context.Context, res string) (*destination, error) {
	if d, ok := f.dests[res]; ok {
		return d, nil
	}
	t, err := f.table(ctx, res)
	if err != nil {
		return nil, err
	}
	d := &destination{table: t, res: t.streams}
	f.dests[res] = d
	f.order = append(f.order, res)
	return d, nil
}

// table checks the table res as the dispositions say, the first time the
// DoFn meets it, and compiles the encoder of its rows. res may name a
// partition (…/tables/t$20261203): the table is t, the streams are made
// on res.
func (f *appendFn) table(ctx context.Context, res string) (*writeTable, error) {
	if t, ok := f.tables[res]; ok {
		return t, nil
	}
	base, part := splitDecorator(res)
	p := strings.Split(base, "/")
	spec := p[1] + "." + p[3] + "." + p[5]
	if part != "" {
		spec += "$" + part
	}
	if f.mw == nil && f.Cfg.AtLeastOnce {
		c, err := acquireShared(f.Cfg, p[1])
		if err != nil {
			return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
		f.shared, f.mw = c, c.mw
	}
	if f.mw == nil {
		mw, err := newManagedWriter(ctx, f.Cfg, p[1])
		if err != nil {
			return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
		f.mw = mw
	}
	given, err := writeSchema(f.Cfg, f.Type.T)
	if err != nil {
		return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
	}
	if f.Cfg.Create == CreateIfNeeded || f.Cfg.Disposition != WriteAppend {
		ts, err := f.tableSpec(p[1]+"."+p[3]+"."+p[5], part, given)
		if err != nil {
			return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
		if err := f.Cfg.checkTable(ctx, p[1], p[3], p[5], part, given, ts); err != nil {
			return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
	}
	if f.Mutation != nil {
		if err := f.Cfg.checkPrimaryKeyOf(ctx, base); err != nil {
			return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
	}
	if given != nil && (f.Cfg.AllowAddition || f.Cfg.AllowRelaxation) {
		if err := f.Cfg.updateSchema(ctx, base, given); err != nil {
			return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
	}
	streams := res
	if f.Cfg.Disposition == WriteTruncate {
		if part != "" {
			return nil, fmt.Errorf("bqwrite.Write to %s: WriteTruncate replaces a whole table, not a partition", spec)
		}
		if streams, err = f.Cfg.makeStaging(ctx, res, f.run); err != nil {
			return nil, fmt.Errorf("bqwrite.Write to %s: %w", spec, err)
		}
	}
	var ws *storagepb.WriteStream
	for settle := newSettler(f.Cfg, base); ; {
		if ws, err = f.mw.GetWriteStream(ctx, &storagepb.GetWriteStreamRequest{Name: base + "/streams/_default", View: storagepb.WriteStreamView_FULL}); err == nil {
			break
		}
		if !settle.wait(ctx, err) {
			return nil, serviceError(spec, "", -1, err, "reading the table's schema (GetWriteStream of _default)"+settle.note())
		}
	}
	schema, err := tableSchema(ws.GetTableSchema())
	if err != nil {
		return nil, fmt.Errorf("bqwrite.Write to %s: the table's schema: %w", spec, err)
	}
	enc, err := newRowEncoder(schema, f.Type.T)
	if err != nil {
		return nil, fmt.Errorf("bqwrite.Write of %v to %s: %w", f.Type.T, spec, err)
	}
	if f.Cfg.IgnoreUnknown {
		enc.plan.ignoreUnknownKeys()
	}
	f.changeDesc(enc)
	t := &writeTable{spec: spec, enc: enc, streams: streams, base: base}
	f.tables[res] = t
	return t, nil
}

// tableSpec is the spec table is created with: the options', or
// WithTableSpecFunc's for it, checked against the schema and the
// partition a decorator names.
func (f *appendFn) tableSpec(table, part string, schema bigquery.Schema) (TableSpec, error) {
	ts := f.Cfg.Spec
	if f.spec != nil {
		ts = f.spec.Call1x1(table).(TableSpec)
		if err := ts.check(schema, func(field string) string { return "WithTableSpecFunc: TableSpec." + field }); err != nil {
			return TableSpec{}, err
		}
		if f.mutate != nil && len(ts.PrimaryKey) == 0 {
			return TableSpec{}, errNoPrimaryKey
		}
	}
	if part != "" {
		if err := ts.checkDecorator(table, part); err != nil {
			return TableSpec{}, err
		}
	}
	return ts, nil
}

// checkTable creates the table if it is missing and CreateIfNeeded, as ts
// says, and refuses a table with rows WriteEmpty. A write to a partition
// (part) of a table to create needs a partitioned one.
func (cfg writeConfig) checkTable(ctx context.Context, project, dataset, table, part string, schema bigquery.Schema, ts TableSpec) error {
	c, err := cfg.rest(ctx, project)
	if err != nil {
		return err
	}
	defer c.Close()
	res := fmt.Sprintf("projects/%s/datasets/%s/tables/%s", project, dataset, table)
	md, err := c.Table(res).Metadata(ctx)
	if isHTTP(err, http.StatusNotFound) {
		if cfg.Create != CreateIfNeeded {
			return fmt.Errorf("the table does not exist (WithCreateDisposition(CreateNever)): %w", err)
		}
		if part != "" && ts.TimePartitioning == nil && ts.RangePartitioning == nil {
			return fmt.Errorf("the table does not exist, and the partition decorator $%s needs a partitioned table: give WithTimePartitioning or WithRangePartitioning", part)
		}
		t, err := ts.metadata(schema)
		if err == nil {
			err = c.Table(res).Create(ctx, t)
		}
		switch {
		case isHTTP(err, http.StatusConflict):
			return nil // made meanwhile by another worker, which logs it
		case err != nil:
			return fmt.Errorf("creating the table (CreateIfNeeded): %w", err)
		}
		// A table made where one was expected to exist (a name misspelled)
		// is found in the log.
		log.Infof(ctx, "bqwrite.Write: created table %s.%s.%s (CreateIfNeeded): %s", project, dataset, table, ts.describe(schema))
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the table's metadata: %w", err)
	}
	if cfg.Disposition == WriteEmpty {
		if n := md.NumRows; n > 0 {
			return fmt.Errorf("the table has %d rows and the write disposition is WriteEmpty", n)
		}
	}
	return nil
}

// rest is the official client of the BigQuery REST API for the write's
// table calls, its jobs run in project (the table's); see bqcore.Client
// for which calls it retries.
func (cfg writeConfig) rest(ctx context.Context, project string) (*restClient, error) {
	opts, err := cfg.restOptions()
	if err != nil {
		return nil, err
	}
	return newClient(ctx, project, retryBackoff(cfg.MaxRetries, cfg.RetryBase), opts...)
}

// projectOf is the project of a table's resource name
// (projects/p/datasets/d/tables/t).
func projectOf(res string) string {
	if p := strings.Split(res, "/"); len(p) > 1 {
		return p[1]
	}
	return ""
}

// flush sends the current batch of d, and waits for the oldest answers
// when the window is full.
func (f *appendFn) flush(ctx context.Context, d *destination, failed func(FailedRow)) error {
	if len(d.cur.rows) == 0 {
		return nil
	}
	if d.ms == nil && f.Cfg.AtLeastOnce {
		ms, desc, err := f.defaultWriter(d)
		if err != nil {
			return err
		}
		d.ms, d.desc = ms, desc
	}
	if d.ms == nil {
		settle := newSettler(f.Cfg, d.res)
		for {
			ms, err := f.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(d.res), managedwriter.WithType(managedwriter.PendingStream),
				managedwriter.WithSchemaDescriptor(d.table.enc.desc))
			if err == nil {
				d.ms, d.desc = ms, d.table.enc.desc
				break
			}
			if !settle.wait(ctx, err) {
				return serviceError(d.table.spec, "", -1, err, "creating a PENDING write stream"+settle.note())
			}
		}
	}
	if d.desc != d.table.enc.desc && len(d.inflight) > 0 {
		// The writer schema changes (followSchema) with the next append:
		// managedwriter sends it on a new connection, so the appends in
		// flight on the old one are answered first.
		if err := f.drain(ctx, d, failed, 0); err != nil {
			return err
		}
	}
	b := d.cur
	d.cur = appendBatch{}
	// The next batch holds about as many rows of this one's mean size as
	// it is sent at (at most maxRowsHint: tiny rows in large appends grow
	// as they come, a last small batch takes no large slices).
	d.rowsHint = len(b.rows) * d.sendAt(f.Cfg) / max(b.bytes, 1)
	d.rowsHint = min(d.rowsHint+d.rowsHint/8, maxRowsHint)
	b.offset = d.next
	d.next += int64(len(b.rows))
	f.send(ctx, d, &b)
	d.inflight = append(d.inflight, &b)
	if len(d.inflight) > appendWindow {
		return f.drain(ctx, d, failed, len(d.inflight)-appendWindow)
	}
	return nil
}

// send appends b to d's stream, not waiting for the answer.
func (f *appendFn) send(ctx context.Context, d *destination, b *appendBatch) {
	var opts []managedwriter.AppendOption
	if !f.Cfg.AtLeastOnce {
		opts = append(opts, managedwriter.WithOffset(b.offset))
	}
	if d.desc != d.table.enc.desc {
		// The table's schema grew (followSchema): rows encoded before fit
		// the new writer schema too, its columns being added at the end.
		d.desc = d.table.enc.desc
		opts = append(opts, managedwriter.UpdateSchemaDescriptor(d.desc))
	}
	f.m.appends.Inc(ctx, 1)
	b.res, b.err = d.ms.AppendRows(ctx, b.rows, opts...)
}

// outcome waits for the answer of b's append.
func (b *appendBatch) outcome(ctx context.Context) (*storagepb.AppendRowsResponse, error) {
	if b.err != nil {
		return nil, b.err
	}
	return b.res.FullResponse(ctx)
}

// drain waits for the answers of d's appends until at most keep are left
// in flight. After a failed append it waits for all, then appends again,
// one at a time, from the failed one on: a transient failure is retried
// at the same offset (ALREADY_EXISTS then says an earlier attempt wrote
// the rows), a request with row errors (none of it written) again without
// its refused rows, and the later appends at the offsets that follow (an
// append after a failed one was answered OUT_OF_RANGE, or was written if
// the failed one was written too).
func (f *appendFn) drain(ctx context.Context, d *destination, failed func(FailedRow), keep int) error {
	for len(d.inflight) > keep {
		b := d.inflight[0]
		resp, err := b.outcome(ctx)
		if err == nil {
			f.written(ctx, b)
			d.inflight = d.inflight[1:]
			continue
		}
		rest := d.inflight
		d.inflight = nil
		known := make([]error, len(rest))
		resps := make([]*storagepb.AppendRowsResponse, len(rest))
		known[0], resps[0] = err, resp
		for i := 1; i < len(rest); i++ {
			resps[i], known[i] = rest[i].outcome(ctx)
			if known[i] == nil && f.mutate != nil {
				known[i] = errReapply
			}
		}
		d.next = b.offset
		for i, r := range rest {
			if err := f.appendSync(ctx, d, r, resps[i], known[i], i == 0, failed); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

// written counts b's rows as appended.
func (f *appendFn) written(ctx context.Context, b *appendBatch) {
	f.m.rows.Inc(ctx, int64(len(b.rows)))
	f.m.bytes.Inc(ctx, int64(b.bytes))
}

// appendSync appends b at d.next until it is written, given the outcome of
// an earlier attempt at b.offset (if that is still d.next). With own, that
// outcome is b's own answer, every append before it written: an error in
// it is b's, as if b had just been sent alone, so a permanent one fails at
// once. Otherwise the error may be an echo of an earlier append's failure
// (OUT_OF_RANGE behind a failed append, or UNAVAILABLE for the whole
// connection), and b is sent again before its answer is judged.
func (f *appendFn) appendSync(ctx context.Context, d *destination, b *appendBatch, resp *storagepb.AppendRowsResponse, err error, own bool, failed func(FailedRow)) error {
	known := b.offset == d.next || f.Cfg.AtLeastOnce
	own = own && known
	// An append at an offset is idempotent (a second one is refused
	// ALREADY_EXISTS); WithAtLeastOnce's appends, at no offset, may
	// duplicate rows on a retry, which that mode accepts.
	r := retryBackoff(f.Cfg.MaxRetries, f.Cfg.RetryBase).Start()
	settle := newSettler(f.Cfg, d.res)
	for {
		if len(b.rows) == 0 {
			return nil
		}
		if !known {
			b.offset = d.next
			f.send(ctx, d, b)
			resp, err = b.outcome(ctx)
		}
		fresh := !known || own
		known, own = false, false
		code := status.Code(err)
		switch {
		case err == nil || code == codes.AlreadyExists && !f.Cfg.AtLeastOnce:
			f.written(ctx, b)
			d.next = b.offset + int64(len(b.rows))
			return nil
		case len(resp.GetRowErrors()) > 0:
			if err := f.dropRefused(ctx, d, b, resp.GetRowErrors(), failed); err != nil {
				return err
			}
			continue
		case !fresh:
			// The answer to an append sent before (or with) the one that
			// failed: send it again.
			f.m.retries.Inc(ctx, 1)
			continue
		case retry.Transient(err, retry.Idempotent):
			if rerr := r.Retry(ctx, err, true, fmt.Sprintf("AppendRows of %d rows", len(b.rows))); rerr != nil {
				return serviceError(d.table.spec, d.ms.StreamName(), f.offsetOf(b), err, rerr.(*retry.Error).Doing())
			}
			f.m.retries.Inc(ctx, 1)
		case settle.wait(ctx, err):
			f.m.retries.Inc(ctx, 1)
		default:
			return serviceError(d.table.spec, d.ms.StreamName(), f.offsetOf(b), err, fmt.Sprintf("AppendRows of %d rows%s", len(b.rows), settle.note()))
		}
	}
}

// offsetOf is the offset of b's append, for an error: -1 WithAtLeastOnce,
// whose appends to _default carry none.
func (f *appendFn) offsetOf(b *appendBatch) int64 {
	if f.Cfg.AtLeastOnce {
		return -1
	}
	return b.offset
}

// dropRefused takes the rows the service refused out of b, sending them
// to FailedRows, or fails WithFailOnRowErrors.
func (f *appendFn) dropRefused(ctx context.Context, d *destination, b *appendBatch, errs []*storagepb.RowError, failed func(FailedRow)) error {
	bad := map[int64]string{}
	for _, e := range errs {
		if e.GetIndex() < 0 || e.GetIndex() >= int64(len(b.rows)) {
			return fmt.Errorf("bqwrite.Write to %s: stream %s: a row error for row %d of an append of %d rows: %s", d.table.spec, d.ms.StreamName(), e.GetIndex(), len(b.rows), e.GetMessage())
		}
		bad[e.GetIndex()] = e.GetMessage()
	}
	if f.Cfg.FailOnErrors {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, fmt.Sprintf("row %d: %s", b.offset+e.GetIndex(), e.GetMessage()))
		}
		at := ""
		if !f.Cfg.AtLeastOnce {
			at = fmt.Sprintf(" at offset %d", b.offset)
		}
		return rowFault{fmt.Errorf("bqwrite.Write to %s: stream %s%s: %d rows refused: %s (WithFailOnRowErrors)", d.table.spec, d.ms.StreamName(), at, len(errs), strings.Join(msgs, "; "))}
	}
	keep := appendBatch{offset: b.offset}
	for i, row := range b.rows {
		if msg, ok := bad[int64(i)]; ok {
			f.m.refused.Inc(ctx, 1)
			failed(failedRow(d.table.spec, d.table.enc.schema, b.elems[i], msg))
			continue
		}
		keep.rows = append(keep.rows, row)
		keep.elems = append(keep.elems, b.elems[i])
		keep.bytes += len(row)
	}
	*b = keep
	return nil
}

// noRetry turns off a client call's own retries where the caller retries.
var noRetry = gax.WithRetry(func() gax.Retryer { return nil })

// finalizeStream finalizes the PENDING stream name of table spec, into which
// appended rows were appended (every append acknowledged at its offset),
// and returns its row count. A transient failure (internal/retry's rule
// for an idempotent call: UNAVAILABLE, INTERNAL, ABORTED,
// RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, UNKNOWN, or a dropped
// connection) is retried with the write's backoff (WithRetries),
// the client's own retries off. A retry may find the stream finalized by
// the attempt whose answer was lost: answered with a row count, the count
// must be appended; answered STREAM_FINALIZED (the Storage Write API
// answers a finalized stream's appends so), the stream must still be a
// PENDING stream of the table, not committed (GetWriteStream), and then it
// holds the appended rows, which is success. Anything else fails, naming
// the table, the stream and both counts.
func finalizeStream(ctx context.Context, cfg writeConfig, spec, name string, appended int64,
	finalize func(context.Context, ...gax.CallOption) (int64, error),
	get func(context.Context, *storagepb.GetWriteStreamRequest, ...gax.CallOption) (*storagepb.WriteStream, error)) (int64, error) {
	r := retryBackoff(cfg.MaxRetries, cfg.RetryBase).Start()
	for {
		n, err := finalize(ctx, noRetry)
		switch {
		case err == nil && n != appended:
			return 0, fmt.Errorf("bqwrite.Write to %s: stream %s finalized with %d rows, %d were appended", spec, name, n, appended)
		case err == nil:
			return n, nil
		case r.Retries() > 0 && storageCode(err) == storagepb.StorageError_STREAM_FINALIZED:
			return appended, checkFinalized(ctx, spec, name, appended, get)
		}
		if err := r.Retry(ctx, err, retry.Transient(err, retry.Idempotent),
			fmt.Sprintf("bqwrite.Write to %s: finalizing stream %s of %d appended rows", spec, name, appended)); err != nil {
			return 0, err
		}
	}
}

// checkFinalized checks that stream name, answered STREAM_FINALIZED to a
// retried finalize, is the PENDING stream of table spec it was, not
// committed: then the earlier attempt finalized it, with the appended rows.
func checkFinalized(ctx context.Context, spec, name string, appended int64,
	get func(context.Context, *storagepb.GetWriteStreamRequest, ...gax.CallOption) (*storagepb.WriteStream, error)) error {
	ws, err := get(ctx, &storagepb.GetWriteStreamRequest{Name: name})
	switch {
	case err != nil:
		return fmt.Errorf("bqwrite.Write to %s: stream %s was finalized by an attempt whose answer was lost; reading it back: %w", spec, name, err)
	case ws.GetType() != storagepb.WriteStream_PENDING || ws.GetCommitTime() != nil:
		return fmt.Errorf("bqwrite.Write to %s: stream %s, answered already finalized, is %v and committed at %v: want the PENDING stream of the %d rows appended, uncommitted",
			spec, name, ws.GetType(), ws.GetCommitTime().AsTime(), appended)
	}
	return nil
}

// storageCode is the Storage Write API's code in err's details, or 0.
func storageCode(err error) storagepb.StorageError_StorageErrorCode {
	st, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range st.Details() {
		if se, ok := d.(*storagepb.StorageError); ok {
			return se.GetCode()
		}
	}
	return 0
}
