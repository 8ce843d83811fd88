package bqflink_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"google.golang.org/grpc/peer"

	"github.com/sdfio/sdfio/bigqueryio/bqtest"
	"github.com/sdfio/sdfio/bigqueryio/bqwrite"
	"github.com/sdfio/sdfio/internal/flinktest"
	"github.com/sdfio/sdfio/internal/workertest"
)

// The batch write's exactly-once write (PENDING streams, one per append
// bundle and table, finalized when the bundle ends; then one
// BatchCommitWriteStreams of them all in the commit step) on Flink, with
// the SDK worker process doing the work killed with SIGKILL: while it
// appends, and while it commits.
//
// What Flink 1.19 does with Beam 2.62's batch job (the DataSet API) when
// a task fails, from the job server's log: the job's 38 tasks form 4
// pipelined regions (the append step's output, which feeds both the
// GroupByKey and the failures' side input, goes through blocking
// exchanges), and its default failover strategy
// (RestartPipelinedRegionFailoverStrategy) restarts the failed task's
// region and the regions downstream of it ("18 tasks will be restarted"
// for an append task, "14" for the commit task), keeping the finished
// regions' results; the job goes RUNNING -> RESTARTING -> RUNNING. So a
// restarted commit step reads the same stream names, and a commit the
// killed attempt applied is answered STREAM_ALREADY_COMMITTED, which the
// commit step takes as its own. With jobmanager.execution.failover-strategy
// full (RestartAllFailoverStrategy: "38 tasks will be restarted") the
// append step runs again, into new streams, and the restarted commit step
// commits those too.
//
// The kill is timed from bqtest, in this process: its hooks slow the
// appends (WriteFaults.OnAppend) and hold a commit as it arrives or once
// it applied (WriteFaults.OnCommit), and the worker killed is the one
// whose connection made the call (a worker's sockets, in /proc, matched
// against the call's peer), not any worker.

// killTable is the table of the kill tests.
const killTable = "p.d.killed"

// killCase is one kill test.
type killCase struct {
	name string
	n    int // rows: simpleOf(0..n-1)
	opts []bqwrite.WriteOption
	// appendDelay slows each AppendRows request (OnAppend), so that the
	// append step lasts long enough to be killed in.
	appendDelay time.Duration
	// killAtAppends: kill a worker holding a connection to the server
	// once the server has received this many appends (0: not in the
	// append step).
	killAtAppends int
	// killCommit: kill the worker of the first commit call, held by
	// OnCommit as it arrives (before it acts) or, with afterApply, once
	// it has committed, before its answer.
	killCommit, afterApply bool
	// failover is Flink's jobmanager.execution.failover-strategy: "" for
	// its default (region), or "full" (every task restarted).
	failover string
}

