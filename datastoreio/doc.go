// Package datastoreio reads Google Cloud Datastore (Firestore in Datastore
// mode) into PCollections of Go structs with a splittable DoFn that the
// runner can split while it reads, and writes and deletes entities with
// the batching and throttling of Beam Java's DatastoreIO. Element types
// must be registered, with RegisterType for a type holding a key (or
// beam.RegisterType for one that does not); the transforms refuse one that
// is not when the pipeline is built.
//
//	type Task struct {
//		K    *datastore.Key `datastore:"__key__"`
//		Done bool
//		Note string `datastore:",noindex"`
//	}
//
//	func init() { datastoreio.RegisterType(reflect.TypeFor[Task]()) }
//
//	func main() {
//		beam.Init()
//		p, s := beam.NewPipelineWithRoot()
//		q := datastoreio.NewQuery("Task").Filter("Done", "=", false)
//		tasks := datastoreio.Read(s, "my-project", q, reflect.TypeFor[Task](),
//			datastoreio.WithNamespace("prod"))
//		datastoreio.Write(s, "my-project", tasks, datastoreio.WithHintNumWorkers(10))
//		if err := beamx.Run(context.Background(), p); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// Options are typed by transform: a ReadOption (WithNamespace,
// WithNumQuerySplits, WithKeysPerSplit, WithSubRangesPerSplit,
// WithSnapshot, WithReadTime, WithVersionRetention, WithLatestData) goes
// to Read and Plan, a WriteOption
// (WithRampupThrottlingDisabled, WithHintNumWorkers, WithAllocateIDs,
// WithCommitRetries) to Write, DeleteEntity and DeleteKey, and an Option
// (WithDatabase, WithClientOptions, WithMetricsNamespace) to both; one
// given to the wrong transform does not compile. Values that cannot work
// (negative counts, WithSnapshot with WithLatestData, an option given twice
// with different values, WithAllocateIDs on a delete) are refused when the
// pipeline is built, the error naming the transform and the option
// (datastoreio.Read: WithKeysPerSplit(0): at least 1 key per split): Read
// and Write panic with it, Plan returns it.
//
// # Reading
//
// A Query is plain data (the client's *datastore.Query does not
// serialise): kind, equality and inequality property filters (ANDed),
// ancestor, projection, distinct-on, order and limit; or a literal GQL
// string (GQL), which the server parses when the read starts. Entities are
// loaded into the output type as the client's Get loads them: datastore
// tags, nested structs, slices, PropertyLoadSaver. A *datastore.Key field
// tagged `datastore:"__key__"` receives the entity's full key. Beam's
// schema coder cannot carry a *datastore.Key (or a PropertyList or
// *Entity field): register such a struct with RegisterType, which gives
// it (only it) a coder of its own that stores them as this package's
// coders of them; the transforms refuse such a type registered only with
// beam.RegisterType. PCollections of *datastore.Key, Property,
// PropertyList, *PropertyList and *Entity themselves have this package's
// Beam coders, registered for the whole program when the package is
// imported: the one place sdfio registers a coder for a type it does not
// own. They must be global, since a program's own PCollection of keys (the
// input of DeleteKey, say) has no sdfio element type to carry a coder, and
// they change nothing that works without sdfio: Beam cannot encode any of
// the five on its own (its schema coder refuses a property's interface{}
// value and overflows the stack on the recursive key; internal/globaltest
// checks it). A coder the program registers for one of them replaces this
// package's. Importing the package registers no schema logical type.
//
// The clients are those of cloud.google.com/go/datastore: the high-level
// client reads entities (iterator, cursors, struct loading) and the gRPC
// client of its apiv1/datastorepb on the same connection runs GQL, scatter
// and statistics queries. DATASTORE_EMULATOR_HOST points both at an emulator,
// as it does for the official client; RegisterClientOptions adds options
// (credentials, interceptors) by name.
//
// # Splitting
//
// The read runs in two steps. The first, at run time, fixes the snapshot
// (WithSnapshot), chooses the number of splits n with the rules of Beam Java's
// withNumQuerySplits (WithNumQuerySplits), and samples split keys: a
// keys-only query of the kind ordered by __scatter__ asking (n-1)*k keys (k,
// the keys per split, 32 by default, WithKeysPerSplit, as Java's
// QuerySplitter oversamples), k-1 for a single split. The keys are sorted in
// Datastore's own key order (CompareKeys: path element by element from the
// root, ancestors first; kind bytewise; numeric ids before names, ids
// numerically, names bytewise). Unlike Java, which keeps n-1 of them, every
// k/m-th sampled key (m, the sub-ranges per split; every 4th by default) is
// kept as a boundary: the kept keys cut the key space into sub-ranges [k_i,
// k_i+1), which are grouped, in order, into the requested number of initial
// splits (a Range each, fewer when the server returned fewer keys), about m
// (8, WithSubRangesPerSplit) each. Datastore gives about one entity in 128 a
// __scatter__ property, so a sub-range spans about 4*128 = 512 entities, a
// page of 500, when the kind is small, and 1/8 of a split when it is large:
// small reads issue few queries, large ones can be split finely. A single
// split is cut into sub-ranges as well, so that the runner can split it too.
// A query with a limit, offset, sort order, inequality filter or distinct-on
// is read unsplit, as one sub-range, by one worker, as Java does
// (distinct-on and offset because their result depends on the whole result
// set).
//
// The second step is the splittable DoFn. Its element is a Range, its
// restriction an sdf.OffsetRange over the Range's sub-range indices, its
// tracker KeyRangeTracker (the module's sdf.Tracker). Sub-range i is read as
// the user's query with __key__ >= k_i AND __key__ < k_i+1 added to its
// filters, in pages of at most 500 entities continued with cursors. The
// first entity of sub-range i is claimed as a split point at position i
// (TryClaimSplitPoint); the others are records of that block
// (TryClaimRecord(i, false)). An empty sub-range claims nothing. So a
// runner's split lands between sub-ranges: the primary keeps the sub-ranges
// before the split position, the residual reads the rest, and rules 1-8 of
// package sdf hold (sdftest's exhaustive and concurrent checks run on it
// against the emulator; dstest.Subject gives anyone the same Subject).
// Within a sub-range entities come in the server's order for the query (key
// order for a query without sort orders); across sub-ranges, in sub-range
// order. How finely a running read can be split is set by
// WithSubRangesPerSplit.
//
// # Snapshot
//
// By default every query reads the latest data, as Beam Java's DatastoreIO
// does without a read time: a long read never expires, and ranges read at
// different times may see different versions of the data (an entity
// changed while the read runs is read as it was when its range read it).
//
// WithSnapshot makes the read one consistent snapshot: the first step fixes
// one read time when the read starts (the server's time when the server
// reports one, else the worker's clock, to the microsecond) and every Range
// carries it, so every query of every range, split residual and retry reads
// that snapshot. WithReadTime gives the time instead. The service keeps old
// versions for an hour (DefaultVersionRetention), seven days with
// point-in-time recovery (tell the read with WithVersionRetention; the
// snapshot is then taken at a whole minute, as the service requires of
// versions older than an hour), so a snapshot read must end within that
// time. It is checked before each query, against the worker's clock: a
// query of a snapshot older than the retention less SnapshotMargin (a
// minute) is not sent, and the read fails with an error naming the
// snapshot, its age and the options that fix it (leave WithSnapshot /
// WithReadTime out, or WithVersionRetention); a WithReadTime already that
// old fails when the read starts, before any work. A query the service
// refuses (FAILED_PRECONDITION, INVALID_ARGUMENT, OUT_OF_RANGE) on a
// snapshot older than an hour says the same. The plan's log says until when
// the snapshot must be read.
//
// The Cloud Datastore emulator accepts read_time (it insists on microsecond
// precision) but ignores it and always reads the latest data, even at a
// read time days old; the tests therefore check which read time every
// request carries, and model the service's refusal of an expired snapshot
// in a client interceptor with a clock of its own.
//
// # Errors and retries
//
// Every call the IO retries itself is judged by one rule, the module's
// internal/retry, shared with bigqueryio, and waits by one backoff (each
// wait drawn at random up to a growing cap, ending at once when the
// context is done, no wait after the last attempt). For an idempotent
// call the rule retries UNAVAILABLE, RESOURCE_EXHAUSTED (not gRPC's
// message-size limit, which the same request meets again), ABORTED,
// DEADLINE_EXCEEDED, INTERNAL and UNKNOWN; for a call that is not
// idempotent only UNAVAILABLE, RESOURCE_EXHAUSTED and ABORTED, where the
// service did not act. Every other code fails at once.
//
//	call                  retried              rule for     why
//	RunQuery (read)       8 attempts in a row  idempotent   a read at a snapshot or the latest data, resumed from the cursor after the last entity emitted; the count restarts after entities arrive
//	RunQuery (planning)   8 attempts           idempotent   a read (scatter keys, statistics, GQL parsing)
//	Commit (write)        WithCommitRetries    idempotent   non-transactional upserts and deletes of complete keys: applying them twice leaves the same data
//	AllocateIds           WithCommitRetries    idempotent   a retry allocates other ids; those of a lost answer are only unused
//
// Queries wait from 100 ms doubling to 30 s; commits and allocations from
// WithCommitRetries' initial backoff growing 1.5 times a retry to 2
// minutes. A read resumes after the last entity emitted, from its cursor, so nothing
// is duplicated. Other errors (INVALID_ARGUMENT, FAILED_PRECONDITION,
// PERMISSION_DENIED, UNAUTHENTICATED, ...) and an entity that does not load
// into the output type fail the bundle at once, with a message naming the
// project, database, namespace, kind, sub-range and key range.
//
// # Writing and deleting
//
// Write upserts entities, DeleteEntity deletes them, DeleteKey deletes the
// entities of keys, with the semantics of Beam Java's DatastoreV1.Write,
// DeleteEntity and DeleteKey:
//
//	type Task struct {
//		K    *datastore.Key `datastore:"__key__"`
//		Desc string
//		Done bool
//	}
//	datastoreio.Write(s, "my-project", tasks)          // PCollection<Task> or <*Task>
//	datastoreio.Write(s, "my-project", keyed)          // PCollection<KV<*datastore.Key, V>>
//	datastoreio.DeleteKey(s, "my-project", keys)       // PCollection<*datastore.Key>
//
// Elements are Go structs (or pointers to them) that the official client
// saves, with their key in a `datastore:"__key__"` field of type
// *datastore.Key, or KVs of a *datastore.Key and a value the client saves
// (a struct, a pointer to one, or a PropertyLoadSaver such as
// *datastore.PropertyList); DeleteKey takes *datastore.Key. The key's
// namespace is the entity's namespace. Keys must be complete: an element
// with an incomplete or invalid key fails the bundle with an error naming
// its type, namespace and kind, unless WithAllocateIDs is given, which has the
// service allocate ids for incomplete keys before they are written (once,
// so that a retried commit writes the same entities again rather than new
// ones).
//
// Mutations are committed non-transactionally, in batches that respect the
// service's limits: at most MaxBatchMutations (500) mutations and less than
// MaxBatchBytes (9,000,000 bytes) of encoded mutations, measured as the
// proto size of each mutation the client builds. Two mutations of the same
// key never share a commit (the batch is committed first), so a later
// element of a key is applied after an earlier one within a bundle. The
// target batch size adapts to the service as Java's writer does: it starts
// at StartBatchMutations and follows the mean commit latency per mutation
// of the last two minutes, aiming at TargetCommitLatency per commit,
// within [MinBatchMutations, MaxBatchMutations]. While the first commit,
// of StartBatchMutations, is out and no latency is known, the next batch
// fills to MaxBatchMutations rather than sending more commits of the start
// size.
//
// Commits failing with a transient code (see Errors and retries) are
// retried with exponential backoff (WithCommitRetries; by default 5
// retries from 5 s, as in Java; each wait drawn at random up to a cap
// growing 1.5 times a retry to 2 minutes). Upserts and
// deletes are idempotent, so a retried commit, or a retried bundle, leaves
// the same data. Write, DeleteEntity and DeleteKey take a PCollection in any
// windowing and bounded or unbounded input: they group nothing, and each
// bundle's mutations are committed before the bundle ends, so the entities
// of a stream are written while it runs. An element of several windows
// (sliding) is upserted or deleted once per bundle it comes in, which
// leaves the same data. Any other error fails the bundle at once, naming the
// project, database, namespace, kind and key of the batch's mutations.
//
// A full batch is committed in the background while the next one is built
// (entities converted and sized), with up to MaxCommitsInFlight (2)
// commits in flight per DoFn instance. Commits in flight together never
// share a key (a batch holding a key of a commit in flight waits for it),
// so two mutations of a key are applied in the order of the elements
// across commits as well. A failed commit stops the writer: no commit
// starts once the error is known, the one beside it ends, and the error
// fails the bundle at the next element or at the end of the bundle. The
// background commits' counts reach Beam's metrics from the bundle's own
// goroutine. Write's stage has an output that is never written to (into a
// Flatten, which costs nothing): Prism (Beam v2.77 and v2.78) waits for a
// bundle of a stage without outputs in a loop that never blocks, and the
// profile of internal/cmd/dswritebench showed that loop taking most of the
// process's CPU while a write ran.
//
// Ramp-up throttling, on by default as in Java (WithRampupThrottlingDisabled
// turns it off): Datastore's 500/50/5 rule, at most 500 operations a second
// shared by all workers at first, 50% more every 5 minutes after the first
// 5. Each worker process takes 1/HintNumWorkers of the budget; without the
// hint the worker count is estimated at construction (1 on a local runner,
// -max_num_workers or -num_workers on Dataflow, else 500 as in Java). All
// bundles of a process share its share, and each process starts its ramp-up
// at its own first write, so the total stays within the budget.
//
// What ramp-up costs on a new key space (the rule's figures, for all
// workers together): 500 entities a second for the first 5 minutes
// (150,000), 750/s to minute 10 (225,000 more), 1,125/s to minute 15
// (337,500 more), 1,688/s to minute 20: 5,000 entities take 10 s, 100,000
// take 3m20s, 1,000,000 about 17m50s; 3,796/s is reached at minute 30. A
// Dataflow job without -num_workers / -max_num_workers or WithHintNumWorkers
// assumes 500 workers, 1 entity a second each at first. On the emulator a
// plain PutMulti loop of 500 writes about 9,000 entities a second on a
// quiet 2-core machine, and Write with WithRampupThrottlingDisabled as many
// (docs/BENCHMARKS.md), so with ramp-up a write of 5,000 takes about 10 s
// against about 0.6 s: use WithRampupThrottlingDisabled for emulators, and for
// key spaces already warm.
//
// Adaptive throttling, always on, as in Java's writer (its
// AdaptiveThrottler): each writer counts, over the last two minutes, the
// commits it wanted to send and those the service accepted, and holds a
// commit back with probability max(0, (requests - 1.25*accepts) /
// (requests + 1)), waiting AdaptiveThrottleDelay before deciding again. A
// service that refuses commits (RESOURCE_EXHAUSTED) thus gets about 1.25
// times what it accepts instead of retries at full rate.
//
// # Metrics
//
// In namespace Namespace ("sdfio/datastoreio"), or the one
// WithMetricsNamespace gives. Write, DeleteEntity and DeleteKey: entities_written,
// entities_deleted, commits, bytes_written (encoded mutations of successful
// commits), commit_retries, throttled_msecs (time spent waiting for the
// ramp-up budget), throttled_commits and adaptive_throttled_msecs (commits
// held back by the adaptive throttling, and the time they waited).
//
// Read: entities, bytes (entity protocol buffer bytes), queries (sub-range
// queries), pages (RunQuery responses), retries, splits_accepted,
// splits_refused, initial_splits and sub_ranges.
//
// # Logs
//
// Through Beam's log package, at INFO: a read's plan when it is made (the
// query, project, database and namespace, the query splits asked and made,
// the scatter keys asked, returned and kept as sub-range bounds, the
// initial splits and sub-ranges, the snapshot), a query read unsplit and
// why, a kind without statistics; and every split of a running read the
// tracker (KeyRangeTracker) accepts, with its primary and residual, so that
// a runner's rebalancing shows in the worker's log. At WARN: a kind for
// which the service returns no __scatter__ keys (naming the kind, project,
// database and namespace), which is read whole as one range by one worker,
// with no initial splits and nothing the runner can split.
package datastoreio
