// Package bqstream proves bigqueryio's exactly-once write of unbounded
// input on Beam's Flink runner (internal/flinktest): a periodic source into
// bqwrite.Write with Flink's checkpointing on, SDK worker processes
// killed with SIGKILL while the stream runs, Flink restoring its last
// checkpoint and replaying the source, and at the end every row in the
// table exactly once. Its tests only; see docs/DESIGN.md, "Streaming
// exactly once", for the argument.
package bqstream