// TestWriteKilled runs bqwrite.Write's batch exactly-once write of n
// rows (reshuffled over Flink's two subtasks) on Flink with restarts
// allowed, killing with SIGKILL:
//
//   - append: a worker that is appending, once 20 appends have come and
//     no stream is finalized yet (appends slowed to 40 ms each, 2,000-byte
//     appends), so the kill lands inside the append step, and appends go
//     on after it (the restarted job's);
//   - commit before apply: the worker whose BatchCommitWriteStreams call
//     has just arrived, held until its caller is gone, so nothing is
//     committed by the killed attempt;
//   - commit after apply: the worker whose commit has just applied, its
//     answer held until the caller is gone: the rows are visible, and
//     the attempt that committed them dies before it can tell Flink;
//   - commit after apply, full restart: the same, with Flink restarting
//     every task (failover strategy full): the append step runs again, as
//     it also would under region failover if the TaskManager holding its
//     results were lost with the worker.
//
// Every case then wants the table to hold each id of 0..n-1 exactly once.
// The last fails until the commit step is idempotent across re-runs of
// the append step: the killed attempt's commit and the restarted one's
// each make every row visible.
func TestWriteKilled(t *testing.T) {
	for _, c := range []killCase{
		{name: "append", n: 12000, opts: []bqwrite.WriteOption{bqwrite.WithMaxAppendBytes(2000)},
			appendDelay: 40 * time.Millisecond, killAtAppends: 20},
		{name: "commit before apply", n: 3000, opts: []bqwrite.WriteOption{bqwrite.WithMaxAppendBytes(4000)},
			killCommit: true},
		{name: "commit after apply", n: 3000, opts: []bqwrite.WriteOption{bqwrite.WithMaxAppendBytes(4000)},
			killCommit: true, afterApply: true},
		{name: "commit after apply, full restart", n: 3000, opts: []bqwrite.WriteOption{bqwrite.WithMaxAppendBytes(4000)},
			killCommit: true, afterApply: true, failover: "full"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.failover == "full" && os.Getenv("SDFIO_FLINK_KNOWN_DEFECTS") == "" {
				// Known, with its fix designed (docs/DESIGN.md, "Batch exactly
				// once on Flink"): a whole-job restart after the commit
				// appends and commits again, every row twice.
				t.Skip("a known defect of the batch write under Flink's full failover; SDFIO_FLINK_KNOWN_DEFECTS=1 runs it")
			}
			runKilled(t, c)
		})
	}
}

// killRecord is what the watch saw when it killed.
type killRecord struct {
	stats   bqtest.WriteStats // the server's counts
	streams map[string]bool   // the streams that existed (the killed attempt's)
}

