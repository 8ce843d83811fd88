package datastoreio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"time"

	"cloud.google.com/go/datastore"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/typex"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/sdfio/sdfio/internal/beamreg"
	"github.com/sdfio/sdfio/internal/beamtypes"
	"github.com/sdfio/sdfio/internal/runnerfix"
)

var (
	entitiesWritten = beam.NewCounter(Namespace, "entities_written")
	entitiesDeleted = beam.NewCounter(Namespace, "entities_deleted")
	commitsCounter  = beam.NewCounter(Namespace, "commits")
	bytesWritten    = beam.NewCounter(Namespace, "bytes_written")
	commitRetries   = beam.NewCounter(Namespace, "commit_retries")
	throttledMsecs  = beam.NewCounter(Namespace, "throttled_msecs")

	adaptiveThrottledMsecs = beam.NewCounter(Namespace, "adaptive_throttled_msecs")
	throttledCommits       = beam.NewCounter(Namespace, "throttled_commits")
)

// writeCounterNames names the write counters, so that a write with
// WithMetricsNamespace counts in its own namespace (see writer.counter).
var writeCounterNames = map[*beam.Counter]string{
	&entitiesWritten: "entities_written", &entitiesDeleted: "entities_deleted",
	&commitsCounter: "commits", &bytesWritten: "bytes_written", &commitRetries: "commit_retries",
	&throttledMsecs: "throttled_msecs", &adaptiveThrottledMsecs: "adaptive_throttled_msecs",
	&throttledCommits: "throttled_commits",
}

func init() {
	beamreg.DoFn3x1[context.Context, beam.X, func(int), error](&mutateFn{})
	beamreg.DoFn4x1[context.Context, *datastore.Key, beam.Y, func(int), error](&mutateKVFn{})
	register.Emitter1[int]()
}

// Write upserts the entities of col into project's Datastore (see the
// package doc, "Writing and deleting"). col holds structs or pointers to
// structs with a `datastore:"__key__"` *datastore.Key field,
// *datastore.Entity (its Key and Properties), or KVs of a *datastore.Key
// and a value the client saves (such as *datastore.PropertyList). Write panics at
// construction when col holds anything else, a named type not registered
// with Beam (beam.RegisterType), project is empty or the options cannot
// work (see WriteOption).
func Write(s beam.Scope, project string, col beam.PCollection, opts ...WriteOption) {
	mutate(s.Scope("datastoreio.Write"), opUpsert, project, col, opts)
}

// DeleteEntity deletes the entities of col, by their keys, from project's
// Datastore. col holds what Write takes.
func DeleteEntity(s beam.Scope, project string, col beam.PCollection, opts ...WriteOption) {
	mutate(s.Scope("datastoreio.DeleteEntity"), opDeleteEntity, project, col, opts)
}

// DeleteKey deletes the entities of the *datastore.Key elements of col from
// project's Datastore. A key with no entity is not an error.
func DeleteKey(s beam.Scope, project string, col beam.PCollection, opts ...WriteOption) {
	mutate(s.Scope("datastoreio.DeleteKey"), opDeleteKey, project, col, opts)
}

const (
	opUpsert       = "upsert"
	opDeleteEntity = "delete-entity"
	opDeleteKey    = "delete-key"
)

// opAPI names the function of each op, for errors.
var opAPI = map[string]string{opUpsert: "datastoreio.Write", opDeleteEntity: "datastoreio.DeleteEntity", opDeleteKey: "datastoreio.DeleteKey"}

