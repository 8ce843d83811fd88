package bqwrite

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"cloud.google.com/go/bigquery"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/reflectx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/bigqueryio/internal/bqcore"
	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/beamtypes"
	"github.com/sdfio/sdfio/internal/windowing"
)

// maxAppendBytes is the default and largest size of the encoded rows of
// one append: the service takes requests of at most 10 MB, and a request
// carries the stream name and, first on a connection, the writer schema.
const maxAppendBytes = 9 << 20

// WriteResult is what Write gives back.
type WriteResult struct {
	// Results holds a TableResult each time rows of a table are made
	// visible, in the global window (the write's steps run in it, whatever
	// the input's windowing). Bounded input: one per table, once all its
	// rows are visible (committed exactly once; WithAtLeastOnce, appended
	// to _default), so a pipeline can wait on it (as a side input) for the
	// write. Unbounded input, exactly once: one per append made visible
	// (a FlushRows of its stream), as the pipeline runs, about a triggering
	// frequency after its rows came. Unbounded input WithAtLeastOnce: one
	// per bundle and table, once the bundle's rows are appended to the
	// _default stream (visible as appended). Input windows and panes are
	// not kept: each element-in-window is one row, and rows of several
	// windows share a stream; an unbounded write's results carry the time
	// their rows became visible, so a pipeline can window them itself.
	Results beam.PCollection
	// FailedRows holds a FailedRow per row the service refused, or that
	// could not be encoded or routed (unless WithFailOnRowErrors).
	FailedRows beam.PCollection
}

// TableResult is rows of one table made visible (see WriteResult.Results).
type TableResult struct {
	Table      string   // project.dataset.table
	Streams    []string // the write streams committed or flushed (WithAtLeastOnce: the _default stream)
	Rows       int64    // rows made visible: committed, flushed (WithAtLeastOnce: appended)
	CommitTime time.Time
}

// FailedRow is a row that was not written, in one shape whatever the
// mode (bounded input, WithAtLeastOnce, unbounded input exactly once):
// only rows refused (the service's row_errors, a value the table's schema
// does not take, a route or change that cannot be sent) are FailedRows;
// a write whose appends fail otherwise fails (see docs/BIGQUERY.md,
// "Errors").
type FailedRow struct {
	Table string // project.dataset.table, or what WithTableFunc returned
	// Row is the element as JSON (encoding/json). The streaming write
	// (unbounded input, exactly once) carries encoded rows, not elements,
	// to its append step, and rebuilds the element from the row: a value
	// the table cannot hold comes back as the table would hold it (a
	// TIMESTAMP in UTC to the microsecond, a DATETIME or TIME to the
	// microsecond, an empty REPEATED slice as null, a Row's numbers as
	// int64 and float64 and its NULL values left out).
	Row string
	// Column is the column (parent.child in a RECORD) the refusal names,
	// "" when it names none.
	Column string
	Error  string // the service's message, or why the row could not be sent
}

// streamDone is an append bundle's report to the commit step of a table
// (the table's resource name is its key): a stream it wrote, finalized;
// or, Stream "", that every row it had for the table was refused; or, Err
// set (under failedKey), the failure it passed on instead of failing
// (appendFn.passOn), which fails the write in its commit step.
type streamDone struct {
	Stream string
	Rows   int64
	Err    string
	// Key is set on the report of truncateKeyFn, which only gives the
	// commit step of a WriteTruncate of one table its key (no bundle's),
	// with the run's id (Run).
	Key bool
	Run string
	// Staging, on a failure's report of a WriteTruncate, are the staging
	// tables the bundle met, which the commit step of failedKey deletes.
	Staging []string
}

// failedKey is the key of the failures append bundles pass on: no table's
// resource name, so that a commit step runs for it (and fails the write)
// even when no bundle reported a stream. The commit step of every table
// sees them too, as a side input (failuresOf).
const failedKey = ""

// appendedResult is the result of one bundle's rows of a table appended
// to its _default stream (WithAtLeastOnce, unbounded input): visible as
// they were appended.
func appendedResult(res string, sd streamDone, emit func(TableResult)) {
	if sd.Rows == 0 || res == failedKey {
		return
	}
	var streams []string
	if sd.Stream != "" {
		streams = []string{sd.Stream}
	}
	emit(TableResult{Table: tableSpecOf(res), Streams: streams, Rows: sd.Rows, CommitTime: time.Now()})
}

