package datastoreio

import (
	"context"
	"flag"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sdfio/sdfio/internal/retry"
)

// The ramp-up rule of Datastore's best practices ("500/50/5"), as Beam
// Java's RampupThrottlingFn applies it: at most RampupBaseBudget operations
// a second at first, shared by all workers, growing by 50% every
// RampupInterval after the first RampupInterval.
const (
	RampupBaseBudget = 500
	RampupInterval   = 5 * time.Minute
	// DefaultHintNumWorkers is the number of workers the budget is divided
	// by on a runner whose worker count is not known at construction: Beam
	// Java's default.
	DefaultHintNumWorkers = 500
)

// rampupBudget is the number of operations one of workers may start in one
// second, elapsed after the ramp-up began: RampupBaseBudget/workers *
// 1.5^max(0, (m-5)/5), m the whole minutes elapsed, as in Java (500 at
// minute 5, 750 at 10, 1125 at 15, 3796 at 30 for one worker), and at least
// one. It returns math.MaxInt once the budget no longer bounds anything.
func rampupBudget(elapsed time.Duration, workers int) int {
	if workers < 1 {
		workers = 1
	}
	minutes := float64(int64(elapsed / time.Minute))
	interval := float64(int64(RampupInterval / time.Minute))
	growth := math.Max(0, (minutes-interval)/interval)
	b := RampupBaseBudget / float64(workers) * math.Pow(1.5, growth)
	if b >= math.MaxInt32 {
		return math.MaxInt
	}
	return max(1, int(b))
}

// rampup enforces the ramp-up budget of one write step in one worker
// process. All DoFn instances of the step in the process share it (see
// rampupFor), so the process never starts more than its share however many
// bundles run at once. Time is counted in one-second windows aligned to
// the clock's seconds (Java's MovingFunction of one one-second bucket); an
// operation over the window's budget waits for the next window.
//
// The ramp-up starts at the process's first operation. A worker that joins
// later starts its own ramp-up from the base budget, below the share of
// the workers that started first, so the sum over the workers never
// exceeds the shared budget. (Java takes one start time for the whole
// pipeline from a side input; ours needs no side input and errs on the
// safe side.)
type rampup struct {
	workers int
	now     func() time.Time
	sleep   func(context.Context, time.Duration) error

	mu     sync.Mutex
	first  time.Time // zero before the first operation
	window int64     // Unix second of the current window
	used   int       // operations started in the current window
}

func newRampup(workers int, now func() time.Time, sleep func(context.Context, time.Duration) error) *rampup {
	return &rampup{workers: max(workers, 1), now: now, sleep: sleep}
}

// acquire waits until one more operation fits the budget and counts it. It
// returns how long it waited, and ctx's error if ctx ended the wait.
func (r *rampup) acquire(ctx context.Context) (time.Duration, error) {
	var waited time.Duration
	for {
		d := r.tryAcquire()
		if d == 0 {
			return waited, nil
		}
		if err := r.sleep(ctx, d); err != nil {
			return waited, err
		}
		waited += d
	}
}

// tryAcquire counts one operation and returns 0 when it fits the budget of
// the current window; otherwise it returns the time to the next window.
func (r *rampup) tryAcquire() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.first.IsZero() {
		r.first = now
	}
	sec := now.Unix()
	if sec != r.window {
		r.window, r.used = sec, 0
	}
	if r.used < rampupBudget(now.Sub(r.first), r.workers) {
		r.used++
		return 0
	}
	return max(time.Unix(sec+1, 0).Sub(now), time.Millisecond)
}

// rampups holds the process's ramp-up state of every write step, by the
// step's id (writeFn.StepID).
var rampups struct {
	sync.Mutex
	m map[string]*rampup
}

// rampupFor returns the process's ramp-up state of step id.
func rampupFor(id string, workers int) *rampup {
	rampups.Lock()
	defer rampups.Unlock()
	if rampups.m == nil {
		rampups.m = make(map[string]*rampup)
	}
	r := rampups.m[id]
	if r == nil {
		r = newRampup(workers, time.Now, retry.Sleep)
		rampups.m[id] = r
	}
	return r
}

// localRunners run every worker in one process.
var localRunners = map[string]bool{"": true, "prism": true, "direct": true, "prismrunner": true, "directrunner": true}

// estimateWorkers is the number of worker processes the ramp-up budget is
// shared by when HintNumWorkers does not say: 1 on a local runner (the
// -runner flag empty, prism or direct); on Dataflow the -max_num_workers
// flag, else -num_workers, when set; DefaultHintNumWorkers otherwise, as in
// Java.
func estimateWorkers() int {
	runner := strings.ToLower(flagValue("runner"))
	if localRunners[runner] {
		return 1
	}
	if runner == "dataflow" || runner == "dataflowrunner" {
		for _, name := range []string{"max_num_workers", "num_workers"} {
			if n, err := strconv.Atoi(flagValue(name)); err == nil && n > 0 {
				return n
			}
		}
	}
	return DefaultHintNumWorkers
}

func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}
