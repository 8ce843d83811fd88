// Package datastoreio reads Google Cloud Datastore (Firestore in Datastore
// mode) with a splittable DoFn that the runner can split while it reads,
// keeping the split contract of package sdf.
//
// # Reading
//
//	type Task struct {
//		K    *datastore.Key `datastore:"__key__"`
//		Done bool
//		Note string `datastore:",noindex"`
//	}
//
//	q := datastoreio.NewQuery("Task").Filter("Done", "=", false)
//	tasks := datastoreio.Read(s, "my-project", q, reflect.TypeFor[Task](),
//		datastoreio.WithNamespace("prod"))
//
// A Query is plain data (the client's *datastore.Query does not
// serialise): kind, equality and inequality property filters (ANDed),
// ancestor, projection, distinct-on, order and limit; or a literal GQL
// string (GQL), which the server parses when the read starts. Entities are
// loaded into the output type as the client's Get loads them: datastore
// tags, nested structs, slices, PropertyLoadSaver. A *datastore.Key field
// tagged `datastore:"__key__"` receives the entity's full key; the package
// registers Beam coders for *datastore.Key (a plain coder and a schema
// logical type), so such structs travel through a pipeline.
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
// The read runs in two steps. The first, at run time, fixes the snapshot,
// chooses the number of splits with the rules of Beam Java's
// withNumQuerySplits (NumQuerySplits), and samples split keys: a keys-only
// query of the kind ordered by __scatter__ asking KeysPerSplit (32) keys per
// requested split, as Java's QuerySplitter does. The keys are sorted in
// Datastore's own key order (CompareKeys: path element by element from the
// root, ancestors first; kind bytewise; numeric ids before names, ids
// numerically, names bytewise). Unlike Java, every sampled key is kept: the
// keys cut the key space into sub-ranges [k_i, k_i+1), which are grouped, in
// order, into the requested number of initial splits (a Range each, fewer
// when the server returned fewer keys). A query with a limit, offset, sort
// order, inequality filter or distinct-on is read unsplit, by one worker, as
// Java does (distinct-on and offset because their result depends on the
// whole result set).
//
// The second step is the splittable DoFn. Its element is a Range, its
// restriction an sdf.OffsetRange over the Range's sub-range indices, its
// tracker the module's sdf.Tracker. Sub-range i is read as the user's query
// with __key__ >= k_i AND __key__ < k_i+1 added to its filters, in pages of
// at most 500 entities continued with cursors. The first entity of sub-range
// i is claimed as a split point at position i (TryClaimSplitPoint); the
// others are records of that block (TryClaimRecord(i, false)). An empty
// sub-range claims nothing. So a runner's split lands between sub-ranges: the
// primary keeps the sub-ranges before the split position, the residual reads
// the rest, and rules 1-8 of package sdf hold (sdftest's exhaustive and
// concurrent checks run on it against the emulator; dstest.Subject gives
// anyone the same Subject). Within a sub-range entities come in the server's
// order for the query (key order for a query without sort orders); across
// sub-ranges, in sub-range order. How finely a running read can be split
// is set by KeysPerSplit.
//
// # Snapshot
//
// By default the first step fixes one read time when the read starts (the
// server's time when the server reports one, else the worker's clock, to the
// microsecond) and every Range carries it: every query of every range,
// split residual and retry reads that snapshot, so the output is one
// consistent snapshot of the database. ReadTime sets the time instead;
// LatestData turns snapshots off. Firestore in Datastore mode keeps old
// versions for an hour (seven days with point-in-time recovery, whole
// minutes only), so a read must finish within that window.
// The Cloud Datastore emulator accepts read_time (it insists on microsecond
// precision) but ignores it and always reads the latest data; the tests
// therefore check that every request carries the one read time, not that
// the emulator honours it.
//
// # Errors and retries
//
// UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, RESOURCE_EXHAUSTED and INTERNAL
// are retried with exponential backoff and jitter (up to 8 attempts in a
// row), resuming after the last entity emitted, from its cursor, so nothing
// is duplicated. Other errors (INVALID_ARGUMENT, FAILED_PRECONDITION,
// PERMISSION_DENIED, UNAUTHENTICATED, ...) and an entity that does not load
// into the output type fail the bundle at once, with a message naming the
// project, database, namespace, kind, sub-range and key range.
//
// # Metrics
//
// In namespace "sdfio/datastoreio": entities, bytes (entity protocol buffer
// bytes), queries (sub-range queries), pages (RunQuery responses), retries,
// splits_accepted, splits_refused, initial_splits and sub_ranges.
package datastoreio
