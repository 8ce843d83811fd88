package workertest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal/runnerlib"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/sdfio/sdfio/internal/testtmp"

	// The hook that turns a binary started with --worker=true into an SDK
	// harness when it calls beam.Init.
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/harness/init"
)

// DefaultTimeout bounds a Run unless WithTimeout says otherwise.
const DefaultTimeout = 3 * time.Minute

// Main is the TestMain of a package that uses Run: it parses flags and calls
// beam.Init, which in a worker process runs the SDK harness and never returns,
// and otherwise runs the tests in a temporary directory of their own
// (internal/testtmp) and exits.
func Main(m Tests) {
	if !flag.Parsed() {
		flag.Parse()
	}
	beam.Init()
	os.Exit(testtmp.Main(m.Run))
}

// Tests is what Main needs of a *testing.M.
type Tests interface{ Run() int }

// TB is what a Run needs of its test (a *testing.T or *testing.B): the
// package takes this rather than importing testing.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Name() string
}

// Option configures a Run.
type Option func(*config)

type config struct {
	timeout       time.Duration
	experiments   []string
	server        *JobServer
	runnerOptions map[string]any
	restarts      bool
	watch         []func(context.Context, *Live)
}

// WithTimeout bounds the whole run: submission, execution and worker start.
// It is further shortened to end before the test's deadline.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithExperiments passes experiments to the runner and the workers, for
// example "prism_disable_sdf_split".
func WithExperiments(exps ...string) Option {
	return func(c *config) { c.experiments = append(c.experiments, exps...) }
}

// Result is the outcome of a successful or failed Run. It implements
// beam.PipelineResult.
type Result struct {
	jobID   string
	metrics *metrics.Results

	// Workers lists the worker processes started for the job, in start order.
	Workers []Worker
	// RunnerPID is the process id of the Prism job server that ran the job
	// (0 if it never started). Each Run has its own, and it has exited when
	// Run returns; with WithJobServer it is that server's.
	RunnerPID int
	// Kills counts the workers killed through Live.Kill.
	Kills int
	// Cancelled: the job was cancelled through Live.Cancel.
	Cancelled bool
	// RunnerOutput is the tail of that job server's log.
	RunnerOutput string
	// Elapsed is the wall time of the run, from translation to the end.
	Elapsed time.Duration
}

// Worker describes one SDK worker process.
type Worker struct {
	ID     string        // the runner's worker id
	PID    int           // 0 if the process never started
	Binary string        // the executable it runs: the test binary
	Boot   time.Duration // from StartWorker to the process being started
	// Started is when the process started (Live.Workers only).
	Started time.Time
	Output  string // the tail of its stdout and stderr
}

// JobID returns the runner's job id.
func (r *Result) JobID() string { return r.jobID }

// Metrics returns the job's metrics as reported by the runner.
func (r *Result) Metrics() metrics.Results {
	if r.metrics == nil {
		return metrics.Results{}
	}
	return *r.metrics
}

var _ beam.PipelineResult = (*Result)(nil)

// runMu serialises the runs of a test binary, so that it has one job (one
// Prism process and its workers) at a time: that bounds the load it puts on
// the machine and keeps the output of a failing run to its own processes.
var runMu sync.Mutex

