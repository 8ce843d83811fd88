package workertest

import "testing"

// A job server process keeps the race detector's options of the test
// process but does not sleep at exit (Run waits for it to exit).
func TestNoExitSleep(t *testing.T) {
	for in, want := range map[string]string{
		"":                "GORACE=atexit_sleep_ms=0",
		"halt_on_error=1": "GORACE=halt_on_error=1 atexit_sleep_ms=0",
	} {
		if got := noExitSleep(in); got != want {
			t.Errorf("noExitSleep(%q) = %q, want %q", in, got, want)
		}
	}
}