// failuresOf picks the failures bundles passed on out of their reports,
// for every table's commit step.
func failuresOf(_ string, sd streamDone, emit func(streamDone)) {
	if sd.Err != "" {
		emit(sd)
	}
}

func init() {
	beamreg.DoFn4x1[context.Context, beam.X, func(string, streamDone), func(FailedRow), error](&appendFn{})
	register.Emitter2[string, streamDone]()
	register.Emitter1[FailedRow]()
	beamreg.DoFn5x1[context.Context, string, func(*streamDone) bool, func(*streamDone) bool, func(TableResult), error](&commitFn{})
	beamreg.DoFn3x0[[]byte, string, func(string, streamDone)](&truncateKeyFn{})
	register.Function3x0(failuresOf)
	register.Function3x0(appendedResult)
	register.Emitter1[streamDone]()
	beamreg.DoFn5x1[context.Context, beam.X, string, func(string, streamDone), func(FailedRow), error](&truncAppendFn{})
	beamreg.DoFn1x1[[]byte, string](&runIDFn{})
	register.Iter1[streamDone]()
	register.Emitter1[TableResult]()
	register.Function1x1(fixedTable)
	beam.RegisterType(reflect.TypeFor[TableSpec]())
	beam.RegisterType(reflect.TypeFor[streamDone]())
	beam.RegisterType(reflect.TypeFor[TableResult]())
	beam.RegisterType(reflect.TypeFor[FailedRow]())
	// Beam's coder would not carry streamDone.Staging (nil in nearly all)
	// nor TableResult's Streams; the streaming write's chunks, batches,
	// writer schemas and the append step's state are bytes and numbers
	// the wire coder writes faster.
	bqcore.RegisterWire(reflect.TypeFor[streamDone](), reflect.TypeFor[TableResult](),
		reflect.TypeFor[streamChunk](), reflect.TypeFor[streamBatch](), reflect.TypeFor[shardStream](), reflect.TypeFor[streamDesc]())
}

// fixedTable is the table function of a Write without WithTableFunc (it
// is never called).
func fixedTable(beam.X) string { return "" }

// Write writes a PCollection of structs (the types bigqueryio.Read fills,
// see docs/BIGQUERY.md, "Output" and "Encoding and values") or of
// bqwrite.Row to the BigQuery table through the Storage Write API,
// exactly once (see the package doc, and docs/BIGQUERY.md, "Exactly once,
// in batch" and "Streaming"), and returns the
// per-table results and the rows that were refused. table is
// project.dataset.table or project:dataset.table, or "" with
// WithTableFunc. Write panics, when the pipeline is built, where TryWrite
// returns an error: a bad table name, a type it cannot write (naming the
// field), options that contradict each other or hold values that cannot
// work.
func Write(s beam.Scope, table string, col beam.PCollection, opts ...WriteOption) WriteResult {
	return must(TryWrite(s, table, col, opts...))
}

