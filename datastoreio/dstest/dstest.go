// Package dstest runs Google's Cloud Datastore emulator for tests, so that
// tests exercise the real server and the official client over the wire.
//
// # Which emulator
//
// When DATASTORE_EMULATOR_HOST is set, the emulator it names is used as it is:
// dstest neither starts nor stops it, and Reset clears it. Otherwise dstest
// starts the emulator that ships with the Google Cloud CLI
// (platform/cloud-datastore-emulator/CloudDatastore.jar under the SDK root) on
// a free loopback port, in testing mode (strong consistency, in memory). It
// runs Java directly on the jar (with C1 compilation only, which suits
// short runs), in its own process group, with the kernel
// told to kill it if the test process dies, and Stop kills the group, so no
// Java process outlives the tests. The SDK root is found through
// CLOUDSDK_ROOT_DIR, the usual install locations, or `gcloud info`; Java
// through JAVA or PATH. Start-up takes about 2 seconds.
//
// # Sharing one emulator
//
// Starting costs seconds, so a test binary should share one emulator. Call
// RunShared from TestMain: every Start in the binary then returns the same
// emulator, started on first use (a worker process that never runs a test
// never starts one), and RunShared stops it when the tests are done. While it
// runs, DATASTORE_EMULATOR_HOST and DATASTORE_PROJECT_ID are set in the
// process environment, so that clients created anywhere in the process, and
// processes it starts (workers of internal/workertest), find it.
//
//	func TestMain(m *testing.M) {
//		flag.Parse()
//		beam.Init()
//		os.Exit(dstest.RunShared(m))
//	}
//
// Tests sharing an emulator keep out of each other's way with distinct
// namespaces or kinds (Namespace gives one per test); Reset drops all data
// and suits only tests that do not run in parallel with others.
//
// # When it cannot start
//
// Start fails the test with a message saying what is missing (Java, the
// Cloud SDK, the emulator component) under CI=true, and skips it otherwise.
package dstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/datastore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultProject is the project id tests use against an emulator dstest
// started (the emulator accepts any id).
const DefaultProject = "dstest-project"

// jvmFlags are the emulator JVM's options. C1 compilation only
// (TieredStopAtLevel=1): a test run is over before the JVM's optimising
// compiler pays for itself. Measured on a shared 2-core machine (one pair
// of runs, so roughly) with the datastoreio tests: the emulator took 62 s
// of CPU instead of 73 and loaded 20,000 entities in 11 s instead of 28,
// while its queries ran about as fast. JAVA_TOOL_OPTIONS still applies,
// before these.
var jvmFlags = []string{"-XX:TieredStopAtLevel=1"}

// startTimeout bounds the emulator's start-up.
const startTimeout = 60 * time.Second

// Emulator is a running Cloud Datastore emulator.
type Emulator struct {
	host    string
	project string

	cmd     *exec.Cmd // nil when the emulator was not started by dstest
	out     *tailBuffer
	exited  chan struct{}
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// Host is the emulator's address, host:port, as DATASTORE_EMULATOR_HOST takes it.
func (e *Emulator) Host() string { return e.host }

// Project is the project id to use with the emulator: DATASTORE_PROJECT_ID
// when the emulator came from the environment and that is set, DefaultProject
// otherwise.
func (e *Emulator) Project() string { return e.project }

// Started reports whether dstest started this emulator (and Stop stops it).
func (e *Emulator) Started() bool { return e.cmd != nil }

// NewClient returns a client of the official library connected to the
// emulator, for Project and the default database. The caller closes it.
func (e *Emulator) NewClient(ctx context.Context) (*datastore.Client, error) {
	return e.NewClientWithDatabase(ctx, "")
}

// NewClientWithDatabase is NewClient for a named database.
func (e *Emulator) NewClientWithDatabase(ctx context.Context, database string) (*datastore.Client, error) {
	c, err := datastore.NewClientWithDatabase(ctx, e.project, database, e.ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("dstest: client of the emulator at %s: %w", e.host, err)
	}
	return c, nil
}

// ClientOptions are the options that point a client of the official library
// at the emulator without credentials, whatever the environment says.
func (e *Emulator) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint("passthrough:///" + e.host),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
	}
}

