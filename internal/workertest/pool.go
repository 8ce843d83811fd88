package workertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/container/tools"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/artifact"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/grpc"
)

// childEnv is set in the environment of every worker process.
const childEnv = "SDFIO_WORKERTEST_WORKER"

// maxOutput bounds the output kept per worker process (its tail is kept).
const maxOutput = 256 << 10

// pool implements fnpb.BeamFnExternalWorkerPoolServer by starting each worker
// as an OS process, like the Go SDK container does with --worker_pool.
type pool struct {
	fnpb.UnimplementedBeamFnExternalWorkerPoolServer

	lis net.Listener
	srv *grpc.Server
	dir string // scratch directory; one subdirectory per worker

	root   context.Context // cancelled by close
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	workers map[string]*workerProc
	order   []*workerProc

	// restarts: a worker that dies is the runner's to replace
	// (WithWorkerRestarts), not a failure of the run.
	restarts bool
	kills    int // workers killed through Live.Kill
	// cancelled: the job was cancelled through Live.Cancel.
	cancelled bool

	failOnce sync.Once
	failed   chan struct{} // closed on the first unexpected worker failure
	failErr  error
}

// workerProc is one worker requested by the runner.
type workerProc struct {
	id   string
	dir  string
	out  tailBuffer
	ctx  context.Context // cancelled by StopWorker or close
	stop context.CancelFunc

	mu       sync.Mutex
	cmd      *exec.Cmd
	binary   string
	pid      int
	stopping bool
	exited   chan struct{} // closed when the process was reaped, or never started
	exitErr  error
	bootTime time.Duration
	started  time.Time // when the process started
}

func startPool() (*pool, error) {
	dir, err := os.MkdirTemp("", "workertest-")
	if err != nil {
		return nil, fmt.Errorf("workertest: creating scratch directory: %w", err)
	}
	lis, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("workertest: worker pool listen: %w", err)
	}
	root, cancel := context.WithCancel(context.Background())
	p := &pool{
		lis:     lis,
		srv:     grpc.NewServer(),
		dir:     dir,
		root:    root,
		cancel:  cancel,
		workers: map[string]*workerProc{},
		failed:  make(chan struct{}),
	}
	fnpb.RegisterBeamFnExternalWorkerPoolServer(p.srv, p)
	go p.srv.Serve(lis)
	return p, nil
}

// addr is the pool's endpoint, the EXTERNAL environment's config.
func (p *pool) addr() string { return p.lis.Addr().String() }

// fail records the first unexpected failure of a worker.
func (p *pool) fail(err error) {
	p.failOnce.Do(func() {
		p.failErr = err
		close(p.failed)
	})
}

// StartWorker implements fnpb.BeamFnExternalWorkerPoolServer. It answers at
// once and boots the worker in the background: Prism panics on an error
// response, so failures while booting are reported through p.failed instead.
func (p *pool) StartWorker(_ context.Context, req *fnpb.StartWorkerRequest) (*fnpb.StartWorkerResponse, error) {
	id := req.GetWorkerId()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		// The run is over (its job was cancelled). An error response would
		// make Prism panic, so the request is acknowledged and ignored.
		return &fnpb.StartWorkerResponse{}, nil
	}
	switch {
	case id == "":
		return &fnpb.StartWorkerResponse{Error: "workertest: StartWorker without a worker id"}, nil
	case p.workers[id] != nil && !(p.restarts && p.workers[id].done()):
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("workertest: worker %q already exists", id)}, nil
	case req.GetControlEndpoint().GetUrl() == "" || req.GetLoggingEndpoint().GetUrl() == "":
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("workertest: worker %q: missing control or logging endpoint", id)}, nil
	}
	w := &workerProc{
		id:     id,
		dir:    filepath.Join(p.dir, fmt.Sprintf("worker-%d", len(p.order))),
		exited: make(chan struct{}),
	}
	w.ctx, w.stop = context.WithCancel(p.root)
	p.workers[id] = w
	p.order = append(p.order, w)
	go func() {
		if err := p.boot(w, req); err != nil {
			w.mu.Lock()
			stopping := w.stopping
			if w.cmd == nil {
				w.exitErr = err
				close(w.exited)
			}
			w.mu.Unlock()
			if !stopping {
				p.fail(fmt.Errorf("workertest: booting worker %q: %w", id, err))
			}
		}
	}()
	return &fnpb.StartWorkerResponse{}, nil
}

