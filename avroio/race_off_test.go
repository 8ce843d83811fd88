//go:build !race

package avroio_test

const raceEnabled = false