// Reset deletes every entity in the emulator (its POST /reset).
func (e *Emulator) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.host+"/reset", nil)
	if err != nil {
		return fmt.Errorf("dstest: reset: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("dstest: reset of the emulator at %s: %w", e.host, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("dstest: reset of the emulator at %s: %s: %s", e.host, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// Stop stops an emulator dstest started: it signals its process group, waits
// up to 10 seconds, then kills the group. It does nothing for an emulator
// taken from the environment. It is safe to call more than once.
func (e *Emulator) Stop() error {
	if e.cmd == nil {
		return nil
	}
	e.stopOnce.Do(func() {
		pgid := e.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-e.exited
		}
		// Anything left in the group (there should be nothing) goes too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
	return e.stopErr
}

// Output returns the last lines the emulator printed (dstest-started only).
func (e *Emulator) Output() string {
	if e.out == nil {
		return ""
	}
	return e.out.String()
}

// New returns the emulator named by DATASTORE_EMULATOR_HOST when that is set,
// and starts one otherwise. The caller must Stop it.
func New(ctx context.Context) (*Emulator, error) {
	if host := os.Getenv("DATASTORE_EMULATOR_HOST"); host != "" {
		project := os.Getenv("DATASTORE_PROJECT_ID")
		if project == "" {
			project = DefaultProject
		}
		host = strings.TrimPrefix(strings.TrimPrefix(host, "http://"), "https://")
		e := &Emulator{host: host, project: project}
		if err := waitReady(ctx, e, 10*time.Second); err != nil {
			return nil, fmt.Errorf("dstest: DATASTORE_EMULATOR_HOST=%s names no running emulator: %w", host, err)
		}
		return e, nil
	}
	return start(ctx)
}

// ErrMissing wraps the errors of New that say a part needed to start the
// emulator is not installed.
var ErrMissing = errors.New("dstest: cannot start the Cloud Datastore emulator")

func start(ctx context.Context) (*Emulator, error) {
	java, jar, err := locate()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("dstest: no free loopback port: %w", err)
		}
		e, err := launch(ctx, java, jar, port)
		if err == nil {
			return e, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func launch(ctx context.Context, java, jar string, port int) (*Emulator, error) {
	host := fmt.Sprintf("localhost:%d", port)
	cmd := exec.Command(java, append(jvmFlags, "-cp", jar, "com.google.cloud.datastore.emulator.CloudDatastore",
		"start", "--host=localhost", fmt.Sprintf("--port=%d", port), "--testing")...)
	out := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = os.TempDir()
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dstest: starting %s: %w", java, err)
	}
	e := &Emulator{host: host, project: DefaultProject, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		e.waitErr = cmd.Wait()
		close(e.exited)
	}()
	if err := waitReady(ctx, e, startTimeout); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("dstest: the emulator on port %d did not come up: %w\nits output:\n%s", port, err, e.Output())
	}
	return e, nil
}

// waitReady polls the emulator's HTTP root until it answers "Ok".
func waitReady(ctx context.Context, e *Emulator, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.host+"/", nil)
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET / answered %s: %s", resp.Status, bytes.TrimSpace(body))
		}
		last = err
		if e.exited != nil {
			select {
			case <-e.exited:
				return fmt.Errorf("the emulator exited (%v)", e.waitErr)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// locate finds Java and the emulator's jar, or says what is missing.
func locate() (java, jar string, err error) {
	java = os.Getenv("JAVA")
	if java == "" {
		java, err = exec.LookPath("java")
		if err != nil {
			return "", "", fmt.Errorf("%w: Java is not installed (no java on PATH and JAVA unset; apt-get install default-jre-headless)", ErrMissing)
		}
	}
	jar, tried := emulatorJar()
	if jar == "" {
		return "", "", fmt.Errorf("%w: the Cloud Datastore emulator is not installed (from Google's Cloud SDK apt repository: apt-get install google-cloud-cli google-cloud-cli-datastore-emulator; or gcloud components install cloud-datastore-emulator; in a clone of sdfio, make deps installs it); looked for %s", ErrMissing, strings.Join(tried, ", "))
	}
	return java, jar, nil
}

// emulatorJar returns the emulator's jar under the first SDK root that has
// it ("" when none has), and the paths it tried. internal/setup/deps.sh,
// which `make deps` runs, looks in the same places, in the same order.
func emulatorJar() (jar string, tried []string) {
	for _, root := range sdkRoots() {
		p := filepath.Join(root, "platform", "cloud-datastore-emulator", "CloudDatastore.jar")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", tried
}

func sdkRoots() []string {
	var roots []string
	if r := os.Getenv("CLOUDSDK_ROOT_DIR"); r != "" {
		roots = append(roots, r)
	}
	roots = append(roots, "/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk", "/opt/google-cloud-sdk")
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, "google-cloud-sdk"))
	}
	for _, r := range roots {
		if _, err := os.Stat(r); err == nil {
			return roots
		}
	}
	// Ask gcloud (slow: it starts Python) only when no usual place exists.
	if gcloud, err := exec.LookPath("gcloud"); err == nil {
		if out, err := exec.Command(gcloud, "info", "--format=value(installation.sdk_root)").Output(); err == nil {
			if r := strings.TrimSpace(string(out)); r != "" {
				roots = append(roots, r)
			}
		}
	}
	return roots
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// The shared emulator of RunShared.
var shared struct {
	mu      sync.Mutex
	enabled bool
	e       *Emulator
	err     error
}

// RunShared runs m.Run with one emulator shared by every Start of the test
// binary, started on first use, and stops it afterwards. It returns m.Run's
// exit code. See the package doc.
func RunShared(m *testing.M) int { return RunSharedFunc(m.Run) }

// RunSharedFunc is RunShared for a TestMain that runs the tests through
// another function, such as ptest.MainRetWithDefault:
//
//	os.Exit(dstest.RunSharedFunc(func() int { return ptest.MainRetWithDefault(m, "prism") }))
func RunSharedFunc(run func() int) int {
	shared.mu.Lock()
	shared.enabled = true
	shared.mu.Unlock()
	code := run()
	shared.mu.Lock()
	e := shared.e
	shared.e, shared.enabled = nil, false
	shared.mu.Unlock()
	if e != nil {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}

func sharedEmulator() (e *Emulator, err error, ok bool) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.enabled {
		return nil, nil, false
	}
	if shared.e == nil && shared.err == nil {
		shared.e, shared.err = New(context.Background())
		if shared.err == nil {
			os.Setenv("DATASTORE_EMULATOR_HOST", shared.e.host)
			os.Setenv("DATASTORE_PROJECT_ID", shared.e.project)
		}
	}
	return shared.e, shared.err, true
}

// Shared returns the emulator of RunShared, starting it on first use, for
// work a TestMain starts before its tests (loading a fixture in the
// background, say). It fails outside RunShared, and with the error Start
// would report when no emulator can be had; a test that then calls Start
// gets the same error, as a failure under CI=true.
func Shared() (*Emulator, error) {
	e, err, ok := sharedEmulator()
	if !ok {
		return nil, errors.New("dstest: Shared called outside RunShared")
	}
	return e, err
}

// Start returns an emulator for the test: the shared one under RunShared, the
// one named by DATASTORE_EMULATOR_HOST, or a new one that is stopped when the
// test ends. When none can be had it fails the test under CI=true and skips
// it otherwise, saying what is missing.
func Start(tb testing.TB) *Emulator {
	tb.Helper()
	e, err, ok := sharedEmulator()
	if !ok {
		e, err = New(context.Background())
		if err == nil {
			tb.Cleanup(func() {
				if err := e.Stop(); err != nil {
					tb.Errorf("dstest: stopping the emulator: %v", err)
				}
			})
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%v (CI=true: a missing emulator is a failure)", err)
		}
		tb.Skip(err)
	}
	return e
}

var nsUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// Namespace returns a namespace for tb alone: its name, made safe, with a
// suffix unique within the process. Tests that share an emulator write and
// read there to stay out of each other's way.
func Namespace(tb testing.TB) string {
	nsSeq.Lock()
	nsSeq.n++
	n := nsSeq.n
	nsSeq.Unlock()
	name := nsUnsafe.ReplaceAllString(tb.Name(), "_")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return fmt.Sprintf("%s.%d.%d", name, os.Getpid(), n)
}

var nsSeq struct {
	sync.Mutex
	n int
}