// Run executes p on a Prism job server with its SDK workers in separate
// processes (see the package documentation) and waits for the job to end.
// The error is non-nil when the job fails, a worker process dies, or the
// timeout expires; the Result is returned either way, with whatever metrics and
// worker output there are. Run calls t.Fatal only when the test binary is not
// set up for it (TestMain) or is itself a worker process.
func Run(t TB, p *beam.Pipeline, opts ...Option) (*Result, error) {
	t.Helper()
	if os.Getenv(childEnv) != "" {
		t.Fatalf("workertest.Run called inside a worker process: TestMain must call workertest.Main(m) or ptest.Main(m)")
	}
	if !beam.Initialized() {
		t.Fatalf("workertest.Run: beam.Init was not called: TestMain must call workertest.Main(m) or ptest.Main(m)")
	}
	cfg := config{timeout: DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}

	runMu.Lock()
	defer runMu.Unlock()

	timeout := cfg.timeout
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			// Leave time to clean up and report before go test's panic.
			if left := time.Until(dl) - 5*time.Second; left < timeout {
				timeout = max(left, time.Second)
			}
		}
	}

	res, err := run(p, jobName(t.Name()), timeout, cfg)
	if err != nil {
		for _, w := range res.Workers {
			t.Logf("workertest: worker %s (pid %d) output:\n%s", w.ID, w.PID, w.Output)
		}
		if res.RunnerPID != 0 {
			name := "Prism job server"
			if cfg.server != nil {
				name = cfg.server.Name
			}
			t.Logf("workertest: %s (pid %d) output:\n%s", name, res.RunnerPID, res.RunnerOutput)
		}
	}
	return res, err
}

// MustRun is Run that fails the test on error.
func MustRun(t TB, p *beam.Pipeline, opts ...Option) *Result {
	t.Helper()
	res, err := Run(t, p, opts...)
	if err != nil {
		t.Fatalf("workertest.Run: %v", err)
	}
	return res
}

func run(p *beam.Pipeline, name string, timeout time.Duration, cfg config) (res *Result, err error) {
	start := time.Now()
	res = &Result{}
	defer func() { res.Elapsed = time.Since(start) }()

	bin, err := os.Executable()
	if err != nil {
		return res, fmt.Errorf("workertest: locating the test binary to stage as worker: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	var client jobpb.JobServiceClient
	endpoint := ""
	if cfg.server != nil {
		client, endpoint = cfg.server.Client, cfg.server.Name
		res.RunnerPID = cfg.server.PID
		defer func() { res.RunnerOutput = cfg.server.Log() }()
	} else {
		js, err := startJobServer(ctx, bin)
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("workertest: the run did not finish within %v: %w", timeout, err)
			}
			return res, err
		}
		res.RunnerPID = js.pid()
		defer func() {
			if cerr := js.close(); cerr != nil && err == nil {
				err = cerr
			}
			res.RunnerOutput = js.out.String()
		}()
		client, endpoint = js.client, js.endpoint
	}

	wp, err := startPool()
	if err != nil {
		return res, err
	}
	wp.restarts = cfg.restarts
	defer func() {
		wp.close()
		res.Workers = wp.snapshot()
		wp.mu.Lock()
		res.Kills = wp.kills
		res.Cancelled = wp.cancelled
		wp.mu.Unlock()
	}()
	// The worker artifact names the test binary instead of being it: see
	// workerPointer.
	staged := filepath.Join(wp.dir, "worker")
	if err := os.WriteFile(staged, workerPointer(bin), 0o644); err != nil {
		return res, err
	}

	// Translate the pipeline, as the universal runner does, but with an
	// EXTERNAL environment that points at our pool and without touching the
	// global --endpoint/--environment_* flags.
	edges, _, err := p.Build()
	if err != nil {
		return res, fmt.Errorf("workertest: building pipeline: %w", err)
	}
	env, err := graphx.CreateEnvironment(ctx, graphx.URNEnvExternal, func(context.Context) string { return wp.addr() })
	if err != nil {
		return res, fmt.Errorf("workertest: creating EXTERNAL environment: %w", err)
	}
	pipe, err := graphx.Marshal(edges, &graphx.Options{Environment: env})
	if err != nil {
		return res, fmt.Errorf("workertest: translating pipeline: %w", err)
	}
	if err := runnerlib.UpdateGoEnvironmentWorker(staged, pipe); err != nil {
		return res, fmt.Errorf("workertest: setting worker artifact %s: %w", staged, err)
	}

	prepID, artifactEndpoint, token, err := prepare(ctx, client, pipe, name, cfg.experiments, cfg.runnerOptions)
	if err != nil {
		return res, setupErr(ctx, timeout, "preparing job on "+endpoint, err)
	}
	retrieval, err := runnerlib.Stage(ctx, prepID, artifactEndpoint, staged, token)
	if err != nil {
		return res, setupErr(ctx, timeout, "staging worker artifact "+staged, err)
	}
	jobID, err := runnerlib.Submit(ctx, client, prepID, retrieval)
	if err != nil {
		return res, setupErr(ctx, timeout, "submitting job", err)
	}
	res.jobID = jobID

	// The wait has no deadline of its own: the timeout is decided below, so
	// that it is never mistaken for a failure of the job.
	waitCtx, stopWait := context.WithCancel(context.Background())
	defer stopWait()
	done := make(chan error, 1)
	go func() { done <- runnerlib.WaitForCompletion(waitCtx, client, jobID) }()
	live := &Live{p: wp, cancel: func() error {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_, err := client.Cancel(cctx, &jobpb.CancelJobRequest{JobId: jobID})
		return err
	}, drain: func() error {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_, err := client.Drain(cctx, &jobpb.DrainJobRequest{JobId: jobID})
		return err
	}}
	for _, w := range cfg.watch {
		go w(waitCtx, live)
	}

	var runErr error
	select {
	case runErr = <-done:
		if runErr != nil {
			runErr = fmt.Errorf("workertest: %w", runErr)
			// A dead worker fails the job too; report its exit and output.
			select {
			case <-wp.failed:
				runErr = errors.Join(wp.failErr, runErr)
			case <-time.After(250 * time.Millisecond):
			}
		}
	case <-wp.failed:
		runErr = wp.failErr
	case <-ctx.Done():
		runErr = fmt.Errorf("workertest: job %s did not finish within %v", jobID, timeout)
	}
	if runErr != nil {
		// Stop the job; its end is what makes Prism release the workers.
		stopWait()
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		client.Cancel(cctx, &jobpb.CancelJobRequest{JobId: jobID})
		ccancel()
	} else {
		// Let Prism stop its workers itself before the pool kills them.
		wp.awaitStopRequests(5 * time.Second)
	}

	mctx, mcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer mcancel()
	resp, merr := client.GetJobMetrics(mctx, &jobpb.GetJobMetricsRequest{JobId: jobID})
	if merr == nil {
		m := resp.GetMetrics()
		res.metrics = metricsx.FromMonitoringInfos(pipe, m.GetAttempted(), m.GetCommitted())
	} else if runErr == nil {
		runErr = fmt.Errorf("workertest: job %s: fetching metrics: %w", jobID, merr)
	}
	return res, runErr
}

