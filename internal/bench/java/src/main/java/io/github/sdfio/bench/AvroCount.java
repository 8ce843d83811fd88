package io.github.sdfio.bench;

import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.channels.Channels;
import java.util.List;
import java.util.Locale;
import org.apache.avro.Schema;
import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.beam.runners.flink.FlinkPipelineOptions;
import org.apache.beam.runners.flink.FlinkRunner;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.PipelineResult;
import org.apache.beam.sdk.extensions.avro.io.AvroIO;
import org.apache.beam.sdk.io.FileSystems;
import org.apache.beam.sdk.io.fs.MatchResult;
import org.apache.beam.sdk.metrics.Counter;
import org.apache.beam.sdk.metrics.MetricNameFilter;
import org.apache.beam.sdk.metrics.MetricQueryResults;
import org.apache.beam.sdk.metrics.MetricResult;
import org.apache.beam.sdk.metrics.Metrics;
import org.apache.beam.sdk.metrics.MetricsFilter;
import org.apache.beam.sdk.options.Default;
import org.apache.beam.sdk.options.Description;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.sdk.transforms.Count;
import org.apache.beam.sdk.transforms.DoFn;
import org.apache.beam.sdk.transforms.ParDo;

/**
 * Reads Avro files with Beam Java's AvroIO on Beam's native FlinkRunner and counts their records:
 * the Java anchor of sdfio's Flink benchmarks (internal/flinksuite/flinkbench).
 *
 * <p>The pipeline is AvroIO.readGenericRecords(the files' own schema).from(input) then
 * Count.globally() (a combine, which Flink pre-combines before its shuffle) and a DoFn that adds
 * the count to a counter. It runs on a local Flink cluster ({@code --flinkMaster=[local]}, a
 * MiniCluster in this JVM) with parallelism 2 unless told otherwise; the versions are those of the
 * Flink job server the Go pipelines run on (Beam 2.62.0, Flink 1.19.3).
 *
 * <p>With {@code --warmupInput}, the same pipeline runs first on that input, untimed, so that the
 * timed run starts in a JVM that has loaded and compiled Flink's and Beam's classes (as the job
 * server of the Go pipelines has). The timed run still starts a MiniCluster of its own.
 *
 * <p>It prints one line on standard output:
 *
 * <pre>avrocount-result: records=N seconds=S cpu_seconds=C warmup_seconds=W</pre>
 *
 * where seconds is the timed run's wall time, from Pipeline.run to the end of waitUntilFinish,
 * and cpu_seconds the JVM's CPU time over the same span. It exits 1 when {@code --expect} is given
 * and the count differs.
 */
public final class AvroCount {
  static final String NAMESPACE = "avrocount";
  static final String COUNTER = "records";

  /** The program's options, besides FlinkPipelineOptions'. */
  public interface Options extends FlinkPipelineOptions {
    @Description("File or glob pattern of the Avro files to read")
    String getInput();

    void setInput(String value);

    @Description("Records the files hold; the program fails on another count (-1: not checked)")
    @Default.Long(-1)
    long getExpect();

    void setExpect(long value);

    @Description("File or pattern read once, untimed, before the timed run")
    @Default.String("")
    String getWarmupInput();

    void setWarmupInput(String value);
  }

  /** Adds the one element it gets, the count, to the counter. */
  static final class ReportFn extends DoFn<Long, Void> {
    private final Counter records = Metrics.counter(NAMESPACE, COUNTER);

    @ProcessElement
    public void process(@Element Long n) {
      records.inc(n);
    }
  }

  public static void main(String[] args) throws Exception {
    PipelineOptionsFactory.register(Options.class);
    Options opts = PipelineOptionsFactory.fromArgs(args).as(Options.class);
    opts.setRunner(FlinkRunner.class);
    if (!hasArg(args, "flinkMaster")) {
      opts.setFlinkMaster("[local]");
    }
    if (!hasArg(args, "parallelism")) {
      opts.setParallelism(2);
    }
    if (opts.getInput() == null || opts.getInput().isEmpty()) {
      throw new IllegalArgumentException("--input is required");
    }
    Schema schema = schemaOf(opts.getInput());

    double warmup = 0;
    if (!opts.getWarmupInput().isEmpty()) {
      long t0 = System.nanoTime();
      run(opts, schema, opts.getWarmupInput());
      warmup = (System.nanoTime() - t0) / 1e9;
    }

    com.sun.management.OperatingSystemMXBean os =
        (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    long cpu0 = os.getProcessCpuTime();
    long t0 = System.nanoTime();
    long n = run(opts, schema, opts.getInput());
    double seconds = (System.nanoTime() - t0) / 1e9;
    double cpu = (os.getProcessCpuTime() - cpu0) / 1e9;

    System.out.printf(
        Locale.ROOT,
        "avrocount-result: records=%d seconds=%.3f cpu_seconds=%.3f warmup_seconds=%.3f%n",
        n,
        seconds,
        cpu,
        warmup);
    System.out.flush();
    if (opts.getExpect() >= 0 && n != opts.getExpect()) {
      System.err.printf("avrocount: counted %d records, want %d%n", n, opts.getExpect());
      System.exit(1);
    }
  }

  /** Runs the pipeline on input and returns the records it counted. */
  static long run(Options opts, Schema schema, String input) {
    Pipeline p = Pipeline.create(opts);
    p.apply("Read", AvroIO.readGenericRecords(schema).from(input))
        .apply("Count", Count.<GenericRecord>globally())
        .apply("Report", ParDo.of(new ReportFn()));
    PipelineResult res = p.run();
    PipelineResult.State state = res.waitUntilFinish();
    if (state != PipelineResult.State.DONE) {
      throw new IllegalStateException("the pipeline ended " + state);
    }
    MetricQueryResults q =
        res.metrics()
            .queryMetrics(
                MetricsFilter.builder()
                    .addNameFilter(MetricNameFilter.named(NAMESPACE, COUNTER))
                    .build());
    long n = 0;
    for (MetricResult<Long> c : q.getCounters()) {
      n += c.getAttempted();
    }
    return n;
  }

  /** The writer schema of the first file that input matches. */
  static Schema schemaOf(String input) throws Exception {
    List<MatchResult.Metadata> files = FileSystems.match(input).metadata();
    if (files.isEmpty()) {
      throw new IllegalArgumentException("no file matches " + input);
    }
    try (InputStream in = Channels.newInputStream(FileSystems.open(files.get(0).resourceId()));
        DataFileStream<GenericRecord> r = new DataFileStream<>(in, new GenericDatumReader<>())) {
      return r.getSchema();
    }
  }

  private static boolean hasArg(String[] args, String name) {
    for (String a : args) {
      if (a.startsWith("--" + name + "=") || a.equals("--" + name)) {
        return true;
      }
    }
    return false;
  }

  private AvroCount() {}
}