func runKilled(t *testing.T, c killCase) {
	srv := newServer(t)
	srv.AddDataset("p", "d", "")
	_, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	serverPort, _ := strconv.Atoi(port)

	// commitCalls receives the peer of the first commit call, as it
	// arrives or once it applied (c.afterApply); the call is held until
	// its caller has gone (or 30 s, if nobody kills it).
	commitCalls := make(chan net.Addr, 1)
	var commitLog []string
	var mu sync.Mutex
	start := time.Now()
	srv.SetWriteFaults(bqtest.WriteFaults{
		OnAppend: func(int) error {
			time.Sleep(c.appendDelay)
			return nil
		},
		OnCommit: func(ctx context.Context, call int, applied bool) {
			p, _ := peer.FromContext(ctx)
			mu.Lock()
			commitLog = append(commitLog, fmt.Sprintf("%.1fs: commit call %d from %v, applied %v", time.Since(start).Seconds(), call, p.Addr, applied))
			mu.Unlock()
			if !c.killCommit || call != 1 || applied != c.afterApply {
				return
			}
			commitCalls <- p.Addr
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Second):
			}
		},
	})

	p, s := beam.NewPipelineWithRoot()
	rows := beam.Reshuffle(s, beam.ParDo(s, &genSimpleFn{N: c.n}, beam.Impulse(s)))
	res := bqwrite.Write(s, killTable, rows, writeOpts(srv, c.opts...)...)
	checkIDs(s, "results", beam.ParDo(s, resultText, res.Results), []string{fmt.Sprintf("%s %d rows", killTable, c.n)})
	checkIDs(s, "failed", beam.ParDo(s, failedText, res.FailedRows), nil)

	var kill *killRecord
	record := func() *killRecord {
		r := &killRecord{stats: srv.WriteStats(), streams: map[string]bool{}}
		for _, ws := range srv.WriteStreams(killTable) {
			r.streams[ws.Name] = true
		}
		mu.Lock()
		kill = r
		mu.Unlock()
		return r
	}
	watch := func(ctx context.Context, l *workertest.Live) {
		var victim workertest.Worker
		if c.killAtAppends > 0 {
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(5 * time.Millisecond):
				}
				if st := srv.WriteStats(); st.Appends < c.killAtAppends {
					continue
				}
				ws := workersConnected(l, serverPort, 0)
				if len(ws) == 0 {
					continue
				}
				victim = ws[0]
				break
			}
		} else {
			var addr net.Addr
			select {
			case <-ctx.Done():
				return
			case addr = <-commitCalls:
			}
			_, cport, _ := net.SplitHostPort(addr.String())
			clientPort, _ := strconv.Atoi(cport)
			ws := workersConnected(l, serverPort, clientPort)
			if len(ws) != 1 {
				t.Errorf("the commit call from %v: %d workers hold its connection (%v)", addr, len(ws), ws)
				return
			}
			victim = ws[0]
		}
		r := record()
		if err := l.Kill(victim.PID); err != nil {
			t.Errorf("kill %d: %v", victim.PID, err)
		}
		t.Logf("%.1fs: killed worker %s (pid %d); server then: %+v", time.Since(start).Seconds(), victim.ID, victim.PID, r.stats)
	}

	opts := append(batchRestarts(t, 3, 500*time.Millisecond, c.failover),
		flinktest.WithWorkertest(workertest.WithTimeout(runTimeout), workertest.WithWatch(watch)))
	run, err := flinktest.Run(t, p, opts...)
	st := srv.WriteStats()
	mu.Lock()
	k := kill
	for _, l := range commitLog {
		t.Log(l)
	}
	mu.Unlock()
	restarts := flinktest.Restarts(run.RunnerOutput)
	t.Logf("Flink run %v, %d workers started, %d killed, %d job restarts; server: %+v", run.Elapsed, len(run.Workers), run.Kills, restarts, st)
	for _, l := range failoverLines(run.RunnerOutput) {
		t.Logf("job server: %s", l)
	}
	committed := committedBy(t, srv, k)
	d, m := audit(t, srv, killTable, c.n)
	if err != nil {
		t.Fatalf("the run failed: %v", err)
	}
	checkCounters(t, run, "results", 1)
	checkCounters(t, run, "failed", 0)

	// The kill landed where it was meant to.
	switch {
	case k == nil:
		t.Fatal("no worker was killed")
	case run.Kills != 1:
		t.Errorf("%d kills, want 1", run.Kills)
	case restarts < 1:
		t.Errorf("no restart of the job in the job server's log")
	}
	if c.killAtAppends > 0 {
		if k.stats.StreamsFinalized != 0 || k.stats.Commits != 0 {
			t.Errorf("killed after the append step: %+v", k.stats)
		}
		if st.Appends <= k.stats.Appends || st.StreamsCreated <= len(k.streams) {
			t.Errorf("no append after the kill: %d appends and %d streams at the kill, %d and %d in all", k.stats.Appends, len(k.streams), st.Appends, st.StreamsCreated)
		}
	}
	if c.killCommit {
		want := 0
		if c.afterApply {
			want = 1
		}
		if k.stats.Commits != want || k.stats.StreamsFinalized != k.stats.StreamsCreated {
			t.Errorf("at the kill the server had %+v: want %d commits, every stream finalized", k.stats, want)
		}
	}
	if d+m > 0 {
		t.Errorf("not exactly once after the kill: %d duplicate rows, %d missing; streams committed: %v", d, m, committed)
	}
}

// batchRestarts is flinktest.WithRestarts with the failover strategy, if
// not "".
func batchRestarts(t *testing.T, n int, delay time.Duration, failover string) []flinktest.Option {
	t.Helper()
	opts := []flinktest.Option{flinktest.WithRestarts(n, delay)}
	if failover != "" {
		opts = append(opts, flinktest.WithFailover(failover))
	}
	return opts
}

// committedBy logs the table's streams, which attempt made them (the
// killed one: those that existed at the kill) and whether they were
// committed, and returns the committed ones by attempt.
func committedBy(t *testing.T, srv *bqtest.Server, k *killRecord) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, ws := range srv.WriteStreams(killTable) {
		who := "restarted"
		if k != nil && k.streams[ws.Name] {
			who = "killed"
		}
		t.Logf("stream %s (%s attempt): %d rows, finalized %v, committed %v", filepath.Base(ws.Name), who, ws.Rows, ws.Finalized, ws.Committed)
		if ws.Committed {
			out[who] = append(out[who], fmt.Sprintf("%s (%d rows)", filepath.Base(ws.Name), ws.Rows))
		}
	}
	return out
}