func mutate(s beam.Scope, op, project string, col beam.PCollection, opts []WriteOption) {
	if project == "" {
		panic(fmt.Sprintf("%s: needs a project", opAPI[op]))
	}
	o, err := newWriteConfig(op, opts)
	if err != nil {
		panic(err)
	}
	workers := o.hintWorkers
	if workers == 0 {
		workers = estimateWorkers()
	}
	fn := mutateFn{
		Project: project, Database: o.database, Op: op,
		Throttle: !o.noThrottle, HintNumWorkers: workers, StepID: newStepID(),
		AllocateIDs: o.allocate, MaxRetries: o.maxRetries,
		InitialBackoffMs: o.initialBackoff.Milliseconds(), ClientOptions: o.clientOptions,
		MetricsNamespace: o.metrics,
	}
	t := col.Type()
	elem := t.Type()
	if typex.IsKV(t) {
		elem = t.Components()[1].Type()
	}
	if err := beamtypes.Check(elem, "datastoreio.RegisterType"); err != nil {
		panic(fmt.Sprintf("%s: %v", opAPI[op], err))
	}
	switch {
	case typex.IsKV(t):
		if op == opDeleteKey {
			panic(fmt.Sprintf("datastoreio: DeleteKey takes a PCollection of *datastore.Key, not %v", t))
		}
		k, v := t.Components()[0].Type(), t.Components()[1].Type()
		if k != keyType {
			panic(fmt.Sprintf("datastoreio: the key of a KV must be *datastore.Key, not %v", k))
		}
		if op == opUpsert {
			if err := checkSavable(v); err != nil {
				panic(err.Error())
			}
		}
		endStage(s, beam.ParDo(s, &mutateKVFn{mutateFn: fn}, col))
	case op == opDeleteKey:
		if t.Type() != keyType {
			panic(fmt.Sprintf("datastoreio: DeleteKey takes a PCollection of *datastore.Key, not %v", t))
		}
		endStage(s, beam.ParDo(s, &fn, col))
	case t.Type() == entityPtrType:
		endStage(s, beam.ParDo(s, &fn, col))
	default:
		if t.Type() == keyType {
			panic(fmt.Sprintf("datastoreio: %s takes entities; use DeleteKey for a PCollection of *datastore.Key", op))
		}
		if _, err := keyFieldIndex(t.Type()); err != nil {
			panic(err.Error())
		}
		endStage(s, beam.ParDo(s, &fn, col))
	}
}

// endStage gives the write's stage an output, which its DoFn declares and
// never emits to (runnerfix.GiveStageAnOutput says why: on the 2 cores of
// internal/cmd/dswritebench, Prism's spinning halved the emulator's commit
// rate).
func endStage(s beam.Scope, none beam.PCollection) {
	runnerfix.GiveStageAnOutput(s, none)
}

func newStepID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkSavable reports whether the client can save values of t as an
// entity: a struct, a pointer to one, or a type whose pointer (or itself)
// is a PropertyLoadSaver.
func checkSavable(t reflect.Type) error {
	switch {
	case t.Implements(plsType), reflect.PointerTo(t).Implements(plsType):
		return nil
	case t.Kind() == reflect.Struct, t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		return nil
	}
	return fmt.Errorf("datastoreio: values of type %v cannot be saved as entities: need a struct, a pointer to one, or a datastore.PropertyLoadSaver", t)
}

// keyFieldIndex finds the `datastore:"__key__"` field of a struct type (or
// pointer to one), which must be a *datastore.Key.
func keyFieldIndex(t reflect.Type) (int, error) {
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() != reflect.Struct {
		return 0, fmt.Errorf("datastoreio: elements of type %v have no key: use a struct with a `datastore:\"__key__\"` *datastore.Key field, or a KV of *datastore.Key and the entity", t)
	}
	for i := 0; i < st.NumField(); i++ {
		f := st.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("datastore"), ",")
		if name != "__key__" {
			continue
		}
		if f.Type != keyType {
			return 0, fmt.Errorf("datastoreio: the __key__ field %s of %v is a %v, not a *datastore.Key", f.Name, t, f.Type)
		}
		if !f.IsExported() {
			return 0, fmt.Errorf("datastoreio: the __key__ field %s of %v is not exported", f.Name, t)
		}
		return i, nil
	}
	return 0, fmt.Errorf("datastoreio: type %v has no `datastore:\"__key__\"` *datastore.Key field: add one, or write KVs of *datastore.Key and the entity", t)
}

// mutateFn commits the mutations of its elements: entities (structs with a
// key field), keys, or, through mutateKVFn, KVs of key and entity.
type mutateFn struct {
	Project, Database string
	Op                string // opUpsert, opDeleteEntity or opDeleteKey
	Throttle          bool
	HintNumWorkers    int
	StepID            string // identifies the step's ramp-up state in a process
	AllocateIDs       bool
	MaxRetries        int
	InitialBackoffMs  int64
	ClientOptions     string // registered with RegisterClientOptions
	MetricsNamespace  string // "" is Namespace

	w         *writer
	keyFields map[reflect.Type]int
}

