package workertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// prismEnv, set in the environment of a process started from the test
// binary, makes that process a Prism job server instead of a test run.
const prismEnv = "SDFIO_WORKERTEST_PRISM"

// Every Run gets a Prism job server of its own, in a process of its own (the
// test binary, started with prismEnv set). Prism keeps state that outlives a
// job and is shared by every server in a process: in Beam v2.77.0 and v2.78.0
// (runners/prism/internal/worker/worker.go) the responders of control
// requests come from one package-level sync.Pool. When an SDK worker
// disconnects, Prism answers each request still registered on it with
// "SDK worker disconnected: worker[<job>_go] ..."; a request that gives up
// at that moment (its worker stopped, its job cancelled) puts its responder
// back into the pool with that answer still buffered, and the next request
// of any later job that takes it gets the old job's error as its own reply.
// That is how a crashed worker of one test failed the split request of the
// next test's job. A server in its own process takes such state with it
// when Run kills it.
func init() {
	if os.Getenv(prismEnv) != "" {
		os.Exit(servePrism())
	}
}

// servePrism is the body of a job server process: it starts Prism on a free
// loopback port, writes the endpoint as the first line of its standard
// output, and serves until its standard input is closed (by Run, or by the
// kernel when the test process dies).
func servePrism() int {
	os.Unsetenv(prismEnv)
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			fmt.Fprintf(os.Stderr, "workertest: finding a free port for the Prism job server: %v\n", err)
			return 2
		}
		if lastErr = createJobServer(port); lastErr == nil {
			fmt.Fprintf(os.Stdout, "localhost:%d\n", port)
			io.Copy(io.Discard, os.Stdin)
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "workertest: starting the Prism job server: %v\n", lastErr)
	return 2
}

// createJobServer starts Prism in this process. prism.CreateJobServer takes a
// port number and does not report the address it serves on, so a free port
// is found first; if another process takes it in between, Prism's listen
// fails (it panics) and another port is tried.
func createJobServer(port int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("prism job server on port %d: %v", port, r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = prism.CreateJobServer(ctx, prism.Options{Port: port})
	return err
}

func freePort() (int, error) {
	lis, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		return 0, err
	}
	defer lis.Close()
	return lis.Addr().(*net.TCPAddr).Port, nil
}

// jobServer is the Prism job server process of one Run.
type jobServer struct {
	endpoint string
	client   jobpb.JobServiceClient
	conn     *grpc.ClientConn
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	out      tailBuffer    // the process's stderr: Prism's log
	exited   chan struct{} // closed when the process was reaped
}

// startJobServer starts a Prism job server process from the test binary exe
// and waits until it serves.
func startJobServer(ctx context.Context, exe string) (*jobServer, error) {
	js := &jobServer{exited: make(chan struct{})}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), prismEnv+"=1", noExitSleep(os.Getenv("GORACE")))
	cmd.Stderr = &js.out
	cmd.WaitDelay = 5 * time.Second
	setDeathSignal(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("workertest: starting the Prism job server process %s: %w", exe, err)
	}
	js.cmd, js.stdin = cmd, stdin

	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		s, _ := r.ReadString('\n')
		line <- strings.TrimSpace(s)
		io.Copy(&js.out, r)
	}()
	go func() {
		cmd.Wait()
		close(js.exited)
	}()

	select {
	case js.endpoint = <-line:
	case <-ctx.Done():
	}
	if !strings.HasPrefix(js.endpoint, "localhost:") {
		js.close()
		why := "it exited"
		if ctx.Err() != nil {
			why = "timed out"
		}
		return nil, fmt.Errorf("workertest: the Prism job server process %s did not start (%s): %s\n%s",
			exe, why, js.exitStatus(), js.out.String())
	}
	conn, err := grpc.NewClient(js.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		js.close()
		return nil, fmt.Errorf("workertest: connecting to the Prism job server at %s: %w", js.endpoint, err)
	}
	js.conn, js.client = conn, jobpb.NewJobServiceClient(conn)
	return js, nil
}

// noExitSleep is the GORACE setting of a job server process: the race
// detector's options of the test process, and no sleep at exit. A binary
// built with -race sleeps a second when it exits (atexit_sleep_ms, for
// other goroutines to report their races), and Run waits for its job
// server to exit: that second was most of what a job server of its own
// added to a Run. A race Prism detects while it serves is reported as
// before; only the wait for late reports at exit is gone.
func noExitSleep(gorace string) string {
	return "GORACE=" + strings.TrimSpace(gorace+" atexit_sleep_ms=0")
}

// pid is the job server's process id.
func (js *jobServer) pid() int { return js.cmd.Process.Pid }

// exitStatus describes how the process ended, if it has.
func (js *jobServer) exitStatus() string {
	select {
	case <-js.exited:
		if st := js.cmd.ProcessState; st != nil {
			return st.String()
		}
		return "not started"
	default:
		return "still running"
	}
}

// close ends the job server process: it closes the process's standard input,
// on which it exits, and kills it if it has not exited after a while.
func (js *jobServer) close() error {
	if js.conn != nil {
		js.conn.Close()
	}
	js.stdin.Close()
	select {
	case <-js.exited:
		return nil
	case <-time.After(5 * time.Second):
	}
	js.cmd.Process.Kill()
	select {
	case <-js.exited:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("workertest: the Prism job server process did not exit after SIGKILL")
	}
}
