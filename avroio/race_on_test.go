//go:build race

package avroio_test

// raceEnabled: under the race detector, pipelines that are meant to fail
// run their SDK workers in processes of their own (see
// TestWriteFailuresOnPrism).
const raceEnabled = true