// boot does what the Go SDK container's boot loader does, then starts the
// worker binary as a child process.
func (p *pool) boot(w *workerProc, req *fnpb.StartWorkerRequest) error {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(grpcx.WriteWorkerID(w.ctx, w.id), 2*time.Minute)
	defer cancel()

	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return err
	}
	provision := req.GetProvisionEndpoint().GetUrl()
	if provision == "" {
		provision = req.GetControlEndpoint().GetUrl()
	}
	info, err := tools.ProvisionInfo(ctx, provision)
	if err != nil {
		return fmt.Errorf("provision info from %s: %w", provision, err)
	}

	// Pipeline options, handed over like boot.go does (PIPELINE_OPTIONS_FILE).
	opts, err := tools.ProtoToJSON(info.GetPipelineOptions())
	if err != nil {
		return fmt.Errorf("pipeline options: %w", err)
	}
	optsFile := filepath.Join(w.dir, "pipeline_options.json")
	if err := os.WriteFile(optsFile, []byte(opts), 0o644); err != nil {
		return err
	}

	prog, err := retrieveWorker(ctx, info, req, w.dir)
	if err != nil {
		return err
	}

	control := req.GetControlEndpoint().GetUrl()
	logging := req.GetLoggingEndpoint().GetUrl()
	if u := info.GetControlEndpoint().GetUrl(); u != "" {
		control = u
	}
	if u := info.GetLoggingEndpoint().GetUrl(); u != "" {
		logging = u
	}
	cmd := exec.Command(prog,
		"--worker=true",
		"--id="+w.id,
		"--control_endpoint="+control,
		"--logging_endpoint="+logging,
		"--semi_persist_dir="+w.dir,
		// If TestMain does not turn the process into a harness, run no test.
		"-test.run=^$",
	)
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(),
		childEnv+"=1",
		"PIPELINE_OPTIONS_FILE="+optsFile,
		"RUNNER_CAPABILITIES="+strings.Join(info.GetRunnerCapabilities(), " "),
	)
	if u := info.GetStatusEndpoint().GetUrl(); u != "" {
		cmd.Env = append(cmd.Env, "STATUS_ENDPOINT="+u)
	}
	cmd.Stdout = &w.out
	cmd.Stderr = &w.out
	cmd.WaitDelay = 5 * time.Second
	setDeathSignal(cmd)

	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		return errors.New("stopped before it started")
	}
	if err := cmd.Start(); err != nil {
		w.mu.Unlock()
		return fmt.Errorf("starting %s: %w", prog, err)
	}
	w.cmd = cmd
	w.binary = prog
	w.pid = cmd.Process.Pid
	w.bootTime = time.Since(begin)
	w.started = time.Now()
	w.mu.Unlock()

	go func() {
		err := cmd.Wait()
		w.mu.Lock()
		w.exitErr = err
		// Expected: the kill that kill() sent. Anything else (an exit status,
		// another signal, an exit before the kill) is a crash, even if the
		// runner asked to stop the worker meanwhile.
		expected := w.stopping && cmd.ProcessState.ExitCode() == -1
		w.mu.Unlock()
		close(w.exited)
		if !expected && p.restarts {
			// The runner recovers (WithWorkerRestarts); its log says how.
			fmt.Fprintf(&w.out, "\nworkertest: worker %q (pid %d) exited: %v (WithWorkerRestarts: left to the runner)\n", w.id, w.pid, err)
		} else if !expected {
			// A Go harness never exits on its own while it is wanted: after a
			// clean shutdown it waits to be killed.
			status := "exit status 0"
			if err != nil {
				status = err.Error()
			}
			p.fail(fmt.Errorf("workertest: worker %q (pid %d) exited while its job was running: %s%s\n%s",
				w.id, w.pid, status, hintIfNoHarness(&w.out), w.out.String()))
		}
	}()
	return nil
}

