// Package dsflink proves datastoreio on a real Flink (Beam's Flink job
// server, a MiniCluster of parallelism 2, every SDK worker a process of its
// own; internal/flinktest) against Google's Cloud Datastore emulator
// (datastoreio/dstest):
//
//   - Write upserts every entity of a data set spread over two namespaces
//     and two kinds, which the official client then finds in the emulator
//     exactly, key and properties;
//   - Read, planned on __scatter__ keys into several initial splits, returns
//     every entity of each namespace and kind exactly once (each key once,
//     its property as written, the total exact), and so does a GQL read with
//     an equality filter in a namespace of its own; the check runs in the
//     pipeline, on a worker, and fails the job on a missing, duplicated or
//     unexpected entity;
//   - DeleteKey and DeleteEntity remove exactly the chosen entities: the
//     official client finds the others, unchanged, and none of those.
//
// It has tests only; under CI=true a missing emulator or Flink job server
// fails them rather than skipping.
package dsflink