func (fn *mutateFn) Setup(ctx context.Context) error {
	opts, err := registeredOptions(fn.ClientOptions)
	if err != nil {
		return err
	}
	client, err := datastore.NewClientWithDatabase(ctx, fn.Project, fn.Database, opts...)
	if err != nil {
		return fmt.Errorf("datastoreio: client of project %q, database %q: %w", fn.Project, fn.Database, err)
	}
	sz, err := processSizer()
	if err != nil {
		client.Close()
		return err
	}
	var ramp *rampup
	if fn.Throttle {
		ramp = rampupFor(fn.StepID, fn.HintNumWorkers)
	}
	fn.w = newWriter(writerConfig{
		project: fn.Project, database: fn.Database, delete: fn.Op != opUpsert,
		allocate: fn.AllocateIDs, maxRetries: fn.MaxRetries,
		initialBackoff: time.Duration(fn.InitialBackoffMs) * time.Millisecond,
		metrics:        fn.MetricsNamespace,
	}, &clientCommitter{client}, sz, ramp)
	fn.w.async = true
	fn.keyFields = make(map[reflect.Type]int)
	return nil
}

// ProcessElement commits elem's mutation with its batch. It never emits to
// none, the stage's output (see endStage).
func (fn *mutateFn) ProcessElement(ctx context.Context, elem beam.X, none func(int)) error {
	return fn.process(ctx, elem)
}

func (fn *mutateFn) process(ctx context.Context, elem beam.X) error {
	if k, ok := elem.(*datastore.Key); ok && fn.Op == opDeleteKey {
		return fn.w.add(ctx, k, nil, "a *datastore.Key")
	}
	if e, ok := elem.(*datastore.Entity); ok {
		if e == nil {
			return fmt.Errorf("datastoreio: %s got a nil *datastore.Entity", fn.Op)
		}
		var src any
		if fn.Op == opUpsert {
			src = (*datastore.PropertyList)(&e.Properties)
		}
		return fn.w.add(ctx, e.Key, src, "*datastore.Entity")
	}
	v := reflect.ValueOf(elem)
	if !v.IsValid() {
		return fmt.Errorf("datastoreio: %s got a nil element", fn.Op)
	}
	t := v.Type()
	i, ok := fn.keyFields[t]
	if !ok {
		var err error
		if i, err = keyFieldIndex(t); err != nil {
			return err
		}
		fn.keyFields[t] = i
	}
	var src any
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			return fmt.Errorf("datastoreio: %s got a nil %v", fn.Op, t)
		}
		src = elem
		v = v.Elem()
	} else if fn.Op == opUpsert {
		p := reflect.New(t) // the client saves through a pointer
		p.Elem().Set(v)
		src = p.Interface()
	}
	k, _ := v.Field(i).Interface().(*datastore.Key)
	if fn.Op != opUpsert {
		src = nil
	}
	return fn.w.add(ctx, k, src, t.String())
}

// FinishBundle commits the rest of the bundle's batch. Beam Go wants a
// DoFn's emitters in FinishBundle too; none is never called.
func (fn *mutateFn) FinishBundle(ctx context.Context, none func(int)) error {
	return fn.w.flush(ctx)
}

func (fn *mutateFn) Teardown() error {
	if fn.w != nil {
		return fn.w.close()
	}
	return nil
}

// mutateKVFn is mutateFn for KVs of a key and the entity.
type mutateKVFn struct {
	mutateFn
}

func (fn *mutateKVFn) ProcessElement(ctx context.Context, k *datastore.Key, v beam.Y, none func(int)) error {
	var src any
	if fn.Op == opUpsert {
		rv := reflect.ValueOf(v)
		if !rv.IsValid() || (rv.Kind() == reflect.Pointer && rv.IsNil()) {
			return fmt.Errorf("datastoreio: %s got a nil entity for %s", fn.Op, describeKey(k))
		}
		if rv.Kind() == reflect.Pointer {
			src = v
		} else {
			p := reflect.New(rv.Type())
			p.Elem().Set(rv)
			src = p.Interface()
		}
	}
	return fn.w.add(ctx, k, src, fmt.Sprintf("KV<*datastore.Key, %T>", v))
}
