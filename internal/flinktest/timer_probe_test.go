package flinktest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/state"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/timers"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"

	"github.com/sdfio/sdfio/internal/flinktest"
	"github.com/sdfio/sdfio/internal/workertest"
)

func init() {
	register.DoFn5x1[context.Context, state.Provider, timers.Provider, int64, int64, error]((*batchProbeFn)(nil))
	register.DoFn5x1[context.Context, state.Provider, timers.Provider, int64, int64, error]((*eventProbeFn)(nil))
	register.Function1x2(keyMod2)
}

func keyMod2(i int64) (int64, int64) { return i % 2, i }

// batchProbeFn keeps elements in a bag and writes them out as files when
// its processing-time timer fires (or, Direct, at once).
type batchProbeFn struct {
	Dir    string
	Direct bool
	Bag    state.Bag[int64]
	Flush  timers.ProcessingTime
}

// eventProbeFn is batchProbeFn with an event-time timer.
type eventProbeFn struct {
	Dir   string
	Bag   state.Bag[int64]
	Event timers.EventTime
}

func (f *eventProbeFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, k, v int64) error {
	if err := f.Bag.Add(sp, v); err != nil {
		return err
	}
	f.Event.Set(tp, time.Now().Add(300*time.Millisecond))
	return nil
}

func (f *eventProbeFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, k int64, timer timers.Context) error {
	vs, _, err := f.Bag.Read(sp)
	if err != nil {
		return err
	}
	for _, v := range vs {
		os.WriteFile(filepath.Join(f.Dir, fmt.Sprint(v)), nil, 0o644)
	}
	return f.Bag.Clear(sp)
}

func (f *batchProbeFn) ProcessElement(ctx context.Context, sp state.Provider, tp timers.Provider, k, v int64) error {
	if f.Direct {
		os.WriteFile(filepath.Join(f.Dir, fmt.Sprint("direct-", v)), nil, 0o644)
	}
	if err := f.Bag.Add(sp, v); err != nil {
		return err
	}
	f.Flush.Set(tp, time.Now().Add(300*time.Millisecond))
	return nil
}

func (f *batchProbeFn) OnTimer(ctx context.Context, sp state.Provider, tp timers.Provider, k int64, timer timers.Context) error {
	vs, _, err := f.Bag.Read(sp)
	if err != nil {
		return err
	}
	for _, v := range vs {
		os.WriteFile(filepath.Join(f.Dir, fmt.Sprint(v)), nil, 0o644)
	}
	return f.Bag.Clear(sp)
}

// TestProcessingTimeTimers is a probe (SDFIO_FLINK_PROBES=1) of a limit of
// Beam's Flink runner (2.62) that bigqueryio's streaming write designs
// around: a Go stateful DoFn's processing-time timers do not fire reliably
// in streaming mode (Beam Go's own integration tests skip
// TestTimers_ProcessingTime on Flink: "Flink doesn't support processing
// time timers"). Of 50 timers, each set 300 ms after its element, none fired
// within 3 s of the last element in two runs here and 45 in another. The
// probe fails once every one fires: then the runner may be relied on.
func TestProcessingTimeTimers(t *testing.T) {
	if os.Getenv("SDFIO_FLINK_PROBES") == "" {
		t.Skip("a probe of the runner; SDFIO_FLINK_PROBES=1 runs it")
	}
	processed, flushed := timerProbe(t, false)
	if processed == probeElements && flushed == probeElements {
		t.Errorf("every one of %d processing-time timers fired: the runner may now be relied on (docs/DESIGN.md's Flink section and bigqueryio's batching step can change)", probeElements)
	}
}

// TestEventTimeTimersFire: a Go stateful DoFn's event-time timers fire on
// Flink's streaming runner, as the watermark passes them: every element
// comes out through the timer.
func TestEventTimeTimersFire(t *testing.T) {
	if _, flushed := timerProbe(t, true); flushed != probeElements {
		t.Errorf("%d of %d elements output by the event-time timer", flushed, probeElements)
	}
}

const probeElements = 50

// timerProbe runs a periodic sequence of probeElements elements, 20 ms
// apart, into batchProbeFn (processing-time timer) or eventProbeFn
// (event-time) on Flink with checkpointing, and returns how many elements
// the DoFn processed and how many its timer output: the job is cancelled
// once every element is out through the timer, or 3 s after the last was
// processed.
func timerProbe(t *testing.T, event bool) (processed, flushed int) {
	dir := t.TempDir()
	p, s := beam.NewPipelineWithRoot()
	start := time.Now().Add(2 * time.Second)
	seq := periodic.Sequence(s, beam.Create(s, periodic.NewSequenceDefinition(start, start.Add(probeElements*20*time.Millisecond), 20*time.Millisecond)))
	if event {
		beam.ParDo0(s, &eventProbeFn{Dir: dir, Bag: state.MakeBagState[int64]("bag"), Event: timers.InEventTime("event")}, beam.ParDo(s, keyMod2, seq))
	} else {
		beam.ParDo0(s, &batchProbeFn{Dir: dir, Direct: true, Bag: state.MakeBagState[int64]("bag"), Flush: timers.InProcessingTime("flush")}, beam.ParDo(s, keyMod2, seq))
	}
	count := func(direct bool) int {
		es, _ := os.ReadDir(dir)
		c := 0
		for _, e := range es {
			if strings.HasPrefix(e.Name(), "direct-") == direct {
				c++
			}
		}
		return c
	}
	var allSince time.Time
	res, err := flinktest.Run(t, p, flinktest.WithCheckpointing(time.Second),
		flinktest.WithStopWhen(func() bool {
			if count(false) >= probeElements {
				return true
			}
			if count(true) >= probeElements && allSince.IsZero() {
				allSince = time.Now()
			}
			return !allSince.IsZero() && time.Since(allSince) > 3*time.Second
		}), flinktest.WithWorkertest(workertest.WithTimeout(time.Minute)))
	if err != nil {
		t.Fatal(err)
	}
	processed, flushed = count(true), count(false)
	if event {
		processed = flushed // eventProbeFn marks nothing directly
	}
	t.Logf("%d of %d elements processed, %d output by the timer, after %v (cancelled %v)", processed, probeElements, flushed, res.Elapsed, res.Cancelled)
	return processed, flushed
}
