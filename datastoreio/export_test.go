package datastoreio

import (
	"sync/atomic"
	"time"
)

// FastRetries shortens the backoff for a test and returns a function that
// restores it.
func FastRetries() func() {
	old := readRetries
	readRetries.Initial, readRetries.Max = 5*time.Millisecond, 50*time.Millisecond
	return func() { readRetries = old }
}

// FastThrottle shortens the adaptive throttling's wait for a test and
// returns a function that restores it.
func FastThrottle() func() {
	old := adaptiveDelay
	adaptiveDelay = 5 * time.Millisecond
	return func() { adaptiveDelay = old }
}

// AlternateThrottle makes the adaptive throttlers made from now on draw 0,
// 1, 0, 1, ... instead of random numbers: a commit the rule may hold back
// is held back once, then let through. It returns a function that restores
// the random source.
func AlternateThrottle() func() {
	old := adaptiveRand
	var n atomic.Int64
	adaptiveRand = func() float64 { return float64((n.Add(1) + 1) % 2) }
	return func() { adaptiveRand = old }
}

// SetClock makes reads of the snapshot at `at` check their snapshot's age
// against f instead of time.Now (reads of other snapshots keep the real
// time), and returns a function that restores time.Now.
func SetClock(at time.Time, f func() time.Time) func() {
	clock.Store(&snapshotClock{at: at, now: f})
	return func() { clock.Store(nil) }
}
