package workertest

import (
	"context"
	"fmt"
	"syscall"

	"github.com/apache/beam/sdks/v2/go/container/tools"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/util/hooks"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/protobuf/types/known/structpb"
)

// JobServer is a job server that Run submits to instead of starting a Prism
// job server of its own: Beam's Flink job server, for example, which
// internal/flinktest starts once per test binary. Run neither starts nor
// stops it.
type JobServer struct {
	Name   string // what it is, for messages: "Flink job server"
	Client jobpb.JobServiceClient
	PID    int           // its process, for Result.RunnerPID
	Log    func() string // the tail of its log, for Result.RunnerOutput
}

// WithJobServer runs the pipeline on js instead of a Prism job server of
// its own.
func WithJobServer(js *JobServer) Option { return func(c *config) { c.server = js } }

// WithRunnerOptions adds pipeline options that Beam Go's job submission
// does not carry (it sends its own options, the app name, the experiments
// and the parallelism, and nothing else): each key k is sent as the portable
// option "beam:option:k:v1", which a Java job server reads as the
// lowerCamelCase option of that snake_case name (checkpointing_interval is
// FlinkPipelineOptions' checkpointingInterval).
func WithRunnerOptions(opts map[string]any) Option {
	return func(c *config) {
		if c.runnerOptions == nil {
			c.runnerOptions = map[string]any{}
		}
		for k, v := range opts {
			c.runnerOptions[k] = v
		}
	}
}

// WithWorkerRestarts lets worker processes die while the job runs without
// failing the run: a runner that recovers from failures (Flink restoring a
// checkpoint) asks the pool for new workers, and the run ends when the job
// does. A worker's death is then the runner's to handle; Result.Workers
// lists every worker started, the dead included.
func WithWorkerRestarts() Option { return func(c *config) { c.restarts = true } }

// WithWatch calls watch on a goroutine of its own once the job is
// submitted, with a handle on the run's live workers (to kill them, for
// example) and on the job (to cancel it). Its context ends with the run;
// Run does not wait for watch to return. Each WithWatch adds a watch.
func WithWatch(watch func(ctx context.Context, l *Live)) Option {
	return func(c *config) { c.watch = append(c.watch, watch) }
}

// Live is a handle on the worker processes of a running job.
type Live struct {
	p      *pool
	cancel func() error // cancels the job
	drain  func() error // asks the job service to drain the job
}

// Drain asks the job service to drain the job (the job API's Drain:
// sources stop, the watermark advances to the end, the job ends DRAINED).
// Prism v2.78 does not implement it: its job service answers
// UNIMPLEMENTED (TestPrismCannotDrain).
func (l *Live) Drain() error { return l.drain() }

// Cancel cancels the job, as an operator stops a streaming job that
// never ends by itself; Run then returns without error when the job ends
// CANCELLED, with Result.Cancelled set.
func (l *Live) Cancel() error {
	l.p.mu.Lock()
	l.p.cancelled = true
	l.p.mu.Unlock()
	return l.cancel()
}

// Workers describes the worker processes started so far whose process has
// not exited.
func (l *Live) Workers() []Worker {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	var ws []Worker
	for _, w := range l.p.order {
		select {
		case <-w.exited:
			continue
		default:
		}
		w.mu.Lock()
		if w.pid != 0 {
			ws = append(ws, Worker{ID: w.id, PID: w.pid, Binary: w.binary, Boot: w.bootTime, Started: w.started})
		}
		w.mu.Unlock()
	}
	return ws
}

// Kill sends SIGKILL to the worker process pid, as a machine that loses a
// worker would: no clean shutdown, no flush, no goodbye to the runner.
func (l *Live) Kill(pid int) error {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	for _, w := range l.p.order {
		if w.pid == pid {
			l.p.kills++
			return syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return fmt.Errorf("workertest: no worker process %d", pid)
}

// prepare is runnerlib.Prepare with the options of WithRunnerOptions added
// to what it sends.
func prepare(ctx context.Context, client jobpb.JobServiceClient, p *pipepb.Pipeline, name string, experiments []string, extra map[string]any) (id, endpoint, token string, err error) {
	hooks.SerializeHooksToOptions()
	beam.PipelineOptions.LoadOptionsFromFlags(nil)
	raw := runtime.RawOptionsWrapper{
		Options:     beam.PipelineOptions.Export(),
		AppName:     name,
		Experiments: append(append([]string(nil), experiments...), "beam_fn_api"),
	}
	options, err := tools.OptionsToProto(raw)
	if err != nil {
		return "", "", "", fmt.Errorf("producing pipeline options: %w", err)
	}
	for k, v := range extra {
		val, err := structpb.NewValue(v)
		if err != nil {
			return "", "", "", fmt.Errorf("pipeline option %s=%v: %w", k, v, err)
		}
		options.Fields["beam:option:"+k+":v1"] = val
	}
	resp, err := client.Prepare(ctx, &jobpb.PrepareJobRequest{Pipeline: p, PipelineOptions: options, JobName: name})
	if err != nil {
		return "", "", "", fmt.Errorf("job failed to prepare: %w", err)
	}
	return resp.GetPreparationId(), resp.GetArtifactStagingEndpoint().GetUrl(), resp.GetStagingSessionToken(), nil
}
