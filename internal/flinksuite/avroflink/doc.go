// Package avroflink proves package avroio on a real Flink: Beam's Flink job
// server (internal/flinktest: Beam 2.62.0, a Flink 1.19.3 MiniCluster,
// parallelism 2), with every SDK worker a process of its own.
//
// Its tests hold each run to an oracle, exactly: every record that the
// files hold is read (or written) once, none twice, none that the files do
// not hold. Reads cover Read and ReadGeneric of files in every codec avroio
// reads (null, deflate, snappy, zstandard, bzip2, xz, and Avro C's lzma),
// written by independent implementations (Debian's python3-avro and Avro
// C's avromod), each file cut into several initial restrictions. Writes
// cover Write with runner and fixed sharding and WithWindowedWrites over
// fixed windows, the files read back in the test process, with their names
// and no temporary file left. The watch test runs WatchForNewFiles in
// Flink's streaming mode over a directory that grows while the job runs.
// Where it is cheap, avroio's metrics are held to the oracle too.
//
// The package has tests only; this file is its documentation.
package avroflink
