// Package flinktest runs Beam Go pipelines in tests on Beam's Flink job
// server: a real Flink (a MiniCluster, parallelism 2) that the job server
// runs in its own JVM, with every SDK worker a process of its own, as on a
// cluster.
//
// `make deps` (internal/setup/deps.sh) fetches the job server from Maven
// Central into a cache directory, checked against the SHA-256 of every jar
// (internal/setup/flink: the versions and why they were chosen). Start
// finds it there ($SDFIO_FLINK_DIR, else
// $HOME/.cache/sdfio/flink-job-server-<beam>-<flink>), starts it on free
// loopback ports with
//
//	java -cp '<dir>/lib/*' org.apache.beam.runners.flink.FlinkJobServerDriver \
//	    --flink-master=[local] --job-host=localhost --job-port=P \
//	    --artifact-port=Q --expansion-port=R --artifacts-dir=<tmp>
//
// and waits until its job service answers. One job server serves every
// test of a test binary (a JVM and a MiniCluster take 5-10 s to start);
// Main stops it when the tests end. Without the job server Start skips the
// test, except under CI=true, where a missing job server fails it.
//
// Run submits a pipeline through internal/workertest with an EXTERNAL
// environment: the job server asks workertest's worker pool for SDK
// workers, and each is the test binary started as a Go SDK harness, in a
// process of its own (what the Go SDK container's --worker_pool mode does on
// a cluster). Options reach Flink as portable pipeline options
// (WithCheckpointing, WithRestarts). The job server's log since the run
// began is printed when a run fails.
package flinktest

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sdfio/sdfio/internal/testtmp"
	"github.com/sdfio/sdfio/internal/workertest"

	// The hook that turns a binary started with --worker=true into an SDK
	// harness when it calls beam.Init.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness/init"
)

// The versions `make deps` installs (internal/setup/flink/pom.xml; a test
// checks that the two agree).
const (
	BeamVersion  = "2.62.0"
	FlinkVersion = "1.19.3"
)

// Parallelism is the parallelism of every job Run submits.
const Parallelism = 2

// Dir is the directory of the job server's jars: $SDFIO_FLINK_DIR, else
// $HOME/.cache/sdfio/flink-job-server-<beam>-<flink> (as deps.sh).
func Dir() string {
	if d := os.Getenv("SDFIO_FLINK_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "sdfio", "flink-job-server-"+BeamVersion+"-"+FlinkVersion)
}

// Main is the TestMain of a package that runs pipelines on Flink: it is
// workertest.Main (a worker process becomes an SDK harness), and it stops
// the job server once the tests have run.
func Main(m workertest.Tests) {
	if !flag.Parsed() {
		flag.Parse()
	}
	beam.Init()
	os.Exit(testtmp.Main(func() int {
		defer stopShared()
		return m.Run()
	}))
}

// TB is what Start and Run need of a test: workertest.TB, and Skip and
// TempDir (a *testing.T or *testing.B has them all).
type TB interface {
	workertest.TB
	Skip(args ...any)
	TempDir() string
}

// Server is a running Flink job server.
type Server struct {
	Endpoint string // the job service, localhost:P
	cmd      *exec.Cmd
	conn     *grpc.ClientConn
	client   jobpb.JobServiceClient
	tmp      string // java.io.tmpdir and the artifacts directory
	log      *logBuffer
	exited   chan struct{}
}

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// Start returns the test binary's job server, starting it on first use. It
// skips the test when the job server is not installed (fails it under
// CI=true) and fails it when the job server does not start.
func Start(t TB) *Server {
	t.Helper()
	lib := filepath.Join(Dir(), "lib")
	if _, err := os.Stat(filepath.Join(lib, "beam-runners-flink-1.19-"+BeamVersion+".jar")); err != nil {
		msg := fmt.Sprintf("flinktest: Beam's Flink job server is not installed in %s (run make deps): %v", lib, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start(lib)
	}
	if sharedErr != nil {
		t.Fatalf("flinktest: %v", sharedErr)
	}
	select {
	case <-shared.exited:
		t.Fatalf("flinktest: the Flink job server (pid %d) has exited: %v\n%s", shared.cmd.Process.Pid, shared.cmd.ProcessState, shared.log.since(0))
	default:
	}
	return shared
}

func stopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.stop()
		shared = nil
	}
}