// setupErr is the error of a step before the job runs; when the run's
// deadline is what failed it, it says so as a timeout of the job does.
func setupErr(ctx context.Context, timeout time.Duration, step string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("workertest: the run did not finish within %v: %s: %w", timeout, step, err)
	}
	return fmt.Errorf("workertest: %s: %w", step, err)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func jobName(testName string) string {
	n := unsafeName.ReplaceAllString(testName, "_")
	if n == "" {
		n = "workertest"
	}
	return n
}

// RunFailing runs a pipeline that is meant to fail and returns its error
// (nil if it succeeded). Without the race detector it runs on Prism in this
// process, as ptest.Run does. Under -race its SDK workers are processes of
// their own (Run): Beam's harness (v2.77.0, v2.78.0) closes its response channel when
// the runner ends the control stream (harness.go:195) without waiting for
// the bundles still running, whose goroutines send their response on it
// (harness.go:213). A job that fails ends while other bundles are in flight,
// and in a LOOPBACK worker the race detector reports that send against the
// close as a data race of the test process, failing whichever test is
// running then (it failed avroio's TestTimeMicrosBeyondDuration in two CI
// runs). In a worker process of its own the report goes to that process's
// output, which Run logs when the job fails. The DoFns of the package still
// run under the race detector in that process and in every pipeline that
// succeeds. opts apply to Run, so only under -race.
func RunFailing(t TB, p *beam.Pipeline, opts ...Option) error {
	t.Helper()
	if RaceEnabled {
		_, err := Run(t, p, opts...)
		return err
	}
	return ptest.Run(p)
}
