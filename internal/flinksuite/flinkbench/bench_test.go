package flinkbench_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sdfio/sdfio/internal/benchdata"
	"github.com/sdfio/sdfio/internal/benchenv"
	"github.com/sdfio/sdfio/internal/flinktest"
)

// BenchmarkFlinkAvroOneFile reads the large file (256 MB by default) and
// counts its records on Flink: sdfio's avroio.Read and Beam Go's avroio.Read
// on the Flink job server, Beam Java's AvroIO on the native FlinkRunner.
func BenchmarkFlinkAvroOneFile(b *testing.B) {
	set := files(b)
	benchRead(b, "one file", set.Large.Path, set.Large.Records, set.Small[0])
	printf("note: flinkbench: BenchmarkFlinkAvroOneFile: %s, %d records, %.0f MB (%s)\n",
		set.Large.Path, set.Large.Records, float64(set.Large.Bytes)/1e6, benchdata.Codec)
}

// BenchmarkFlinkAvroManyFiles reads the small files (16 by default) as one
// pattern, the same three ways.
func BenchmarkFlinkAvroManyFiles(b *testing.B) {
	set := files(b)
	benchRead(b, "many files", set.SmallPattern, set.SmallRecords(), set.Small[0])
	printf("note: flinkbench: BenchmarkFlinkAvroManyFiles: %s, %d files, %d records, %.1f MB (%s)\n",
		set.SmallPattern, len(set.Small), set.SmallRecords(), float64(set.SmallBytes())/1e6, benchdata.Codec)
}

// benchRead measures every selected implementation on pattern in rounds,
// each round running each once in turn, as sub-benchmarks named after the
// implementation (go test names the repeats sdfio#01, sdfio#02, ...;
// benchreport counts them as runs of sdfio). warm is read first, untimed,
// by both Go pipelines.
func benchRead(b *testing.B, what, pattern string, want int64, warm benchdata.File) {
	if c := flag.Lookup("test.count"); c != nil && c.Value.String() != "1" {
		b.Fatalf("flinkbench interleaves its runs itself: run it with -count=1 and -flinkbench.rounds=N (got -count=%s)", c.Value)
	}
	if *rounds < 1 {
		b.Fatal("-flinkbench.rounds must be at least 1")
	}
	var impls []string
	for _, impl := range []string{implSdfio, implBeamGo, implJava} {
		if selected(impl) {
			impls = append(impls, impl)
		}
	}
	java, javaErr := javaProgram()
	if selected(implJava) && javaErr != nil {
		if os.Getenv("CI") == "true" {
			b.Fatal(javaErr)
		}
		b.Logf("Beam Java's AvroIO is not measured: %v", javaErr)
		printf("note: flinkbench: %s: Beam Java's AvroIO not measured: %v\n", what, javaErr)
		impls = impls[:len(impls)-1]
	}
	if selected(implSdfio) || selected(implBeamGo) {
		flinktest.Start(b)
		runWarmup(b, warm.Path, warm.Records)
	}
	printf("note: flinkbench: %s: load average before the runs: %s\n", what, benchenv.LoadAvg())
	for r := 1; r <= *rounds; r++ {
		for _, impl := range impls {
			b.Run(impl, func(b *testing.B) {
				var m measurement
				if impl == implJava {
					m = runJava(b, java, pattern, warm.Path, want)
				} else {
					m = runGo(b, impl, pattern, want)
				}
				fmt.Fprintf(os.Stderr, "flinkbench: %s round %d/%d %s: %.1f s, %.3g M records/s, %.2f cpu-cores, %.2f other-cores\n",
					what, r, *rounds, impl, m.seconds, float64(m.records)/m.seconds/1e6, m.cpu/m.seconds, m.other)
				m.report(b)
			})
		}
	}
	printf("note: flinkbench: %s: load average after the runs: %s\n", what, benchenv.LoadAvg())
	name := b.Name()
	printf("goal: %s/sdfio records/s / %s/beamgo # Flink, %s: sdfio's avroio.Read against Beam Go's avroio.Read, same job server\n", name, name, what)
	printf("goal: %s/sdfio records/cpu-s / %s/beamgo # Flink, %s: CPU per record against Beam Go's avroio.Read (job server, workers)\n", name, name, what)
	printf("goal: %s/sdfio records/s / %s/java # Flink, %s: sdfio on the job server against Beam Java's AvroIO on the native FlinkRunner\n", name, name, what)
	printf("goal: %s/sdfio records/cpu-s / %s/java # Flink, %s: CPU per record against Beam Java's AvroIO (the JVM against job server and workers)\n", name, name, what)
}

// printf writes a line for benchreport on standard output, beside the
// benchmark lines.
func printf(format string, args ...any) { fmt.Fprintf(os.Stdout, format, args...) }