// done reports whether the worker's process has exited (or never started).
func (w *workerProc) done() bool {
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// retrieveWorker fetches the staged artifacts from the runner's artifact
// service into dir, as the container's boot loader does, and returns the
// path of the worker binary that the Go worker artifact among them names
// (see workerPointer).
func retrieveWorker(ctx context.Context, info *fnpb.ProvisionInfo, req *fnpb.StartWorkerRequest, dir string) (string, error) {
	endpoint := info.GetArtifactEndpoint().GetUrl()
	if endpoint == "" {
		endpoint = req.GetArtifactEndpoint().GetUrl()
	}
	staged := filepath.Join(dir, "staged")
	arts, err := artifact.Materialize(ctx, endpoint, info.GetDependencies(), info.GetRetrievalToken(), staged)
	if err != nil {
		return "", fmt.Errorf("retrieving staged artifacts from %s: %w", endpoint, err)
	}
	name, err := workerArtifact(arts)
	if err != nil {
		return "", err
	}
	return readWorkerPointer(filepath.Join(staged, name))
}

// pointerHeader is the first line of the worker artifact Run stages.
const pointerHeader = "sdfio workertest worker binary"

// maxPointer bounds the size of a worker artifact the pool accepts.
const maxPointer = 64 << 10

// workerPointer is the content of the worker artifact Run stages: not the
// worker binary (about 200 MB under -race) but the absolute path of it on
// this machine. Prism waits one minute for a worker's control connection
// from the moment it asks the pool for the worker, and fetching the binary
// from its artifact service within that minute took 10 to 51 s at a load
// of 7.5, so the pool retrieves this pointer (tens of bytes) and runs
// the binary it names in place.
func workerPointer(binary string) []byte {
	return []byte(pointerHeader + "\n" + binary + "\n")
}

// readWorkerPointer reads a worker artifact written by workerPointer and
// returns the binary it names.
func readWorkerPointer(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("reading the worker artifact: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPointer+1))
	if err != nil {
		return "", fmt.Errorf("reading the worker artifact %s: %w", file, err)
	}
	lines := strings.Split(string(data), "\n")
	if len(data) > maxPointer || len(lines) != 3 || lines[0] != pointerHeader || lines[2] != "" {
		return "", fmt.Errorf("the worker artifact %s (%d bytes) is not a workertest pointer to a worker binary (%q, then the binary's absolute path)", file, len(data), pointerHeader)
	}
	binary := lines[1]
	if !filepath.IsAbs(binary) {
		return "", fmt.Errorf("the worker artifact %s names %q, not an absolute path", file, binary)
	}
	if st, err := os.Stat(binary); err != nil {
		return "", fmt.Errorf("the worker binary %s named by the worker artifact: %w", binary, err)
	} else if !st.Mode().IsRegular() {
		return "", fmt.Errorf("the worker binary %s named by the worker artifact is not a regular file (%v)", binary, st.Mode())
	}
	return binary, nil
}

// workerArtifact picks the Go worker binary among the staged artifacts, like
// the container's boot loader.
func workerArtifact(arts []*pipepb.ArtifactInformation) (string, error) {
	switch len(arts) {
	case 0:
		return "", errors.New("no artifacts staged; the worker binary is missing")
	case 1:
		name, _ := artifact.MustExtractFilePayload(arts[0])
		return name, nil
	}
	for _, a := range arts {
		if a.GetRoleUrn() == artifact.URNGoWorkerBinaryRole {
			name, _ := artifact.MustExtractFilePayload(a)
			return name, nil
		}
	}
	return "", fmt.Errorf("no artifact with role %s among %d staged artifacts", artifact.URNGoWorkerBinaryRole, len(arts))
}

func hintIfNoHarness(out *tailBuffer) string {
	s := out.String()
	if strings.Contains(s, "no tests to run") || strings.HasPrefix(strings.TrimSpace(s), "PASS") {
		return " (the test binary ran as a test, not as an SDK harness: TestMain must call workertest.Main(m), ptest.Main(m) or flag.Parse and beam.Init)"
	}
	return ""
}

// StopWorker implements fnpb.BeamFnExternalWorkerPoolServer.
func (p *pool) StopWorker(_ context.Context, req *fnpb.StopWorkerRequest) (*fnpb.StopWorkerResponse, error) {
	p.mu.Lock()
	w := p.workers[req.GetWorkerId()]
	p.mu.Unlock()
	if w == nil {
		return &fnpb.StopWorkerResponse{Error: fmt.Sprintf("workertest: no worker %q", req.GetWorkerId())}, nil
	}
	w.kill()
	return &fnpb.StopWorkerResponse{}, nil
}

// kill marks the worker as expected to exit and kills its process.
func (w *workerProc) kill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopping = true
	w.stop()
	if w.cmd != nil && w.cmd.Process != nil {
		w.cmd.Process.Kill()
	}
}

// awaitStopRequests waits until the runner has asked to stop every worker it
// started, or until the timeout.
func (p *pool) awaitStopRequests(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		all := true
		for _, w := range p.order {
			w.mu.Lock()
			if !w.stopping {
				all = false
			}
			w.mu.Unlock()
		}
		p.mu.Unlock()
		if all {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// close stops the service, kills every worker process, waits for them to be
// reaped and removes the scratch directory.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	workers := append([]*workerProc(nil), p.order...)
	p.mu.Unlock()
	for _, w := range workers {
		w.kill()
	}
	p.cancel()
	for _, w := range workers {
		select {
		case <-w.exited:
		case <-time.After(10 * time.Second):
		}
	}
	p.srv.Stop()
	os.RemoveAll(p.dir)
}

// snapshot describes the workers started so far.
func (p *pool) snapshot() []Worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ws []Worker
	for _, w := range p.order {
		w.mu.Lock()
		ws = append(ws, Worker{ID: w.id, PID: w.pid, Binary: w.binary, Boot: w.bootTime, Output: w.out.String()})
		w.mu.Unlock()
	}
	return ws
}

// tailBuffer is an io.Writer that keeps the last maxOutput bytes written.
type tailBuffer struct {
	mu      sync.Mutex
	buf     []byte
	dropped int64
}

func (b *tailBuffer) Write(data []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, data...)
	if over := len(b.buf) - maxOutput; over > 0 {
		b.dropped += int64(over)
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(data), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return fmt.Sprintf("[%d bytes dropped]\n%s", b.dropped, b.buf)
	}
	return string(b.buf)
}
