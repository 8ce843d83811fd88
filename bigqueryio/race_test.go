//go:build race

package bigqueryio_test

const raceEnabled = true