// startTimeout bounds the job server's start: a JVM and Flink's classes,
// 5-10 s on a quiet 2-core machine, several times that beside a -race build.
const startTimeout = 2 * time.Minute

func start(lib string) (*Server, error) {
	java := os.Getenv("JAVA")
	if java == "" {
		java = "java"
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(3)
		if err != nil {
			return nil, err
		}
		tmp, err := os.MkdirTemp("", "flink-job-server-")
		if err != nil {
			return nil, err
		}
		s := &Server{Endpoint: "localhost:" + strconv.Itoa(ports[0]), tmp: tmp, log: &logBuffer{}, exited: make(chan struct{})}
		s.cmd = exec.Command(java,
			"-Xmx2g",
			// Flink 1.19's Kryo serializes Beam's values reflectively in
			// streaming mode; on Java 17 that needs these packages open
			// (else "Unable to make field private final java.lang.Object[]
			// java.util.Arrays$ArrayList.a accessible").
			"--add-opens=java.base/java.util=ALL-UNNAMED",
			"--add-opens=java.base/java.lang=ALL-UNNAMED",
			"-Djava.io.tmpdir="+tmp,
			"-Dorg.slf4j.simpleLogger.showDateTime=true",
			"-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
			// Flink's own INFO lines (restarts, checkpoints, task states) stay;
			// the chattiest of Beam's and Flink's internals do not.
			"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.checkpoint.CheckpointCoordinator=info",
			"-Dorg.slf4j.simpleLogger.log.org.apache.beam.runners.fnexecution.logging=info",
			"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.taskexecutor.slot=warn",
			"-Dorg.slf4j.simpleLogger.log.org.apache.flink.runtime.io.network=warn",
			"-cp", filepath.Join(lib, "*"),
			"org.apache.beam.runners.flink.FlinkJobServerDriver",
			"--flink-master=[local]",
			"--job-host=localhost",
			"--job-port="+strconv.Itoa(ports[0]),
			"--artifact-port="+strconv.Itoa(ports[1]),
			"--expansion-port="+strconv.Itoa(ports[2]),
			"--artifacts-dir="+filepath.Join(tmp, "artifacts"),
		)
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
		s.cmd.WaitDelay = 5 * time.Second
		setDeathSignal(s.cmd)
		if err := s.cmd.Start(); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("starting the Flink job server (%s): %w", java, err)
		}
		go func() { s.cmd.Wait(); close(s.exited) }()
		if err := s.await(); err != nil {
			lastErr = err
			s.stop()
			continue
		}
		return s, nil
	}
	return nil, lastErr
}

