// Package binsize holds a test of what a user's binary pays for avroio: a
// program that reads Avro files with avroio (testdata/sdfio) against the
// same program on Beam Go's own io/avroio (testdata/beam). The test builds
// both the same plain way (go build) and fails unless ours is at most 1.1
// times the size; it logs both sizes and their non-standard package
// counts (go list -deps), and the packages only ours links.
package binsize