// javaMain is the Java program's class (internal/bench/java).
const javaMain = "io.github.sdfio.bench.AvroCount"

// javaProgram is the Java program's classpath, from its build
// (-flinkbench.java_dir: avro-count.jar and classpath.txt, which make
// bench writes with mvn).
func javaProgram() (string, error) {
	dir := *javaDir
	if dir == "" {
		dir = filepath.Join(*benchDir, "java")
	}
	jar := filepath.Join(dir, "avro-count.jar")
	deps, err := os.ReadFile(filepath.Join(dir, "classpath.txt"))
	if err == nil {
		_, err = os.Stat(jar)
	}
	if err != nil {
		return "", fmt.Errorf("the Java program is not built in %s (make bench builds it: mvn -q -B -f internal/bench/java/pom.xml -Dbench.build=%s package dependency:build-classpath -Dmdep.outputFile=%s/classpath.txt): %w", dir, dir, dir, err)
	}
	return jar + string(os.PathListSeparator) + strings.TrimSpace(string(deps)), nil
}

// runJava runs the Java program on pattern (after an untimed warm-up run
// on warm in the same JVM) and returns its timed run: wall time and the
// JVM's CPU time from Pipeline.run to the end of waitUntilFinish, as the
// program measures them. other-cores is taken over the whole process.
func runJava(b *testing.B, classpath, pattern, warm string, want int64) measurement {
	b.Helper()
	tmp, err := os.MkdirTemp("", "flinkbench-java-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	javaBin := os.Getenv("JAVA")
	if javaBin == "" {
		javaBin = "java"
	}
	ctx, cancel := context.WithTimeout(context.Background(), *runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, javaBin,
		// As the job server's JVM (internal/flinktest).
		"-Xmx2g",
		"--add-opens=java.base/java.util=ALL-UNNAMED",
		"--add-opens=java.base/java.lang=ALL-UNNAMED",
		"-Djava.io.tmpdir="+tmp,
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", classpath, javaMain,
		"--input="+pattern,
		"--warmupInput="+warm,
		"--expect="+strconv.FormatInt(want, 10),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	busy0 := cpuBusyTicks()
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start).Seconds()
	busy1 := cpuBusyTicks()
	if err != nil {
		b.Fatalf("%s: %v\n%s\n%s", shortArgs(cmd.Args), err, stdout.String(), tail(stderr.String(), 64<<10))
	}
	var m measurement
	found := false
	for _, l := range strings.Split(stdout.String(), "\n") {
		rest, ok := strings.CutPrefix(l, "avrocount-result: ")
		if !ok {
			continue
		}
		found = true
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "records":
				m.records, err = strconv.ParseInt(v, 10, 64)
			case "seconds":
				m.seconds, err = strconv.ParseFloat(v, 64)
			case "cpu_seconds":
				m.cpu, err = strconv.ParseFloat(v, 64)
			}
			if err != nil {
				b.Fatalf("bad result line %q: %v", l, err)
			}
		}
	}
	if !found || m.seconds <= 0 {
		b.Fatalf("the Java program printed no result:\n%s\n%s", stdout.String(), tail(stderr.String(), 64<<10))
	}
	if m.records != want {
		b.Fatalf("Beam Java's AvroIO counted %d records of %s, want %d", m.records, pattern, want)
	}
	var jvmCPU float64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		jvmCPU = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
	}
	m.other = otherCores(busy0, busy1, jvmCPU, wall)
	b.ReportMetric(wall, "jvm-sec/run")
	return m
}

// shortArgs is the command line with the classpath elided.
func shortArgs(args []string) string {
	out := append([]string(nil), args...)
	for i := range out {
		if i > 0 && out[i-1] == "-cp" {
			out[i] = "<" + strconv.Itoa(strings.Count(out[i], string(os.PathListSeparator))+1) + " jars>"
		}
	}
	return strings.Join(out, " ")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[...]\n" + s[len(s)-n:]
}

// TestJavaVersions: the Java program's pom pins the Beam and Flink of the
// job server the Go pipelines run on (flinktest's, internal/setup/flink),
// so that the two sides run the same Flink. It reads the pom only.
func TestJavaVersions(t *testing.T) {
	pom, err := os.ReadFile("../../bench/java/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"beam.version": flinktest.BeamVersion, "flink.version": flinktest.FlinkVersion} {
		got := ""
		if m := regexp.MustCompile(`<` + regexp.QuoteMeta(name) + `>([^<]+)</`).FindSubmatch(pom); m != nil {
			got = string(m[1])
		}
		if got != want {
			t.Errorf("internal/bench/java/pom.xml's %s is %q, the job server's %q", name, got, want)
		}
	}
}
