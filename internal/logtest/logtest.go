// Package logtest captures what the module logs through Beam's log package,
// for tests that check a read logs its plan and its accepted splits.
package logtest

import (
	"context"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
)

// TB is the part of *testing.T a Log uses; the package does not import
// testing, so that nothing it is linked into carries the test framework.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Cleanup(func())
}

// Log keeps the messages logged at INFO while it is installed.
type Log struct {
	mu   sync.Mutex
	msgs []string
}

// Capture installs a Log as Beam's logger until t ends (then Beam's
// structural logger is back). Tests that capture must not run in parallel
// with each other: the logger is the process's.
func Capture(t TB) *Log {
	l := &Log{}
	log.SetLogger(l)
	t.Cleanup(func() { log.SetLogger(&log.Structural{}) })
	return l
}

// Log implements log.Logger.
func (l *Log) Log(_ context.Context, sev log.Severity, _ int, msg string) {
	if sev == log.SevInfo {
		l.mu.Lock()
		l.msgs = append(l.msgs, msg)
		l.mu.Unlock()
	}
}

// Messages returns the INFO messages so far.
func (l *Log) Messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// Has fails t unless one INFO message so far contains every string of
// want.
func (l *Log) Has(t TB, want ...string) {
	t.Helper()
	msgs := l.Messages()
	for _, m := range msgs {
		all := true
		for _, w := range want {
			all = all && strings.Contains(m, w)
		}
		if all {
			return
		}
	}
	t.Errorf("no INFO log saying all of %q in %q", want, msgs)
}
