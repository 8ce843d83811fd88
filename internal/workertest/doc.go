// Package workertest runs Beam Go pipelines in tests the way Dataflow and Flink
// run them: the pipeline is submitted to a Prism job server through Beam's
// portable job API, and every SDK worker is a separate operating-system process
// that runs the test binary itself.
//
// The default way of running tests, ptest on Prism, uses a LOOPBACK
// environment: the SDK harness runs as goroutines inside the test process.
// LOOPBACK already decodes every DoFn from the pipeline proto, so unregistered
// types and unexported DoFn fields fail there too, and Beam panics on
// registration after beam.Init. What LOOPBACK cannot catch is reliance on the
// state of the process that built the pipeline:
//
//   - package variables, flag values, sync.Once caches or singletons set up by
//     the test (or by pipeline construction) and read by a DoFn;
//   - files in Beam's in-memory filesystem (memfs://) or other in-process fakes;
//   - paths relative to the package directory (a worker runs in its own
//     scratch directory; pass absolute paths);
//   - anything the pipeline options do not carry to the worker.
//
// Under Run these fail the test, as they would fail on a cluster.
// Environment variables are inherited by the workers (so emulator addresses
// such as DATASTORE_EMULATOR_HOST set before Run reach them).
//
// # How it works
//
// Each Run starts a Prism job server of its own, in a process of its own: the
// test binary, which becomes a job server (in this package's init, before
// TestMain) when started with SDFIO_WORKERTEST_PRISM set, serves on a free
// port (Prism listens on every interface; Run and the workers connect through
// localhost) and exits when Run closes its standard input. Prism keeps
// state beyond a job that every server in a process shares (Beam v2.77.0 and v2.78.0
// reuses the responders of its control requests through a package-level
// pool, and a worker that disconnects while a request is outstanding can
// leave its error in one, to be read by a later job as the answer to its own
// request), so a job server in the test process would let one run's failure
// reach the next. (Under -race the job server is race-instrumented too, but
// a race inside Prism, such as v2.77.0 and v2.78.0's send on a worker's instruction
// channel against its close, is reported in the job server's output, which
// Run logs when it fails, not by the test process's race detector.) A job
// server costs a Run half a second to a second to start at a load of 12-18
// under -race, and a tenth of a second to end (it does not sleep at exit for
// late race reports, as a -race binary otherwise does for a second).
//
// Run also starts an external worker pool: a gRPC BeamFnExternalWorkerPool
// service on a loopback port. The pipeline is translated with an EXTERNAL
// environment (beam:env:external:v1) whose endpoint is that pool, a Go worker
// artifact is staged, and the job is submitted. When Prism asks the pool for
// a worker it does what Beam's Go container boot loader
// (sdks/go/container/boot.go) does: it reads the provision info, writes the
// pipeline options to a file named by PIPELINE_OPTIONS_FILE, retrieves the
// staged artifacts from Prism's artifact service, and executes the worker
// binary with --worker=true, --id, --control_endpoint, --logging_endpoint and
// --semi_persist_dir. The worker process's beam.Init call (made by TestMain)
// turns it into an SDK harness before any test runs. The worker connects
// back to Prism's control, data, state and logging services; Prism stops it
// through StopWorker when the job ends, and Run kills whatever is still alive
// before it returns, then ends the job server process. On Linux a worker also
// dies with the test process; a job server does everywhere (its standard
// input closes).
//
// The staged worker artifact is not the worker binary but a pointer to it: a
// header line and the test binary's absolute path (tens of bytes), which the
// pool retrieves before it executes that binary in place (the pool runs on the
// same machine as the test). Prism (v2.77.0, v2.78.0) fails a job whose worker has not
// opened its control connection one minute after Prism asked the pool for it
// (runners/prism/internal/execute.go: a fixed time.AfterFunc that no option
// or environment setting changes), and that minute covers everything the
// pool does before the worker starts, plus the worker's own start. Fetching
// the test binary (about 200 MB under -race) from Prism's artifact service
// within it took 10 to 51 s per worker at a load of 7.5 on two cores, and the
// job then failed with "didn't get control connection after 1m0s"; a run
// that staged it took 80-110 s at a load of 10-12. Booting a worker from the
// pointer took 30-130 ms at a load of 9-10, so it no longer races that
// minute. The worker still runs in a process of its own, from the same bytes
// a copy would have, with nothing of the test process but its environment
// and the pipeline options; what a fetched copy added was a test of Beam's
// artifact transfer, not of the pipeline's code.
//
// # What a test package must do
//
// TestMain must let a worker process become an SDK harness, i.e. parse flags and
// call beam.Init before running any tests:
//
//	func TestMain(m *testing.M) { workertest.Main(m) }
//
// ptest.Main(m) does the same. Everything the workers need must be registered
// in init() (register.DoFnNxM, register.EmitterN, beam.RegisterType, ...).
// A worker process is started with -test.run=^$, so if TestMain does not hand
// control to the harness the worker runs no tests and exits, and Run fails with
// a message saying so, instead of recursing.
//
// Runs are serialised within a test binary (one job, one Prism process and
// its workers at a time), and each Run is bounded by a timeout
// (WithTimeout, default 3 minutes, shortened to fit the test's deadline). A
// worker process that exits while its job is running fails the run at once,
// with the worker's output in the error.
//
// # Why EXTERNAL and not PROCESS
//
// Prism (v2.77.0, v2.78.0) also implements beam:env:process:v1
// (runners/prism/internal/environments.go, processEnvironment), but it starts
// the command with the arguments "--id='<id>'" and --provision_endpoint: the
// single quotes reach the process verbatim, as no shell is involved. A boot
// loader that uses the id as given, such as the Go container's boot.go, sends
// it as worker_id metadata, quotes included, and Prism refuses it as "read
// from context metadata but not registered in worker pool"; the worker exits, Prism only logs "process failed while running", and
// the job hangs. A boot command that strips the quotes works (tested). The
// EXTERNAL pool is used instead because it is the protocol Flink and Dataflow
// use for Go workers (the Go container's --worker_pool mode) and because it
// lets Run see a worker die, capture its output, and kill it.
package workertest
