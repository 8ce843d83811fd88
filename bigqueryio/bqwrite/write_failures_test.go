package bqwrite_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/workertest"
)

// TestWriteAppendErrorsFail: a permanent error of the service (OUT_OF_RANGE,
// INVALID_ARGUMENT, PERMISSION_DENIED) on an append that follows written
// ones, with more appends in flight behind it, fails the write with the
// service's message naming the table and the stream, and is not sent again:
// no offset is ever sent twice, and nothing becomes visible.
func TestWriteAppendErrorsFail(t *testing.T) {
	for _, c := range []struct {
		code codes.Code
		msg  string
	}{
		{codes.OutOfRange, "The offset is beyond stream, expected offset 1, received 2."},
		{codes.InvalidArgument, "Input schema has more fields than BigQuery schema."},
		{codes.PermissionDenied, "Permission 'TABLES_UPDATE_DATA' denied on resource."},
	} {
		t.Run(c.code.String(), func(t *testing.T) {
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			// The table the write makes reads as made an hour ago: a new
			// table's PERMISSION_DENIED is waited out (TestNewTableSettles).
			srv.SetWriteFaults(bqtest.WriteFaults{AppendErrorCode: c.code, AppendErrorMessage: c.msg, AppendErrorAfter: 3, CreatedAgo: time.Hour})
			p, s := beam.NewPipelineWithRoot()
			// One bundle (the direct runner does not split Create), so
			// one stream: appends 1-3 are written, 4 on are refused.
			bqwrite.Write(s, "p.d.perm", beam.Create(s, anys(simpleRows(3000))...), writeOpts(srv, bqwrite.WithMaxAppendBytes(4000))...)
			err := runFailing(p)
			if err == nil {
				t.Fatal("the write succeeded")
			}
			for _, want := range []string{"bqwrite.Write to p.d.perm", "projects/p/datasets/d/tables/perm/streams/", c.msg} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q: want %q in it", err, want)
				}
			}
			for at, n := range srv.AppendAttempts() {
				if n != 1 {
					t.Errorf("%s offset %d was sent %d times", at.Stream, at.Offset, n)
				}
			}
			st := srv.WriteStats()
			if st.AppendsWritten != 3 || st.InjectedFailures == 0 || st.Commits != 0 {
				t.Errorf("server %+v: want 3 appends written, injected failures, no commit", st)
			}
			if rows, err := srv.TableRows("p.d.perm"); err != nil || len(rows) != 0 {
				t.Errorf("table rows %d (%v): want none visible", len(rows), err)
			}
		})
	}
}

// TestWriteWorkerKilled: the worker process (internal/workertest: a
// separate process, as on Dataflow) is killed while it writes, after five
// appends were written and with the sixth held at the server (then ended
// unwritten, as the connection of a dead process is). The job fails (Prism
// v2.77 does not retry the bundle of a dead worker), and nothing is
// visible: the rows written are in a PENDING stream never committed,
// which the service lets expire.
func TestWriteWorkerKilled(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	killed := make(chan []int, 1)
	srv.SetWriteFaults(bqtest.WriteFaults{OnAppend: func(call int) error {
		if call != 6 {
			return nil
		}
		killed <- killWorkers(t)
		return status.Error(codes.Unavailable, "bqtest: the connection of a killed worker")
	}})
	const n = 3000
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.killed", beam.Create(s, anys(simpleRows(n))...), writeOpts(srv, bqwrite.WithMaxAppendBytes(4000))...)
	_, err := workertest.Run(t, p)
	select {
	case pids := <-killed:
		if len(pids) == 0 {
			t.Fatalf("no worker process was killed (run: %v)", err)
		}
	default:
		t.Fatalf("the sixth append never came (run: %v)", err)
	}
	if err == nil {
		t.Fatal("the job succeeded after its worker was killed")
	}
	// Two reports race: the pool's (the worker exited while its job ran)
	// and Prism's (the worker's connection dropped).
	if msg := err.Error(); !(strings.Contains(msg, "exited while its job was running") && strings.Contains(msg, "killed")) && !strings.Contains(msg, "SDK worker disconnected") {
		t.Errorf("error %q: want the killed worker reported", err)
	}
	if rows, err := srv.TableRows("p.d.killed"); err != nil || len(rows) != 0 {
		t.Errorf("table rows %d (%v): want none visible", len(rows), err)
	}
	st := srv.WriteStats()
	if st.AppendsWritten != 5 || st.Commits != 0 || st.StreamsCommitted != 0 {
		t.Errorf("server %+v: want 5 appends written, no commit", st)
	}
	pend := srv.PendingStreams("p.d.killed")
	if len(pend) != 1 || pend[0].Rows != st.RowsAppended || pend[0].Rows == 0 || pend[0].Rows >= n || pend[0].Visible != 0 || pend[0].Committed {
		t.Errorf("pending streams %+v (server wrote %d rows): want the one stream of the killed bundle, uncommitted", pend, st.RowsAppended)
	}
}