// await waits until the job service answers a GetJobs call.
func (s *Server) await() error {
	deadline := time.Now().Add(startTimeout)
	conn, err := grpc.NewClient(s.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	s.conn, s.client = conn, jobpb.NewJobServiceClient(conn)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := s.client.GetJobs(ctx, &jobpb.GetJobsRequest{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("the Flink job server exited while starting: %v\n%s", s.cmd.ProcessState, s.log.since(0))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Flink job server did not answer on %s within %v: %w\n%s", s.Endpoint, startTimeout, err, s.log.since(0))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stop ends the job server and removes its temporary directory.
func (s *Server) stop() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	}
	os.RemoveAll(s.tmp)
}

// Log returns the job server's log since offset (a value of LogOffset).
func (s *Server) Log(offset int64) string { return s.log.since(offset) }

// LogOffset is the position in the job server's log now.
func (s *Server) LogOffset() int64 { return s.log.offset() }

// Option configures a Run.
type Option func(*runConfig)

type runConfig struct {
	wt      []workertest.Option
	options map[string]any
	conf    []string // lines of the run's Flink config.yaml
	// checkpointDir: checkpoints go to a directory of the run's own
	// (filesystem checkpoint storage).
	checkpointDir bool
}

// WithCheckpointing turns Flink's checkpointing on at the interval (Flink
// then runs streaming jobs exactly once: on a failure it restores every
// operator's state from the last completed checkpoint and replays the
// sources from there).
func WithCheckpointing(interval time.Duration) Option {
	return func(c *runConfig) {
		c.options["checkpointing_interval"] = interval.Milliseconds()
		c.options["min_pause_between_checkpoints"] = 0
		// Without it Beam's Flink runner finishes a bundle that is open at
		// a checkpoint inside the snapshot and buffers its output, which it
		// sends on only when the next watermark or element comes: an
		// operator whose input watermark is already final (an Impulse
		// emits +inf at once) and that gets no more elements never sends
		// it (DoFnOperator.snapshotState, BufferedOutputManager.flushBuffer
		// in Beam 2.62). The stage stalls with its last output held.
		c.options["finish_bundle_before_checkpointing"] = true
		// Flink's default checkpoint storage keeps each operator's state
		// snapshot in the JobManager's memory, at most 5 MB
		// (MemoryBackendCheckpointStorage): the streaming BigQuery write's
		// batching state passes that on a fast input ("Size of the state is
		// larger than the maximum permitted memory-backed state.
		// Size=5303020, maxSize=5242880"), and the failed checkpoint fails
		// the job. A production cluster keeps checkpoints in a file system;
		// so do the tests, in the run's own directory (Run).
		c.checkpointDir = true
	}
}

// WithRestarts lets Flink restart a failed job up to n times, delay apart,
// and lets worker processes die (a killed worker is Flink's to replace).
// Beam 2.62's Flink runner applies its retry options to streaming jobs
// only (FlinkExecutionEnvironments sets no restart strategy on the batch
// environment, whose jobs then run with Flink's NoRestartBackoffTimeStrategy),
// so the strategy also goes in a Flink configuration directory of the
// run's own (config.yaml), which the option flink_conf_dir names and both
// environments load.
func WithRestarts(n int, delay time.Duration) Option {
	return func(c *runConfig) {
		c.options["number_of_execution_retries"] = n
		c.options["execution_retry_delay"] = delay.Milliseconds()
		c.conf = append(c.conf, "restart-strategy.type: fixed-delay",
			fmt.Sprintf("restart-strategy.fixed-delay.attempts: %d", n),
			fmt.Sprintf("restart-strategy.fixed-delay.delay: %d ms", delay.Milliseconds()))
		c.wt = append(c.wt, workertest.WithWorkerRestarts())
	}
}

// WithFailover sets Flink's failover strategy
// (jobmanager.execution.failover-strategy): "region", Flink's default,
// restarts the failed task's pipelined region; "full" restarts every task.
func WithFailover(strategy string) Option {
	return func(c *runConfig) {
		c.conf = append(c.conf, "jobmanager.execution.failover-strategy: "+strategy)
	}
}

// WithStopWhen cancels the job once done returns true (polled every
// 100 ms), as an operator stops a streaming job: with checkpointing on,
// Beam's Flink runner keeps its Impulse sources up for ever
// (FlinkPipelineOptions' shutdownSourcesAfterIdleMs becomes
// Long.MAX_VALUE), so a streaming job never ends by itself; and a shorter
// idle time ends an unbounded splittable DoFn (periodic.Sequence, a file
// watch) as soon as its impulse source ends: Flink drains it, and it
// outputs nothing more. The run then succeeds with Result.Cancelled set.
func WithStopWhen(done func() bool) Option {
	return func(c *runConfig) {
		c.wt = append(c.wt, workertest.WithWatch(func(ctx context.Context, l *workertest.Live) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				if done() {
					l.Cancel()
					return
				}
			}
		}))
	}
}

