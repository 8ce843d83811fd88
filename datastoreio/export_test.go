package datastoreio

import "time"

// FastRetries shortens the backoff for a test and returns a function that
// restores it.
func FastRetries() func() {
	old := defaultRetry
	defaultRetry.Initial, defaultRetry.Max = 5*time.Millisecond, 50*time.Millisecond
	return func() { defaultRetry = old }
}
