//go:build !race

package bqquery_test

const raceEnabled = false