// failoverLines are what the job server's log says Flink did about the
// failure: its restart and failover strategies, its pipelined regions,
// how many of the job's tasks it scheduled at first, which failed, how
// many it restarted, and the job's state changes.
func failoverLines(log string) []string {
	keep := regexp.MustCompile(`Using restart back off|Using failover strategy|pipelined regions|tasks will be restarted|switched from state`)
	failed := regexp.MustCompile(`ExecutionGraph - (.*) \([0-9a-f_]+\) switched from RUNNING to FAILED`)
	scheduled := regexp.MustCompile(`ExecutionGraph - (.*) \(([0-9a-f]+_[0-9a-f]+_[0-9]+)_[0-9]+\) switched from CREATED to SCHEDULED`)
	tasks := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if m := scheduled.FindStringSubmatch(l); m != nil {
			tasks[m[2]] = true // a task (vertex and subtask) of the job, any attempt
			continue
		}
		if m := failed.FindStringSubmatch(l); m != nil {
			out = append(out, l[:min(len(l), 12)]+" task failed: "+m[1])
			continue
		}
		if keep.MatchString(l) {
			if k := strings.Index(l, " - "); k >= 0 {
				l = l[:min(len(l), 12)] + l[k+2:]
			}
			out = append(out, l)
		}
	}
	return append(out, fmt.Sprintf("the job has %d tasks", len(tasks)))
}

// audit compares the table with the ids 0..n-1: every id exactly once.
func audit(t *testing.T, srv *bqtest.Server, table string, n int) (dups, missing int) {
	t.Helper()
	rows, err := srv.TableRows(table)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, r := range rows {
		id := r[0].(int64)
		if id < 0 || id >= int64(n) {
			t.Errorf("row id %d in %s, not one of the input's", id, table)
		}
		seen[id]++
	}
	var dupIDs, missIDs []int64
	perID := map[int]int{} // how many ids have each count
	for id := int64(0); id < int64(n); id++ {
		c := seen[id]
		perID[c]++
		switch {
		case c == 0:
			missIDs = append(missIDs, id)
		case c > 1:
			dups += c - 1
			dupIDs = append(dupIDs, id)
		}
	}
	t.Logf("%s: %d rows, %d distinct of %d; ids by times present %v; %d duplicate rows (ids %v); %d missing (ids %v)",
		table, len(rows), len(seen), n, perID, dups, first(dupIDs), len(missIDs), first(missIDs))
	return dups, len(missIDs)
}

func first(ids []int64) []int64 {
	if len(ids) > 10 {
		return ids[:10]
	}
	return ids
}

// workersConnected are the live workers holding an established TCP
// connection to the server's port on this machine (from clientPort, if
// not 0): a worker's sockets (/proc/<pid>/fd) matched against the
// connections of /proc/net/tcp and tcp6. Linux only.
func workersConnected(l *workertest.Live, serverPort, clientPort int) []workertest.Worker {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "01" { // 01: ESTABLISHED
				continue
			}
			if portOf(fs[2]) == serverPort && (clientPort == 0 || portOf(fs[1]) == clientPort) {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
	}
	var out []workertest.Worker
	for _, w := range l.Workers() {
		dir := fmt.Sprintf("/proc/%d/fd", w.PID)
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(ents, func(e os.DirEntry) bool {
			link, err := os.Readlink(filepath.Join(dir, e.Name()))
			return err == nil && inodes[link]
		}) {
			out = append(out, w)
		}
	}
	return out
}

// portOf is the port of a /proc/net/tcp address, ADDR:PORT in hex.
func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	p, err := strconv.ParseInt(addr[i+1:], 16, 32)
	if err != nil {
		return -1
	}
	return int(p)
}
