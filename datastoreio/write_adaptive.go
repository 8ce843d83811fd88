package datastoreio

import (
	"math/rand/v2"
	"time"
)

// Adaptive throttling of commits, as Beam Java's DatastoreV1 writer does
// with its AdaptiveThrottler (client-side throttling from the Site
// Reliability Engineering book, "Handling Overload"): each writer keeps,
// over the last AdaptiveThrottleWindow in buckets of ten seconds, the
// number of commit attempts it wanted to make (requests) and the number
// the service accepted (accepts). Before each attempt it holds the commit
// back with probability
//
//	max(0, (requests - AdaptiveOverloadRatio*accepts) / (requests + 1))
//
// and then waits AdaptiveThrottleDelay before deciding again (the held-back
// attempt counts as a request, as in Java). A commit still in flight is
// left out of requests until it is answered: with MaxCommitsInFlight
// commits out at once, counting a sent commit before its answer would hold
// back the second commit of a writer's first two with probability 1/2,
// where Java's one commit at a time never meets the case. While the service accepts
// everything the probability is 0; when it refuses commits
// (RESOURCE_EXHAUSTED above all, but every failed attempt counts, as in
// Java), a writer sends at most about AdaptiveOverloadRatio times as many
// commits as the service accepts, instead of retrying at full rate and
// adding to the overload. The time held back is counted in the metric
// adaptive_throttled_msecs.
const (
	AdaptiveThrottleWindow = 2 * time.Minute
	AdaptiveOverloadRatio  = 1.25
	// AdaptiveThrottleDelay is how long a held-back commit waits before the
	// writer decides again: the commit latency the batch sizing aims at, as
	// Java waits its target batch latency.
	AdaptiveThrottleDelay = TargetCommitLatency
)

// adaptiveDelay is AdaptiveThrottleDelay, and adaptiveRand the random
// source of new throttlers; tests replace them.
var (
	adaptiveDelay = AdaptiveThrottleDelay
	adaptiveRand  = rand.Float64
)

type adaptiveThrottler struct {
	requests, accepts *movingAverage
	inFlight          int            // commits sent and not yet answered
	rand              func() float64 // uniform in [0, 1)
}

func newAdaptiveThrottler() *adaptiveThrottler {
	return &adaptiveThrottler{
		requests: newMovingAverage(AdaptiveThrottleWindow, latencyBucket),
		accepts:  newMovingAverage(AdaptiveThrottleWindow, latencyBucket),
		rand:     adaptiveRand,
	}
}

// probability is the probability that a commit at now is held back.
func (a *adaptiveThrottler) probability(now time.Time) float64 {
	req, acc := max(0, a.requests.sum(now)-float64(a.inFlight)), a.accepts.sum(now)
	return max(0, (req-AdaptiveOverloadRatio*acc)/(req+1))
}

// throttle counts a commit the writer wants to send at now and reports
// whether to hold it back. A commit not held back is in flight until the
// writer reports its answer with accepted or refused.
func (a *adaptiveThrottler) throttle(now time.Time) bool {
	p := a.probability(now)
	a.requests.add(now, 1)
	if p > 0 && a.rand() < p {
		return true
	}
	a.inFlight++
	return false
}

// accepted counts a commit the service accepted, sent at now.
func (a *adaptiveThrottler) accepted(now time.Time) {
	a.inFlight--
	a.accepts.add(now, 1)
}

// refused ends a commit the service did not accept.
func (a *adaptiveThrottler) refused() { a.inFlight-- }
