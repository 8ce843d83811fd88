// Package streamtest holds what the tests of the module's sinks share to
// write unbounded input: a source and a watch on what the sink made
// visible while the pipeline runs.
package streamtest

import (
	"sync/atomic"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/transforms/periodic"
)

// Sequence is an unbounded PCollection of the int64s 0..n-1, one every
// every, the first a second after the call (so that the pipeline is up
// before the first).
func Sequence(s beam.Scope, n int, every time.Duration) beam.PCollection {
	start := time.Now().Add(time.Second)
	def := periodic.NewSequenceDefinition(start, start.Add(time.Duration(n)*every), every)
	return periodic.Sequence(s, beam.Create(s, def))
}

// WatchPartial calls count every 20 ms until stop is called; stop returns
// whether some call saw more than none and fewer than n: the sink made
// part of the input visible before the end.
func WatchPartial(count func() int, n int) (stop func() bool) {
	var partial atomic.Bool
	done, polled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if c := count(); c > 0 && c < n {
				partial.Store(true)
			}
		}
	}()
	return func() bool {
		close(done)
		<-polled
		return partial.Load()
	}
}
