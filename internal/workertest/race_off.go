//go:build !race

package workertest

// RaceEnabled says whether this binary was built with the race detector.
const RaceEnabled = false