// TryWrite is Write returning the errors of construction instead of
// panicking.
func TryWrite(s beam.Scope, table string, col beam.PCollection, opts ...WriteOption) (WriteResult, error) {
	cfg, err := newWriteConfig(table, opts)
	if err != nil {
		return WriteResult{}, err
	}
	if !col.IsValid() {
		return WriteResult{}, fmt.Errorf("bqwrite.Write: the PCollection is not valid")
	}
	t := col.Type().Type()
	if err := checkWriteType(t, cfg); err != nil {
		return WriteResult{}, fmt.Errorf("bqwrite.Write of %v: %w", t, err)
	}
	if t != typeOfRow {
		if err := beamtypes.Check(t, "bqwrite.RegisterType"); err != nil {
			return WriteResult{}, fmt.Errorf("bqwrite.Write: %w", err)
		}
	}
	fn := &appendFn{Cfg: cfg, Type: beam.EncodedType{T: t}, TableFn: beam.EncodedFunc{Fn: reflectx.MakeFunc(fixedTable)}}
	if cfg.tableFn != nil {
		ft := reflect.TypeOf(cfg.tableFn)
		if ft.Kind() != reflect.Func || ft.NumIn() != 1 || ft.NumOut() != 1 || ft.In(0) != t || ft.Out(0) != reflect.TypeFor[string]() {
			return WriteResult{}, fmt.Errorf("bqwrite.Write: WithTableFunc(%v): want a func(%v) string", ft, t)
		}
		fn.TableFn, fn.HasTableFn = beam.EncodedFunc{Fn: reflectx.MakeFunc(cfg.tableFn)}, true
	}
	if cfg.specFn != nil {
		fn.SpecFn = &beam.EncodedFunc{Fn: reflectx.MakeFunc(cfg.specFn)}
	}
	if cfg.mutationFn != nil {
		fn.Mutation = &beam.EncodedFunc{Fn: reflectx.MakeFunc(cfg.mutationFn)}
	}
	dest := table
	if dest == "" {
		dest = "the tables of WithTableFunc"
	}
	// Unbounded input is written exactly once by the streaming write
	// (write_stream.go) unless WithAtLeastOnce.
	streaming := windowing.Unbounded(col) && !cfg.AtLeastOnce
	if streaming && cfg.Disposition != WriteAppend {
		return WriteResult{}, fmt.Errorf("bqwrite.Write to %s: %s cannot be given for unbounded input: it needs the end of the input, which never comes", dest, cfg.calls("WithWriteDisposition")[0])
	}
	s = s.Scope("bqwrite.Write")
	// The write's own steps run in the global window: each element-in-
	// window is one row, and the commit sees every stream once.
	col = windowing.Global(s, col)
	if streaming {
		results, failed := writeStreaming(s, fn, col)
		return WriteResult{Results: results, FailedRows: failed}, nil
	}
	var streams, failed beam.PCollection
	if cfg.Disposition == WriteTruncate {
		run := beam.ParDo(s, runIDFn{}, beam.Impulse(s))
		streams, failed = beam.ParDo2(s, &truncAppendFn{Fn: fn}, col, beam.SideInput{Input: run})
		if cfg.tableFn == nil {
			streams = beam.Flatten(s, streams, truncateKey(s, cfg.Table, run))
		}
	} else {
		streams, failed = beam.ParDo2(s, fn, col)
	}
	if cfg.AtLeastOnce && windowing.Unbounded(col) {
		// Nothing to commit, and a GroupByKey in the global window of an
		// unbounded input never fires: each bundle's rows of a table are
		// a result once appended.
		return WriteResult{Results: beam.ParDo(s, appendedResult, streams), FailedRows: failed}, nil
	}
	// The failures bundles pass on reach every table's commit step. The
	// at-least-once write passes none on, and its input may be unbounded,
	// of which a side input would never be ready.
	failures := beam.CreateList(s, []streamDone{})
	if !cfg.AtLeastOnce {
		failures = beam.ParDo(s, failuresOf, streams)
	}
	results := beam.ParDo(s, &commitFn{Cfg: cfg, Type: beam.EncodedType{T: t}}, beam.GroupByKey(s, streams), beam.SideInput{Input: failures})
	return WriteResult{Results: results, FailedRows: failed}, nil
}

// checkWriteType refuses, when the pipeline is built, a type Write cannot
// write: it must be a struct type whose fields fit the schema (WithSchema
// or inferred) or Row.
func checkWriteType(t reflect.Type, cfg writeConfig) error {
	if t == typeOfRow {
		if cfg.Schema == "" && cfg.Create == CreateIfNeeded {
			return fmt.Errorf("rows of bqwrite.Row have no schema to create a table with: give WithSchema, or WithCreateDisposition(CreateNever)")
		}
		if cfg.Schema == "" && (cfg.AllowAddition || cfg.AllowRelaxation) {
			return fmt.Errorf("rows of bqwrite.Row have no schema to update the table's to: give WithSchema with WithSchemaUpdateOptions")
		}
	} else if t.Kind() != reflect.Struct {
		return fmt.Errorf("needs a struct type or bqwrite.Row")
	}
	schema, err := writeSchema(cfg, t)
	if err != nil {
		return err
	}
	if t != typeOfRow {
		if cfg.IgnoreUnknown {
			return fmt.Errorf("WithIgnoreUnknownValues applies to rows of bqwrite.Row: a struct's fields are checked against the schema now")
		}
		if _, err := newRowEncoder(schema, t); err != nil {
			return err
		}
	}
	if err := cfg.checkCDC(t, schema); err != nil {
		return err
	}
	if schema != nil {
		return cfg.Spec.check(schema, cfg.specName)
	}
	return nil
}

// writeSchema is WithSchema's schema, or the one inferred from t.
func writeSchema(cfg writeConfig, t reflect.Type) (bigquery.Schema, error) {
	if cfg.Schema != "" {
		return bigquery.SchemaFromJSON([]byte(cfg.Schema))
	}
	if t == typeOfRow {
		return nil, nil
	}
	return inferSchema(t)
}
