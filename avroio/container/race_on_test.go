//go:build race

package container

// raceEnabled: the race detector's shadow memory makes resident-set
// figures meaningless, and its instrumentation makes heavy cases slow.
const raceEnabled = true
