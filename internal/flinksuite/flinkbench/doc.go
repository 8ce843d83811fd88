// Package flinkbench measures avroio.Read on a real Flink against its
// anchors on the same Flink, in the same run: Beam Go's own avroio.Read on
// the same job server, and Beam Java's AvroIO on Beam's native FlinkRunner
// at the same versions (Beam 2.62.0, Flink 1.19.3, parallelism 2).
//
// The files are internal/benchdata's (the 8-field benchmark schema,
// snappy), generated once under $BENCH_DIR (default /tmp/sdfio-bench) and
// never committed: one large file of at least 256 MB and 16 small files
// of 20,000 records.
//
//   - BenchmarkFlinkAvroOneFile reads and counts the large file,
//     BenchmarkFlinkAvroManyFiles the small files as one pattern;
//   - sub-benchmark sdfio is avroio.Read with its defaults and beamgo Beam
//     Go's avroio.Read, each a Go pipeline on the Flink job server of
//     internal/flinktest (a MiniCluster in its own JVM, every SDK worker a
//     process of its own); java is the Java program of internal/bench/java
//     (AvroIO.readGenericRecords, Count.globally(), --flinkMaster=[local],
//     a MiniCluster in its own JVM), run with `java -cp`;
//   - the runs are interleaved: -flinkbench.rounds (3) rounds, each running
//     sdfio, beamgo and java once in turn, so that load from elsewhere
//     falls on all of them. go test names a round's repeats sdfio#01,
//     sdfio#02; internal/cmd/benchreport counts them as runs of sdfio and
//     reports medians and the ratios sdfio/beamgo and sdfio/java. Before
//     the first round both Go pipelines read one small file, untimed, and
//     the Java program reads it in its own JVM before each timed run: the
//     JVMs have loaded and compiled what the runs use.
//
// BenchmarkFlinkBQWriteBatch and BenchmarkFlinkBQWriteStream (bq_test.go)
// write to BigQuery (a bqtest server in the test process) on the Flink job
// server (sub-benchmark flink) and on a Prism job server (prism), the same
// Go pipeline with its SDK workers as processes of their own on both: a
// batch write of -flinkbench.bq_rows generated rows (1,000,000) and the
// exactly-once streaming write of -flinkbench.bq_stream_rows rows of a due
// periodic sequence (200,000; on Flink with checkpoints every second),
// interleaved in rounds; rows/s (for the streaming write, to every row
// visible), cpu-ns/row (the test process with bqtest, its children, the
// Flink job server's JVM); every run checks that each row is in the table
// once.
//
// Every pipeline counts with a combine of partial counts (see
// bundleCountFn) and checks the total against the generator's.
//
// Metrics of each run: records/s and sec/run (the run's wall time: for the
// Go pipelines workertest's, from translation to the job's end and its
// metrics; for Java from Pipeline.run to waitUntilFinish, which includes
// starting the MiniCluster), records/cpu-s and cpu-cores (the CPU of the
// job server's JVM, the SDK workers and the test process; the Java
// program's JVM), other-cores (the CPU the rest of the machine used
// meanwhile: the noise), and for java jvm-sec/run, the whole process
// (JVM start, warm-up, timed run).
//
// `make bench` builds the Java program (mvn, outside the tree) and runs
//
//	go test -run='^$' -bench=. -timeout 120m ./internal/flinksuite/flinkbench
//
// The flags (after the package) change the inputs and the rounds:
// -flinkbench.large_bytes, -flinkbench.small_files,
// -flinkbench.small_records, -flinkbench.rounds, -flinkbench.only=sdfio,java
// (a subset), -flinkbench.dir, -flinkbench.java_dir. Each body runs once
// (TestMain sets -benchtime=1x); -count must be 1. Without the Flink job
// server (make deps) the benchmarks skip; without the Java program's build
// they run without java.
//
// Its one test, TestJavaVersions (which `make test` runs), checks that the
// Java program's pom pins the job server's Beam and Flink. This file is
// the package's documentation.
package flinkbench