// WithRunnerOptions passes pipeline options to the runner (see
// workertest.WithRunnerOptions): snake_case names of FlinkPipelineOptions.
func WithRunnerOptions(opts map[string]any) Option {
	return func(c *runConfig) {
		for k, v := range opts {
			c.options[k] = v
		}
	}
}

// WithStreaming runs the job in Flink's streaming mode even if no
// PCollection is unbounded (the job server picks streaming for a pipeline
// with one).
func WithStreaming() Option { return func(c *runConfig) { c.options["streaming"] = true } }

// WithWorkertest passes options to workertest.Run (WithTimeout, WithWatch).
func WithWorkertest(opts ...workertest.Option) Option {
	return func(c *runConfig) { c.wt = append(c.wt, opts...) }
}

// Run runs p on the test binary's Flink job server (Start) with
// parallelism 2 and every SDK worker a process of its own, and waits for
// the job to end. The error is non-nil when the job fails or times out; the
// result has the job's metrics and workers either way.
func Run(t TB, p *beam.Pipeline, opts ...Option) (*workertest.Result, error) {
	t.Helper()
	s := Start(t)
	cfg := runConfig{options: map[string]any{"parallelism": Parallelism}}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.checkpointDir {
		// In the job server's directory, removed when it stops: Flink may
		// still write a run's checkpoint files after the job is cancelled,
		// after a test's own TempDir is gone.
		dir, err := os.MkdirTemp(s.tmp, "checkpoints-")
		if err != nil {
			t.Fatalf("flinktest: %v", err)
		}
		cfg.conf = append(cfg.conf, "state.checkpoint-storage: filesystem",
			"state.checkpoints.dir: file://"+filepath.ToSlash(dir))
	}
	if len(cfg.conf) > 0 {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(strings.Join(cfg.conf, "\n")+"\n"), 0o644); err != nil {
			t.Fatalf("flinktest: %v", err)
		}
		cfg.options["flink_conf_dir"] = dir
	}
	from := s.LogOffset()
	js := &workertest.JobServer{
		Name:   "Flink job server",
		Client: s.client,
		PID:    s.cmd.Process.Pid,
		Log:    func() string { return s.log.since(from) },
	}
	wt := append([]workertest.Option{workertest.WithJobServer(js), workertest.WithRunnerOptions(cfg.options)}, cfg.wt...)
	return workertest.Run(t, p, wt...)
}

// MustRun is Run that fails the test on error.
func MustRun(t TB, p *beam.Pipeline, opts ...Option) *workertest.Result {
	t.Helper()
	res, err := Run(t, p, opts...)
	if err != nil {
		t.Fatalf("flinktest.Run: %v", err)
	}
	return res
}

// Restarts counts the restarts of the job in the log text: Flink's
// "Job <name> (<id>) switched from state RUNNING to RESTARTING" lines.
func Restarts(log string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "switched from state RUNNING to RESTARTING") {
			n++
		}
	}
	return n
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "localhost:0")
		if err != nil {
			return nil, fmt.Errorf("flinktest: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logBuffer keeps the job server's log: its last maxLog bytes, and how many
// were written in all, so that a run can ask for what came after it began.
type logBuffer struct {
	mu    sync.Mutex
	buf   []byte
	total int64
}

const maxLog = 8 << 20

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	b.total += int64(len(p))
	if over := len(b.buf) - maxLog; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *logBuffer) offset() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// since returns the log from offset on (what is still kept of it).
func (b *logBuffer) since(offset int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	start := int64(len(b.buf)) - (b.total - offset)
	prefix := ""
	if start < 0 {
		prefix = fmt.Sprintf("[%d bytes of the log dropped]\n", -start)
		start = 0
	}
	return prefix + string(b.buf[start:])
}
