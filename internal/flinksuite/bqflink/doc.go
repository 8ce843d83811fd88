// Package bqflink proves bigqueryio on a real Flink (Beam's Flink job
// server, a MiniCluster of parallelism 2, every SDK worker a process of its
// own; internal/flinktest) against bqtest, the in-process BigQuery Storage
// Read/Write and REST server, which listens on loopback and which the
// workers reach through the transforms' options (WithEndpoint,
// WithRESTEndpoint, WithInsecure), not through any state of the test
// process:
//
//   - Read of a table over several read streams, in Avro and in Arrow,
//     returns every row exactly once (by its unique id, with its other
//     columns as defined; the total exact); the check runs in the pipeline,
//     on a worker, and fails the job on a missing, duplicated or unexpected
//     row;
//   - Write in batch, exactly once (PENDING streams, one commit), also while
//     appends' answers are lost after the server wrote them, and
//     WithAtLeastOnce (the _default stream), leaves every row in the table
//     exactly once, read back through bqtest's own API;
//   - a CDC write (WithRowMutation's _CHANGE_TYPE upserts and deletes, with
//     sequence numbers out of order, to a table with a primary key) ends
//     with exactly the expected final rows, read back through bqtest's own
//     API.
//
// It has tests only; under CI=true a missing Flink job server fails them
// rather than skipping. The unbounded (streaming) write is not here.
package bqflink
