// Package logtest captures what the module logs through Beam's log package,
// for tests that check a read logs its plan, its accepted splits and its
// warnings.
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

// Log keeps the messages logged at INFO, WARN and ERROR while it is
// installed.
type Log struct {
	mu   sync.Mutex
	msgs map[log.Severity][]string
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
	if sev == log.SevInfo || sev == log.SevWarn || sev == log.SevError {
		l.mu.Lock()
		if l.msgs == nil {
			l.msgs = map[log.Severity][]string{}
		}
		l.msgs[sev] = append(l.msgs[sev], msg)
		l.mu.Unlock()
	}
}

// Messages returns the INFO messages so far.
func (l *Log) Messages() []string { return l.at(log.SevInfo) }

// Warnings returns the WARN messages so far.
func (l *Log) Warnings() []string { return l.at(log.SevWarn) }

// Errors returns the ERROR messages so far.
func (l *Log) Errors() []string { return l.at(log.SevError) }

func (l *Log) at(sev log.Severity) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs[sev]...)
}

// Has fails t unless one INFO message so far contains every string of
// want.
func (l *Log) Has(t TB, want ...string) {
	t.Helper()
	has(t, "INFO", l.Messages(), want)
}

// HasWarn fails t unless one WARN message so far contains every string of
// want.
func (l *Log) HasWarn(t TB, want ...string) {
	t.Helper()
	has(t, "WARN", l.Warnings(), want)
}

func has(t TB, sev string, msgs, want []string) {
	t.Helper()
	for _, m := range msgs {
		all := true
		for _, w := range want {
			all = all && strings.Contains(m, w)
		}
		if all {
			return
		}
	}
	t.Errorf("no %s log saying all of %q in %q", sev, want, msgs)
}