// killWorkers kills the SDK worker processes this test process started
// (workertest's, which run with --worker=true) and returns their pids.
func killWorkers(t *testing.T) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Errorf("listing processes: %v", err)
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after
		// its closing parenthesis.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte("--worker=true")) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Errorf("killing worker %d: %v", pid, err)
			continue
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Errorf("no worker process of pid %d found", os.Getpid())
	}
	return pids
}

// TestWriteFinalizeRetried: FinalizeWriteStream failing with INTERNAL or
// UNAVAILABLE is retried with the write's backoff, in SDK workers of their
// own processes (internal/workertest), and every row is written once: when
// the failed attempt had finalized the stream (its answer lost), the retry
// is answered the row count again, or STREAM_FINALIZED, and either is
// success. (Before: INTERNAL, which the client does not retry, failed the
// job.)
func TestWriteFinalizeRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults bqtest.WriteFaults
	}{
		{"internal", bqtest.WriteFaults{FinalizeErrorCode: codes.Internal, FinalizeErrorCalls: 2}},
		{"internal after apply, refused again", bqtest.WriteFaults{FinalizeErrorCode: codes.Internal, FinalizeErrorCalls: 1, FinalizeAfterApply: true, FinalizeAgainRefused: true}},
		{"unavailable after apply, count again", bqtest.WriteFaults{FinalizeErrorCode: codes.Unavailable, FinalizeErrorCalls: 2, FinalizeAfterApply: true}},
		// The client's own retry of UNAVAILABLE would see STREAM_FINALIZED
		// as the first answer: it is off, the write's own retry knows.
		{"unavailable after apply, refused again", bqtest.WriteFaults{FinalizeErrorCode: codes.Unavailable, FinalizeErrorCalls: 1, FinalizeAfterApply: true, FinalizeAgainRefused: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			srv.AddDataset("p", "d", "")
			srv.SetWriteFaults(tc.faults)
			const n = 2000
			p, s := beam.NewPipelineWithRoot()
			res := bqwrite.Write(s, "p.d.fin", beam.Create(s, anys(simpleRows(n))...), writeOpts(srv, bqwrite.WithMaxAppendBytes(8000))...)
			passert.Equals(s, beam.ParDo(s, resultText, res.Results), fmt.Sprintf("p.d.fin %d rows", n))
			if _, err := workertest.Run(t, p); err != nil {
				t.Fatal(err)
			}
			checkOnce(t, srv, "p.d.fin", n, nil)
			if st := srv.WriteStats(); st.InjectedFinalize != tc.faults.FinalizeErrorCalls || st.StreamsCommitted == 0 {
				t.Errorf("server %+v: want %d finalize failures injected, streams committed", st, tc.faults.FinalizeErrorCalls)
			}
		})
	}
}

// TestWriteFinalizeFailsLoudly: a finalize failing with a permanent error
// (PERMISSION_DENIED) fails the write at once naming the table and the
// stream, and nothing is visible.
func TestWriteFinalizeFailsLoudly(t *testing.T) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	srv.SetWriteFaults(bqtest.WriteFaults{FinalizeErrorCode: codes.PermissionDenied, FinalizeErrorCalls: 1000})
	p, s := beam.NewPipelineWithRoot()
	bqwrite.Write(s, "p.d.fin", beam.Create(s, anys(simpleRows(100))...), writeOpts(srv)...)
	err := runFailing(p)
	if err == nil || !strings.Contains(err.Error(), "bqwrite.Write to p.d.fin: finalizing stream projects/p/datasets/d/tables/fin/streams/") ||
		!strings.Contains(err.Error(), "PermissionDenied") {
		t.Fatalf("error %v: want the finalize's, naming the table and the stream", err)
	}
	if st := srv.WriteStats(); st.InjectedFinalize != 1 {
		t.Errorf("%d finalize calls failed, want 1 (a permanent error is not retried)", st.InjectedFinalize)
	}
	if rows, _ := srv.TableRows("p.d.fin"); len(rows) != 0 {
		t.Errorf("%d rows visible", len(rows))
	}
}
